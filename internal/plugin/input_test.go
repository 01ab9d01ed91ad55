package plugin

import (
	"errors"
	"strings"
	"testing"
	"time"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

func TestConfirm(t *testing.T) {
	tests := []struct {
		in      string
		groupID string
		wantErr string
	}{
		{in: "orders\n", groupID: "orders"},
		{in: "orders\r\n", groupID: "orders"},
		{in: "orders", groupID: "orders"}, // the last line of a file, without its newline
		{in: "Orders.Processors\nmore\n", groupID: "Orders.Processors"},
		{in: "", groupID: "orders", wantErr: "no confirmation"},
		{in: "\n", groupID: "orders", wantErr: `confirmation "" is not the group id "orders"`},
		{in: "order\n", groupID: "orders", wantErr: `confirmation "order" is not the group id "orders"`},
		{in: " orders\n", groupID: "orders", wantErr: "is not the group id"},
		{in: "yes\n", groupID: "orders", wantErr: "is not the group id"},
	}
	for _, tc := range tests {
		err := confirm(strings.NewReader(tc.in), tc.groupID)
		ok := err == nil
		if tc.wantErr != "" {
			ok = err != nil && strings.Contains(err.Error(), tc.wantErr)
		}
		if !ok {
			t.Errorf("confirm(%q, %q) = %v, want error %q", tc.in, tc.groupID, err, tc.wantErr)
		}
	}
	if err := confirm(nil, "orders"); err == nil {
		t.Error("confirm without input accepted")
	}
	if err := confirm(failingReader{}, "orders"); err == nil || !strings.Contains(err.Error(), "reading the confirmation") {
		t.Errorf("confirm on a failing reader: %v", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("input/output error") }

func TestBatchRows(t *testing.T) {
	rows := batchRows([]string{"0-4/2/1", "5/0/3", "banana", "4-6/4/1", "9/1/1", "10-12/0/0"})
	want := []struct {
		first, last int64
		state       string
		problem     string
	}{
		{0, 4, "ACKNOWLEDGED", ""},
		{5, 5, "AVAILABLE", ""},
		{-1, -1, "", "want <first>[-<last>]/<state>/<count>"},
		{4, 6, "ARCHIVED", "overlaps or precedes the batch before it (5/0/3)"},
		{-1, -1, "", "cannot be stored"}, // ACQUIRED is never persisted
		{10, 12, "AVAILABLE", ""},
	}
	for i, w := range want {
		r := rows[i]
		if !strings.Contains(r.Problem, w.problem) || (w.problem == "") != (r.Problem == "") {
			t.Errorf("row %d (%s): problem %q, want %q", i, r.Stored, r.Problem, w.problem)
		}
		if w.first < 0 {
			if r.FirstOffset != nil || r.State != "" {
				t.Errorf("row %d (%s): decoded %+v from a batch that does not parse", i, r.Stored, r)
			}
			continue
		}
		if r.FirstOffset == nil || *r.FirstOffset != w.first || *r.LastOffset != w.last || r.State != w.state || *r.Records != w.last-w.first+1 {
			t.Errorf("row %d (%s): %+v, want %d-%d %s", i, r.Stored, r, w.first, w.last, w.state)
		}
	}
}

func TestResetOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    resetOptions
		offset  bool
		want    sharestatev1.OffsetResetTopic
		wantErr string
	}{
		{name: "earliest", opts: resetOptions{topic: "t", toEarliest: true, id: "r1", timeout: time.Minute, execute: true},
			want: sharestatev1.OffsetResetTopic{To: sharestatev1.OffsetResetToEarliest}},
		{name: "offset 0 is an offset", opts: resetOptions{topic: "t", id: "r1", timeout: time.Minute, execute: true}, offset: true,
			want: sharestatev1.OffsetResetTopic{To: sharestatev1.OffsetResetToOffset}},
		{name: "partitions sorted and deduplicated", opts: resetOptions{topic: "t", toAuto: true, partitions: []int32{3, 1, 3}, id: "r1", timeout: time.Minute, execute: true},
			want: sharestatev1.OffsetResetTopic{To: sharestatev1.OffsetResetToAutoOffsetReset, Partitions: []int32{1, 3}}},
		{name: "no destination", opts: resetOptions{topic: "t", timeout: time.Minute, execute: true}, wantErr: "exactly one of"},
		{name: "two destinations", opts: resetOptions{topic: "t", toEarliest: true, toAuto: true, timeout: time.Minute, execute: true}, wantErr: "exactly one of"},
		{name: "no topic", opts: resetOptions{toAuto: true, timeout: time.Minute, execute: true}, wantErr: "--topic is required"},
		{name: "zero timeout", opts: resetOptions{topic: "t", toAuto: true, dryRun: dryRunClient}, wantErr: "--timeout"},
		{name: "neither dry run nor execute", opts: resetOptions{topic: "t", toAuto: true, timeout: time.Minute}, wantErr: "takes one of --dry-run"},
		{name: "dry run and execute", opts: resetOptions{topic: "t", toAuto: true, timeout: time.Minute, dryRun: dryRunClient, execute: true}, wantErr: "takes one of --dry-run"},
		{name: "id too long", opts: resetOptions{topic: "t", toAuto: true, id: strings.Repeat("a", 64), timeout: time.Minute, execute: true}, wantErr: "--id"},
		{name: "id with a slash", opts: resetOptions{topic: "t", toAuto: true, id: "a/b", timeout: time.Minute, execute: true}, wantErr: "--id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.opts.validate(tc.offset)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.To != tc.want.To || !equalInt32s(got.Partitions, tc.want.Partitions) || (tc.offset && (got.Offset == nil || *got.Offset != 0)) {
				t.Fatalf("validate = %+v, want %+v", got, tc.want)
			}
		})
	}
	o := resetOptions{topic: "t", toAuto: true, timeout: time.Minute, execute: true}
	if _, err := o.validate(false); err != nil || !resetIDPattern.MatchString(o.id) || len(o.id) > 63 {
		t.Fatalf("generated id %q: %v", o.id, err)
	}
}

func equalInt32s(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestResolveTopic(t *testing.T) {
	sg := groupDeclaring(0, sharestatev1.ShareGroupTopic{TopicID: topicA, Name: "orders", Partitions: 1})
	for arg, want := range map[string]sharestatev1.TopicID{"orders": topicA, string(topicA): topicA, string(topicB): topicB} {
		if got, err := resolveTopic(sg, arg); err != nil || got != want {
			t.Errorf("resolveTopic(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
	for arg, wantErr := range map[string]string{
		"payments":               `topic "payments" is neither a Kafka topic id`,
		"AAAAAAAAAAAAAAAAAAAAAA": "zero Uuid",
		"q1Sh0o2QRbuBzMz8vEMbv":  "neither", // 21 characters
		"":                       "neither",
	} {
		if _, err := resolveTopic(sg, arg); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("resolveTopic(%q): error %v, want %q", arg, err, wantErr)
		}
	}
}
