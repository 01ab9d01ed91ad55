package main_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// The generator of the sidecar's fuzz test: multi-partition requests of the five share-state APIs
// whose bytes decode, and whose contents are what a broken or hostile broker could send. Each request
// comes with what the spec lets its answer be, partition by partition.

// Group ids the generator picks from. groupVictim's derived ShareGroup name is held by a ShareGroup of
// groupSquatter (which declares topicDeclared with declaredPartitions partitions), and
// groupUnicodeVictim's by one of groupOtherSquatter: the fuzz test creates both before it starts.
const (
	groupVictim        = "victim"
	groupSquatter      = "squatter"
	groupUnicodeVictim = "グループ-β/Ünïcode 🎉"
	groupOtherSquatter = "other-squatter"
	declaredPartitions = 4
)

var (
	topicDeclared = [16]byte{0xd, 0xe, 0xc, 0x1}
	hostileGroups = []string{
		"",                                        // missing
		strings.Repeat("a", 255),                  // the longest allowed
		strings.Repeat("b", 256),                  // one byte too long
		strings.Repeat("é", 127) + "x",            // 255 bytes, 128 characters
		"\xff\xfe", "bad-\xc3\x28-utf8", "ok\x80", // not UTF-8
		groupUnicodeVictim, "日本語のグループ", "Group/With Spaces:and.Dots",
		groupVictim, groupSquatter, groupOtherSquatter,
		"g1", "g2",
	}
)

// groupIsValid is the persister's check of a group id (semantics §4: a group must name a share group): not
// empty, at most 255 bytes, UTF-8 as every Kafka string is.
func groupIsValid(g string) bool { return g != "" && len(g) <= 255 && utf8.ValidString(g) }

// groupNameIsTaken says the group's derived ShareGroup name is held by a ShareGroup of another group
// id, so an Initialize cannot create the group's ShareGroup: UNKNOWN_SERVER_ERROR, the persister's
// answer for what a retry cannot fix.
func groupNameIsTaken(g string) bool { return g == groupVictim || g == groupUnicodeVictim }

// expectation is what the spec lets one partition's answer be.
type expectation struct {
	topic     [16]byte
	partition int32
	invalid   bool // the input fails a check that needs no stored state: INVALID_REQUEST, nothing else
	// beyond: a partition beyond sharestate.MaxPartitions, which no group can declare:
	// UNKNOWN_TOPIC_OR_PARTITION, nothing else.
	beyond bool
	// undeclared: a partition that the group's ShareGroup, declaring topics, does not declare
	// (semantics §6): never NONE.
	undeclared bool
}

// hostileRequest is one request and, in request order, the expectations of its partitions.
type hostileRequest struct {
	req    kmsg.Request
	api    string
	group  string
	expect []expectation
}

type generator struct {
	r      *rand.Rand
	topics [][16]byte // random topic ids, reused so that requests meet the same partitions again
	// clean makes the partition being generated pass its own input checks (its group, topic and
	// partition stay as hostile as they come): half of them, so that Reads and Writes get past
	// validation to the stored state often enough.
	clean bool
}

func newGenerator(seed uint64) *generator {
	g := &generator{r: rand.New(rand.NewPCG(seed, 0x5eed))}
	for range 2 {
		var id [16]byte
		for i := range id {
			id[i] = byte(g.r.UintN(256))
		}
		g.topics = append(g.topics, id)
	}
	return g
}

func pick[T any](r *rand.Rand, from ...T) T { return from[r.IntN(len(from))] }

// group is a hostile group id two times in five, otherwise one of a few valid ones, so that requests
// meet partitions that earlier ones initialized.
func (g *generator) group() string {
	if g.r.IntN(5) < 2 {
		return pick(g.r, hostileGroups...)
	}
	return pick(g.r, "g1", "g2", "日本語のグループ", groupSquatter)
}

// topicIDs are one to three topic ids: zero, random, declared, or the same one again.
func (g *generator) topicIDs() [][16]byte {
	n := 1 + g.r.IntN(3)
	out := make([][16]byte, 0, n)
	for range n {
		switch k := g.r.IntN(10); {
		case k == 0:
			out = append(out, [16]byte{})
		case k == 1 && len(out) > 0:
			out = append(out, out[g.r.IntN(len(out))]) // a topic repeated within the request
		case k <= 3:
			out = append(out, topicDeclared)
		default:
			out = append(out, pick(g.r, g.topics...))
		}
	}
	return out
}

