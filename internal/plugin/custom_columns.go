package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// customColumnsPrinter prints kubectl's -o custom-columns=NAME:JSONPATH,...: one row per object (per
// item of a list), one column per JSONPath, "<none>" where a path finds nothing. kubectl's own
// printer of that format lives in k8s.io/kubectl, which the plugin does not link; this one takes the
// same spec, evaluates it with client-go's jsonpath (kubectl's engine) and aligns the columns with
// cli-runtime's tab writer.
type customColumnsPrinter struct {
	headers []string
	paths   []*jsonpath.JSONPath
}

func newCustomColumnsPrinter(spec string) (*customColumnsPrinter, error) {
	if spec == "" {
		return nil, errors.New("custom-columns format specified but no custom columns given")
	}
	p := &customColumnsPrinter{}
	for _, column := range strings.Split(spec, ",") {
		name, path, ok := strings.Cut(column, ":")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("custom-columns: %q is not NAME:JSONPATH", column)
		}
		jp := jsonpath.New(name).AllowMissingKeys(true)
		if err := jp.Parse(relaxedJSONPath(path)); err != nil {
			return nil, fmt.Errorf("custom-columns: column %s: %w", name, err)
		}
		p.headers = append(p.headers, name)
		p.paths = append(p.paths, jp)
	}
	return p, nil
}

// relaxedJSONPath accepts a path with or without kubectl's braces: ".spec.groupId" or "{.spec.groupId}".
func relaxedJSONPath(path string) string {
	if strings.HasPrefix(path, "{") {
		return path
	}
	if !strings.HasPrefix(path, ".") {
		path = "." + path
	}
	return "{" + path + "}"
}

// PrintObj prints obj's row, or a row for each item of a list, under the header.
func (p *customColumnsPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	var items []map[string]any
	switch o := obj.(type) {
	case *unstructured.UnstructuredList:
		for i := range o.Items {
			items = append(items, o.Items[i].Object)
		}
	case *unstructured.Unstructured:
		items = append(items, o.Object)
	default:
		return fmt.Errorf("custom-columns cannot print %T", obj)
	}
	tw := printers.GetNewTabWriter(w)
	if _, err := fmt.Fprintln(tw, strings.Join(p.headers, "\t")); err != nil {
		return err
	}
	for _, item := range items {
		cells, err := p.row(item)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(tw, strings.Join(cells, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

func (p *customColumnsPrinter) row(item map[string]any) ([]string, error) {
	cells := make([]string, len(p.paths))
	for i, jp := range p.paths {
		results, err := jp.FindResults(item)
		if err != nil {
			return nil, fmt.Errorf("custom-columns: column %s: %w", p.headers[i], err)
		}
		var values []string
		for _, r := range results {
			for _, v := range r {
				var buf bytes.Buffer
				if err := jp.PrintResults(&buf, []reflect.Value{v}); err != nil {
					return nil, fmt.Errorf("custom-columns: column %s: %w", p.headers[i], err)
				}
				values = append(values, buf.String())
			}
		}
		cells[i] = strings.Join(values, ",")
		if cells[i] == "" {
			cells[i] = "<none>"
		}
	}
	return cells, nil
}
