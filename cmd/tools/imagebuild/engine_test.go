package imagebuild

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// imageEngine is the in-memory engine with what the builder relies on from a real one: docker
// load of a multi-image tarball, and containers that carry their image's labels.
type imageEngine struct {
	*inmemory.Runtime
	mu     sync.Mutex
	labels map[string]map[string]string // by image name
	ids    map[string]string            // image ID by name
	// dropLoads makes LoadImages read the stream and keep nothing, like an engine that
	// reports a failed load only inside its response.
	dropLoads bool
}

func newImageEngine(t *testing.T) *imageEngine {
	t.Helper()
	e := &imageEngine{Runtime: inmemory.New(), labels: map[string]map[string]string{}, ids: map[string]string{}}
	if err := e.CreateNetwork(context.Background(), container.NetworkSpec{Name: "none"}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *imageEngine) LoadImages(ctx context.Context, stream io.Reader) error {
	data, err := io.ReadAll(stream)
	if err != nil {
		return err
	}
	if e.dropLoads {
		return nil
	}
	opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	manifest, err := tarball.LoadManifest(opener)
	if err != nil {
		return err
	}
	for _, m := range manifest {
		for _, tag := range m.RepoTags {
			t, err := name.NewTag(tag)
			if err != nil {
				return err
			}
			img, err := tarball.Image(opener, &t)
			if err != nil {
				return err
			}
			cf, err := img.ConfigFile()
			if err != nil {
				return err
			}
			id, _ := img.ConfigName()
			e.mu.Lock()
			e.labels[tag] = cf.Config.Labels
			e.ids[tag] = id.String()
			e.mu.Unlock()
			// The fake engine learns images by pulling them.
			e.Pullable[tag] = true
			if err := e.PullImage(ctx, tag); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *imageEngine) CreateContainer(ctx context.Context, spec container.ContainerSpec) error {
	e.mu.Lock()
	merged := map[string]string{}
	for k, v := range e.labels[spec.Image] {
		merged[k] = v
	}
	e.mu.Unlock()
	for k, v := range spec.Labels {
		merged[k] = v
	}
	spec.Labels = merged
	return e.Runtime.CreateContainer(ctx, spec)
}

func (e *imageEngine) InspectImage(_ context.Context, ref string) (*container.Image, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := e.ids[ref]
	if !ok {
		return nil, container.ErrNotFound
	}
	return &container.Image{ID: id, Labels: e.labels[ref]}, nil
}

// removingEngine can also remove images.
type removingEngine struct {
	*imageEngine
	removed []string
}

func (e *removingEngine) RemoveImage(_ context.Context, ref string) error {
	e.removed = append(e.removed, ref)
	return nil
}

func testImage(t *testing.T, labels map[string]string) v1.Image {
	t.Helper()
	img, err := assemble(nil, imageConfig{Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestExistingReadsImageLabels(t *testing.T) {
	ctx := context.Background()
	e := newImageEngine(t)
	var log bytes.Buffer
	b := &Builder{CacheDir: t.TempDir(), Runtime: e, Log: &log}
	const ref = "localhost/dockyard/test:v1"

	if got, err := b.existing(ctx, "h1", ref); err != nil || got != "" {
		t.Fatalf("existing before load = %q, %v; want nothing", got, err)
	}
	if err := b.load(ctx, ref, testImage(t, map[string]string{InputsLabel: "h1", "other": "x"})); err != nil {
		t.Fatal(err)
	}
	if got, err := b.existing(ctx, "h1", ref); err != nil || got != ref {
		t.Errorf("existing(h1) = %q, %v; want %s", got, err, ref)
	}
	if got, err := b.existing(ctx, "h2", ref); err != nil || got != "" {
		t.Errorf("existing(h2) = %q, %v; want nothing (other inputs)", got, err)
	}
	labels, ok, err := b.imageLabels(ctx, ref)
	if err != nil || !ok || labels["other"] != "x" || labels[BuildLabel] != "" {
		t.Errorf("imageLabels = %v, %v, %v; want the image's labels without the probe's", labels, ok, err)
	}
	b.Force = true
	if got, _ := b.existing(ctx, "h1", ref); got != "" {
		t.Errorf("existing with Force = %q, want nothing", got)
	}
	if names := e.ContainerNames(); len(names) != 0 {
		t.Errorf("probe containers left behind: %v", names)
	}
}

func TestLoadChecksTheEngine(t *testing.T) {
	e := newImageEngine(t)
	e.dropLoads = true
	b := &Builder{CacheDir: t.TempDir(), Runtime: e}
	err := b.load(context.Background(), "localhost/dockyard/test:v1", testImage(t, map[string]string{InputsLabel: "h1"}))
	if err == nil || !strings.Contains(err.Error(), "does not have it afterwards") {
		t.Fatalf("load into an engine that kept nothing: err = %v", err)
	}
}

func TestLoadDropsSupersededImages(t *testing.T) {
	ctx := context.Background()
	e := &removingEngine{imageEngine: newImageEngine(t)}
	b := &Builder{CacheDir: t.TempDir(), Runtime: e}
	const ref, latest = "localhost/dockyard/lb:1.0", "localhost/dockyard/lb:latest"
	first := testImage(t, map[string]string{InputsLabel: "h1"})
	second := testImage(t, map[string]string{InputsLabel: "h2"})
	if err := b.load(ctx, ref, first, latest); err != nil {
		t.Fatal(err)
	}
	if err := b.load(ctx, ref, first, latest); err != nil {
		t.Fatal(err)
	}
	if len(e.removed) != 0 {
		t.Fatalf("reloading the same image removed %v", e.removed)
	}
	if err := b.load(ctx, ref, second, latest); err != nil {
		t.Fatal(err)
	}
	firstID, _ := first.ConfigName()
	if len(e.removed) != 1 || e.removed[0] != firstID.String() {
		t.Errorf("removed %v, want once the first image %s", e.removed, firstID)
	}
	if got, _ := b.existing(ctx, "h2", latest); got != latest {
		t.Errorf("latest does not name the second image")
	}

	// What the names pointed to comes from the engine, not from a cache that may be new.
	fresh := &Builder{CacheDir: t.TempDir(), Runtime: e}
	third := testImage(t, map[string]string{InputsLabel: "h3"})
	if err := fresh.load(ctx, ref, third, latest); err != nil {
		t.Fatal(err)
	}
	secondID, _ := second.ConfigName()
	if len(e.removed) != 2 || e.removed[1] != secondID.String() {
		t.Errorf("removed %v, want the second image %s after the first", e.removed, secondID)
	}
}

func TestExistingLoadBalancer(t *testing.T) {
	ctx := context.Background()
	e := newImageEngine(t)
	b := &Builder{CacheDir: t.TempDir(), Runtime: e}
	ref := LoadBalancerRepository + ":" + ImageTag("2.6.12-1+deb12u3")
	img := testImage(t, map[string]string{InputsLabel: "h1", LabelPrefix + "version.haproxy": "2.6.12-1+deb12u3"})
	if got, err := b.existingLoadBalancer(ctx, "h1"); err != nil || got != "" {
		t.Fatalf("before load: %q, %v", got, err)
	}
	if err := b.load(ctx, ref, img, LoadBalancerRepository+":latest"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.existingLoadBalancer(ctx, "h1"); err != nil || got != ref {
		t.Errorf("existingLoadBalancer(h1) = %q, %v; want %s", got, err, ref)
	}
	if got, _ := b.existingLoadBalancer(ctx, "h2"); got != "" {
		t.Errorf("existingLoadBalancer(h2) = %q, want nothing", got)
	}
}

func TestBuilderWithoutRuntime(t *testing.T) {
	b := &Builder{CacheDir: t.TempDir()}
	if _, err := b.existing(context.Background(), "h", "x:y"); err == nil {
		t.Error("a Builder without a Runtime did not fail")
	}
}
