// Command image-build builds an image of one static binary without a container engine or a
// registry: the binary at /app on a base like distroless's static:nonroot (the Dockerfile's runtime
// stage), run as 65532:65532 with /app as its entrypoint. It writes a docker-save archive, which
// `ctr images import` and `docker load` take, or, with several platforms, pushes an image index.
// With --layer instead of --binary it stacks tar files (a root filesystem, then what goes on it)
// into an image of the host's platform, for the test cluster's Kafka images (hack/kafka-image.sh).
//
//	image-build --binary bin/linux_amd64/app --tag ghcr.io/sharestate/app:v1 --out app.tar
//	image-build --binary linux/amd64=a --binary linux/arm64=b --tag ghcr.io/sharestate/app:v1 --push --digest-file app.digest
//	image-build --layer rootfs.tar --layer kafka.tar --user 1000:1000 --workdir /opt/kafka --cmd /bin/bash --tag localhost/kafka:4.4.0 --out kafka.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// list is a repeatable flag's values.
type list []string

func (b *list) String() string     { return strings.Join(*b, ",") }
func (b *list) Set(v string) error { *b = append(*b, v); return nil }

type labels map[string]string

func (l labels) String() string { return fmt.Sprint(map[string]string(l)) }
func (l labels) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("a label is key=value, not %q", v)
	}
	l[k] = val
	return nil
}

func main() {
	var bins, layers list
	var rc runtimeConfig
	lbls := labels{}
	flag.Var(&layers, "layer", "a layer's tar file, bottom first (repeatable; instead of --binary)")
	flag.StringVar(&rc.user, "user", "", "with --layer: the user the image runs as")
	flag.StringVar(&rc.workdir, "workdir", "/", "with --layer: the working directory")
	flag.Var((*list)(&rc.env), "env", "with --layer: an environment variable NAME=VALUE (repeatable)")
	flag.Var((*list)(&rc.cmd), "cmd", "with --layer: the command, one argument per flag (repeatable)")
	flag.Var(&bins, "binary", "the static binary: PATH for the host's platform, or OS/ARCH=PATH (repeatable, one per platform)")
	tag := flag.String("tag", "", "the image's name and tag (required)")
	out := flag.String("out", "", "write a docker-save archive here (one platform only)")
	push := flag.Bool("push", false, "push the image (an index of every platform) to the tag's registry, with the credentials of ~/.docker/config.json")
	digestFile := flag.String("digest-file", "", "with --push: write the digests pushed here, for the release's attestations: a line \"index sha256:...\", then one \"OS/ARCH sha256:...\" per platform's image")
	flag.Var(lbls, "label", "an OCI label key=value of the image's config (repeatable)")
	flag.Parse()
	err := runLayers(layers, rc, *tag, *out, *push, lbls)
	if len(layers) > 0 && len(bins) > 0 {
		err = fmt.Errorf("give --binary or --layer, not both")
	} else if len(layers) == 0 {
		err = run(bins, *tag, *out, *push, *digestFile, lbls)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image-build:", err)
		os.Exit(1)
	}
}

// runLayers writes the image of layers as an archive.
func runLayers(layers list, rc runtimeConfig, tag, out string, push bool, lbls labels) error {
	switch {
	case len(layers) == 0:
		return nil
	case tag == "" || out == "" || push:
		return fmt.Errorf("--layer needs --tag and --out (an image of layers is written, never pushed)")
	}
	img, err := layeredImage(layers, rc, lbls, createdTime())
	if err != nil {
		return err
	}
	return writeArchive(img, tag, out)
}

func run(bins list, tag, out string, push bool, digestFile string, lbls labels) error {
	switch {
	case len(bins) == 0:
		return fmt.Errorf("--binary is required")
	case tag == "":
		return fmt.Errorf("--tag is required")
	case (out == "") == !push:
		return fmt.Errorf("give exactly one of --out and --push")
	case digestFile != "" && !push:
		return fmt.Errorf("--digest-file needs --push")
	case out != "" && len(bins) > 1:
		return fmt.Errorf("--out writes one platform's image; %d binaries were given", len(bins))
	}
	platforms, err := parseBinaries(bins)
	if err != nil {
		return err
	}
	created := createdTime()
	if out != "" {
		img, err := appImage(platforms[0], lbls, created)
		if err != nil {
			return err
		}
		return writeArchive(img, tag, out)
	}
	digests, err := pushIndex(platforms, tag, lbls, created)
	if err != nil || digestFile == "" {
		return err
	}
	return os.WriteFile(digestFile, []byte(digests), 0o644)
}
