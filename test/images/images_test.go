//go:build cluster

package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The archives test-cluster builds, with the names it gives them.
var archives = map[string]string{
	"sharestate-operator.tar": "localhost/sharestate/sharestate-operator:dev",
	"sharestate-sidecar.tar":  "localhost/sharestate/sharestate-sidecar:dev",
}

func TestArchivesMatchTheDockerfile(t *testing.T) {
	user, entrypoint := dockerfileRuntime(t, filepath.Join(testenv.RepoRoot(), "Dockerfile"))
	for file, tag := range archives {
		t.Run(file, func(t *testing.T) {
			img := openArchive(t, filepath.Join(os.Getenv("CLUSTER_IMAGES"), file))
			if !slices.Equal(img.tags, []string{tag}) {
				t.Errorf("tags %v, want %s", img.tags, tag)
			}
			if img.config.Config.User != user {
				t.Errorf("user %q, the Dockerfile's %q", img.config.Config.User, user)
			}
			if !slices.Equal(img.config.Config.Entrypoint, entrypoint) {
				t.Errorf("entrypoint %q, the Dockerfile's %q", img.config.Config.Entrypoint, entrypoint)
			}
			if img.config.OS != "linux" || img.config.Architecture != runtime.GOARCH {
				t.Errorf("platform %s/%s, want linux/%s", img.config.OS, img.config.Architecture, runtime.GOARCH)
			}
			checkFiles(t, img.files, entrypoint[0])
		})
	}
}

// dockerfileRuntime returns the USER and exec-form ENTRYPOINT of the Dockerfile's last stage.
func dockerfileRuntime(t *testing.T, path string) (user string, entrypoint []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		instr, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(instr) {
		case "FROM": // a new stage: only the last one's count
			user, entrypoint = "", nil
		case "USER":
			user = strings.TrimSpace(arg)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(arg), &entrypoint); err != nil {
				t.Fatalf("the Dockerfile's ENTRYPOINT is not in exec form: %s", arg)
			}
		}
	}
	if user == "" || len(entrypoint) == 0 {
		t.Fatalf("the Dockerfile's last stage has no USER or ENTRYPOINT")
	}
	return user, entrypoint
}

type image struct {
	tags   []string
	config struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			User       string
			Entrypoint []string
		} `json:"config"`
	}
	files map[string]file // by path, without the leading slash
}

type file struct {
	hdr  *tar.Header
	data []byte
}

// openArchive reads a docker-save archive: manifest.json, the config it names, its layers' files.
func openArchive(t *testing.T, path string) *image {
	t.Helper()
	entries := readTar(t, path, openFile(t, path))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"].data, &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s: manifest.json: %v (%d images)", path, err, len(manifest))
	}
	img := &image{tags: manifest[0].RepoTags, files: map[string]file{}}
	if err := json.Unmarshal(entries[manifest[0].Config].data, &img.config); err != nil {
		t.Fatalf("%s: the config: %v", path, err)
	}
	for _, layer := range manifest[0].Layers {
		gz, err := gzip.NewReader(bytes.NewReader(entries[layer].data))
		if err != nil {
			t.Fatalf("%s: layer %s: %v", path, layer, err)
		}
		for name, f := range readTar(t, layer, gz) {
			img.files[strings.TrimSuffix(name, "/")] = f
		}
	}
	return img
}

func openFile(t *testing.T, path string) io.Reader {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make test-cluster`, which builds the images)", err)
	}
	return bytes.NewReader(data)
}

func readTar(t *testing.T, name string, r io.Reader) map[string]file {
	t.Helper()
	out := map[string]file{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", name, hdr.Name, err)
		}
		out[hdr.Name] = file{hdr: hdr, data: data}
	}
}

// checkFiles checks what the image's user and entrypoint need: the entrypoint a static executable
// for this machine, a /tmp anyone may write, and an account for the user.
func checkFiles(t *testing.T, files map[string]file, entrypoint string) {
	t.Helper()
	app, ok := files[strings.TrimPrefix(entrypoint, "/")]
	if !ok || app.hdr.Typeflag != tar.TypeReg || app.hdr.Mode&0o111 == 0 {
		t.Fatalf("%s is not an executable file of the image", entrypoint)
	}
	if err := staticELF(app.data); err != nil {
		t.Errorf("%s: %v", entrypoint, err)
	}
	if tmp, ok := files["tmp"]; !ok || tmp.hdr.Typeflag != tar.TypeDir || tmp.hdr.Mode&0o7777 != 0o1777 {
		t.Errorf("/tmp is not a directory of mode 1777")
	}
	if passwd := string(files["etc/passwd"].data); !strings.Contains(passwd, ":x:65532:65532:") {
		t.Errorf("/etc/passwd has no account 65532:\n%s", passwd)
	}
}

// staticELF says why data is not a statically linked ELF executable for this machine's architecture.
func staticELF(data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return err
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if f.Machine != want {
		return fmt.Errorf("built for %v, not %s", f.Machine, runtime.GOARCH)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked (it names an interpreter)")
		}
	}
	return nil
}

// TestKafkaImageIsLaidOutAsApacheKafkas: the Kafka image of hack/kafka-image.sh is laid out as the
// apache/kafka image that docs/kafka-integration.md §4 names: Kafka's scripts and jars in /opt/kafka,
// a writable /var/lib/kafka/data, run as appuser (1000:1000), a JRE and a shell.
func TestKafkaImageIsLaidOutAsApacheKafkas(t *testing.T) {
	img := openArchive(t, filepath.Join(os.Getenv("CLUSTER_IMAGES"), "kafka.tar"))
	if img.config.Config.User != "1000:1000" {
		t.Errorf("user %q, want apache/kafka's appuser, 1000:1000", img.config.Config.User)
	}
	find := func(path string) (file, bool) {
		if f, ok := img.files[path]; ok {
			return f, true
		}
		f, ok := img.files["./"+path]
		return f, ok
	}
	for _, path := range []string{"opt/kafka/bin/kafka-server-start.sh", "opt/kafka/bin/kafka-storage.sh",
		"opt/kafka/bin/kafka-share-groups.sh", "opt/kafka/config/log4j2.yaml", "usr/bin/sh", "usr/bin/bash", "usr/bin/java"} {
		if _, ok := find(path); !ok {
			t.Errorf("no /%s in the image", path)
		}
	}
	if data, ok := find("var/lib/kafka/data"); !ok || data.hdr.Uid != 1000 || data.hdr.Typeflag != tar.TypeDir {
		t.Errorf("/var/lib/kafka/data is not appuser's directory")
	}
	if passwd, _ := find("etc/passwd"); !strings.Contains(string(passwd.data), "appuser:x:1000:1000:") {
		t.Errorf("no appuser 1000:1000 in /etc/passwd")
	}
	jars := 0
	for path := range img.files {
		if strings.Contains(path, "opt/kafka/libs/kafka_2.13-") {
			jars++
		}
	}
	if jars != 1 {
		t.Errorf("%d broker jars (kafka_2.13-*.jar) in /opt/kafka/libs, want 1", jars)
	}
}
