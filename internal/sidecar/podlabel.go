package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// The sidecar says which broker its pod serves with a label on the pod (sharestatev1.LabelBrokerID):
// a sidecar that answers a Read or Write another broker sent finds the sender's pod by it
// (persister.PodResolver), to record that pod as the partition's leader.

// The wait between attempts to label the pod: the first retry comes soon (the API server, or the
// role binding, may not be in force yet), the later ones no more often than every 10 s, so that a pod
// that cannot be labelled (no permission, a pod name that is not the pod's) logs a line that often,
// and is labelled soon after the cause is fixed.
const (
	labelFirstBackoff = time.Second
	labelMaxBackoff   = 10 * time.Second
)

// startLabellingOwnPod labels the sidecar's pod in the background (labelOwnPod), on a client of its
// own, until it succeeds or ctx ends.
func startLabellingOwnPod(ctx context.Context, restCfg *rest.Config, cfg Config) error {
	c, err := client.New(restCfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return fmt.Errorf("creating the Kubernetes client that labels the pod: %w", err)
	}
	go labelOwnPod(ctx, c, cfg)
	return nil
}

// labelOwnPod labels the sidecar's pod with its broker id, with a merge patch, retrying until it
// succeeds or ctx ends; every failure is logged, since until it succeeds no other broker's sidecar
// can record this broker as a leader and their requests are answered COORDINATOR_NOT_AVAILABLE.
func labelOwnPod(ctx context.Context, c client.Client, cfg Config) {
	log := cfg.Logger.WithValues("pod", cfg.Namespace+"/"+cfg.Identity.PodName, "brokerId", cfg.Identity.BrokerID)
	patch, err := brokerLabelPatch(cfg.Identity.BrokerID)
	if err != nil {
		log.Error(err, "Could not build the pod's broker-id label")
		return
	}
	wait := labelFirstBackoff
	for attempt := 1; ; attempt++ {
		err := patchPod(ctx, c, cfg.Namespace, cfg.Identity.PodName, patch)
		if err == nil {
			log.Info("Labelled the pod with its broker id", "label", sharestatev1.LabelBrokerID)
			return
		}
		if ctx.Err() != nil {
			return
		}
		log.Info("Labelling the pod with its broker id failed; retrying", "attempt", attempt, "retryIn", wait, "error", err.Error())
		if !sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, labelMaxBackoff)
	}
}

// brokerLabelPatch is the merge patch that sets the broker-id label, and nothing else.
func brokerLabelPatch(brokerID int32) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{
		sharestatev1.LabelBrokerID: strconv.FormatInt(int64(brokerID), 10),
	}}})
}

func patchPod(ctx context.Context, c client.Client, namespace, name string, patch []byte) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patching pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// sleep waits d, or less if ctx ends; false if it did.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
