package mirror

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

func TestName(t *testing.T) {
	for _, tc := range []struct{ registry, ref, want, err string }{
		{"localhost:5001/dockyard", "localhost/dockyard/node:v1.34.4", "localhost:5001/dockyard/node:v1.34.4", ""},
		{"localhost:5001/dockyard", "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2", "localhost:5001/dockyard/cluster-api-controller:v1.14.2", ""},
		{"registry.example.com/team/dockyard", "quay.io/jetstack/cert-manager-webhook:v1.11.5", "registry.example.com/team/dockyard/cert-manager-webhook:v1.11.5", ""},
		{"localhost:5001/dockyard", "localhost/dockyard/node", "", "must be named with a tag"},
		{"localhost:5001/Dockyard", "localhost/dockyard/node:v1.34.4", "", "is no registry path"},
	} {
		got, err := Name(tc.registry, tc.ref)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Name(%q, %q) = %q, %v; want an error with %q", tc.registry, tc.ref, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Name(%q, %q) = %q, %v; want %q", tc.registry, tc.ref, got, err, tc.want)
		}
	}
}

// An image pushed from one engine is pulled into another with the same ID and its name, an
// image the registry lacks is reported missing, one the engine has is left alone, and pushing
// an image the engine lacks pushes nothing.
func TestPushThenPull(t *testing.T) {
	ctx := context.Background()
	server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(server.Close)
	u, err := url.Parse(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	reg := u.Host + "/dockyard"

	node, manager, absent := "localhost/dockyard/node:v1.34.4", "localhost/dockyard/manager:v0.2.0", "localhost/dockyard/haproxy:latest"
	from := inmemory.New(node, manager)
	if _, err := Push(ctx, from, reg, []string{node, absent}); err == nil || !strings.Contains(err.Error(), absent) {
		t.Fatalf("pushing an image the engine lacks: %v, want an error naming %s", err, absent)
	}
	pushed, err := Push(ctx, from, reg, []string{node})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{reg + "/node:v1.34.4"}; !slices.Equal(pushed, want) {
		t.Errorf("pushed %v, want %v", pushed, want)
	}

	to := inmemory.New(manager)
	pulled, missing, err := Pull(ctx, to, reg, []string{node, manager, absent})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{node}; !slices.Equal(pulled, want) {
		t.Errorf("pulled %v, want %v", pulled, want)
	}
	// The manager image, which the engine has, is not asked of the registry (it lacks it too).
	if want := []string{absent}; !slices.Equal(missing, want) {
		t.Errorf("missing %v, want %v", missing, want)
	}
	want, err := from.InspectImage(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	got, err := to.InspectImage(ctx, node)
	if err != nil {
		t.Fatalf("the pulled image is not on the engine under its name: %v", err)
	}
	if got.ID != want.ID {
		t.Errorf("pulled image ID %s, pushed %s", got.ID, want.ID)
	}
}
