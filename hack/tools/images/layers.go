package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// runtimeConfig is what an image of layers runs: the process's user, directory, environment and
// command, as a Dockerfile's USER, WORKDIR, ENV and CMD give them.
type runtimeConfig struct {
	user, workdir string
	env, cmd      []string
}

// layeredImage is an image of the host's platform whose layers are the tar files given, in order,
// the first the bottom one: a root filesystem, then what goes on it. Each layer is compressed once,
// as it is written.
func layeredImage(paths []string, rc runtimeConfig, lbls map[string]string, created time.Time) (v1.Image, error) {
	var layers []v1.Layer
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		layer, err := tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", p, err)
		}
		layers = append(layers, layer)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", runtime.GOARCH, v1.Time{Time: created}
	cfg.Config.User = rc.user
	cfg.Config.WorkingDir = rc.workdir
	cfg.Config.Env = rc.env
	cfg.Config.Cmd = rc.cmd
	cfg.Config.Labels = lbls
	return mutate.ConfigFile(img, cfg)
}
