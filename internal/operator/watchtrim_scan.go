package operator

import (
	"bytes"
	"errors"
)

// The scanner of watchTrimmer: it finds where a watch event ends and which of its members to cut,
// in one pass over the event's bytes. It reads only what it must to find where values end (strings
// and their escapes, the nesting of objects and arrays), and the keys of the objects on the way to
// what it cuts; what lies between it leaves for client-go to judge.

var (
	errMalformed  = errors.New("not a JSON value")
	errIncomplete = errors.New("the JSON value goes on past the bytes received")
)

// span is [start, end) of a byte slice.
type span struct{ start, end int }

// eventCuts are the members scanEvent found to cut out of an event, in the order they stand.
type eventCuts struct {
	spans [2]span
	n     int
}

func (c *eventCuts) add(s span) {
	if c.n < len(c.spans) {
		c.spans[c.n] = s
		c.n++
	}
}

// appendKept appends b[start:] to dst without the cut spans.
func (c *eventCuts) appendKept(dst, b []byte, start int) []byte {
	from := start
	for _, s := range c.spans[:c.n] {
		dst = append(dst, b[from:s.start]...)
		from = s.end
	}
	return append(dst, b[from:]...)
}

// appendTrimmed appends the watch event ev to dst without object.metadata.managedFields, and
// without object.status.stateBatches where object.status holds inFlightRecords; an event the scanner
// cannot read as a whole object is appended as it is.
func appendTrimmed(dst, ev []byte) []byte {
	end, cuts, err := scanEvent(ev, 0)
	if err != nil || skipSpace(ev, end) != len(ev) {
		return append(dst, ev...)
	}
	return cuts.appendKept(dst, ev, 0)
}

// level names the objects of a watch event the scanner descends into.
type level int

const (
	levelOther    level = iota
	levelEvent          // {"type": ..., "object": {...}}
	levelObject         // the object: its metadata and status are descended into
	levelMetadata       // managedFields is cut
	levelStatus         // stateBatches is cut, if inFlightRecords is there and not null
)

// child is the level of the object that is the value of member key at level l.
func (l level) child(key []byte) level {
	switch {
	case l == levelEvent && string(key) == "object":
		return levelObject
	case l == levelObject && string(key) == "metadata":
		return levelMetadata
	case l == levelObject && string(key) == "status":
		return levelStatus
	}
	return levelOther
}

// cutKey is the member cut at level l ("": none).
func (l level) cutKey() string {
	switch l {
	case levelMetadata:
		return "managedFields"
	case levelStatus:
		return "stateBatches"
	}
	return ""
}

// scanEvent returns the end of the watch event that starts at b[start], and what to cut out of it.
// A key is compared as written: one spelled with escapes is not recognised, and then nothing is cut.
func scanEvent(b []byte, start int) (int, eventCuts, error) {
	var cuts eventCuts
	end, err := scanObject(b, start, levelEvent, &cuts)
	return end, cuts, err
}

// memberCut tracks, while an object at level l is scanned, the span that removes its member to cut
// together with the comma that parts it from a neighbour.
type memberCut struct {
	l       level
	key     string // the member to cut ("": none at this level)
	found   bool
	span    span
	nextKey bool // the member is the object's first: its span ends where the next key starts
	prevEnd int  // the end of the previous member's value; -1 before the first
	counted bool // levelStatus: a non-null inFlightRecords was seen
}

// see takes in the member whose key starts at keyStart and whose value is b[valueStart:valueEnd].
func (m *memberCut) see(b []byte, keyStart, keyEnd, valueStart, valueEnd int) {
	if m.nextKey {
		m.span.end, m.nextKey = keyStart, false
	}
	key := b[keyStart+1 : keyEnd-1]
	switch {
	case m.key != "" && !m.found && string(key) == m.key:
		m.found = true
		if m.prevEnd >= 0 { // from the end of the value before it
			m.span = span{m.prevEnd, valueEnd}
		} else {
			m.span, m.nextKey = span{keyStart, valueEnd}, true
		}
	case m.l == levelStatus && string(key) == "inFlightRecords":
		m.counted = string(b[valueStart:valueEnd]) != "null"
	}
	m.prevEnd = valueEnd
}

