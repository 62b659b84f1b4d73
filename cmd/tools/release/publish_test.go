package release

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// releaseFor writes a release whose components run the manager image named ref.
func releaseFor(t *testing.T, ref string) string {
	t.Helper()
	in := testInput(t)
	in.Components = []byte(strings.ReplaceAll(components, managerRef, ref))
	in.Images[0].Ref = ref
	dir := filepath.Join(t.TempDir(), "release")
	if _, err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPublishPushesTheArchivesImagesWithTheirDigests(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/dockyard/manager:v0.2.0"
	dir := releaseFor(t, ref)

	pushed, err := Publish(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := testInput(t).Images[0].Image.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed) != 1 || pushed[0].Ref != ref || pushed[0].Digest != digest {
		t.Fatalf("pushed %+v, want %s with %s", pushed, ref, digest)
	}
	components, err := os.ReadFile(filepath.Join(dir, ComponentsFile))
	if err != nil {
		t.Fatal(err)
	}
	pinned := ref + "@" + digest.String()
	if !strings.Contains(string(components), "image: "+pinned+"\n") {
		t.Fatalf("the components do not run %s", pinned)
	}
	// What the components name is what the registry serves, by digest and by tag.
	byDigest, err := name.ParseReference(pinned)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(byDigest)
	if err != nil {
		t.Fatalf("pulling %s: %v", pinned, err)
	}
	if got, _ := img.Digest(); got != digest {
		t.Errorf("the registry serves %s as %s", pinned, got)
	}
	tag, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(tag)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != digest {
		t.Errorf("tag %s is %s, want %s", ref, desc.Digest, digest)
	}
}

func TestPublishRefuses(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name   string
		ref    string
		change func(t *testing.T, dir string)
		want   string
	}{
		{"an image in no registry", managerRef, nil, "which is in no registry"},
		{"a file changed after the release", host + "/dockyard/manager:v0.2.0", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, ComponentsFile), []byte("changed"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "infrastructure-components.yaml does not have the sum"},
		{"a file the sums do not list", host + "/dockyard/manager:v0.2.0", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "extra.yaml"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "extra.yaml is not in SHA256SUMS"},
		{"a file missing", host + "/dockyard/manager:v0.2.0", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "images", "manager.oci.tar")); err != nil {
				t.Fatal(err)
			}
		}, "images/manager.oci.tar is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := releaseFor(t, tc.ref)
			if tc.change != nil {
				tc.change(t, dir)
			}
			_, err := Publish(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Publish: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	repo, err := name.NewRepository(host + "/dockyard/manager")
	if err != nil {
		t.Fatal(err)
	}
	if tags, err := remote.List(repo); err == nil && len(tags) > 0 {
		t.Error("a refused release pushed an image")
	}
}
