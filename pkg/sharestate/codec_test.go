package sharestate

import (
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// canonicalBatch is the storage form as a regular expression, written apart from ParseBatch so that the
// tests can hold one to the other: the offsets and the count without leading zeros, the count at most
// 32767, a state that is stored. ParseBatch accepts exactly the strings that match it and whose numbers
// also fit their types, with a last offset above the first.
const canonicalBatch = `^(0|[1-9][0-9]{0,18})(-(0|[1-9][0-9]{0,18}))?/[0234]/(0|[1-9][0-9]{0,3}|[1-2][0-9]{4}|3[0-1][0-9]{3}|32[0-6][0-9]{2}|327[0-5][0-9]|3276[0-7])$`

var (
	batchPattern = regexp.MustCompile(canonicalBatch)
	// batchParts splits a string that matches canonicalBatch into first, last (maybe empty) and count.
	batchParts = regexp.MustCompile(`^([0-9]+)(?:-([0-9]+))?/[0-9]/([0-9]+)$`)
)

func TestFormatBatch(t *testing.T) {
	tests := []struct {
		batch StateBatch
		want  string
	}{
		{sb(0, 0, avail, 0), "0/0/0"},
		{sb(1e12, 1e12, acked, 1), "1000000000000/2/1"},
		{sb(1e12, 1e12+9, avail, 3), "1000000000000-1000000000009/0/3"},
		{sb(5, 6, archg, 2), "5-6/3/2"},
		{sb(7, 7, archd, 10), "7/4/10"},
		{sb(0, math.MaxInt64, avail, math.MaxInt16), "0-9223372036854775807/0/32767"},
		{sb(math.MaxInt64, math.MaxInt64, archd, 1), "9223372036854775807/4/1"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := FormatBatch(tt.batch)
			if got != tt.want {
				t.Fatalf("FormatBatch(%+v) = %q, want %q", tt.batch, got, tt.want)
			}
			if s := tt.batch.String(); s != tt.want {
				t.Errorf("String() = %q, want %q", s, tt.want)
			}
			if !batchPattern.MatchString(got) {
				t.Errorf("%q does not match canonicalBatch", got)
			}
		})
	}
}

