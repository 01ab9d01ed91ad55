package plugin

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/kubeconfig"
)

// NewCommand returns the kubectl-sharestate command. flags say how to reach the cluster (--kubeconfig,
// --context, -n/--namespace and the rest of kubectl's connection flags, added to the command's
// persistent flags); streams receive all input and output.
func NewCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &rootOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "kubectl-sharestate",
		Short: "Inspect and manage Kafka share-group state kept by sharestate-operator",
		Long: `Inspect and manage the Kafka share-group state (KIP-932) that sharestate-operator keeps in
ShareGroup and SharePartitionState objects (sharestate.dev/v1alpha1).

A group is named by its ShareGroup object name or by its Kafka group id (spec.groupId); a topic by
its Kafka topic id or by the name the ShareGroup declares for it.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl sharestate"},
		SilenceUsage:  true, // an API error is not a usage error
		SilenceErrors: true, // the caller prints the error once
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	flags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		newListCommand(o),
		newDescribeCommand(o),
		newResetOffsetsCommand(o),
		newDeleteCommand(o),
		newDumpCommand(o),
		newVersionCommand(o),
	)
	return cmd
}

// rootOptions is what every command shares: the connection flags and the streams.
type rootOptions struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

// session is one command's connection to the cluster.
type session struct {
	client    client.Client
	scheme    *runtime.Scheme
	namespace string // from -n, else the kubeconfig context's, else "default"
	out       io.Writer
}

// connect builds a client from the connection flags. It reads from the API server directly: a
// command's answer is never older than the moment it runs.
func (o *rootOptions) connect() (*session, error) {
	if o.nothingConfigured() {
		return nil, kubeconfig.ErrNoConfig
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the cluster configuration: %w", err)
	}
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("finding the namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{sharestatev1.AddToScheme, eventsv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the API client: %w", err)
	}
	return &session{client: c, scheme: scheme, namespace: ns, out: o.streams.Out}, nil
}

// nothingConfigured reports whether nothing names a cluster: no kubeconfig file has one, --server
// was not given, and the plugin does not run in a pod. client-go would then fall back to
// http://localhost:8080, and the user would read of a refused connection to a server they never named.
func (o *rootOptions) nothingConfigured() bool {
	if o.flags.APIServer != nil && *o.flags.APIServer != "" {
		return false
	}
	raw, err := o.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil || len(raw.Clusters) > 0 {
		return false // a kubeconfig that does not load says why when it is loaded
	}
	_, err = rest.InClusterConfig()
	return err != nil
}

// ErrorLine renders err as the single line the plugin prints: joined errors and cobra's "Did you mean
// this?" suggestions span several lines, which a script or a log reading stderr would split apart. The
// suggestions become a question: `unknown command "lst" for "kubectl sharestate"; did you mean "list"?`.
func ErrorLine(err error) string {
	var parts, suggestions []string
	suggesting := false
	for _, line := range strings.Split(err.Error(), "\n") {
		if suggesting && strings.HasPrefix(line, "\t") {
			suggestions = append(suggestions, strconv.Quote(strings.TrimSpace(line)))
			continue
		}
		suggesting = false
		switch line = strings.TrimSpace(line); line {
		case "":
		case "Did you mean this?":
			suggesting = true
		default:
			parts = append(parts, line)
		}
	}
	switch {
	case len(suggestions) == 1:
		parts = append(parts, "did you mean "+suggestions[0]+"?")
	case len(suggestions) > 1:
		parts = append(parts, "did you mean one of "+strings.Join(suggestions, ", ")+"?")
	}
	return strings.Join(parts, "; ")
}

// requireKind makes a command that only holds the commands of each kind (describe, delete) fail when
// run without one, as kubectl describe does: cobra would print its help and exit 0, and a script that
// forgot "group" in `kubectl sharestate delete orders` would take the group for deleted. The error
// says what to run instead. Unknown flags are let through to this error, the one that helps.
func requireKind(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.FParseErrWhitelist.UnknownFlags = true
	cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets on the root command alone
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var kinds []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				kinds = append(kinds, c.Name())
			}
		}
		usage := fmt.Sprintf("%s %s NAME", cmd.CommandPath(), strings.Join(kinds, "|"))
		if len(args) == 0 {
			return fmt.Errorf("%s needs the kind of what to %s: %s", cmd.Name(), cmd.Name(), usage)
		}
		if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
			return fmt.Errorf("unknown kind %q for %q\n\nDid you mean this?\n\t%s", args[0], cmd.CommandPath(), strings.Join(suggestions, "\n\t"))
		}
		return fmt.Errorf("%q is not a kind %s knows (%s): to %s the share group %q, run %s %s %s",
			args[0], cmd.Name(), strings.Join(kinds, ", "), cmd.Name(), args[0], cmd.CommandPath(), kinds[0], strings.Join(args, " "))
	}
}

// apiError wraps an API error with what was being done, and says what to do when the cluster does not
// know the sharestate.dev resources at all.
func apiError(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("%s: %w (are the sharestate.dev CRDs installed? kubectl apply --server-side -f config/crd/bases)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
