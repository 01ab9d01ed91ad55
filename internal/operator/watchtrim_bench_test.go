package operator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	restclientwatch "k8s.io/client-go/rest/watch"
	"k8s.io/utils/ptr"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// BenchmarkPartitionWatchDecode decodes a watch stream of partition writes as the operator's
// informer does (client-go's JSON framer, the event's envelope, then the object), whole and through
// the trimmer. The events are of the scale bench's steady state: 63 batches, managedFields of the
// persister and the operator, the two conditions.
func BenchmarkPartitionWatchDecode(b *testing.B) {
	event := benchEvent(b)
	scheme := runtime.NewScheme()
	if err := sharestatev1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	info, ok := runtime.SerializerInfoForMediaType(serializer.NewCodecFactory(scheme).SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		b.Fatal("no JSON serializer")
	}
	const events = 1000
	stream := bytes.Repeat(event, events)
	for _, via := range []string{"whole", "trimmed"} {
		b.Run(via, func(b *testing.B) {
			b.SetBytes(int64(len(event)))
			trimmer, _ := newWatchTrimmer(nil)
			b.ReportAllocs()
			for i := 0; i < b.N; {
				body := io.NopCloser(bytes.NewReader(stream))
				if via == "trimmed" {
					body = &trimReader{src: body, counts: trimmer}
				}
				dec := restclientwatch.NewDecoder(streaming.NewDecoder(info.StreamSerializer.NewFrameReader(body), info.StreamSerializer.Serializer), info.Serializer)
				for range events {
					if i == b.N {
						break
					}
					if _, obj, err := dec.Decode(); err != nil || obj.(*sharestatev1.SharePartitionState).Status.StateEpoch != 3 {
						b.Fatalf("event %d: %v %v", i, obj, err)
					}
					i++
				}
			}
		})
	}
}

func benchEvent(b testing.TB) []byte {
	now := metav1.Now()
	batches := make([]sharestatev1.StateBatch, 63)
	for i := range batches {
		batches[i] = sharestatev1.StateBatch(fmt.Sprintf("%d-%d/2/1", 1000000000000+10*i, 1000000000007+10*i))
	}
	fields := func(manager, subresource string, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "sharestate.dev/v1alpha1",
			Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw), Subresource: subresource}
	}
	sps := sharestatev1.SharePartitionState{
		TypeMeta: metav1.TypeMeta{APIVersion: "sharestate.dev/v1alpha1", Kind: "SharePartitionState"},
		ObjectMeta: metav1.ObjectMeta{Name: "orders-7-4ccrnibkluej5bzh", Namespace: "kafka", UID: "5f0e6c1e-3a59-4b1e-9d3b-0f6f3d0f9a11",
			ResourceVersion: "123456", Generation: 1, CreationTimestamp: now, Labels: map[string]string{sharestatev1.LabelShareGroup: "orders-dpepjpjjcvuye3ve"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "sharestate.dev/v1alpha1", Kind: "ShareGroup", Name: "orders-dpepjpjjcvuye3ve",
				UID: "0b8e2b7c-6d0a-4a43-8a9e-3c1f5f0b2e77", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				fields("sharestate-sidecar", "", `{"f:metadata":{"f:labels":{".":{},"f:sharestate.dev/share-group":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0b8e2b7c-6d0a-4a43-8a9e-3c1f5f0b2e77\"}":{}}},"f:spec":{".":{},"f:groupId":{},"f:partition":{},"f:topicId":{},"f:topicName":{}}}`),
				fields("sharestate-sidecar", "status", `{"f:status":{".":{},"f:createTime":{},"f:deliveryCompleteCount":{},"f:inFlightRecords":{},"f:lastWriteId":{},"f:leader":{".":{},"f:brokerId":{},"f:leaderEpoch":{},"f:podName":{},"f:podUID":{},"f:since":{}},"f:leaderEpoch":{},"f:startOffset":{},"f:stateBatches":{},"f:stateEpoch":{},"f:writeCount":{},"f:writeTime":{}}}`),
				fields("sharestate-operator", "status", `{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"Fenced\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:observedGeneration":{}}}`),
			}},
		Spec: sharestatev1.SharePartitionStateSpec{GroupID: "orders", TopicID: "q1Sh0o2QRbuBzMz8vEMbvQ", TopicName: "payments", Partition: 7},
		Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 3, LeaderEpoch: 5, StartOffset: 1000000000000, DeliveryCompleteCount: 504,
			StateBatches: batches, InFlightRecords: ptr.To[int64](126), CreateTime: &now, WriteTime: &now, WriteCount: 4711, LastWriteID: "c2VjcmV0LXdyaXRlLWlk",
			Leader: &sharestatev1.LeaderRef{BrokerID: 1, PodName: "broker-1", PodUID: "7d8c1a2b-4e5f-4a6b-8c9d-0e1f2a3b4c5d", LeaderEpoch: 5, Since: now},
			Conditions: []metav1.Condition{
				{Type: sharestatev1.ConditionInitialized, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: now, Reason: "StateInitialized", Message: "the persister initialized the state"},
				{Type: "Fenced", Status: metav1.ConditionFalse, ObservedGeneration: 1, LastTransitionTime: now, Reason: "LeaderAlive", Message: "the recorded leader's pod kafka/broker-1 is running"},
			}},
	}
	object, err := json.Marshal(&sps)
	if err != nil {
		b.Fatal(err)
	}
	event, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": json.RawMessage(object)})
	if err != nil {
		b.Fatal(err)
	}
	return append(event, '\n')
}

// BenchmarkTrimEvent is the trimmer's own cost on one such event.
func BenchmarkTrimEvent(b *testing.B) {
	event := benchEvent(b)
	var out []byte
	b.SetBytes(int64(len(event)))
	for b.Loop() {
		out = appendTrimmed(out[:0], event[:len(event)-1])
	}
}
