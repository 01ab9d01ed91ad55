package serve

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzProxyFrames: the two bodies the proxy reads from outside, the start of a Produce request and
// the upstream's ApiVersions response, never panic, and a rewritten response always frames itself.
func FuzzProxyFrames(f *testing.F) {
	produce := kmsg.NewPtrProduceRequest()
	f.Add(frameOf(produce, 9, 1)[4:], int16(9))
	f.Add(frameOf(produce, 3, 1)[4:], int16(3))
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 84, MaxVersion: 3}}
	f.Add(append([]byte{0, 0, 0, 1}, resp.AppendTo(nil)...), int16(3))
	f.Fuzz(func(t *testing.T, b []byte, version int16) {
		_, _ = produceExpectsResponse(b, version)
		out, err := RewriteAPIVersions(b, version)
		if err != nil && !bytes.Equal(out[4:], b) {
			t.Fatalf("a response reported unrewritten (%v) was changed", err)
		}
		if size := int(out[0])<<24 | int(out[1])<<16 | int(out[2])<<8 | int(out[3]); size != len(out)-4 {
			t.Fatalf("a rewritten response of %d bytes announces %d", len(out)-4, size)
		}
	})
}
