package main_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// wireClient is one Kafka-protocol connection that reports a closed connection as an error, where
// the fuzz test must tell "answered" from "closed" from "the process died" (a franz-go client would
// reconnect behind its back).
type wireClient struct {
	nc   net.Conn
	corr int32
}

func dialWire(addr string) (*wireClient, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &wireClient{nc: nc}, nil
}

func (w *wireClient) close() { _ = w.nc.Close() }

// roundTrip sends the requests pipelined, in one write, and reads their responses in order.
func (w *wireClient) roundTrip(reqs ...kmsg.Request) ([]kmsg.Response, error) {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	var out []byte
	first := w.corr + 1
	for _, r := range reqs {
		w.corr++
		out = append(out, formatter.AppendRequest(nil, r, w.corr)...) // it frames only an empty dst
	}
	// Beyond the sidecar's request timeout (30s): an answer must come before this.
	_ = w.nc.SetDeadline(time.Now().Add(45 * time.Second))
	if _, err := w.nc.Write(out); err != nil {
		return nil, err
	}
	resps := make([]kmsg.Response, 0, len(reqs))
	for i, r := range reqs {
		resp, err := w.readResponse(r, first+int32(i))
		if err != nil {
			return resps, fmt.Errorf("response %d of %d (%s): %w", i+1, len(reqs), kmsg.NameForKey(r.Key()), err)
		}
		resps = append(resps, resp)
	}
	return resps, nil
}

func (w *wireClient) readResponse(req kmsg.Request, corr int32) (kmsg.Response, error) {
	var size [4]byte
	if _, err := io.ReadFull(w.nc, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(w.nc, frame); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != 18 { // ApiVersions' response header is never flexible
		if len(body) == 0 || body[0] != 0 {
			return nil, errors.New("response header with tagged fields")
		}
		body = body[1:]
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding the response: %w", err)
	}
	return resp, nil
}

// apiVersions checks that the connection answers a plain ApiVersions.
func (w *wireClient) apiVersions() error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	resps, err := w.roundTrip(req)
	if err != nil {
		return err
	}
	if code := resps[0].(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
		return fmt.Errorf("ApiVersions answered %s", sharestate.ErrorCode(code))
	}
	return nil
}

// partAnswer is one partition's answer, whatever the API; problem checks the fields of a NONE answer
// that only that API has ("" when they hold).
type partAnswer struct {
	topic     [16]byte
	partition int32
	code      sharestate.ErrorCode
	msg       *string
	problem   string
}

// partitionAnswers flattens a response into its partitions' answers, in order, and counts its topics.
func partitionAnswers(resp kmsg.Response) (topics int, out []partAnswer) {
	add := func(id [16]byte, p int32, code int16, msg *string, problem string) {
		out = append(out, partAnswer{topic: id, partition: p, code: sharestate.ErrorCode(code), msg: msg, problem: problem})
	}
	switch r := resp.(type) {
	case *kmsg.InitializeShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode, p.ErrorMessage, "")
			}
		}
		return len(r.Topics), out
	case *kmsg.ReadShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode, p.ErrorMessage, readProblem(p))
			}
		}
		return len(r.Topics), out
	case *kmsg.WriteShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode, p.ErrorMessage, "")
			}
		}
		return len(r.Topics), out
	case *kmsg.DeleteShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode, p.ErrorMessage, "")
			}
		}
		return len(r.Topics), out
	case *kmsg.ReadShareGroupStateSummaryResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode, p.ErrorMessage, summaryProblem(r.Version, p))
			}
		}
		return len(r.Topics), out
	}
	panic(fmt.Sprintf("partitionAnswers: %T", resp))
}

// readProblem checks what a successful Read returns against what any stored state must be: epochs
// and start offset in range, batches valid, sorted, apart and none below the start offset.
func readProblem(p kmsg.ReadShareGroupStateResponseTopicPartition) string {
	if p.ErrorCode != 0 {
		return ""
	}
	if p.StateEpoch < 0 || p.StartOffset < -1 {
		return fmt.Sprintf("state epoch %d, start offset %d", p.StateEpoch, p.StartOffset)
	}
	last := int64(-1)
	for i, b := range p.StateBatches {
		switch {
		case b.FirstOffset < 0 || b.LastOffset < b.FirstOffset || b.DeliveryCount < 0 ||
			!slices.Contains([]int8{0, 2, 3, 4}, b.DeliveryState):
			return fmt.Sprintf("batch %d is invalid: %+v", i, b)
		case b.FirstOffset <= last:
			return fmt.Sprintf("batch %d overlaps or precedes the one before: %+v", i, p.StateBatches)
		case p.StartOffset != -1 && b.FirstOffset < p.StartOffset:
			return fmt.Sprintf("batch %d starts below the start offset %d: %+v", i, p.StartOffset, b)
		}
		last = b.LastOffset
	}
	return ""
}

func summaryProblem(version int16, p kmsg.ReadShareGroupStateSummaryResponseTopicPartition) string {
	if p.ErrorCode != 0 {
		return ""
	}
	if p.StateEpoch < 0 || p.LeaderEpoch < 0 || p.StartOffset < -1 || (version >= 1 && p.DeliveryCompleteCount < -1) {
		return fmt.Sprintf("a summary out of range: %+v", p)
	}
	return ""
}
