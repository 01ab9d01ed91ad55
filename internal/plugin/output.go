package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// customColumnsPrefix starts kubectl's -o custom-columns=NAME:JSONPATH,... format.
const customColumnsPrefix = "custom-columns="

// outputFlags are kubectl's output flags (-o json|yaml|name|jsonpath=...|go-template=...|
// custom-columns=..., --template, --show-managed-fields, --allow-missing-template-keys), through
// cli-runtime's PrintFlags. With no -o a command prints its own human-readable view.
type outputFlags struct {
	print *genericclioptions.PrintFlags
	// withWide accepts -o wide, as kubectl get does: the view for people with more columns.
	withWide bool
}

func newOutputFlags() *outputFlags {
	return &outputFlags{print: genericclioptions.NewPrintFlags("")}
}

// newTableOutputFlags are the output flags of a command whose view for people is a table: they also
// accept -o wide.
func newTableOutputFlags() *outputFlags {
	f := newOutputFlags()
	f.withWide = true
	return f
}

// addFlags adds the output flags to cmd; the -o help names custom-columns, which cli-runtime's
// PrintFlags do not know (kubectl adds it from its own package, which the plugin does not link).
func (f *outputFlags) addFlags(cmd *cobra.Command) {
	f.print.AddFlags(cmd)
	view := "Without it, a view for people."
	if f.withWide {
		view = "Without it, a table for people; wide adds columns."
	}
	cmd.Flags().Lookup("output").Usage = "Output format. One of: (" + strings.Join(f.formats(), ", ") + "). " + view
}

// formats lists the -o values the command takes, as its help and its errors name them.
func (f *outputFlags) formats() []string {
	formats := append(f.print.AllowedFormats(), "custom-columns")
	if f.withWide {
		formats = append([]string{"wide"}, formats...)
	}
	return formats
}

// human reports whether the command prints its own human-readable view (-o wide included).
func (f *outputFlags) human() bool {
	return (f.format() == "" || f.wide()) && !f.templateGiven()
}

// wide reports whether -o wide asks for the view for people with more columns.
func (f *outputFlags) wide() bool {
	return f.withWide && f.format() == "wide"
}

func (f *outputFlags) format() string {
	return *f.print.OutputFormat
}

func (f *outputFlags) templateGiven() bool {
	t := f.print.TemplatePrinterFlags
	return t != nil && t.TemplateArgument != nil && *t.TemplateArgument != ""
}

// validate checks the output format before anything is read from the cluster.
func (f *outputFlags) validate() error {
	if f.human() {
		return nil
	}
	_, err := f.printer()
	return err
}

// printer returns the printer -o asks for.
func (f *outputFlags) printer() (printers.ResourcePrinter, error) {
	if spec, ok := strings.CutPrefix(f.format(), customColumnsPrefix); ok {
		return newCustomColumnsPrinter(spec)
	}
	p, err := f.print.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		formats := f.formats()
		return nil, fmt.Errorf("--output %q: want one of %s=NAME:JSONPATH[,NAME:JSONPATH]", f.format(), strings.Join(formats, ", "))
	}
	return p, err
}

// printObjects prints objs with the printer -o asks for: one object as itself, several (or none,
// with asList) as a kind List, the way kubectl get prints them.
func (f *outputFlags) printObjects(w io.Writer, asList bool, objs ...*unstructured.Unstructured) error {
	p, err := f.printer()
	if err != nil {
		return err
	}
	if len(objs) == 1 && !asList {
		return p.PrintObj(objs[0], w)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{
		"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""},
	}}
	for _, o := range objs {
		list.Items = append(list.Items, *o)
	}
	return p.PrintObj(list, w)
}

// toUnstructured turns a typed object into the form every printer takes, with its apiVersion and
// kind set (the client leaves them empty on typed objects).
func toUnstructured(scheme *runtime.Scheme, obj runtime.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// pluginGroupVersion names the documents the plugin computes (dump's decoded partition), which no
// API server serves: a group of their own, so they are never taken for a sharestate.dev object.
var pluginGroupVersion = schema.GroupVersion{Group: "plugin.sharestate.dev", Version: "v1alpha1"}
