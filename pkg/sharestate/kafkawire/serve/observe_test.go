package serve

import (
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// recorder counts what it observes by a key that names the event and its labels ("closed/idle",
// "requests/WriteShareGroupState/NONE"), for tests to read; a gauge's key ("open", "inflight")
// goes up and down.
type recorder struct {
	mu sync.Mutex
	n  map[string]float64
}

var (
	_ ServerObserver = (*recorder)(nil)
	_ ProxyObserver  = (*recorder)(nil)
)

func newRecorder() *recorder { return &recorder{n: map[string]float64{}} }

func (r *recorder) add(v float64, key ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[strings.Join(key, "/")] += v
}

// get returns the count of a key.
func (r *recorder) get(key ...string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[strings.Join(key, "/")]
}

// counter returns a reader of one key's count.
func (r *recorder) counter(key ...string) func() float64 {
	return func() float64 { return r.get(key...) }
}

// recorded is the recorder a test helper gave a Server or Proxy as its observer.
func recorded(o any) *recorder { return o.(*recorder) }

func (r *recorder) ConnectionOpened() { r.add(1, "accepted"); r.add(1, "open") }
func (r *recorder) ConnectionClosed(reason string) {
	r.add(-1, "open")
	r.add(1, "closed", reason)
}
func (r *recorder) RequestRead()    { r.add(1, "inflight") }
func (r *recorder) RequestWritten() { r.add(-1, "inflight") }
func (r *recorder) RequestCounted(api string, code sharestate.ErrorCode) {
	r.add(1, "requests", api, code.String())
}
func (r *recorder) RequestServed(api string, _ time.Duration) { r.add(1, "served", api) }
func (r *recorder) Request(key int16, route string)           { r.add(1, "route", kmsg.NameForKey(key), route) }
func (r *recorder) BytesToUpstream(n int64)                   { r.add(float64(n), "bytes", "request") }
func (r *recorder) BytesFromUpstream(n int64)                 { r.add(float64(n), "bytes", "response") }
func (r *recorder) UpstreamDialFailed()                       { r.add(1, "dial_errors") }
func (r *recorder) UpstreamIdleEnded()                        { r.add(1, "idle_ends") }
func (r *recorder) UpstreamRedialed()                         { r.add(1, "redials") }
func (r *recorder) APIVersionsUnrewritten(reason string)      { r.add(1, "unrewritten", reason) }
