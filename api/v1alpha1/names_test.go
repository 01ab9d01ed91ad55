package v1alpha1

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestSharePartitionStateNameIsValidAndReadable(t *testing.T) {
	tests := []struct {
		name      string
		groupID   string
		topicID   string
		partition int32
		prefix    string
	}{
		{"plain", "orders", "q1Sh0o2QRbuBzMz8vEMbvQ", 0, "orders-0-"},
		{"upper case and dots", "Payments.EU.v2", "q1Sh0o2QRbuBzMz8vEMbvQ", 7, "payments-eu-v2-7-"},
		{"unicode", "Überweisung-€-日本", "q1Sh0o2QRbuBzMz8vEMbvQ", 3, "berweisung-3-"},
		{"only symbols", "€€€...___", "q1Sh0o2QRbuBzMz8vEMbvQ", 12, "g-12-"},
		{"long", strings.Repeat("a.B", 85), "q1Sh0o2QRbuBzMz8vEMbvQ", 2147483647, "a-ba-ba-ba-ba-ba-ba-ba-ba-ba-b-2147483647-"},
		{"leading and trailing junk", "--__Group__--", "AAAAAAAAAAAAAAAAAAAAAQ", 1, "group-1-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SharePartitionStateName(tt.groupID, tt.topicID, tt.partition)
			assertValidName(t, got)
			if !strings.HasPrefix(got, tt.prefix) {
				t.Errorf("SharePartitionStateName(%q, %q, %d) = %q, want prefix %q", tt.groupID, tt.topicID, tt.partition, got, tt.prefix)
			}
			if again := SharePartitionStateName(tt.groupID, tt.topicID, tt.partition); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestShareGroupNameIsValid(t *testing.T) {
	for _, g := range []string{"orders", "Payments.EU.v2", "日本", strings.Repeat("Z", 255)} {
		got := ShareGroupName(g)
		assertValidName(t, got)
		if got == ShareGroupName(strings.ToLower(g)) && g != strings.ToLower(g) {
			t.Errorf("group ids %q and %q collide on %q", g, strings.ToLower(g), got)
		}
	}
}

// Keys that differ only in what the readable prefix drops must still get different names.
func TestNamesKeepNearKeysApart(t *testing.T) {
	pairs := [][2]string{
		{"Orders", "orders"},
		{"a.b", "a-b"},
		{"a.b", "a_b"},
		{strings.Repeat("x", 200) + "1", strings.Repeat("x", 200) + "2"},
		{"日本", "中国"},
	}
	for _, p := range pairs {
		a := SharePartitionStateName(p[0], "q1Sh0o2QRbuBzMz8vEMbvQ", 0)
		b := SharePartitionStateName(p[1], "q1Sh0o2QRbuBzMz8vEMbvQ", 0)
		if a == b {
			t.Errorf("%q and %q both named %q", p[0], p[1], a)
		}
	}
	// The same group with the topic and partition split differently must not collide either.
	if SharePartitionStateName("g", "q1Sh0o2QRbuBzMz8vEMbvQ", 11) == SharePartitionStateName("g", "q1Sh0o2QRbuBzMz8vEMbvQ", 1) {
		t.Error("partitions 1 and 11 collide")
	}
}

func TestNamesNoCollisionsOverRandomKeys(t *testing.T) {
	const keys = 200000
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aAbB.-_9€日")
	seen := make(map[string]string, keys)
	for i := 0; i < keys; i++ {
		group := randomString(rng, alphabet, 1+rng.IntN(255))
		topic := randomTopicID(rng)
		partition := rng.Int32N(1 << 20)
		name := SharePartitionStateName(group, topic, partition)
		key := group + "\x00" + topic + "\x00" + string(rune(partition))
		if other, ok := seen[name]; ok && other != key {
			t.Fatalf("collision on %q", name)
		}
		seen[name] = key
		if i%1000 == 0 {
			assertValidName(t, name)
		}
	}
}

func assertValidName(t *testing.T, name string) {
	t.Helper()
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		t.Errorf("%q is not a valid DNS label: %v", name, errs)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Errorf("%q is not a valid object name: %v", name, errs)
	}
}

func randomString(rng *rand.Rand, alphabet []rune, n int) string {
	r := make([]rune, n)
	for i := range r {
		r[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(r)
}

func randomTopicID(rng *rand.Rand) string {
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	id := make([]byte, 22)
	for i := range 21 {
		id[i] = b64[rng.IntN(64)]
	}
	id[21] = "AQgw"[rng.IntN(4)]
	return string(id)
}

func TestLeaderPodLabelValue(t *testing.T) {
	long := strings.Repeat("kafka-broker.", 20) + "0"
	tests := []struct {
		pod  string
		want string // "" : a hashed form, checked for validity and length
	}{
		{"kafka-0", "kafka-0"},
		{"my-cluster-kafka-brokers.example-0", "my-cluster-kafka-brokers.example-0"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63)},
		{strings.Repeat("a", 64), ""},
		{long, ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := LeaderPodLabelValue(tt.pod)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 || got == "" {
			t.Errorf("LeaderPodLabelValue(%q) = %q, not a label value: %v", tt.pod, got, errs)
		}
		if tt.want != "" && got != tt.want {
			t.Errorf("LeaderPodLabelValue(%q) = %q, want %q", tt.pod, got, tt.want)
		}
		if tt.want == "" && (got == tt.pod || len(got) != 63) {
			t.Errorf("LeaderPodLabelValue(%q) = %q, want a hashed form of 63 characters", tt.pod, got)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("pods %q and %q share the label value %q", other, tt.pod, got)
		}
		seen[got] = tt.pod
	}
	// Names that differ only past the readable prefix stay apart.
	if LeaderPodLabelValue(long) == LeaderPodLabelValue(long+"1") {
		t.Error("long pod names that differ at the end share a label value")
	}
}
