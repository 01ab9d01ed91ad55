package serve

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// TestProxyForwardsUnrewrittenAPIVersions: an upstream ApiVersions answer the proxy cannot rewrite
// reaches the client byte for byte, is counted by reason, and, when it does not decode, is logged at
// V(0) once on the connection however often it comes; the connection goes on working.
func TestProxyForwardsUnrewrittenAPIVersions(t *testing.T) {
	fallback := []byte{0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 3} // KIP-511's v0 answer: UNSUPPORTED_VERSION, ApiVersions 0–3
	for _, tc := range []struct {
		name, reason string
		body         []byte
		logged       int
	}{
		// No error, then a compact array whose length never ends (two continuation bytes).
		{"undecodable", unrewrittenUndecodable, []byte{0, 0, 0xde, 0xad}, 1},
		{"too short for an error code", unrewrittenUndecodable, []byte{0}, 1},
		{"error response", unrewrittenErrorCode, fallback, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, func(key, _ int16, corrID int32, frame []byte) upstreamAnswer {
				if key == kafkawire.KeyAPIVersions {
					return upstreamAnswer{body: tc.body}
				}
				return upstreamAnswer{body: echoBody(corrID, frame)}
			})
			var mu sync.Mutex
			var logs []string
			logger := funcr.New(func(_, args string) {
				mu.Lock()
				defer mu.Unlock()
				logs = append(logs, args)
			}, funcr.Options{Verbosity: 0})
			p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String(), Logger: logger})
			c := dialRaw(t, addr)
			for corrID := int32(1); corrID <= 2; corrID++ {
				send(t, c, apiVersionsFrame(corrID))
				got, body := wiretest.ReadResponse(t, c, false)
				if got != corrID || !bytes.Equal(body, tc.body) {
					t.Fatalf("ApiVersions %d answered with correlation id %d, body % x; want the upstream's % x", corrID, got, body, tc.body)
				}
			}
			send(t, c, wiretest.RawFrame(3, 12, 3, nil))
			if got, _ := wiretest.ReadResponse(t, c, false); got != 3 {
				t.Fatalf("the request after ApiVersions answered with correlation id %d, want 3", got)
			}
			if n := recorded(p.obs).get("unrewritten", tc.reason); n != 2 {
				t.Fatalf("%v ApiVersions answers counted unrewritten for %s, want 2", n, tc.reason)
			}
			mu.Lock()
			defer mu.Unlock()
			var about []string
			for _, l := range logs {
				if strings.Contains(l, "ApiVersions") {
					about = append(about, l)
				}
			}
			if len(about) != tc.logged {
				t.Fatalf("%d V(0) log lines about ApiVersions, want %d: %q", len(about), tc.logged, about)
			}
			var served []string
			for _, a := range kafkawire.APIs {
				if isShareStateKey(a.Key) {
					served = append(served, fmt.Sprintf("%d:%d-%d", a.Key, a.MinVersion, a.MaxVersion))
				}
			}
			for _, l := range about {
				if !strings.Contains(l, `"version"=3`) || !strings.Contains(l, fmt.Sprintf("%q=%q", "served", strings.Join(served, " "))) ||
					!strings.Contains(l, "does not decode") {
					t.Fatalf("the log line lacks the version, the versions served or the error: %s", l)
				}
			}
		})
	}
}

// TestRewriteAPIVersionsServesLocalVersions: whatever the upstream lists for keys 83–87, the
// rewritten answer lists each of them once, at exactly the versions the local server answers in its
// own ApiVersions (the APIs table, apis.go), and leaves every other key as the upstream listed it.
func TestRewriteAPIVersionsServesLocalVersions(t *testing.T) {
	_, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := dialRaw(t, addr)
	send(t, c, apiVersionsFrame(1))
	_, body := wiretest.ReadResponse(t, c, false)
	served := kmsg.NewPtrApiVersionsResponse()
	served.Version = 3
	if err := served.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	want := map[int16]string{0: "3-13", 18: "0-4", 90: "0-2"}
	for _, k := range served.ApiKeys {
		if isShareStateKey(k.ApiKey) {
			want[k.ApiKey] = fmt.Sprintf("%d-%d", k.MinVersion, k.MaxVersion)
		}
	}
	for _, a := range kafkawire.APIs {
		if got := want[a.Key]; isShareStateKey(a.Key) && got != fmt.Sprintf("%d-%d", a.MinVersion, a.MaxVersion) {
			t.Fatalf("the server answers key %d at %s, the APIs table says %d-%d", a.Key, got, a.MinVersion, a.MaxVersion)
		}
	}

	for _, version := range []int16{0, 1, 2, 3, 4} {
		upstream := kmsg.NewPtrApiVersionsResponse()
		upstream.Version = version
		upstream.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
			{ApiKey: 0, MinVersion: 3, MaxVersion: 13}, {ApiKey: 18, MinVersion: 0, MaxVersion: 4},
			{ApiKey: 83, MinVersion: 0, MaxVersion: 7}, {ApiKey: 85, MinVersion: 2, MaxVersion: 9},
			{ApiKey: 87, MinVersion: 0, MaxVersion: 0}, {ApiKey: 90, MinVersion: 0, MaxVersion: 2},
		}
		frame := append([]byte{0, 0, 0, 9}, upstream.AppendTo(nil)...)
		out, err := RewriteAPIVersions(frame, version)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = version
		if err := resp.ReadFrom(out[8:]); err != nil {
			t.Fatalf("v%d: the rewritten answer does not decode: %v", version, err)
		}
		got := map[int16]string{}
		for _, k := range resp.ApiKeys {
			if _, dup := got[k.ApiKey]; dup {
				t.Fatalf("v%d: key %d listed twice", version, k.ApiKey)
			}
			got[k.ApiKey] = fmt.Sprintf("%d-%d", k.MinVersion, k.MaxVersion)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("v%d: rewritten to %v, want %v", version, got, want)
		}
	}
}
