// Package plugin is the kubectl plugin kubectl-sharestate: commands that list share groups and show
// their partition state, carry out an admin offset reset through the operator, delete a group, decode
// a partition's stored record-state batches, and tell the plugin's and the CRDs' versions, against
// the cluster kubectl's flags point at.
//
// NewCommand builds the cobra command tree; cmd/kubectl-sharestate only wires it to the process.
// Every command writes to the IOStreams it is given, so the tests run it in-process.
//
//	root.go             the command tree, the cluster connection (session), API error wording, ErrorLine,
//	                    and the refusal of describe or delete without a kind
//	resolve.go          finding a group by object name or Kafka group id, a topic by id or name
//	list.go             list: the groups with their state (a metav1.Table, cli-runtime's table printer)
//	describe.go         describe group: choosing and gathering; describe_print.go: the view for people
//	output.go           kubectl's -o flags through cli-runtime's PrintFlags; custom_columns.go: -o custom-columns
//	reset.go            reset-offsets: flags, the plan, submitting the request, waiting for the operator
//	reset_flags.go      reset-offsets' --dry-run modes (Kafka's bare flag, kubectl's none|client|server) and --to-latest
//	reset_plan.go       which partitions a reset names and at which state epoch, and the operator's answer (pure)
//	delete.go           delete group, with confirmation
//	dump.go             dump: a partition's batches decoded into rows
//	version.go          version: the build information and the CRD versions the cluster serves
//	print.go            aligned tables and key/value blocks of the views for people
package plugin
