package kafkawire

import (
	"context"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// KeyMetadata is Kafka's Metadata API. MinMetadataVersion is the lowest version FetchMetadata sends:
// v12 is the first whose request may name topics by id, and every answer from it on carries each
// topic's id (Metadata v10 added the ids to the response).
const (
	KeyMetadata        int16 = 3
	MinMetadataVersion int16 = 12
)

// MetadataOptions configure FetchMetadata.
type MetadataOptions struct {
	// Address is the broker listener's host:port.
	Address string
	// Dial connects to Address (default: a net.Dialer's DialContext); TLS goes here.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// ClientID is sent in the request headers (default "sharestate-metadata").
	ClientID string
	// MaxResponseBytes bounds each response (default DefaultMaxResponseBytes).
	MaxResponseBytes int32
}

// ClusterMetadata is a broker's Metadata answer for all topics: the brokers with their addresses on
// the listener that answered, and every topic with its id and error code.
type ClusterMetadata struct {
	ClusterID string
	Brokers   []BrokerAddress
	Topics    []TopicMetadata
}

// BrokerAddress is a broker's advertised address on one listener.
type BrokerAddress struct {
	NodeID int32
	Host   string
	Port   int32
}

// TopicMetadata is a topic of a Metadata answer; ErrorCode 0 is none.
type TopicMetadata struct {
	Name      string
	ID        sharestate.TopicID
	ErrorCode int16
}

// FetchMetadata asks the broker at opts.Address for the metadata of all topics, on a connection of
// its own that it closes before returning: ApiVersions first, to pick the highest Metadata version
// both speak (at least MinMetadataVersion), then one Metadata request. ctx bounds the whole exchange.
func FetchMetadata(ctx context.Context, opts MetadataOptions) (*ClusterMetadata, error) {
	opts.setDefaults()
	nc, err := opts.Dial(ctx, "tcp", opts.Address)
	if err != nil {
		return nil, fmt.Errorf("kafkawire: connecting to %s: %w", opts.Address, err)
	}
	defer func() { _ = nc.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(deadline)
	}
	copts := &ClientOptions{ClientID: opts.ClientID, MaxResponseBytes: opts.MaxResponseBytes}
	versions, err := peerAPIVersions(ctx, nc, copts)
	if err != nil {
		return nil, fmt.Errorf("kafkawire: ApiVersions with %s: %w", opts.Address, err)
	}
	version, err := metadataVersion(versions.ApiKeys)
	if err != nil {
		return nil, fmt.Errorf("kafkawire: %s: %w", opts.Address, err)
	}
	resp, err := metadataRoundTrip(nc, version, copts)
	if err != nil {
		return nil, fmt.Errorf("kafkawire: Metadata v%d from %s: %w", version, opts.Address, err)
	}
	return clusterMetadata(resp), nil
}

func (o *MetadataOptions) setDefaults() {
	if o.Dial == nil {
		var d net.Dialer
		o.Dial = d.DialContext
	}
	if o.ClientID == "" {
		o.ClientID = "sharestate-metadata"
	}
	o.MaxResponseBytes = orDefault(o.MaxResponseBytes, DefaultMaxResponseBytes)
}

// metadataVersion is the highest Metadata version both the broker (keys, its ApiVersions answer) and
// kmsg speak, if it is at least MinMetadataVersion.
func metadataVersion(keys []kmsg.ApiVersionsResponseApiKey) (int16, error) {
	ours := kmsg.NewPtrMetadataRequest().MaxVersion()
	for _, k := range keys {
		if k.ApiKey != KeyMetadata {
			continue
		}
		top := min(ours, k.MaxVersion)
		if top < max(MinMetadataVersion, k.MinVersion) {
			return 0, fmt.Errorf("metadata versions %d-%d offered, at least v%d needed for topic ids", k.MinVersion, k.MaxVersion, MinMetadataVersion)
		}
		return top, nil
	}
	return 0, fmt.Errorf("the broker does not offer the Metadata API (key %d)", KeyMetadata)
}

// metadataCorrelationID is the correlation id of the one Metadata request on a connection.
const metadataCorrelationID = 1

// metadataRoundTrip sends a Metadata request for all topics (nil topics, no auto-creation) and reads
// its answer.
func metadataRoundTrip(nc net.Conn, version int16, opts *ClientOptions) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	req.Topics = nil // all topics
	req.AllowAutoTopicCreation = false
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(opts.ClientID)).AppendRequest(nil, req, metadataCorrelationID)
	if _, err := nc.Write(frame); err != nil {
		return nil, err
	}
	raw, err := ReadFrame(nc, opts.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	body, err := responseBody(raw, metadataCorrelationID, req.IsFlexible())
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding the response: %w", err)
	}
	return resp, nil
}

// clusterMetadata keeps what the sidecar uses of a Metadata answer.
func clusterMetadata(resp *kmsg.MetadataResponse) *ClusterMetadata {
	md := &ClusterMetadata{}
	if resp.ClusterID != nil {
		md.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		md.Brokers = append(md.Brokers, BrokerAddress{NodeID: b.NodeID, Host: b.Host, Port: b.Port})
	}
	for _, t := range resp.Topics {
		tm := TopicMetadata{ID: sharestate.TopicID(t.TopicID), ErrorCode: t.ErrorCode}
		if t.Topic != nil {
			tm.Name = *t.Topic
		}
		md.Topics = append(md.Topics, tm)
	}
	return md
}
