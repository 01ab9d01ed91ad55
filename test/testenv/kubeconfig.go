package testenv

import (
	"bytes"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig that reaches cfg's API server as user, in a directory of the
// test's own, and returns its path: what a binary under test, or kubectl, is started with.
func WriteKubeconfig(t testing.TB, cfg *rest.Config, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfigFor(cfg, user), path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeconfigFor is a kubeconfig that reaches cfg's API server as user.
func kubeconfigFor(cfg *rest.Config, user *clientcmdapi.AuthInfo) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = user
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "user"}
	kc.CurrentContext = "envtest"
	return kc
}

// AdminKubeconfig writes a kubeconfig that reaches the API server as cfg does (the envtest
// administrator) and returns its path.
func AdminKubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	return WriteKubeconfig(t, cfg, adminUser(cfg))
}

// WriteAdminKubeconfig writes to path a kubeconfig that reaches the API server as cfg does: for
// programs that are not tests, such as the bench.
func WriteAdminKubeconfig(cfg *rest.Config, path string) error {
	return clientcmd.WriteToFile(*kubeconfigFor(cfg, adminUser(cfg)), path)
}

func adminUser(cfg *rest.Config) *clientcmdapi.AuthInfo {
	return &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
}

// SyncBuffer collects a process's output while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