func TestParseBatch(t *testing.T) {
	valid := []struct {
		in   string
		want StateBatch
	}{
		{"0/0/0", sb(0, 0, avail, 0)},
		{"1000000000000/2/1", sb(1e12, 1e12, acked, 1)},
		{"1000000000000-1000000000009/0/3", sb(1e12, 1e12+9, avail, 3)},
		{"0-1/3/0", sb(0, 1, archg, 0)},
		{"10-20/4/5", sb(10, 20, archd, 5)},
		{"9223372036854775807/4/32767", sb(math.MaxInt64, math.MaxInt64, archd, math.MaxInt16)},
		{"0-9223372036854775807/2/1", sb(0, math.MaxInt64, acked, 1)},
		{"9223372036854775806-9223372036854775807/0/9", sb(math.MaxInt64-1, math.MaxInt64, avail, 9)},
	}
	for _, tt := range valid {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBatch(tt.in)
			if err != nil {
				t.Fatalf("ParseBatch(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseBatch(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}

	invalid := []struct{ in, why string }{
		// Leading zeros, in each number.
		{"01/0/1", "leading zero in first"},
		{"00/0/1", "zero written twice"},
		{"1-02/0/1", "leading zero in last"},
		{"1/00/1", "leading zero in state"},
		{"1/02/1", "leading zero in state"},
		{"1/0/01", "leading zero in count"},
		{"1/0/00", "zero count written twice"},
		// Signs.
		{"+1/0/1", "plus sign on first"},
		{"-1/0/1", "minus sign on first"},
		{"1-+2/0/1", "plus sign on last"},
		{"1--2/0/1", "minus sign on last"},
		{"1/+0/1", "plus sign on state"},
		{"1/-0/1", "minus sign on state"},
		{"1/0/+1", "plus sign on count"},
		{"1/0/-1", "negative count"},
		// Spaces, and other characters that are not ASCII digits.
		{" 1/0/1", "leading space"},
		{"1/0/1 ", "trailing space"},
		{"1 /0/1", "space before slash"},
		{"1/ 0/1", "space after slash"},
		{"1 - 2/0/1", "spaces around the dash"},
		{"1/0/1\n", "trailing newline"},
		{"\n1/0/1", "leading newline"},
		{"1/0/1\x00", "trailing NUL"},
		{"1e3/0/1", "exponent"},
		{"0x10/0/1", "hexadecimal"},
		{"1_000/0/1", "digit separator"},
		{"١/0/1", "non-ASCII digit"},
		{"１/0/1", "fullwidth digit"},
		// Missing or extra parts.
		{"", "empty"},
		{"1", "offset only"},
		{"1/0", "no count"},
		{"1/0/", "empty count"},
		{"/0/1", "empty first"},
		{"1//1", "empty state"},
		{"-/0/1", "empty first and last"},
		{"-2/0/1", "empty first"},
		{"1-/0/1", "empty last"},
		{"1-2-3/0/1", "two dashes"},
		{"1/0/1/", "trailing slash"},
		{"1/0/1/2", "four parts"},
		{"/", "slash only"},
		{"//", "slashes only"},
		{"1,0,1", "wrong separator"},
		// Out of range.
		{"9223372036854775808/0/1", "first above MaxInt64"},
		{"0-9223372036854775808/0/1", "last above MaxInt64"},
		{"99999999999999999999/0/1", "first of 20 digits"},
		{"1/0/32768", "count above MaxInt16"},
		{"1/0/99999", "count of 5 digits above MaxInt16"},
		{"1/0/100000", "count of 6 digits"},
		// States that may not be stored.
		{"1/1/1", "ACQUIRED is never persisted"},
		{"1/5/1", "state 5"},
		{"1/9/1", "state 9"},
		{"1/10/1", "state 10"},
		{"1/127/1", "state 127"},
		{"1/128/1", "state beyond int8"},
		// Offsets out of order, or not canonical.
		{"5-4/0/1", "last below first"},
		{"1-0/0/1", "last below first"},
		{"5-5/0/1", "last equal to first must be omitted"},
		{"0-0/0/1", "last equal to first must be omitted"},
	}
	for _, tt := range invalid {
		t.Run(tt.why+"/"+tt.in, func(t *testing.T) {
			got, err := ParseBatch(tt.in)
			if err == nil {
				t.Fatalf("ParseBatch(%q) = %+v, want an error (%s)", tt.in, got, tt.why)
			}
			if got != (StateBatch{}) {
				t.Errorf("ParseBatch(%q) returned %+v alongside its error, want the zero batch", tt.in, got)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.in) && !strings.Contains(msg, strconv.Quote(tt.in)) {
				t.Errorf("error %q does not name the input %q", err, tt.in)
			}
		})
	}
}

// randomValidBatch draws a valid batch, with offsets and counts often at their extremes.
func randomValidBatch(r *rand.Rand) StateBatch {
	offset := func() int64 {
		switch r.IntN(4) {
		case 0:
			return r.Int64N(10)
		case 1:
			return math.MaxInt64 - r.Int64N(10)
		case 2:
			return 1e12 + r.Int64N(1e6)
		default:
			return r.Int64()
		}
	}
	first, last := offset(), offset()
	if r.IntN(3) == 0 {
		last = first
	}
	if last < first {
		first, last = last, first
	}
	count := int16(r.IntN(math.MaxInt16 + 1))
	if r.IntN(2) == 0 {
		count = int16(r.IntN(12))
	}
	return sb(first, last, modelStates[r.IntN(len(modelStates))], count)
}

func TestFormatParseRoundTrip(t *testing.T) {
	const seed = 20260604
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 20000 {
		b := randomValidBatch(r)
		s := FormatBatch(b)
		if !batchPattern.MatchString(s) {
			t.Fatalf("seed %d, case %d: FormatBatch(%+v) = %q does not match canonicalBatch", seed, i, b, s)
		}
		got, err := ParseBatch(s)
		if err != nil {
			t.Fatalf("seed %d, case %d: ParseBatch(FormatBatch(%+v) = %q): %v", seed, i, b, s, err)
		}
		if got != b {
			t.Fatalf("seed %d, case %d: ParseBatch(%q) = %+v, want %+v", seed, i, s, got, b)
		}
	}
}

// patternAccepts is the acceptance rule ParseBatch promises, built independently of it: the string
// matches canonicalBatch, every number fits its type (int64 offsets, int16 count), and a last offset,
// when written, is above the first.
func patternAccepts(s string) bool {
	if !batchPattern.MatchString(s) {
		return false
	}
	m := batchParts.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	first, err := strconv.ParseUint(m[1], 10, 63)
	if err != nil {
		return false
	}
	if m[2] != "" {
		last, err := strconv.ParseUint(m[2], 10, 63)
		if err != nil || last <= first {
			return false
		}
	}
	_, err = strconv.ParseUint(m[3], 10, 15)
	return err == nil
}

// checkParseAgainstPattern checks one string both ways: ParseBatch accepts it exactly when
// patternAccepts does, and what it accepts formats back to the same string.
func checkParseAgainstPattern(t *testing.T, s string) (accepted bool) {
	t.Helper()
	b, err := ParseBatch(s)
	want := patternAccepts(s)
	switch {
	case err == nil && !want:
		t.Fatalf("ParseBatch(%q) = %+v, but the pattern and range checks reject it", s, b)
	case err != nil && want:
		t.Fatalf("ParseBatch(%q): %v, but the pattern and range checks accept it", s, err)
	case err == nil && FormatBatch(b) != s:
		t.Fatalf("FormatBatch(ParseBatch(%q)) = %q", s, FormatBatch(b))
	}
	return err == nil
}

// randomBatchString draws strings over the alphabet "0123456789-/ ". Half are shapeless; the other
// half are built like batches, with numbers that are sometimes too long or have leading zeros, and
// then often damaged by one random edit, so that acceptance and rejection are both frequent.
func randomBatchString(r *rand.Rand) string {
	const alphabet = "0123456789-/ "
	if r.IntN(2) == 0 {
		buf := make([]byte, r.IntN(30))
		for i := range buf {
			buf[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(buf)
	}
	number := func(maxDigits int) string {
		buf := make([]byte, 1+r.IntN(maxDigits))
		for i := range buf {
			buf[i] = byte('0' + r.IntN(10))
		}
		if r.IntN(3) != 0 && len(buf) > 1 && buf[0] == '0' {
			buf[0] = '1'
		}
		return string(buf)
	}
	var text strings.Builder
	text.WriteString(number(20))
	if r.IntN(2) == 0 {
		text.WriteString("-" + number(20))
	}
	text.WriteString("/" + number(2) + "/" + number(6))
	s := []byte(text.String())
	if r.IntN(2) == 0 {
		i := r.IntN(len(s) + 1)
		s = slices.Insert(s, i, alphabet[r.IntN(len(alphabet))])
	}
	return string(s)
}

func TestParseBatchAcceptsExactlyThePattern(t *testing.T) {
	const seed = 20260605
	r := rand.New(rand.NewPCG(seed, 0))
	var accepted, rejected int
	for range 50000 {
		s := randomBatchString(r)
		if checkParseAgainstPattern(t, s) {
			accepted++
		} else {
			rejected++
		}
	}
	for range 5000 {
		s := FormatBatch(randomValidBatch(r))
		if !checkParseAgainstPattern(t, s) {
			t.Fatalf("a formatted batch %q was rejected", s)
		}
	}
	// The property above says nothing if the generator never reaches one side of the boundary.
	if accepted < 1000 || rejected < 1000 {
		t.Fatalf("seed %d: weak generator: %d random strings accepted, %d rejected", seed, accepted, rejected)
	}
}

func TestEncodeBatches(t *testing.T) {
	if got := EncodeBatches(nil); got != nil {
		t.Errorf("EncodeBatches(nil) = %#v, want nil", got)
	}
	if got := EncodeBatches([]StateBatch{}); got != nil {
		t.Errorf("EncodeBatches(empty) = %#v, want nil", got)
	}
	batches := []StateBatch{sb(0, 9, acked, 1), sb(10, 10, avail, 2), sb(20, 29, archd, 3)}
	want := []string{"0-9/2/1", "10/0/2", "20-29/4/3"}
	got := EncodeBatches(batches)
	if !slices.Equal(got, want) {
		t.Fatalf("EncodeBatches(%v) = %q, want %q", batches, got, want)
	}
	back, err := DecodeBatches(got)
	if err != nil || !slices.Equal(back, batches) {
		t.Fatalf("DecodeBatches(EncodeBatches(x)) = %v, %v; want %v", back, err, batches)
	}
}

func TestDecodeBatches(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []StateBatch
		wantErr string // a substring of the error; empty when none is expected
	}{
		{name: "nil", in: nil, want: nil},
		{name: "empty", in: []string{}, want: nil},
		{name: "one", in: []string{"5-9/2/1"}, want: []StateBatch{sb(5, 9, acked, 1)}},
		{
			name: "sorted with a gap",
			in:   []string{"0-4/2/1", "10/0/1"},
			want: []StateBatch{sb(0, 4, acked, 1), sb(10, 10, avail, 1)},
		},
		{
			name: "touching",
			in:   []string{"0-4/2/1", "5-9/0/1"},
			want: []StateBatch{sb(0, 4, acked, 1), sb(5, 9, avail, 1)},
		},
		{
			// Not minimal, but well formed: decoding does not insist on coalescing.
			name: "touching with equal state and count",
			in:   []string{"0-4/2/1", "5-9/2/1"},
			want: []StateBatch{sb(0, 4, acked, 1), sb(5, 9, acked, 1)},
		},
		{name: "unsorted", in: []string{"10/0/1", "0-4/2/1"}, wantErr: "stateBatches[1]"},
		{name: "overlapping by one offset", in: []string{"0-5/2/1", "5-9/0/1"}, wantErr: "stateBatches[1]"},
		{name: "contained", in: []string{"0-9/2/1", "3-4/0/1"}, wantErr: "stateBatches[1]"},
		{name: "same first offset", in: []string{"3/2/1", "3-4/0/1"}, wantErr: "stateBatches[1]"},
		{name: "duplicate", in: []string{"3/2/1", "3/2/1"}, wantErr: "stateBatches[1]"},
		{name: "unsorted late in the list", in: []string{"0/0/1", "2/0/1", "4/0/1", "3/0/1"}, wantErr: "stateBatches[3]"},
		{name: "invalid element first", in: []string{"x", "0/0/1"}, wantErr: "stateBatches[0]"},
		{name: "invalid element later", in: []string{"0/0/1", "2/1/1"}, wantErr: "stateBatches[1]"},
		{name: "empty element", in: []string{"0/0/1", ""}, wantErr: "stateBatches[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeBatches(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DecodeBatches(%q) = %v, %v; want an error mentioning %q", tt.in, got, err, tt.wantErr)
				}
				if got != nil {
					t.Errorf("DecodeBatches(%q) returned %v alongside its error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeBatches(%q): %v", tt.in, err)
			}
			if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Fatalf("DecodeBatches(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

// TestDecodeCombinedBatches ties the codec to the combiner: whatever CombineBatches returns
// encodes to strings that decode back to it unchanged.
func TestDecodeCombinedBatches(t *testing.T) {
	const seed = 20260606
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 2000 {
		base := modelBases[r.IntN(len(modelBases))]
		combined := CombineBatches(shiftBatches(randomBatches(r, 8), base), shiftBatches(randomBatches(r, 8), base), -1)
		back, err := DecodeBatches(EncodeBatches(combined))
		if err != nil || !slices.Equal(back, combined) {
			t.Fatalf("seed %d, case %d: DecodeBatches(EncodeBatches(%v)) = %v, %v", seed, i, combined, back, err)
		}
	}
}

func FuzzParseBatch(f *testing.F) {
	for _, s := range []string{
		"0/0/0", "1000000000000/2/1", "1000000000000-1000000000009/0/3", "9223372036854775807/4/32767",
		"9223372036854775808/0/1", "1/0/32768", "01/0/1", "5-5/0/1", "5-4/0/1", "1/1/1", "1/0/1 ", "-1/0/1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBatch(s)
		if err != nil {
			if patternAccepts(s) {
				t.Fatalf("ParseBatch(%q): %v, but the pattern and range checks accept it", s, err)
			}
			return
		}
		if got := FormatBatch(b); got != s {
			t.Fatalf("FormatBatch(ParseBatch(%q)) = %q", s, got)
		}
		if !batchPattern.MatchString(s) {
			t.Fatalf("ParseBatch accepted %q, which does not match canonicalBatch", s)
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("ParseBatch(%q) returned an invalid batch: %v", s, err)
		}
	})
}

// FuzzDecodeBatches feeds DecodeBatches a list made by splitting the input at commas (a character
// no batch contains). Whatever it accepts must be well formed and encode back to the same list;
// whatever it rejects must hold an element ParseBatch rejects or a pair out of order.
func FuzzDecodeBatches(f *testing.F) {
	for _, s := range []string{"0-4/2/1,5-9/0/1", "10/0/1,0-4/2/1", "0-5/2/1,5-9/0/1", "1/0/1,,2/0/1", "3/2/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := strings.Split(s, ",")
		got, err := DecodeBatches(in)
		if err != nil {
			if wellFormed(in) {
				t.Fatalf("DecodeBatches(%q): %v, but every element parses and they are in order", in, err)
			}
			return
		}
		if enc := EncodeBatches(got); !slices.Equal(enc, in) {
			t.Fatalf("EncodeBatches(DecodeBatches(%q)) = %q", in, enc)
		}
		for i, b := range got {
			if err := b.Validate(); err != nil {
				t.Fatalf("DecodeBatches(%q)[%d]: %v", in, i, err)
			}
			if i > 0 && b.FirstOffset <= got[i-1].LastOffset {
				t.Fatalf("DecodeBatches(%q) accepted %v after %v", in, b, got[i-1])
			}
		}
	})
}

// wellFormed is DecodeBatches' acceptance rule, written out on its own: every element parses and
// each starts above the end of the one before.
func wellFormed(stored []string) bool {
	var prev StateBatch
	for i, s := range stored {
		b, err := ParseBatch(s)
		if err != nil || (i > 0 && b.FirstOffset <= prev.LastOffset) {
			return false
		}
		prev = b
	}
	return true
}
