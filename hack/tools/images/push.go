package main

import (
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

// pushIndex pushes the index of every platform's image to tag's registry.
func pushIndex(platforms []platformBinary, tag string, lbls map[string]string, created time.Time) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	idx, err := imageIndex(platforms, lbls, created)
	if err != nil {
		return err
	}
	return remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain))
}
