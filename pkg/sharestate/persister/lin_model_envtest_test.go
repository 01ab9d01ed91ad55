package persister_test

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

type opKind int

const (
	opInitialize opKind = iota
	opRead
	opWrite
	opDelete
	opReadSummary
	opNone // no reaction owed (linView.owed)
)

// linInput is one partition's part of a request: a porcupine operation's input. Only the field of its
// kind is set.
type linInput struct {
	kind    opKind
	init    sharestate.InitializePartition
	read    sharestate.ReadPartition
	write   sharestate.WritePartition
	summary sharestate.ReadSummaryPartition
	del     sharestate.DeletePartition
}

func (in linInput) partition() int32 {
	switch in.kind {
	case opInitialize:
		return in.init.Partition
	case opRead:
		return in.read.Partition
	case opWrite:
		return in.write.Partition
	case opDelete:
		return in.del.Partition
	default:
		return in.summary.Partition
	}
}

// linOutput is one partition's answer: a porcupine operation's output. The message is kept for people;
// the model does not compare it.
type linOutput struct {
	code    sharestate.ErrorCode
	message string
	read    sharestate.ReadResult
	summary sharestate.ReadSummaryResult
}

// ambiguous says the answer leaves open whether the operation took effect: the store could not be
// reached, or something unexpected happened, possibly after the change was made.
func (o linOutput) ambiguous() bool {
	return o.code.Retriable() || o.code == sharestate.ErrUnknownServerError
}

// --- The model: the sequential rules of rules.go, one partition's state at a time. ---

// linExpect is what the sequential model answers to in on state st (nil: no state), and the state after.
func linExpect(st *sharestate.State, in linInput) (*sharestate.State, linOutput) {
	var o sharestate.Outcome
	switch in.kind {
	case opInitialize:
		if o = sharestate.CheckInitializeInput(linTopicID, in.init); o.OK() {
			var next sharestate.State
			if next, o = sharestate.ApplyInitialize(st, in.init, true); o.OK() {
				return &next, linOutput{}
			}
		}
	case opRead:
		if o = sharestate.CheckReadInput(linTopicID, in.read); o.OK() {
			var next sharestate.State
			if next, _, o = sharestate.ApplyRead(st, in.read, true); o.OK() {
				return &next, linOutput{read: sharestate.ReadResult{
					StateEpoch: next.StateEpoch, StartOffset: next.StartOffset, StateBatches: next.Batches,
				}}
			}
		}
	case opWrite:
		if o = sharestate.CheckWriteInput(linTopicID, in.write, sharestate.DefaultLimits); o.OK() {
			var next sharestate.State
			if next, o = sharestate.ApplyWrite(st, in.write, true, sharestate.DefaultLimits); o.OK() {
				return &next, linOutput{}
			}
		}
	case opDelete:
		if o = sharestate.CheckKeyInput(linTopicID, in.del.Partition); o.OK() {
			return nil, linOutput{}
		}
	case opReadSummary:
		if o = sharestate.CheckKeyInput(linTopicID, in.summary.Partition); o.OK() {
			return st, linOutput{summary: sharestate.SummaryOf(st)}
		}
	}
	return st, linOutput{code: o.Code}
}

// sameAnswer compares what matters of an answer: the code and, on success, the state a read returns.
func sameAnswer(kind opKind, want, got linOutput) bool {
	if want.code != got.code {
		return false
	}
	if want.code != sharestate.ErrNone {
		return true
	}
	switch kind {
	case opRead:
		return want.read.StateEpoch == got.read.StateEpoch && want.read.StartOffset == got.read.StartOffset &&
			slices.Equal(want.read.StateBatches, got.read.StateBatches)
	case opReadSummary:
		w, g := want.summary, got.summary
		return w.StateEpoch == g.StateEpoch && w.LeaderEpoch == g.LeaderEpoch &&
			w.StartOffset == g.StartOffset && w.DeliveryCompleteCount == g.DeliveryCompleteCount
	default:
		return true
	}
}

