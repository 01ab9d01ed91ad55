package bench

import (
	"slices"
	"testing"
)

func TestParseShareCells(t *testing.T) {
	got, err := ParseShareCells("100x1, 3x4")
	if err != nil || !slices.Equal(got, []ShareCell{{100, 1}, {3, 4}}) {
		t.Fatalf("ParseShareCells: %v, %v", got, err)
	}
	for _, bad := range []string{"", "100", "100x", "x4", "0x1", "3x0", "3x-1", "ax1"} {
		if _, err := ParseShareCells(bad); err == nil {
			t.Errorf("ParseShareCells(%q) accepted", bad)
		}
	}
}
