package faultproxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/faultproxy"
)

// startEcho runs a TCP server on a loopback port that writes back whatever it reads, and returns its
// address. It stops when the test ends.
func startEcho(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

func startProxy(t *testing.T, opts faultproxy.Options) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(opts)
	if err != nil {
		t.Fatalf("starting the proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("writing: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

// readUntilClosed reads until the connection fails and returns what it read; it fails the test if
// the connection is still open after timeout.
func readUntilClosed(t *testing.T, c net.Conn, timeout time.Duration) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	var got bytes.Buffer
	_, err := io.Copy(&got, c)
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		t.Fatalf("the connection is still open after %v", timeout)
	}
	return got.Bytes()
}

func TestForwardsBothWays(t *testing.T) {
	p := startProxy(t, faultproxy.Options{Target: startEcho(t)})
	for i := range 3 {
		c := dial(t, p.Addr())
		roundTrip(t, c, "hello")
		roundTrip(t, c, string(bytes.Repeat([]byte{byte('a' + i)}, 100_000)))
	}
	if s := p.Stats(); s.Accepted != 3 || s.Open != 3 || s.Dropped != 0 {
		t.Fatalf("stats = %+v, want 3 accepted, 3 open, none dropped", s)
	}
}

func TestDropAllClosesEveryConnection(t *testing.T) {
	p := startProxy(t, faultproxy.Options{Target: startEcho(t)})
	var conns []net.Conn
	for range 3 {
		c := dial(t, p.Addr())
		roundTrip(t, c, "ping")
		conns = append(conns, c)
	}
	if n := p.DropAll(); n != 3 {
		t.Fatalf("DropAll closed %d connections, want 3", n)
	}
	for _, c := range conns {
		if got := readUntilClosed(t, c, 2*time.Second); len(got) != 0 {
			t.Fatalf("read %q after the drop", got)
		}
	}
	// The proxy goes on serving new connections.
	roundTrip(t, dial(t, p.Addr()), "again")
	if s := p.Stats(); s.Dropped != 3 || s.Accepted != 4 {
		t.Fatalf("stats = %+v, want 3 dropped of 4 accepted", s)
	}
}

func TestByteLimitCutsTheConnection(t *testing.T) {
	const limitMin, limitMax = 100, 200
	p := startProxy(t, faultproxy.Options{
		Target: startEcho(t),
		Seed:   7,
		Faults: faultproxy.Faults{MinBytes: limitMin, MaxBytes: limitMax},
	})
	for range 5 {
		c := dial(t, p.Addr())
		// Without a limit all 1000 bytes would come back and the connection would stay open.
		if _, err := c.Write(bytes.Repeat([]byte("x"), 1000)); err != nil {
			t.Fatalf("writing: %v", err)
		}
		if got := readUntilClosed(t, c, 2*time.Second); len(got) > limitMax/2 {
			t.Fatalf("%d bytes came back: more than half the largest budget of %d", len(got), limitMax)
		}
	}
	if s := p.Stats(); s.Dropped != 5 {
		t.Fatalf("stats = %+v, want all 5 connections dropped", s)
	}
}

func TestLifetimeLimitClosesTheConnection(t *testing.T) {
	const lifeMin, lifeMax = 50 * time.Millisecond, 100 * time.Millisecond
	p := startProxy(t, faultproxy.Options{
		Target: startEcho(t),
		Faults: faultproxy.Faults{MinLifetime: lifeMin, MaxLifetime: lifeMax},
	})
	start := time.Now()
	c := dial(t, p.Addr())
	roundTrip(t, c, "quick")
	readUntilClosed(t, c, 5*time.Second)
	if lived := time.Since(start); lived < lifeMin {
		t.Fatalf("the connection was closed after %v, before the shortest lifetime %v", lived, lifeMin)
	}
	if s := p.Stats(); s.Dropped != 1 {
		t.Fatalf("stats = %+v, want 1 dropped", s)
	}
}

func TestSetFaultsAppliesToNewConnections(t *testing.T) {
	p := startProxy(t, faultproxy.Options{Target: startEcho(t)})
	old := dial(t, p.Addr())
	roundTrip(t, old, "before")
	if err := p.SetFaults(faultproxy.Faults{MinBytes: 10, MaxBytes: 10}); err != nil {
		t.Fatalf("SetFaults: %v", err)
	}
	roundTrip(t, old, "the old connection keeps no limit")
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("0123456789abcdef")); err != nil {
		t.Fatalf("writing: %v", err)
	}
	// What comes back was forwarded twice, so at most half the 10-byte budget.
	if got := readUntilClosed(t, c, 2*time.Second); len(got) > 5 {
		t.Fatalf("read %q through a 10-byte budget", got)
	}
	if err := p.SetFaults(faultproxy.Faults{MinBytes: 5, MaxBytes: 1}); err == nil {
		t.Fatal("SetFaults accepted an empty byte range")
	}
}

func TestRejectsTargetsBeyondLoopback(t *testing.T) {
	for _, target := range []string{"10.0.0.1:6443", "example.com:443", "[2001:db8::1]:443", "127.0.0.1"} {
		if p, err := faultproxy.New(faultproxy.Options{Target: target}); err == nil {
			_ = p.Close()
			t.Errorf("New accepted target %q", target)
		}
	}
	for _, target := range []string{"127.0.0.1:1", "localhost:1", "[::1]:1"} {
		p, err := faultproxy.New(faultproxy.Options{Target: target})
		if err != nil {
			t.Errorf("New rejected loopback target %q: %v", target, err)
			continue
		}
		_ = p.Close()
	}
}

func TestCloseStopsEverything(t *testing.T) {
	echo := startEcho(t)
	before := runtime.NumGoroutine()
	p, err := faultproxy.New(faultproxy.Options{Target: echo, Faults: faultproxy.Faults{MinLifetime: time.Hour, MaxLifetime: time.Hour}})
	if err != nil {
		t.Fatalf("starting the proxy: %v", err)
	}
	addr := p.Addr()
	var conns []net.Conn
	for range 4 {
		c := dial(t, addr)
		roundTrip(t, c, "live")
		conns = append(conns, c)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	for _, c := range conns {
		readUntilClosed(t, c, 2*time.Second)
		_ = c.Close()
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatal("the proxy still accepts connections after Close")
	}
	// The echo server's goroutines for these connections end once the proxy closed its side.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
