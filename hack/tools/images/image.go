package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The runtime the Dockerfile's last stage gives the binary (gcr.io/distroless/static:nonroot, USER
// 65532:65532, ENTRYPOINT ["/app"]); test/images checks the archive against the Dockerfile itself.
const (
	appPath = "/app"
	appUser = "65532:65532"
	caFile  = "/etc/ssl/certs/ca-certificates.crt"
)

// platformBinary is one platform's binary.
type platformBinary struct {
	platform v1.Platform
	path     string
}

func parseBinaries(bins []string) ([]platformBinary, error) {
	var out []platformBinary
	for _, b := range bins {
		plat, path, ok := strings.Cut(b, "=")
		if !ok {
			plat, path = "linux/"+runtime.GOARCH, b
		}
		os, arch, ok := strings.Cut(plat, "/")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("a platform is OS/ARCH, not %q", plat)
		}
		out = append(out, platformBinary{platform: v1.Platform{OS: os, Architecture: arch}, path: path})
	}
	return out, nil
}

// createdTime is SOURCE_DATE_EPOCH when it is set, else the epoch: the same binary makes the same image.
func createdTime() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(secs, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

// appImage is the binary's image for one platform: one layer with the base's files and the binary.
func appImage(b platformBinary, lbls map[string]string, created time.Time) (v1.Image, error) {
	binary, err := os.ReadFile(b.path)
	if err != nil {
		return nil, err
	}
	layer, err := baseLayer(binary, created)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = b.platform.OS, b.platform.Architecture, v1.Time{Time: created}
	cfg.Config.User = appUser
	cfg.Config.Entrypoint = []string{appPath}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=" + caFile}
	cfg.Config.Labels = lbls
	return mutate.ConfigFile(img, cfg)
}

// baseLayer holds what distroless's static:nonroot gives a static binary (the accounts, a home for
// nonroot, a /tmp, the CA bundle) and the binary at /app. The CA bundle is the build machine's
// (Debian's ca-certificates), when it has one: the sidecar's proxy verifies an upstream's TLS against
// the system's roots when no CA file is given.
func baseLayer(binary []byte, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: created})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: created}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("home", 0o755, 0) },
		func() error { return dir("home/nonroot", 0o700, 65532) },
		func() error { return dir("root", 0o700, 0) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return file("app", 0o755, binary) },
	}
	if ca, err := os.ReadFile(caFile); err == nil {
		steps = append(steps,
			func() error { return dir("etc/ssl", 0o755, 0) },
			func() error { return dir("etc/ssl/certs", 0o755, 0) },
			func() error { return file(strings.TrimPrefix(caFile, "/"), 0o644, ca) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// writeArchive writes img as a docker-save archive tagged tag.
func writeArchive(img v1.Image, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}
