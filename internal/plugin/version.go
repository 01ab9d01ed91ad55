package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// crdNames are the CustomResourceDefinitions the plugin reads and writes.
var crdNames = []string{"sharegroups.sharestate.dev", "sharepartitionstates.sharestate.dev"}

// versionInfo is what version prints; its JSON is -o json's and -o yaml's.
type versionInfo struct {
	Plugin pluginVersion `json:"plugin"`
	// Server is nil with --client.
	Server *serverVersion `json:"server,omitempty"`
}

// pluginVersion is the plugin binary's build, from the Go build information.
type pluginVersion struct {
	Version    string `json:"version"` // the module version, "(devel)" for a build from a work tree
	Module     string `json:"module"`
	APIVersion string `json:"apiVersion"` // the sharestate.dev version the plugin speaks
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
	Revision   string `json:"revision,omitempty"` // the VCS commit, when the build recorded it
	BuildTime  string `json:"revisionTime,omitempty"`
	Modified   bool   `json:"modified,omitempty"` // built from a work tree with uncommitted changes
}

// serverVersion is what the cluster serves of the sharestate.dev CRDs.
type serverVersion struct {
	CRDs []crdVersion `json:"crds"`
}

type crdVersion struct {
	Name      string   `json:"name"`
	Installed bool     `json:"installed"`
	Served    []string `json:"served,omitempty"`
	Storage   string   `json:"storage,omitempty"`
	Generator string   `json:"generator,omitempty"` // the controller-gen version that wrote the CRD
}

func newVersionCommand(o *rootOptions) *cobra.Command {
	var clientOnly bool
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and build, and the sharestate.dev CRD versions the cluster serves",
		Long: `Print the plugin's version and build (module version, VCS revision, Go version, platform), and,
unless --client, which versions of the sharestate.dev CRDs the cluster serves. -o json and -o yaml
print the same as a document, as kubectl version does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output %q: want json or yaml", output)
			}
			info := versionInfo{Plugin: buildVersion()}
			var serverErr error
			if !clientOnly {
				info.Server, serverErr = readServerVersion(cmd.Context(), o)
			}
			if err := printVersion(o.streams.Out, info, output); err != nil {
				return err
			}
			return serverErr
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the plugin's version; do not contact the cluster")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml")
	return cmd
}

// buildVersion reads the plugin's build from the Go build information.
func buildVersion() pluginVersion {
	v := pluginVersion{
		Version: "unknown", APIVersion: sharestatev1.GroupVersion.String(),
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module = info.Main.Path
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.BuildTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// readServerVersion reads the sharestate.dev CRDs; a CRD that is not there is reported as not installed.
func readServerVersion(ctx context.Context, o *rootOptions) (*serverVersion, error) {
	s, err := o.connect()
	if err != nil {
		return nil, err
	}
	server := &serverVersion{}
	for _, name := range crdNames {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := s.client.Get(ctx, client.ObjectKey{Name: name}, crd)
		if apierrors.IsNotFound(err) {
			server.CRDs = append(server.CRDs, crdVersion{Name: name})
			continue
		}
		if err != nil {
			return nil, apiError(err, "reading CustomResourceDefinition %s", name)
		}
		server.CRDs = append(server.CRDs, describeCRD(crd))
	}
	return server, nil
}

func describeCRD(crd *apiextensionsv1.CustomResourceDefinition) crdVersion {
	v := crdVersion{Name: crd.Name, Installed: true, Generator: crd.Annotations["controller-gen.kubebuilder.io/version"]}
	for _, ver := range crd.Spec.Versions {
		if ver.Served {
			v.Served = append(v.Served, ver.Name)
		}
		if ver.Storage {
			v.Storage = ver.Name
		}
	}
	return v
}

func printVersion(w io.Writer, info versionInfo, output string) error {
	switch output {
	case "json":
		doc, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			return fmt.Errorf("rendering JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", doc)
		return err
	case "yaml":
		doc, err := yaml.Marshal(info)
		if err != nil {
			return fmt.Errorf("rendering YAML: %w", err)
		}
		_, err = w.Write(doc)
		return err
	}
	p := &printer{w: w}
	pv := info.Plugin
	p.fields(
		[2]string{"Plugin Version", pv.Version},
		[2]string{"Revision", revision(pv)},
		[2]string{"Go", pv.GoVersion + " " + pv.Platform},
		[2]string{"Speaks", pv.APIVersion},
	)
	if info.Server != nil {
		p.printf("Server CRDs:\n")
		p.table("  ", []string{"CRD", "SERVED", "STORAGE", "GENERATOR"}, crdRows(info.Server))
		if warning := apiVersionWarning(pv.APIVersion, info.Server); warning != "" {
			p.printf("Warning: %s\n", warning)
		}
	}
	return p.err
}

// revision shows the VCS commit the plugin was built from, and whether the tree had changes.
func revision(v pluginVersion) string {
	if v.Revision == "" {
		return "unknown (built without VCS information)"
	}
	s := v.Revision
	if v.BuildTime != "" {
		s += " (" + v.BuildTime + ")"
	}
	if v.Modified {
		s += ", with uncommitted changes"
	}
	return s
}

func crdRows(server *serverVersion) [][]string {
	rows := make([][]string, len(server.CRDs))
	for i, c := range server.CRDs {
		if !c.Installed {
			rows[i] = []string{c.Name, "<not installed>", "-", "-"}
			continue
		}
		rows[i] = []string{c.Name, strings.Join(c.Served, ","), orDash(c.Storage), orDash(c.Generator)}
	}
	return rows
}

// apiVersionWarning says when the cluster does not serve the version the plugin speaks.
func apiVersionWarning(apiVersion string, server *serverVersion) string {
	_, version, _ := strings.Cut(apiVersion, "/")
	var missing []string
	for _, c := range server.CRDs {
		if !slices.Contains(c.Served, version) {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("the plugin speaks %s, which the cluster does not serve for %s", apiVersion, strings.Join(missing, ", "))
}
