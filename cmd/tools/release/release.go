// Package release writes a Dockyard release: what a Cluster API provider publishes for
// clusterctl (infrastructure-components.yaml with its images pinned by digest, metadata.yaml,
// every flavor and ClusterClass), the images as OCI archives with an SBOM each, and SHA256SUMS
// over all of it. The same inputs give the same bytes.
package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/pkg/repository"
)

// File names in a release.
const (
	ComponentsFile = "infrastructure-components.yaml"
	MetadataFile   = "metadata.yaml"
	SumsFile       = "SHA256SUMS"
	ImagesDir      = "images"
)

// Image is an image the release carries.
type Image struct {
	// Name names its files: images/<Name>.oci.tar and images/<Name>.cdx.json.
	Name string
	// Ref is the tagged reference the components name it by; the release's components name
	// it by Ref@<digest>.
	Ref string
	// Image is the image itself.
	Image v1.Image
	// SBOM is its software bill of materials (CycloneDX JSON).
	SBOM []byte
}

// Input is everything a release is made of.
type Input struct {
	// Version is the release's version, e.g. v0.2.0.
	Version string
	// Components is infrastructure-components.yaml rendered for Version, naming images by tag.
	Components []byte
	// Metadata is metadata.yaml, which must hold Version's release series.
	Metadata []byte
	// Flavors holds the flavors and ClusterClasses at its root (other files are not released).
	Flavors fs.FS
	// Images are the images the components run, each named there by its Ref.
	Images []Image
}

// Write writes the release into dir, which must not exist: a release is never overwritten.
// It is written beside dir and renamed into place, so dir holds a whole release or nothing.
// Write returns the files written, relative to dir.
func Write(dir string, in Input) ([]string, error) {
	if _, err := os.Lstat(dir); err == nil {
		return nil, errors.Errorf("%s exists: a release is written once; remove it to write it again", dir)
	}
	files, err := Files(in)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, errors.Wrap(err, "making the release's parent directory")
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-")
	if err != nil {
		return nil, errors.Wrap(err, "making the release's directory")
	}
	defer os.RemoveAll(tmp)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, errors.Wrapf(err, "making the directory of %s", name)
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return nil, errors.Wrapf(err, "writing %s", name)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, errors.Wrap(err, "opening the release's directory to readers")
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, errors.Wrapf(err, "moving the release into %s", dir)
	}
	return names, nil
}

// Files returns the release's files by their slash-separated paths, SHA256SUMS included.
func Files(in Input) (map[string][]byte, error) {
	v, err := version.ParseSemantic(in.Version)
	if err != nil || !strings.HasPrefix(in.Version, "v") {
		return nil, errors.Errorf("release version %q is not a semantic version with a leading v (v0.2.0)", in.Version)
	}
	if err := checkMetadata(in.Metadata, v); err != nil {
		return nil, err
	}
	files := map[string][]byte{MetadataFile: in.Metadata}

	pins := map[string]string{}
	for _, img := range in.Images {
		if img.Name == "" || strings.ContainsAny(img.Name, "/\\") {
			return nil, errors.Errorf("image %s: its file name %q must be a plain name", img.Ref, img.Name)
		}
		if _, ok := pins[img.Ref]; ok {
			return nil, errors.Errorf("image %s is given twice", img.Ref)
		}
		if _, ok := files[ImagesDir+"/"+img.Name+".oci.tar"]; ok {
			return nil, errors.Errorf("two images are named %s", img.Name)
		}
		digest, err := img.Image.Digest()
		if err != nil {
			return nil, errors.Wrapf(err, "digest of %s", img.Ref)
		}
		pins[img.Ref] = img.Ref + "@" + digest.String()
		var archive bytes.Buffer
		if err := imagebuild.WriteOCIArchive(&archive, img.Ref, img.Image); err != nil {
			return nil, err
		}
		files[ImagesDir+"/"+img.Name+".oci.tar"] = archive.Bytes()
		if len(img.SBOM) == 0 {
			return nil, errors.Errorf("image %s has no SBOM", img.Ref)
		}
		files[ImagesDir+"/"+img.Name+".cdx.json"] = img.SBOM
	}
	components, err := PinImages(in.Components, pins)
	if err != nil {
		return nil, err
	}
	files[ComponentsFile] = components

	flavors := 0
	err = fs.WalkDir(in.Flavors, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !repository.IsFlavor(p) {
			return err
		}
		data, err := fs.ReadFile(in.Flavors, p)
		if err != nil {
			return errors.Wrapf(err, "reading flavor %s", p)
		}
		files[p] = data
		flavors++
		return nil
	})
	if err != nil {
		return nil, err
	}
	if flavors == 0 {
		return nil, errors.New("no flavor (cluster-template*.yaml) or ClusterClass (clusterclass-*.yaml) to release")
	}
	files[SumsFile] = Sums(files)
	return files, nil
}