// partitions are one to six partitions: small, negative, huge, or one already in the list.
func (g *generator) partitions() []int32 {
	n := 1 + g.r.IntN(6)
	out := make([]int32, 0, n)
	for range n {
		switch k := g.r.IntN(12); {
		case k == 0:
			out = append(out, pick[int32](g.r, -1, math.MinInt32))
		case k == 1:
			out = append(out, pick[int32](g.r, math.MaxInt32, 1<<20))
		case k == 2 && len(out) > 0:
			out = append(out, out[g.r.IntN(len(out))]) // a duplicate within the topic
		case k == 3:
			out = append(out, int32(declaredPartitions+g.r.IntN(declaredPartitions)))
		default:
			out = append(out, int32(g.r.IntN(declaredPartitions)))
		}
	}
	return out
}

// epoch is small three times in four (so that fences are not all sticky), otherwise an extreme.
func (g *generator) epoch() int32 {
	if g.clean || g.r.IntN(4) > 0 {
		return int32(g.r.IntN(4))
	}
	return pick[int32](g.r, -1, math.MinInt32, 7, math.MaxInt32-1, math.MaxInt32)
}

func (g *generator) startOffset() int64 {
	if g.clean {
		return pick[int64](g.r, -1, 0, 10, 25, 1<<40)
	}
	return pick[int64](g.r, -2, -1, -1, 0, 0, 10, 25, 1<<40, math.MaxInt64, math.MinInt64)
}

func (g *generator) completeCount() int32 {
	if g.clean {
		return pick[int32](g.r, -1, 0, 3)
	}
	return pick[int32](g.r, -2, -1, -1, 0, 3, math.MaxInt32)
}

// batches are zero to five state batches, most valid, some overlapping one another, some inverted,
// negative or with a state or count that cannot be stored; now and then more than a write may carry.
func (g *generator) batches() (out []kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch, valid bool) {
	n := g.r.IntN(6)
	if !g.clean && g.r.IntN(40) == 0 {
		n = sharestate.DefaultLimits.MaxBatchesPerWrite + 1
	}
	valid = n <= sharestate.DefaultLimits.MaxBatchesPerWrite
	for range n {
		b := kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			FirstOffset: int64(g.r.IntN(40)), DeliveryState: pick[int8](g.r, 0, 2, 3, 4), DeliveryCount: int16(g.r.IntN(6)),
		}
		b.LastOffset = b.FirstOffset + int64(g.r.IntN(10)) // overlaps are likely at these sizes
		hostile := -1
		if !g.clean {
			hostile = g.r.IntN(25)
		}
		switch hostile {
		case 0:
			b.LastOffset = b.FirstOffset - 1 - int64(g.r.IntN(5)) // inverted
		case 1:
			b.FirstOffset = -1 - int64(g.r.IntN(3))
		case 2:
			b.DeliveryState = pick[int8](g.r, 1, 5, -1, 127) // ACQUIRED is never persisted
		case 3:
			b.DeliveryCount = pick[int16](g.r, -1, -2, math.MinInt16)
		case 4:
			b.DeliveryCount = math.MaxInt16
		}
		valid = valid && b.FirstOffset >= 0 && b.LastOffset >= b.FirstOffset &&
			slices.Contains([]int8{0, 2, 3, 4}, b.DeliveryState) && b.DeliveryCount >= 0
		out = append(out, b)
	}
	return out, valid
}

// next returns a request of a random API and version; Delete is rarer than the others, so that
// Reads and Writes meet initialized partitions.
func (g *generator) next() hostileRequest {
	switch k := g.r.IntN(10); {
	case k < 3:
		return g.initialize()
	case k < 5:
		return g.read()
	case k < 8:
		return g.write(int16(g.r.IntN(2)))
	case k < 9:
		return g.delete()
	default:
		return g.summary(int16(g.r.IntN(2)))
	}
}

