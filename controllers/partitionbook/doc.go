// Package partitionbook is the operator's record of every SharePartitionState, and the periodic
// resync that keeps it. The operator watches no partition (the persister rewrites a partition's status
// on every write), so its ShareGroup reconciler computes a group's status from this book, and the
// partition gauges come from it, at no request of their own.
//
// What the book promises:
//   - Staleness: a partition's Summary is as the operator last looked at it: the resync's last pass
//     over it, at most one resync period and one pass's duration ago, or the operator's last write to
//     it (a fence, a condition, an adoption), whichever came later. Nothing in between shows.
//   - Completeness: Group answers false until one pass over every partition has been recorded: before
//     it, a partition missing from the book may only not have been looked at yet.
//   - Removal: a partition is dropped at the end of the first complete pass that did not see it.
//   - Memory: a Summary per partition, never its state batches: about a hundred bytes of fields, the
//     strings they hold (name, topic id, owner UID, group label: about 150 bytes more) and the map
//     entry that holds it. Record keeps only what a group's status and its adoption read.
//
// The resync lists the partitions from the API server a page at a time, without their state batches
// (ListPages, DropStateBatches), records each in the book and hands it to its Look function, which
// decides whether the partition needs a reconcile. Its first pass runs at full speed, so the book is
// complete soon after the operator starts; the later ones spread their pages over the period, so its
// cost is the same at every moment: one List of every partition a period, never more with the rate
// of writes.
package partitionbook