// checkMetadata refuses a release whose metadata.yaml does not map its series to a contract:
// clusterctl would refuse to install or upgrade to it.
func checkMetadata(data []byte, v *version.Version) error {
	var m clusterctlv1.Metadata
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return errors.Wrap(err, "reading metadata.yaml")
	}
	if m.GetReleaseSeriesForVersion(v) == nil {
		return errors.Errorf("metadata.yaml has no release series %d.%d: add it, with the Cluster API contract it implements, before releasing v%s",
			v.Major(), v.Minor(), v.String())
	}
	return nil
}

// PinImages returns the components with every image they run named by digest, from pins (a
// tagged reference to the same reference with @sha256:…). An image the components run that
// pins does not hold, or a pin the components never run, is an error: the release would carry
// an image nobody runs, or name one it does not carry.
func PinImages(components []byte, pins map[string]string) ([]byte, error) {
	objs, err := utilyaml.ToUnstructured(components)
	if err != nil {
		return nil, errors.Wrap(err, "reading the components")
	}
	used := map[string]bool{}
	for i := range objs {
		for _, img := range containerImages(&objs[i]) {
			if _, ok := pins[img]; !ok {
				return nil, errors.Errorf("%s %s runs image %s, which the release does not carry", objs[i].GetKind(), objs[i].GetName(), img)
			}
			used[img] = true
		}
	}
	out := components
	for ref, pinned := range pins {
		if !used[ref] {
			return nil, errors.Errorf("the release carries image %s, which no container of the components runs", ref)
		}
		// Both the block form ("image: ref") and a list item ("- image: ref") end the line.
		var b bytes.Buffer
		for line := range bytes.Lines(out) {
			trimmed := bytes.TrimRight(line, "\r\n")
			if value, ok := bytes.CutPrefix(bytes.TrimLeft(trimmed, " -"), []byte("image: ")); ok && string(value) == ref {
				b.Write(trimmed[:len(trimmed)-len(ref)])
				b.WriteString(pinned)
				b.Write(line[len(trimmed):])
				continue
			}
			b.Write(line)
		}
		out = b.Bytes()
	}
	// What was read as YAML must name every image by digest now.
	objs, err = utilyaml.ToUnstructured(out)
	if err != nil {
		return nil, errors.Wrap(err, "reading the pinned components")
	}
	for i := range objs {
		for _, img := range containerImages(&objs[i]) {
			if !strings.Contains(img, "@sha256:") {
				return nil, errors.Errorf("%s %s: image %s could not be pinned (not written as \"image: %s\" on a line of its own)", objs[i].GetKind(), objs[i].GetName(), img, img)
			}
		}
	}
	return out, nil
}

// containerImages lists the images of a workload's containers and init containers.
func containerImages(u *unstructured.Unstructured) []string {
	var images []string
	for _, field := range []string{"containers", "initContainers"} {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", field)
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok {
				if img, ok := m["image"].(string); ok {
					images = append(images, img)
				}
			}
		}
	}
	return images
}

// Sums is SHA256SUMS of files, as sha256sum writes it and `sha256sum -c` reads it: a line per
// file in path order.
func Sums(files map[string][]byte) []byte {
	names := make([]string, 0, len(files))
	for name := range files {
		if name != SumsFile {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, name := range names {
		sum := sha256.Sum256(files[name])
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), name)
	}
	return b.Bytes()
}
