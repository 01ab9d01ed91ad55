package persister

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

const topologyTestTopic = "q1Sh0o2QRbuBzMz8vEMbvQ"

// gatedClient counts the ShareGroup reads and holds each until the gate opens.
type gatedClient struct {
	client.Client
	gets    atomic.Int32
	entered chan struct{} // receives once per read that reached the client
	gate    chan struct{}
}

func (c *gatedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	c.entered <- struct{}{}
	select {
	case <-c.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func newGatedTopology(t *testing.T) (*topology, *gatedClient) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := sharestatev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: sharestatev1.ShareGroupName("orders")},
		Spec: sharestatev1.ShareGroupSpec{GroupID: "orders",
			Topics: []sharestatev1.ShareGroupTopic{{TopicID: topologyTestTopic, Partitions: 4}}},
	}
	c := &gatedClient{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(sg).Build(),
		entered: make(chan struct{}, 100), gate: make(chan struct{})}
	direct := func(ctx context.Context, _ string, request func(context.Context) error) error { return request(ctx) }
	return newTopology(c, "kafka", time.Minute, 5*time.Second, time.Now, direct), c
}

// waitJoined waits until n lookups have joined the group's fetch in flight.
func waitJoined(t *testing.T, top *topology, group string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		top.mu.Lock()
		f := top.fetching[group]
		joined := f != nil && f.joined >= n
		top.mu.Unlock()
		if joined {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lookups did not join the fetch of %s", n, group)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConcurrentLookupsShareOneRead(t *testing.T) {
	top, c := newGatedTopology(t)
	topic, err := sharestate.ParseTopicID(topologyTestTopic)
	if err != nil {
		t.Fatal(err)
	}
	const lookups = 20
	known := make([]bool, lookups)
	errs := make([]error, lookups)
	var wg sync.WaitGroup
	lookup := func(i int) {
		known[i], errs[i] = top.known(t.Context(), "orders", topic, int32(i%8))
	}
	wg.Go(func() { lookup(0) })
	<-c.entered
	for i := 1; i < lookups; i++ {
		wg.Go(func() { lookup(i) })
	}
	waitJoined(t, top, "orders", lookups-1)
	close(c.gate)
	wg.Wait()
	if n := c.gets.Load(); n != 1 {
		t.Errorf("%d concurrent lookups read the ShareGroup %d times, want once", lookups, n)
	}
	for i := range lookups {
		if errs[i] != nil || known[i] != (i%8 < 4) {
			t.Errorf("lookup of partition %d: known %v, error %v; want known %v (4 partitions declared)", i%8, known[i], errs[i], i%8 < 4)
		}
	}
	if _, err := top.known(t.Context(), "orders", topic, 0); err != nil || c.gets.Load() != 1 {
		t.Errorf("a lookup within the TTL: error %v, %d reads; want the cached declaration", err, c.gets.Load())
	}
}

func TestALookupThatGivesUpFailsAloneInASharedRead(t *testing.T) {
	top, c := newGatedTopology(t)
	topic, _ := sharestate.ParseTopicID(topologyTestTopic)
	impatient, cancel := context.WithCancel(t.Context())
	impatientErr := make(chan error, 1)
	go func() {
		_, err := top.known(impatient, "orders", topic, 0)
		impatientErr <- err
	}()
	<-c.entered
	patientErr := make(chan error, 1)
	go func() {
		_, err := top.known(t.Context(), "orders", topic, 0)
		patientErr <- err
	}()
	waitJoined(t, top, "orders", 1)
	cancel()
	if err := <-impatientErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the lookup whose context ended: %v, want context.Canceled", err)
	}
	close(c.gate)
	if err := <-patientErr; err != nil {
		t.Errorf("the lookup that waited: %v; the read it shared must not follow the other caller's context", err)
	}
}

func TestAForgottenGroupIsReadAgain(t *testing.T) {
	top, c := newGatedTopology(t)
	topic, _ := sharestate.ParseTopicID(topologyTestTopic)
	first := make(chan error, 1)
	go func() {
		_, err := top.known(t.Context(), "orders", topic, 0)
		first <- err
	}()
	<-c.entered
	top.forget("orders") // say, the persister has just created the group's ShareGroup
	second := make(chan error, 1)
	go func() {
		_, err := top.known(t.Context(), "orders", topic, 0)
		second <- err
	}()
	<-c.entered // the lookup after forget reads again instead of joining the older read
	close(c.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if n := c.gets.Load(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}
	top.mu.Lock()
	_, cached := top.groups["orders"]
	top.mu.Unlock()
	if !cached {
		t.Error("the read started after forget was not cached")
	}
}
