package bench

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestProxyScenariosWrite sets up each proxy scenario and drives its writers by hand: every Kafka
// round trip fetches back the record it produced, and every Write over Kafka's protocol lands on the
// partition's object.
func TestProxyScenariosWrite(t *testing.T) {
	testenv.Require(t, env)
	const rounds = 5
	for _, sc := range proxyScenarios {
		t.Run(sc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			c, err := (&runner{env: env}).countedClient(&requestCounter{})
			if err != nil {
				t.Fatal(err)
			}
			writers, err := sc.setup(t.Context(), c, ns)
			if err != nil {
				t.Fatal(err)
			}
			for range rounds {
				for _, write := range writers {
					if err := write(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if strings.HasPrefix(sc.name, "kafka-") {
				return
			}
			var obj v1alpha1.SharePartitionState
			key := client.ObjectKey{Namespace: ns, Name: v1alpha1.SharePartitionStateName(groupID, topicIDText, 0)}
			if err := env.Client.Get(t.Context(), key, &obj); err != nil {
				t.Fatal(err)
			}
			want := baseOffset + (int64(rounds*len(writers))-1)*offsetsPerWrite - trailingOffsets
			if obj.Status.StartOffset != want {
				t.Errorf("start offset %d after %d writes, want %d", obj.Status.StartOffset, rounds*len(writers), want)
			}
		})
	}
}
