package sharestate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The storage form of a state batch is one short string, "<first>[-<last>]/<state>/<count>":
//
//	1000000000000/2/1            offset 10^12, ACKNOWLEDGED, delivered once
//	1000000000000-1000000000009/0/3
//
// The last offset is omitted when it equals the first. The form is readable in `kubectl get -o yaml`
// and compact: a single-offset batch at offsets near 10^12 takes 20 bytes of JSON with its quotes and
// comma, where a JSON object with named fields takes about 70. Every write stores the whole status
// again in etcd, so this size multiplies into the write load. ParseBatch is the form's one grammar:
// the CRD schema bounds only the string's length and shape (api/v1alpha1, StateBatch), so whatever
// reads a stored state decodes it here and reports what does not decode as corrupt.

// FormatBatch renders a batch in its storage form. The batch is assumed valid (see StateBatch.Validate).
func FormatBatch(b StateBatch) string {
	buf := make([]byte, 0, 48)
	buf = strconv.AppendInt(buf, b.FirstOffset, 10)
	if b.LastOffset != b.FirstOffset {
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, b.LastOffset, 10)
	}
	buf = append(buf, '/')
	buf = strconv.AppendInt(buf, int64(b.DeliveryState), 10)
	buf = append(buf, '/')
	buf = strconv.AppendInt(buf, int64(b.DeliveryCount), 10)
	return string(buf)
}

// ParseBatch parses one batch from its storage form. It accepts only the canonical form FormatBatch
// writes (no signs, no leading zeros, no "-last" equal to first) and only valid batches.
func ParseBatch(s string) (StateBatch, error) {
	offsets, rest, ok := strings.Cut(s, "/")
	if !ok {
		return StateBatch{}, fmt.Errorf("batch %q: want <first>[-<last>]/<state>/<count>", s)
	}
	stateText, countText, ok := strings.Cut(rest, "/")
	if !ok {
		return StateBatch{}, fmt.Errorf("batch %q: want <first>[-<last>]/<state>/<count>", s)
	}
	firstText, lastText, hasLast := strings.Cut(offsets, "-")
	first, err := parseCanonical(firstText, 63)
	if err != nil {
		return StateBatch{}, fmt.Errorf("batch %q: first offset: %w", s, err)
	}
	last := first
	if hasLast {
		if last, err = parseCanonical(lastText, 63); err != nil {
			return StateBatch{}, fmt.Errorf("batch %q: last offset: %w", s, err)
		}
		if last == first {
			return StateBatch{}, fmt.Errorf("batch %q: last offset repeats the first", s)
		}
	}
	state, err := parseCanonical(stateText, 7)
	if err != nil {
		return StateBatch{}, fmt.Errorf("batch %q: delivery state: %w", s, err)
	}
	count, err := parseCanonical(countText, 15)
	if err != nil {
		return StateBatch{}, fmt.Errorf("batch %q: delivery count: %w", s, err)
	}
	b := StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: DeliveryState(state), DeliveryCount: int16(count)}
	if err := b.Validate(); err != nil {
		return StateBatch{}, err
	}
	return b, nil
}

// parseCanonical parses a non-negative decimal of at most bits bits, written without sign or leading zeros.
func parseCanonical(s string, bits int) (int64, error) {
	if s == "" {
		return 0, errors.New("empty number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", s)
	}
	v, err := strconv.ParseInt(s, 10, bits+1)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return v, nil
}

// EncodeBatches renders batches in their storage form, in order.
func EncodeBatches(batches []StateBatch) []string {
	if len(batches) == 0 {
		return nil
	}
	out := make([]string, len(batches))
	for i, b := range batches {
		out[i] = FormatBatch(b)
	}
	return out
}

// DecodeBatches parses stored batches and checks that together they are well formed: each one valid,
// sorted by first offset and non-overlapping. A stored object that fails this is corrupt: the caller
// must report it, never use it.
func DecodeBatches(stored []string) ([]StateBatch, error) {
	if len(stored) == 0 {
		return nil, nil
	}
	out := make([]StateBatch, len(stored))
	for i, s := range stored {
		b, err := ParseBatch(s)
		if err != nil {
			return nil, fmt.Errorf("stateBatches[%d]: %w", i, err)
		}
		if i > 0 && b.FirstOffset <= out[i-1].LastOffset {
			return nil, fmt.Errorf("stateBatches[%d]: %q overlaps or precedes %q", i, s, stored[i-1])
		}
		out[i] = b
	}
	return out, nil
}
