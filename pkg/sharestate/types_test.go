package sharestate

import (
	"strings"
	"testing"
)

func TestParseTopicID(t *testing.T) {
	const text = "q1Sh0o2QRbuBzMz8vEMbvQ"
	id, err := ParseTopicID(text)
	if err != nil || id.String() != text {
		t.Fatalf("ParseTopicID(%q) = %v, %v; want it back", text, id, err)
	}
	for _, bad := range []string{"", "q1Sh0o2QRbuBzMz8vEMbv", text + "A", "q1Sh0o2QRbuBzMz8vEMb+Q", "q1Sh0o2QRbuBzMz8vEMbvR"} {
		if _, err := ParseTopicID(bad); err == nil || !strings.Contains(err.Error(), "topic id") {
			t.Errorf("ParseTopicID(%q): error %v, want one naming the topic id", bad, err)
		}
	}
}

func TestMustParseTopicIDPanicsOnInvalid(t *testing.T) {
	if got := MustParseTopicID("AAAAAAAAAAAAAAAAAAAAAQ"); got.String() != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("MustParseTopicID = %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("MustParseTopicID of an invalid id did not panic")
		}
	}()
	MustParseTopicID("not a topic id")
}
