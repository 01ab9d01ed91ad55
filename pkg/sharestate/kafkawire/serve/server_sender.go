package serve

import (
	"context"
	"strconv"
	"strings"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// persisterClientPrefix begins the client id of a Kafka broker's share-state persister. The broker
// builds the persister's network client with NetworkUtils.buildNetworkClient("Persister", ...)
// (BrokerServer.createShareStatePersister), which names it prefix + "-client-" + config.nodeId, and
// NetworkClient puts that client id in every request header (ClientRequest.makeHeader). Read in the
// compiled classes of kafka_2.13 4.4.0 (commit 1156b2752aaa28ea) and 4.2.2 (commit c5e942859576203e):
// kafka/server/NetworkUtils.class and kafka/server/BrokerServer.class (core/src/main/java/kafka/server/
// NetworkUtils.java, core/src/main/scala/kafka/server/BrokerServer.scala); Maven Central publishes
// no sources jar for those versions.
const persisterClientPrefix = "Persister-client-"

// persisterSender returns the node id of the broker whose share-state persister sent a request with
// this client id ("Persister-client-3" -> 3); false for any other client id, which names no broker.
// Only the form Java's string concatenation of a non-negative int produces is taken, so a client id
// that merely looks like one ("Persister-client-+3", "Persister-client-03") names nobody.
func persisterSender(clientID *string) (int32, bool) {
	if clientID == nil {
		return 0, false
	}
	digits, ok := strings.CutPrefix(*clientID, persisterClientPrefix)
	if !ok || digits == "" || digits[0] < '0' || digits[0] > '9' || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(id), true
}

// withSender names in ctx the broker that sent the request, when its client id says which.
func withSender(ctx context.Context, h kafkawire.RequestHeader) context.Context {
	if id, ok := persisterSender(h.ClientID); ok {
		return sharestate.WithSender(ctx, id)
	}
	return ctx
}