// eachPartition lays out topics × partitions and records the expectation of each, in request order;
// checks says whether a partition's own input passes the checks that need no state.
func (g *generator) eachPartition(h *hostileRequest, add func(topic int, id [16]byte), part func(topic int, p int32) bool) {
	for ti, id := range g.topicIDs() {
		add(ti, id)
		for _, p := range g.partitions() {
			g.clean = g.r.IntN(2) == 0
			ok := part(ti, p)
			keyValid := groupIsValid(h.group) && id != [16]byte{} && p >= 0
			// Check 2 of semantics §4 ends with the bound: a partition beyond it is unknown, whatever
			// the rest of its input.
			beyond := keyValid && p >= sharestate.MaxPartitions
			h.expect = append(h.expect, expectation{
				topic: id, partition: p,
				invalid:    !keyValid || (!beyond && !ok),
				beyond:     beyond,
				undeclared: h.group == groupSquatter && (id != topicDeclared || p >= declaredPartitions),
			})
		}
	}
}

func (g *generator) initialize() hostileRequest {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	h := hostileRequest{req: req, api: "Initialize", group: g.group()}
	req.GroupID = h.group
	g.eachPartition(&h, func(_ int, id [16]byte) {
		req.Topics = append(req.Topics, kmsg.InitializeShareGroupStateRequestTopic{TopicID: id})
	}, func(ti int, p int32) bool {
		in := kmsg.InitializeShareGroupStateRequestTopicPartition{Partition: p, StateEpoch: g.epoch(), StartOffset: g.startOffset()}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, in)
		// A state epoch at the top leaves no room for a fence (our choice, rules.go MaxStateEpoch).
		return in.StateEpoch >= 0 && in.StateEpoch < sharestate.MaxStateEpoch && in.StartOffset >= -1
	})
	return h
}

func (g *generator) read() hostileRequest {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	h := hostileRequest{req: req, api: "Read", group: g.group()}
	req.GroupID = h.group
	g.eachPartition(&h, func(_ int, id [16]byte) {
		req.Topics = append(req.Topics, kmsg.ReadShareGroupStateRequestTopic{TopicID: id})
	}, func(ti int, p int32) bool {
		in := kmsg.ReadShareGroupStateRequestTopicPartition{Partition: p, LeaderEpoch: g.epoch()}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, in)
		return in.LeaderEpoch >= 0
	})
	return h
}

func (g *generator) write(version int16) hostileRequest {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.SetVersion(version)
	h := hostileRequest{req: req, api: "Write", group: g.group()}
	req.GroupID = h.group
	g.eachPartition(&h, func(_ int, id [16]byte) {
		req.Topics = append(req.Topics, kmsg.WriteShareGroupStateRequestTopic{TopicID: id})
	}, func(ti int, p int32) bool {
		in := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		in.Partition, in.StateEpoch, in.LeaderEpoch, in.StartOffset = p, g.epoch(), g.epoch(), g.startOffset()
		if version >= 1 {
			in.DeliveryCompleteCount = g.completeCount() // v0 does not carry it: the server takes -1
		}
		batches, ok := g.batches()
		in.StateBatches = batches
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, in)
		return ok && in.StateEpoch >= 0 && in.LeaderEpoch >= 0 && in.StartOffset >= -1 && in.DeliveryCompleteCount >= -1
	})
	return h
}

func (g *generator) delete() hostileRequest {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	h := hostileRequest{req: req, api: "Delete", group: g.group()}
	req.GroupID = h.group
	g.eachPartition(&h, func(_ int, id [16]byte) {
		req.Topics = append(req.Topics, kmsg.DeleteShareGroupStateRequestTopic{TopicID: id})
	}, func(ti int, p int32) bool {
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, kmsg.DeleteShareGroupStateRequestTopicPartition{Partition: p})
		return true
	})
	return h
}

// summary is a ReadSummary: its leader epoch is not checked at all (semantics §4), negative or not.
func (g *generator) summary(version int16) hostileRequest {
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.SetVersion(version)
	h := hostileRequest{req: req, api: "ReadSummary", group: g.group()}
	req.GroupID = h.group
	g.eachPartition(&h, func(_ int, id [16]byte) {
		req.Topics = append(req.Topics, kmsg.ReadShareGroupStateSummaryRequestTopic{TopicID: id})
	}, func(ti int, p int32) bool {
		in := kmsg.ReadShareGroupStateSummaryRequestTopicPartition{Partition: p, LeaderEpoch: g.epoch()}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, in)
		return true
	})
	return h
}
