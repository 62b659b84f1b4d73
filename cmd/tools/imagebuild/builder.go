// Package imagebuild builds Dockyard's images without a container registry: the Kubernetes node
// image (Debian from debootstrap, Kubernetes built from the Go module proxy, every image kubeadm
// needs preloaded into the node's containerd), the haproxy load balancer image and the flannel
// CNI image. Root filesystems, binaries and layers are cached under a directory keyed by their
// inputs; images in the engine carry the hash of their inputs in the label InputsLabel, so an
// unchanged image is not built again.
//
// Building needs root (debootstrap, chroot) and a container engine, reached only through
// Dockyard's runtime layer (container.Runtime; see engine.go).
package imagebuild

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dockyard-dev/dockyard/images"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// Labels set on the images this package builds.
const (
	// InputsLabel holds the hash of everything the image was built from.
	InputsLabel = "dev.dockyard.image.inputs"
	// LabelPrefix prefixes the version labels (dev.dockyard.version.kubernetes, ...).
	LabelPrefix = "dev.dockyard."
)

// recipeVersion is part of every inputs hash; bump it to invalidate every cached artifact when
// the way they are built changes in a way the hashed sources do not show.
const recipeVersion = "1"

// Builder builds images.
type Builder struct {
	// CacheDir holds everything built: build/ (Go binaries, see gobuild), rootfs/, layers/,
	// debs/ (downloaded packages), tmp/ and locks/.
	CacheDir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Runtime is the container engine the images go into (pkg/container/dockerengine.New() for
	// the engine DOCKER_HOST names). The preload step runs a build node on it.
	Runtime container.Runtime
	// Mirror is the Debian archive debootstrap uses; DefaultMirror when empty.
	Mirror string
	// Suite is the Debian release; DefaultSuite when empty.
	Suite string
	// Force rebuilds images even when the engine has one with the same inputs.
	Force bool

	goOnce    sync.Once
	goVersion string
	logMu     sync.Mutex
	// aptMu serialises the builder's own apt-get runs: root filesystems are built in parallel
	// and apt holds a lock on its lists while it updates them.
	aptMu sync.Mutex
}

// Defaults of Builder.
const (
	DefaultMirror = "http://deb.debian.org/debian"
	DefaultSuite  = "bookworm"
)

//go:embed *.go
var sources embed.FS

func (b *Builder) mirror() string {
	if b.Mirror != "" {
		return b.Mirror
	}
	return DefaultMirror
}

func (b *Builder) suite() string {
	if b.Suite != "" {
		return b.Suite
	}
	return DefaultSuite
}

func (b *Builder) goBuilder() *gobuild.Builder {
	return &gobuild.Builder{CacheDir: filepath.Join(b.CacheDir, "build"), Log: b.prefixed("go")}
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log == nil {
		return
	}
	b.logMu.Lock()
	defer b.logMu.Unlock()
	fmt.Fprintf(b.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// prefixed returns a writer that logs each line with a prefix.
func (b *Builder) prefixed(prefix string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			b.logf("[%s] %s", prefix, line)
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// baseInputs are part of every image's inputs: the build recipe (this package's sources), the
// Go toolchain, and the files under images/ in the given directories (all of them when none
// is given), so that editing one image's files does not rebuild the others.
func (b *Builder) baseInputs(ctx context.Context, imageDirs ...string) (*Inputs, error) {
	in := &Inputs{}
	in.Set("recipe", recipeVersion)
	src, err := sourcesFS()
	if err != nil {
		return nil, err
	}
	if err := in.SetFS("imagebuild-sources", src); err != nil {
		return nil, err
	}
	if len(imageDirs) == 0 {
		if err := in.SetFS("images", images.Files); err != nil {
			return nil, err
		}
	}
	for _, dir := range imageDirs {
		sub, err := fs.Sub(images.Files, dir)
		if err != nil {
			return nil, err
		}
		if err := in.SetFS("images/"+dir, sub); err != nil {
			return nil, err
		}
	}
	in.Set("go", b.goToolVersion(ctx))
	return in, nil
}

// sourcesFS is this package's Go sources without the tests.
func sourcesFS() (fs.FS, error) {
	return filteredFS{FS: sources, keep: func(p string) bool { return !strings.HasSuffix(p, "_test.go") }}, nil
}

type filteredFS struct {
	fs.FS
	keep func(string) bool
}

func (f filteredFS) ReadDir(name string) ([]fs.DirEntry, error) {
	entries, err := fs.ReadDir(f.FS, name)
	var kept []fs.DirEntry
	for _, e := range entries {
		if e.IsDir() || f.keep(e.Name()) {
			kept = append(kept, e)
		}
	}
	return kept, err
}

func (b *Builder) goToolVersion(ctx context.Context) string {
	b.goOnce.Do(func() {
		out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
		if err != nil {
			b.goVersion = "unknown"
			return
		}
		b.goVersion = strings.TrimSpace(string(out))
	})
	return b.goVersion
}

// lock takes an exclusive lock on name in the cache, waiting for another dockyard-build that
// holds it. The lock goes away with the process, so an interrupted build never leaves it behind.
func (b *Builder) lock(ctx context.Context, name string) (func(), error) {
	return gobuild.Lock(ctx, filepath.Join(b.CacheDir, "locks", name+".lock"), func(path string) {
		b.logf("waiting for another dockyard-build holding %s", path)
	})
}

// existing returns want, and says it is up to date, when the engine has it built from the
// given inputs; "" when it does not (or when Force is set).
func (b *Builder) existing(ctx context.Context, inputsHash, want string) (string, error) {
	if b.Force {
		return "", nil
	}
	labels, ok, err := b.imageLabels(ctx, want)
	if err != nil || !ok || labels[InputsLabel] != inputsHash {
		return "", err
	}
	b.logf("%s is up to date (inputs %s)", want, short(inputsHash))
	return want, nil
}

func (b *Builder) layerPath(kind, key string) string {
	return filepath.Join(b.CacheDir, "layers", kind+"-"+short(key)+".tar.gz")
}

// cachedLayer returns the layer stored for (kind, key), writing it with write first when the
// cache does not have it.
func (b *Builder) cachedLayer(kind, key string, write func(t *tarBuilder) error) (*fileLayer, error) {
	file := b.layerPath(kind, key)
	if l, ok := openLayer(file); ok {
		return l, nil
	}
	return writeLayer(file, func(w io.Writer) error {
		t := newTarBuilder(w)
		if err := write(t); err != nil {
			return err
		}
		return t.Close()
	})
}

func mustEmbedded(name string) []byte {
	b, err := fs.ReadFile(images.Files, name)
	if err != nil {
		panic(fmt.Sprintf("embedded image file %s: %v", name, err))
	}
	return b
}
