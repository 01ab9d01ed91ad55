// The release as far as this machine can run it: hack/release.sh publish, the script the release
// workflow runs, pushes to a registry served by this test on loopback instead of ghcr.io. What the
// workflow adds after it (signed provenance and SBOM attestations) needs GitHub's OIDC token and
// cannot run here.
package release

import (
	"bufio"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// platforms are the release's (hack/release.sh's default).
var platforms = []string{"linux/amd64", "linux/arm64"}

var imageNames = []string{"sharestate-operator", "sharestate-sidecar"}

// TestPublish runs the release into a local registry and checks what a user pulls: each image an
// index of every platform, each platform's image as the Dockerfile builds it, the chart, and SBOMs
// naming every module linked into each binary.
func TestPublish(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	out := t.TempDir()
	run(t, "hack/release.sh", "publish").
		env("IMG_REPO="+host+"/sharestate", "OUT_DIR="+out, "HELM_PUSH_FLAGS=--plain-http").do()
	rel := readEnv(t, filepath.Join(out, "release.env"))
	version := rel["version"]

	for _, img := range imageNames {
		key := strings.ReplaceAll(img, "-", "_")
		if want := host + "/sharestate/" + img; rel[key+"_image"] != want {
			t.Errorf("release.env names the image %q, want %q", rel[key+"_image"], want)
		}
		checkIndex(t, rel[key+"_image"]+":"+version, key, rel)
		for _, plat := range platforms {
			binary := filepath.Join(out, "images", strings.ReplaceAll(plat, "/", "_"), img)
			checkSBOM(t, filepath.Join(out, "sbom", img+"."+strings.ReplaceAll(plat, "/", "_")+".cdx.json"), binary)
		}
	}
	checkChart(t, rel["chart"], rel["chart_digest"], strings.TrimPrefix(version, "v"))
}

// checkIndex checks that tag is the index release.env records, with one image per platform, each at
// the digest release.env records for it (the subject of its SBOM's attestation) and run as the
// Dockerfile's: /app as the entrypoint, as 65532:65532.
func checkIndex(t *testing.T, tag, key string, rel map[string]string) {
	t.Helper()
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("%s: %v", tag, err)
	}
	if got, _ := idx.Digest(); got.String() != rel[key+"_digest"] {
		t.Errorf("%s is %s, release.env records %s", tag, got, rel[key+"_digest"])
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		if recorded := rel[key+"_"+d.Platform.OS+"_"+d.Platform.Architecture+"_digest"]; recorded != d.Digest.String() {
			t.Errorf("%s's %s/%s image is %s, release.env records %q", tag, d.Platform.OS, d.Platform.Architecture, d.Digest, recorded)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, tag, d.Platform, img)
	}
	if strings.Join(got, ",") != strings.Join(platforms, ",") {
		t.Errorf("%s holds the platforms %v, want %v", tag, got, platforms)
	}
}

func checkConfig(t *testing.T, tag string, plat *v1.Platform, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != plat.OS || cf.Architecture != plat.Architecture {
		t.Errorf("%s: the %s/%s image's config is for %s/%s", tag, plat.OS, plat.Architecture, cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/app" {
		t.Errorf("%s (%s): user %q, entrypoint %q; the Dockerfile's are 65532:65532 and /app", tag, cf.Architecture, cf.Config.User, cf.Config.Entrypoint)
	}
	if cf.Config.Labels["org.opencontainers.image.version"] == "" || cf.Config.Labels["org.opencontainers.image.revision"] == "" {
		t.Errorf("%s: no version or revision label: %v", tag, cf.Config.Labels)
	}
}

// checkSBOM checks that the CycloneDX SBOM at path names the module of the binary's main package and
// every module the binary links, at the version it links.
func checkSBOM(t *testing.T, path, binary string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Name string } `json:"component"`
		} `json:"metadata"`
		Components []struct{ Name, Version string } `json:"components"`
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/sharestate/sharestate-operator" {
		t.Errorf("%s: format %q, main component %q", path, bom.BOMFormat, bom.Metadata.Component.Name)
	}
	listed := map[string]string{}
	for _, c := range bom.Components {
		listed[c.Name] = c.Version
	}
	linked := linkedModules(t, binary)
	for mod, version := range linked {
		if listed[mod] != version {
			t.Errorf("%s: the binary links %s %s, the SBOM lists %q", path, mod, version, listed[mod])
		}
	}
	if len(linked) < 10 {
		t.Errorf("%s links only %d modules: %v", binary, len(linked), linked)
	}
}

// linkedModules are the dependency modules in the binary's build information, with their versions
// (`go version -m`: a "dep" line per module, "=>" and a line of its own for a replacement).
func linkedModules(t *testing.T, binary string) map[string]string {
	t.Helper()
	mods := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(run(t, "go", "version", "-m", binary).do()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "dep" {
			mods[f[1]] = f[2]
		}
	}
	return mods
}

// checkChart checks that `helm pull` of the pushed chart gets the digest recorded and the version
// released.
func checkChart(t *testing.T, chart, digest, version string) {
	t.Helper()
	dir := t.TempDir()
	out := run(t, helm(), "pull", "oci://"+chart, "--version", version, "--plain-http", "--destination", dir).do()
	if !strings.Contains(out, "Digest: "+digest) {
		t.Errorf("helm pull printed\n%s\nrelease.env records the chart's digest %s", out, digest)
	}
	if _, err := os.Stat(filepath.Join(dir, "sharestate-operator-"+version+".tgz")); err != nil {
		t.Error(err)
	}
}

// readEnv reads key=value lines.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		kv[k] = v
	}
	return kv
}

func helm() string {
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	return filepath.Join(repoRoot(), "bin", "helm")
}

// repoRoot is the project's root: this module is hack/tools/release.
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "..")
}

type command struct {
	t   *testing.T
	cmd *exec.Cmd
}

// run is a command run from the project's root.
func run(t *testing.T, name string, args ...string) *command {
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot()
	cmd.Env = os.Environ()
	return &command{t: t, cmd: cmd}
}

func (c *command) env(kv ...string) *command {
	c.cmd.Env = append(c.cmd.Env, kv...)
	return c
}

// do runs the command and returns its output, failing the test if it fails.
func (c *command) do() string {
	c.t.Helper()
	out, err := c.cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s: %v\n%s", strings.Join(c.cmd.Args, " "), err, out)
	}
	return string(out)
}
