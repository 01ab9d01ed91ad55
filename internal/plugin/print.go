package plugin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// printer writes formatted text and keeps the first write error, so a render function checks once.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// fields prints "Key:<tab>value" lines aligned on their values.
func (p *printer) fields(pairs ...[2]string) {
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	for _, kv := range pairs {
		if p.err == nil {
			_, p.err = fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
		}
	}
	if err := tw.Flush(); p.err == nil {
		p.err = err
	}
}

// table prints rows under a header, in aligned columns, each line indented by indent.
func (p *printer) table(indent string, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	for _, cells := range append([][]string{header}, rows...) {
		if p.err == nil {
			_, p.err = fmt.Fprintf(tw, "%s%s\n", indent, strings.Join(cells, "\t"))
		}
	}
	if err := tw.Flush(); p.err == nil {
		p.err = err
	}
}

// stamp shows a time absolutely (UTC, RFC 3339) and how long ago it was.
func stamp(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(t.Time)))
}

// conditionStatus is a condition's status, or "-" when it is not set.
func conditionStatus(conditions []metav1.Condition, condType string) string {
	if c := meta.FindStatusCondition(conditions, condType); c != nil {
		return string(c.Status)
	}
	return "-"
}

// counted shows a count with its noun, in the plural unless the count is one: "1 partition", "3 partitions".
func counted[N ~int | ~int32 | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// orDash shows an empty string as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
