package testenv

import (
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1alpha1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// NewScheme holds Kubernetes' built-in types and this project's.
func NewScheme() (*k8sruntime.Scheme, error) {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := sharestatev1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// KubeClient is a client of the cluster that the kubeconfig file reaches, for the built-in types and
// this project's: what a test uses on a control plane it did not start itself (make run's).
func KubeClient(t testing.TB, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
