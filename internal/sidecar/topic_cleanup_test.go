package sidecar

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// Topic ids as Kafka prints them.
const (
	topicKept    sharestatev1.TopicID = "AAAAAAAAAAAAAAAAAAAAAQ"
	topicGone    sharestatev1.TopicID = "AAAAAAAAAAAAAAAAAAAAAg"
	topicNewHere sharestatev1.TopicID = "AAAAAAAAAAAAAAAAAAAAAw"
)

func state(uid string, topic sharestatev1.TopicID) sharestatev1.SharePartitionState {
	return sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), ResourceVersion: "7"},
		Spec:       sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: topic, Partition: 0},
	}
}

func read(at time.Time, cluster string, listed []string, topics ...sharestatev1.TopicID) topicsRead {
	r := topicsRead{sent: at, clusterID: cluster, topics: map[sharestatev1.TopicID]bool{}}
	for _, t := range topics {
		r.topics[t] = true
	}
	if listed != nil {
		r.listedBefore = map[types.UID]bool{}
		for _, uid := range listed {
			r.listedBefore[types.UID(uid)] = true
		}
	}
	return r
}

func TestStatesOfDeletedTopics(t *testing.T) {
	const period = 30 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(period)
	kept, gone, gone2 := state("kept", topicKept), state("gone", topicGone), state("gone-2", topicGone)
	young := state("young", topicNewHere) // created after the first read was sent: not in its list
	deleting := state("deleting", topicGone)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	all := []string{"kept", "gone", "gone-2", "deleting"}
	states := []sharestatev1.SharePartitionState{kept, gone, gone2, young, deleting}

	for _, tc := range []struct {
		name          string
		first, second topicsRead
		want          []string
	}{
		{"a topic absent from both reads goes, with every partition of it",
			read(t0, "c", all, topicKept), read(t1, "c", all, topicKept), []string{"gone", "gone-2"}},
		{"a topic in the first read only stays (deleted since: the next round decides)",
			read(t0, "c", all, topicKept, topicGone), read(t1, "c", all, topicKept), nil},
		{"a topic in the second read only stays (created, or seen late)",
			read(t0, "c", all, topicKept), read(t1, "c", all, topicKept, topicGone), nil},
		{"an object not listed before the first read stays, though its topic is in neither",
			read(t0, "c", all, topicKept), read(t1, "c", append(all, "young"), topicKept), []string{"gone", "gone-2"}},
		{"reads less than a period apart decide nothing",
			read(t0, "c", all, topicKept), read(t0.Add(period-time.Millisecond), "c", all, topicKept), nil},
		{"reads exactly a period apart decide",
			read(t0, "c", all, topicKept), read(t1, "c", all, topicKept), []string{"gone", "gone-2"}},
		{"reads of two clusters decide nothing",
			read(t0, "c", all, topicKept), read(t1, "other", all, topicKept), nil},
		{"no list before the first read: nothing is known to be older than it",
			read(t0, "c", nil, topicKept), read(t1, "c", all, topicKept), nil},
		{"every topic present: nothing goes",
			read(t0, "c", all, topicKept, topicGone, topicNewHere), read(t1, "c", all, topicKept, topicGone, topicNewHere), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range statesOfDeletedTopics(tc.first, tc.second, period, states) {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("deleted %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewTopicsRead(t *testing.T) {
	id := func(b byte) sharestate.TopicID { return sharestate.TopicID{15: b} }
	stateTopic := kafkawire.TopicMetadata{Name: shareGroupStateTopic, ID: id(9)}
	orders := kafkawire.TopicMetadata{Name: "orders", ID: id(1)}
	listed := []sharestatev1.SharePartitionState{state("a", topicKept)}
	for _, tc := range []struct {
		name    string
		md      kafkawire.ClusterMetadata
		listErr error
		refused string // "" accepted
	}{
		{"complete", kafkawire.ClusterMetadata{ClusterID: "c", Topics: []kafkawire.TopicMetadata{stateTopic, orders}}, nil, ""},
		{"complete, the list failed", kafkawire.ClusterMetadata{ClusterID: "c", Topics: []kafkawire.TopicMetadata{stateTopic}}, errors.New("boom"), ""},
		{"no cluster id", kafkawire.ClusterMetadata{Topics: []kafkawire.TopicMetadata{stateTopic, orders}}, nil, "no cluster id"},
		{"a topic with an error", kafkawire.ClusterMetadata{ClusterID: "c", Topics: []kafkawire.TopicMetadata{
			stateTopic, {Name: "orders", ID: id(1), ErrorCode: 5}}}, nil, `topic "orders" has error code 5`},
		{"a topic without an id", kafkawire.ClusterMetadata{ClusterID: "c", Topics: []kafkawire.TopicMetadata{
			stateTopic, {Name: "orders"}}}, nil, `topic "orders" has no id`},
		{"no __share_group_state (topics hidden from the sidecar)", kafkawire.ClusterMetadata{ClusterID: "c",
			Topics: []kafkawire.TopicMetadata{orders}}, nil, "lists no __share_group_state"},
		{"no topic at all", kafkawire.ClusterMetadata{ClusterID: "c"}, nil, "lists no __share_group_state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newTopicsRead(time.Unix(1, 0), &tc.md, listed, tc.listErr)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("got %v, want an error saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, topic := range tc.md.Topics {
				if !r.topics[sharestatev1.TopicID(topic.ID.String())] {
					t.Errorf("topic %s (%s) missing from the read", topic.Name, topic.ID)
				}
			}
			if gotList := r.listedBefore != nil; gotList != (tc.listErr == nil) || (gotList && !r.listedBefore["a"]) {
				t.Errorf("listedBefore %v with list error %v", r.listedBefore, tc.listErr)
			}
		})
	}
}
