package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// askedImages replaces how dockyard registry create gets the images the engine lacks: each
// request is recorded with the --image-registry it came with, and the images appear on rt.
func askedImages(t *testing.T, rt *inmemory.Runtime) *[][]string {
	t.Helper()
	var asked [][]string
	saved := provideRegistryImages
	t.Cleanup(func() { provideRegistryImages = saved })
	provideRegistryImages = func(ctx context.Context, _ *globals, o *managementOptions, _ *docker.Manager, want []string) error {
		asked = append(asked, append([]string{o.imageRegistry}, want...))
		for _, ref := range want {
			rt.Pullable[ref] = true
			if err := rt.PullImage(ctx, ref); err != nil {
				return err
			}
		}
		return nil
	}
	return &asked
}

// runRegistryCreate runs dockyard registry create with args on the fake engine of rt.
func runRegistryCreate(t *testing.T, rt *inmemory.Runtime, args ...string) error {
	t.Helper()
	g := &globals{stateDir: t.TempDir()}
	cmd := registryCreateCommand(g)
	cmd.SetContext(context.Background())
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	flags := cmd.Flags()
	spec := docker.RegistrySpec{}
	spec.Name, _ = flags.GetString("name")
	spec.Image, _ = flags.GetString("image")
	spec.HostPort, _ = flags.GetInt("port")
	spec.ListenAddress, _ = flags.GetString("listen-address")
	spec.Namespaces, _ = flags.GetStringSlice("namespaces")
	spec.MutableTags, _ = flags.GetBool("mutable-tags")
	spec.Auth, _ = flags.GetBool("auth")
	images := &managementOptions{kubernetesVersion: defaultKubernetesVersion, images: "local"}
	images.imageRegistry, _ = flags.GetString("image-registry")
	return createRegistry(cmd, g, images, docker.NewManager(rt, docker.ManagerOptions{}), spec)
}

// On an engine without Dockyard's registry image, dockyard registry create asks for it as the
// quick start asks for its images (pulled from --image-registry, else built) before it starts
// the registry; with the image there, or another image named, it asks for nothing.
func TestRegistryCreateAsksForTheImageTheEngineLacks(t *testing.T) {
	rt := inmemory.New()
	asked := askedImages(t, rt)
	if err := runRegistryCreate(t, rt, "--name", "reg", "--image-registry", "localhost:5001/dockyard"); err != nil {
		t.Fatalf("on an engine without %s: %v", localRegistryImage, err)
	}
	if want := [][]string{{"localhost:5001/dockyard", localRegistryImage}}; !slices.EqualFunc(*asked, want, slices.Equal) {
		t.Fatalf("asked for %v, want %v", *asked, want)
	}
	if r, err := docker.NewManager(rt, docker.ManagerOptions{}).FindRegistry(context.Background(), "reg"); err != nil || r == nil || !r.Running() {
		t.Fatalf("registry reg: %+v, %v; want it running", r, err)
	}

	// The image is there now: another registry asks for nothing.
	if err := runRegistryCreate(t, rt, "--name", "other", "--port", "5002"); err != nil || len(*asked) != 1 {
		t.Errorf("with the image on the engine: asked %v, %v", *asked, err)
	}
	// Another image is the engine's to pull, as before.
	rt.Pullable["registry:2"] = true
	if err := runRegistryCreate(t, rt, "--name", "hub", "--port", "5003", "--image", "registry:2"); err != nil || len(*asked) != 1 {
		t.Errorf("with --image registry:2: asked %v, %v", *asked, err)
	}
}

func TestPlanImagesBuildsTheRegistryImage(t *testing.T) {
	plan, err := planImages(defaultKubernetesVersion, []string{localRegistryImage})
	if err != nil || !plan.registry || plan.node || plan.loadBalancer || plan.components != nil {
		t.Fatalf("plan %+v, %v: want only the registry image built", plan, err)
	}
	if targets := plan.makeTargets(); !slices.Equal(targets, []string{"registry-image"}) {
		t.Errorf("make targets %v, want [registry-image]", targets)
	}
}

// --mutable-tags is recorded on the registry; creating it again without the flag keeps it, and
// asking for the other setting says to re-create it.
func TestRegistryCreateKeepsMutableTags(t *testing.T) {
	rt := inmemory.New()
	askedImages(t, rt)
	nodes := docker.NewManager(rt, docker.ManagerOptions{})
	if err := runRegistryCreate(t, rt, "--name", "reg", "--mutable-tags"); err != nil {
		t.Fatal(err)
	}
	if r, err := nodes.FindRegistry(context.Background(), "reg"); err != nil || r == nil || !r.MutableTags() {
		t.Fatalf("registry %+v, %v: want mutable tags", r, err)
	}
	if err := runRegistryCreate(t, rt, "--name", "reg"); err != nil {
		t.Errorf("creating it again without --mutable-tags: %v", err)
	}
	if err := runRegistryCreate(t, rt, "--name", "reg", "--mutable-tags=false"); err == nil || !strings.Contains(err.Error(), "--keep-data") {
		t.Errorf("asking for immutable tags: %v, want the refusal saying how to re-create it", err)
	}
	if r, err := nodes.FindRegistry(context.Background(), "reg"); err != nil || r == nil || !r.MutableTags() {
		t.Errorf("after the refusal: %+v, %v", r, err)
	}
	if help := registryCreateCommand(&globals{}).Long; !strings.Contains(help, "--mutable-tags") || !strings.Contains(help, "<namespace>/") {
		t.Errorf("registry create --help does not say how tags and users work:\n%s", help)
	}
}
