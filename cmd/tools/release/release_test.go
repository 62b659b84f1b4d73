package release

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/pkg/errors"
)

const managerRef = "localhost/dockyard/manager:v0.2.0"

const components = `apiVersion: v1
kind: Namespace
metadata:
  name: dockyard-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: dockyard-controller-manager
  namespace: dockyard-system
spec:
  template:
    spec:
      initContainers:
      - image: localhost/dockyard/manager:v0.2.0
        name: init
      containers:
      - args:
        - --leader-elect
        image: localhost/dockyard/manager:v0.2.0
        name: manager
`

const metadata = `apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
- major: 0
  minor: 1
  contract: v1beta2
- major: 0
  minor: 2
  contract: v1beta2
`

func testImage(t *testing.T, content string) v1.Image {
	t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "manager", Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(layer.Bytes(), types.DockerUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func testInput(t *testing.T) Input {
	return Input{
		Version:    "v0.2.0",
		Components: []byte(components),
		Metadata:   []byte(metadata),
		Flavors: fstest.MapFS{
			"cluster-template.yaml":                  {Data: []byte("kind: Cluster\n")},
			"cluster-template-ipv6.yaml":             {Data: []byte("kind: Cluster # ipv6\n")},
			"clusterclass-dockyard-quick-start.yaml": {Data: []byte("kind: ClusterClass\n")},
			"src/cluster-template.yaml":              {Data: []byte("not released\n")},
			"templates.go":                           {Data: []byte("package templates\n")},
		},
		Images: []Image{{Name: "manager", Ref: managerRef, Image: testImage(t, "the manager"), SBOM: []byte(`{"bomFormat":"CycloneDX"}`)}},
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestWriteIsReproducibleAndComplete(t *testing.T) {
	root := t.TempDir()
	var trees []map[string][]byte
	for _, name := range []string{"first", "second"} {
		dir := filepath.Join(root, name)
		written, err := Write(dir, testInput(t))
		if err != nil {
			t.Fatal(err)
		}
		tree := readTree(t, dir)
		if len(written) != len(tree) {
			t.Fatalf("Write reported %d files, %s holds %d", len(written), dir, len(tree))
		}
		trees = append(trees, tree)
	}
	want := []string{
		"SHA256SUMS", "cluster-template-ipv6.yaml", "cluster-template.yaml", "clusterclass-dockyard-quick-start.yaml",
		"images/manager.cdx.json", "images/manager.oci.tar", "infrastructure-components.yaml", "metadata.yaml",
	}
	if len(trees[0]) != len(want) {
		t.Fatalf("release files: got %d, want %v", len(trees[0]), want)
	}
	for _, name := range want {
		first, ok := trees[0][name]
		if !ok {
			t.Fatalf("the release has no %s", name)
		}
		if !bytes.Equal(first, trees[1][name]) {
			t.Errorf("%s differs between two releases of the same inputs", name)
		}
	}

	// SHA256SUMS names every other file with its sum.
	sums := string(trees[0][SumsFile])
	for name, data := range trees[0] {
		if name == SumsFile {
			continue
		}
		sum := sha256.Sum256(data)
		if line := hex.EncodeToString(sum[:]) + "  " + name + "\n"; !strings.Contains(sums, line) {
			t.Errorf("SHA256SUMS lacks %q:\n%s", line, sums)
		}
	}
	if n := strings.Count(sums, "\n"); n != len(want)-1 {
		t.Errorf("SHA256SUMS has %d lines, want %d", n, len(want)-1)
	}

	// The components run the image by the digest the archive carries.
	digest, err := testInput(t).Images[0].Image.Digest()
	if err != nil {
		t.Fatal(err)
	}
	pinned := managerRef + "@" + digest.String()
	if got := strings.Count(string(trees[0][ComponentsFile]), "image: "+pinned+"\n"); got != 2 {
		t.Errorf("components name %s %d times, want 2 (container and init container):\n%s", pinned, got, trees[0][ComponentsFile])
	}
	idx := extractLayout(t, trees[0]["images/manager.oci.tar"])
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != digest {
		t.Fatalf("archive index %+v, want one manifest %s", im.Manifests, digest)
	}
	if got := im.Manifests[0].Annotations["io.containerd.image.name"]; got != managerRef {
		t.Errorf("archive names its image %q, want %q", got, managerRef)
	}
	if got := im.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != "v0.2.0" {
		t.Errorf("archive's OCI ref name %q, want the tag v0.2.0", got)
	}
	img, err := idx.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("archive's image layers %v, %v", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	if content, _ := io.ReadAll(tr); string(content) != "the manager" {
		t.Errorf("archive's layer holds %q", content)
	}
}

// extractLayout unpacks an OCI archive into a directory and opens it as an OCI image layout.
func extractLayout(t *testing.T, archive []byte) v1.ImageIndex {
	t.Helper()
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if hdr.ModTime.Unix() != 0 || hdr.Uid != 0 || hdr.Uname != "" {
			t.Errorf("%s: time %s, owner %d: an archive entry carries no time or owner", hdr.Name, hdr.ModTime, hdr.Uid)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestWriteNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, testInput(t)); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("Write into an existing directory: %v, want a refusal", err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "keep")); err != nil || string(data) != "mine" {
		t.Fatalf("the directory's file was touched: %q, %v", data, err)
	}
}

func TestFilesRefuses(t *testing.T) {
	other := testImage(t, "another")
	for _, tc := range []struct {
		name   string
		change func(*Input)
		want   string
	}{
		{"a version without v", func(in *Input) { in.Version = "0.2.0" }, "semantic version"},
		{"a version that is no version", func(in *Input) { in.Version = "latest" }, "semantic version"},
		{"a series metadata.yaml lacks", func(in *Input) { in.Version = "v0.3.0" }, "no release series 0.3"},
		{"metadata.yaml that is not clusterctl's", func(in *Input) { in.Metadata = []byte("releaseSeries: 3\n") }, "reading metadata.yaml"},
		{"an image the components run but the release lacks", func(in *Input) { in.Images = nil }, "runs image localhost/dockyard/manager:v0.2.0, which the release does not carry"},
		{"an image no container runs", func(in *Input) {
			in.Images = append(in.Images, Image{Name: "lb", Ref: "localhost/dockyard/haproxy:v0.2.0", Image: other, SBOM: []byte("{}")})
		}, "carries image localhost/dockyard/haproxy:v0.2.0, which no container"},
		{"an image without an SBOM", func(in *Input) { in.Images[0].SBOM = nil }, "has no SBOM"},
		{"an image named by a path", func(in *Input) { in.Images[0].Name = "../manager" }, "must be a plain name"},
		{"two images under one name", func(in *Input) {
			in.Images = append(in.Images, Image{Name: "manager", Ref: "localhost/dockyard/haproxy:v0.2.0", Image: other, SBOM: []byte("{}")})
		}, "two images are named manager"},
		{"no flavor", func(in *Input) { in.Flavors = fstest.MapFS{"README.md": {Data: []byte("x")}} }, "no flavor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := testInput(t)
			tc.change(&in)
			_, err := Files(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Files: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestPinImagesLeavesTextAlone(t *testing.T) {
	in := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: dockyardmachines.infrastructure.cluster.x-k8s.io
spec:
  description: |
    image: localhost/dockyard/manager:v0.2.0 is not a container of this object
---
` + components
	out, err := PinImages([]byte(in), map[string]string{managerRef: managerRef + "@sha256:" + strings.Repeat("a", 64)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "    image: localhost/dockyard/manager:v0.2.0 is not a container") {
		t.Errorf("a description's text was changed:\n%s", out)
	}
	if got := strings.Count(string(out), "@sha256:"); got != 2 {
		t.Errorf("%d pinned images, want 2:\n%s", got, out)
	}
}
