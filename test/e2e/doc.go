// Package e2e holds the whole-system test (`make test-e2e`): a local control plane, the CRDs applied
// with kubectl, the operator installed with helm and run from its binary with the chart's service
// account permissions, three sidecar processes standing for three broker pods, and simulated share
// consumers driving share-partition leaders through the sidecars over Kafka's wire protocol.
package e2e
