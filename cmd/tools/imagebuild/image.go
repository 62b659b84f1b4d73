package imagebuild

import (
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/pkg/errors"
)

// imageConfig is the runtime configuration of an assembled image.
type imageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	Labels     map[string]string
	StopSignal string
	WorkingDir string
	// User runs the entrypoint, e.g. "65532:65532"; root when empty.
	User string
	// Created is the image's creation time; the Unix epoch when zero, so that an image
	// assembled twice from the same layers has the same ID.
	Created time.Time
}

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// assemble stacks layers into a linux image with the given configuration.
func assemble(layers []v1.Layer, c imageConfig) (v1.Image, error) {
	created := c.Created
	if created.IsZero() {
		created = epoch
	}
	adds := make([]mutate.Addendum, 0, len(layers))
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "dockyard-build"}})
	}
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = c.Entrypoint
	cf.Config.Cmd = c.Cmd
	cf.Config.Env = c.Env
	if len(cf.Config.Env) == 0 {
		cf.Config.Env = []string{defaultPath}
	}
	cf.Config.Labels = c.Labels
	cf.Config.StopSignal = c.StopSignal
	cf.Config.WorkingDir = c.WorkingDir
	cf.Config.User = c.User
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, errors.Wrap(err, "setting image configuration")
	}
	return img, nil
}

// imageSize returns the compressed size of an image's layers.
func imageSize(img v1.Image) int64 {
	layers, err := img.Layers()
	if err != nil {
		return 0
	}
	var n int64
	for _, l := range layers {
		s, _ := l.Size()
		n += s
	}
	return n
}
