// Package plugin is the kubectl plugin kubectl-sharestate: commands that show a share group's
// partition state, carry out an admin offset reset through the operator, delete a group, and decode a
// partition's stored record-state batches, against the cluster kubectl's flags point at.
//
// NewCommand builds the cobra command tree; cmd/kubectl-sharestate only wires it to the process.
// Every command writes to the IOStreams it is given, so the tests run it in-process.
//
//	root.go             the command tree, the cluster connection (session), API error wording
//	resolve.go          finding a group by object name or Kafka group id, a topic by id or name
//	describe.go         describe group: gathering; describe_print.go: rendering
//	reset.go            reset-offsets: flags, submitting the request, waiting for the operator
//	reset_plan.go       which partitions a reset names and at which state epoch (pure)
//	delete.go           delete group, with confirmation
//	dump.go             dump: a partition's batches decoded into rows
//	print.go            tables and key/value blocks
package plugin