// linStep is the nondeterministic model's step: the states the operation may lead to from state.
func linStep(state, input, output any) []any {
	st, in, got := state.(*sharestate.State), input.(linInput), output.(linOutput)
	next, want := linExpect(st, in)
	if got.ambiguous() {
		if statesEqual(st, next) {
			return []any{st}
		}
		return []any{st, next}
	}
	if !sameAnswer(in.kind, want, got) {
		return nil
	}
	return []any{next}
}

func statesEqual(a, b *sharestate.State) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.StateEpoch == b.StateEpoch && a.LeaderEpoch == b.LeaderEpoch && a.StartOffset == b.StartOffset &&
		a.DeliveryCompleteCount == b.DeliveryCompleteCount && slices.Equal(a.Batches, b.Batches)
}

func stateHash(state any) uint64 {
	st := state.(*sharestate.State)
	if st == nil {
		return 0
	}
	buf := make([]byte, 0, 24+len(st.Batches)*19)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(st.StateEpoch))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(st.LeaderEpoch))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(st.StartOffset))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(st.DeliveryCompleteCount))
	for _, b := range st.Batches {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(b.FirstOffset))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(b.LastOffset))
		buf = append(buf, byte(b.DeliveryState))
		buf = binary.LittleEndian.AppendUint16(buf, uint16(b.DeliveryCount))
	}
	h := fnv.New64a()
	_, _ = h.Write(buf)
	return h.Sum64() | 1 // 0 is the missing state's
}

func describeState(state any) string {
	st := state.(*sharestate.State)
	if st == nil {
		return "none"
	}
	return fmt.Sprintf("se=%d le=%d so=%d dcc=%d %s", st.StateEpoch, st.LeaderEpoch, st.StartOffset,
		st.DeliveryCompleteCount, describeBatches(st.Batches))
}

func describeBatches(batches []sharestate.StateBatch) string {
	parts := make([]string, len(batches))
	for i, b := range batches {
		parts[i] = sharestate.FormatBatch(b)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeOperation(input, output any) string {
	in, out := input.(linInput), output.(linOutput)
	var call, answer string
	switch in.kind {
	case opInitialize:
		call = fmt.Sprintf("Initialize(p%d se=%d so=%d)", in.init.Partition, in.init.StateEpoch, in.init.StartOffset)
	case opRead:
		call = fmt.Sprintf("Read(p%d le=%d)", in.read.Partition, in.read.LeaderEpoch)
		answer = fmt.Sprintf(" se=%d so=%d %s", out.read.StateEpoch, out.read.StartOffset, describeBatches(out.read.StateBatches))
	case opWrite:
		w := in.write
		call = fmt.Sprintf("Write(p%d se=%d le=%d so=%d dcc=%d %s)", w.Partition, w.StateEpoch, w.LeaderEpoch,
			w.StartOffset, w.DeliveryCompleteCount, describeBatches(w.StateBatches))
	case opDelete:
		call = fmt.Sprintf("Delete(p%d)", in.del.Partition)
	case opReadSummary:
		s := out.summary
		call = fmt.Sprintf("ReadSummary(p%d le=%d)", in.summary.Partition, in.summary.LeaderEpoch)
		answer = fmt.Sprintf(" se=%d le=%d so=%d dcc=%d", s.StateEpoch, s.LeaderEpoch, s.StartOffset, s.DeliveryCompleteCount)
	}
	if out.code != sharestate.ErrNone {
		answer = ""
	}
	if out.ambiguous() {
		answer += " (ambiguous)"
	}
	return call + " -> " + out.code.String() + answer
}

func linModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, linPartitions)
			for _, op := range history {
				p := op.Input.(linInput).partition()
				parts[p] = append(parts[p], op)
			}
			return parts
		},
		Init:              func() []any { return []any{(*sharestate.State)(nil)} },
		Step:              linStep,
		Equal:             func(a, b any) bool { return statesEqual(a.(*sharestate.State), b.(*sharestate.State)) },
		Hash:              stateHash,
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
	}
	return nm.ToModel()
}