// done reports the span to cut once the object has ended, if any.
func (m *memberCut) done() (span, bool) {
	return m.span, m.found && (m.l != levelStatus || m.counted)
}

// scanObject returns the end of the object at b[obj]. It descends into the members that lead to
// what is cut, and adds to cuts the span of the member cut at level l.
func scanObject(b []byte, obj int, l level, cuts *eventCuts) (int, error) {
	if obj >= len(b) {
		return 0, errIncomplete
	}
	if b[obj] != '{' {
		return 0, errMalformed
	}
	cut := memberCut{l: l, key: l.cutKey(), prevEnd: -1}
	i := skipSpace(b, obj+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		keyStart, keyEnd, valueStart, err := memberStart(b, i)
		if err != nil {
			return 0, err
		}
		valueEnd, err := memberEnd(b, l.child(b[keyStart+1:keyEnd-1]), valueStart, cuts)
		if err != nil {
			return 0, err
		}
		cut.see(b, keyStart, keyEnd, valueStart, valueEnd)
		if i = skipSpace(b, valueEnd); i >= len(b) {
			return 0, errIncomplete
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if s, ok := cut.done(); ok {
				cuts.add(s)
			}
			return i + 1, nil
		default:
			return 0, errMalformed
		}
	}
}

// memberEnd returns the end of the value at b[valueStart], descending into it if it is an object
// at a level that leads to a cut.
func memberEnd(b []byte, child level, valueStart int, cuts *eventCuts) (int, error) {
	if child != levelOther && b[valueStart] == '{' {
		return scanObject(b, valueStart, child, cuts)
	}
	return skipValue(b, valueStart)
}

// memberStart reads the key and the colon of the member at b[i], and returns where the key starts
// and ends and where the value starts (a byte of it is there).
func memberStart(b []byte, i int) (keyStart, keyEnd, valueStart int, err error) {
	if i >= len(b) {
		return 0, 0, 0, errIncomplete
	}
	if b[i] != '"' {
		return 0, 0, 0, errMalformed
	}
	if keyEnd, err = stringEnd(b, i); err != nil {
		return 0, 0, 0, err
	}
	colon := skipSpace(b, keyEnd)
	if colon >= len(b) {
		return 0, 0, 0, errIncomplete
	}
	if b[colon] != ':' {
		return 0, 0, 0, errMalformed
	}
	if valueStart = skipSpace(b, colon+1); valueStart >= len(b) {
		return 0, 0, 0, errIncomplete
	}
	return i, keyEnd, valueStart, nil
}

// skipValue returns the index past the JSON value that starts at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errIncomplete
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		return nestedEnd(b, i)
	case '}', ']', ',', ':':
		return 0, errMalformed
	}
	for j := i; j < len(b); j++ { // a number, true, false or null
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j, nil
		case '"', '{', '[', ':':
			return 0, errMalformed
		}
	}
	return 0, errIncomplete
}

// structural marks the bytes nestedEnd stops at.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// nestedEnd returns the index past the object or array that starts at b[i].
func nestedEnd(b []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(b); j++ {
		if !structural[b[j]] {
			continue
		}
		switch b[j] {
		case '"':
			end, err := stringEnd(b, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case '{', '[':
			depth++
		default: // '}', ']'
			if depth--; depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, errIncomplete
}

// stringEnd returns the index past the string whose opening quote is b[i]: the next quote not
// escaped by an odd number of backslashes.
func stringEnd(b []byte, i int) (int, error) {
	for j := i + 1; ; {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return 0, errIncomplete
		}
		j += q
		backslashes := 0
		for k := j - 1; k > i && b[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
