package sidecar

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

func TestProfilesAreServedOnlyWhenAsked(t *testing.T) {
	for _, off := range []string{"", "0"} {
		srv, addr, err := serveProfiles(Config{PprofBindAddress: off, Logger: logr.Discard()}, make(chan error, 1))
		if srv != nil || addr != nil || err != nil {
			t.Fatalf("--pprof-bind-address=%q: served on %v (%v); want nothing", off, addr, err)
		}
	}
	errs := make(chan error, 1)
	srv, addr, err := serveProfiles(Config{PprofBindAddress: "127.0.0.1:0", Logger: logr.Discard()}, errs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()
	resp, err := http.Get("http://" + addr.String() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Fatalf("GET /debug/pprof/goroutine: %s\n%.300s", resp.Status, body)
	}
}

func TestProfilesOnATakenAddressNameTheFlag(t *testing.T) {
	srv, addr, err := serveProfiles(Config{PprofBindAddress: "127.0.0.1:0", Logger: logr.Discard()}, make(chan error, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()
	_, _, err = serveProfiles(Config{PprofBindAddress: addr.String(), Logger: logr.Discard()}, make(chan error, 1))
	if err == nil || !strings.Contains(err.Error(), "--pprof-bind-address=") {
		t.Fatalf("a taken address: %v; want an error naming --pprof-bind-address", err)
	}
}
