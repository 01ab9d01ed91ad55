package testenv

import (
	"strings"
	"testing"
	"time"
)

// Each line is stamped with the time its first bytes arrived, however the writes cut it.
func TestStampedWriter(t *testing.T) {
	var out strings.Builder
	w := NewStampedWriter(&out)
	clock := time.Date(2026, 12, 2, 4, 48, 33, 266_000_000, time.UTC)
	w.now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	for _, p := range []string{"gc 1 @0.01s", " 4%\nready\n", "", "half", "-line\nlast"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "04:48:33.267 gc 1 @0.01s 4%\n04:48:33.268 ready\n04:48:33.269 half-line\n04:48:33.270 last\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	if err := w.Close(); err != nil || out.String() != want {
		t.Fatalf("a second Close wrote %q (%v)", strings.TrimPrefix(out.String(), want), err)
	}
}
