package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageIndex is one image per platform, as an OCI image index.
func imageIndex(platforms []platformBinary, lbls map[string]string, created time.Time) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := appImage(p, lbls, created)
		if err != nil {
			return nil, err
		}
		plat := p.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plat}})
	}
	return idx, nil
}

// pushIndex pushes the index of every platform's image to tag's registry and returns the digests
// pushed: "index DIGEST" and "OS/ARCH DIGEST" lines.
func pushIndex(platforms []platformBinary, tag string, lbls map[string]string, created time.Time) (string, error) {
	ref, err := name.NewTag(tag)
	if err != nil {
		return "", err
	}
	idx, err := imageIndex(platforms, lbls, created)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", err
	}
	return indexDigests(idx)
}

// indexDigests lists the index's digest and each platform's image's.
func indexDigests(idx v1.ImageIndex) (string, error) {
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "index %s\n", digest)
	for _, d := range m.Manifests {
		fmt.Fprintf(&b, "%s/%s %s\n", d.Platform.OS, d.Platform.Architecture, d.Digest)
	}
	return b.String(), nil
}
