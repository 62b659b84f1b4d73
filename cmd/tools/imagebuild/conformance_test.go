package imagebuild

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// listImages is `e2e.test --list-images` of k8s.io/kubernetes v1.34.4 with
// ConformanceRepoList("localhost/conformance/e2e"), shortened (the CSI images are alike).
const listImages = `gcr.io/authenticated-image-pulling/alpine:3.7
gcr.io/k8s-authenticated-test/agnhost:2.6
invalid.registry.k8s.io/invalid/alpine:3.1
localhost/conformance/e2e/agnhost:2.56
localhost/conformance/e2e/apparmor-loader:1.4
localhost/conformance/e2e/busybox:1.37.0-1
localhost/conformance/e2e/distroless-iptables:v0.7.14
localhost/conformance/e2e/etcd:3.6.4-0
localhost/conformance/e2e/httpd:2.4.38-4
localhost/conformance/e2e/httpd:2.4.39-4
localhost/conformance/e2e/ipc-utils:1.3
localhost/conformance/e2e/jessie-dnsutils:1.7
localhost/conformance/e2e/kitten:1.7
localhost/conformance/e2e/nautilus:1.7
localhost/conformance/e2e/nfs-provisioner:v4.0.8
localhost/conformance/e2e/nginx:1.14-4
localhost/conformance/e2e/nginx:1.15-4
localhost/conformance/e2e/node-perf/npb-ep:1.2
localhost/conformance/e2e/nonewprivs:1.3
localhost/conformance/e2e/nonroot:1.4
localhost/conformance/e2e/pause:3.10.1
localhost/conformance/e2e/perl:5.26
localhost/conformance/e2e/sample-apiserver:1.29.2
localhost/conformance/e2e/volume/nfs:1.4
localhost/conformance/e2e/csi-provisioner:v5.3.0
localhost/conformance/e2e/agnhost:2.56
`

func TestSelectConformanceImages(t *testing.T) {
	build, others := SelectConformanceImages(listImages, DefaultConformancePrefix)
	var refs []string
	for _, img := range build {
		refs = append(refs, img.Ref)
		if img.Ref != DefaultConformancePrefix+"/"+img.Name+":"+img.Tag {
			t.Errorf("%s: name %q, tag %q do not make the reference", img.Ref, img.Name, img.Tag)
		}
	}
	want := []string{
		"localhost/conformance/e2e/agnhost:2.56",
		"localhost/conformance/e2e/busybox:1.37.0-1",
		"localhost/conformance/e2e/etcd:3.6.4-0",
		"localhost/conformance/e2e/httpd:2.4.38-4",
		"localhost/conformance/e2e/httpd:2.4.39-4",
		"localhost/conformance/e2e/jessie-dnsutils:1.7",
		"localhost/conformance/e2e/nautilus:1.7",
		"localhost/conformance/e2e/nginx:1.14-4",
		"localhost/conformance/e2e/nginx:1.15-4",
		"localhost/conformance/e2e/nonewprivs:1.3",
		"localhost/conformance/e2e/pause:3.10.1",
		"localhost/conformance/e2e/sample-apiserver:1.29.2",
	}
	if !slices.Equal(refs, want) {
		t.Errorf("images to build:\n%s\nwant\n%s", strings.Join(refs, "\n"), strings.Join(want, "\n"))
	}
	// What is not built stays listed (for the record), the repeated agnhost only once.
	for _, o := range []string{"invalid.registry.k8s.io/invalid/alpine:3.1", "localhost/conformance/e2e/volume/nfs:1.4", "localhost/conformance/e2e/kitten:1.7"} {
		if !slices.Contains(others, o) {
			t.Errorf("%s is missing from the images not built: %v", o, others)
		}
	}
	if len(build)+len(others) != 25 {
		t.Errorf("%d images in all, want the 25 distinct ones listed", len(build)+len(others))
	}
	// Another prefix selects nothing of this list.
	if b, _ := SelectConformanceImages(listImages, "localhost/other/e2e"); len(b) != 0 {
		t.Errorf("another prefix selected %v", b)
	}
}

// A focused set builds the images it names, both tags of a name; an unknown name is refused
// with the names there are.
func TestOnlyConformanceImages(t *testing.T) {
	all, _ := SelectConformanceImages(listImages, DefaultConformancePrefix)
	kept, err := OnlyConformanceImages(all, []string{"httpd", "pause"})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, img := range kept {
		refs = append(refs, img.Ref)
	}
	want := []string{"localhost/conformance/e2e/httpd:2.4.38-4", "localhost/conformance/e2e/httpd:2.4.39-4", "localhost/conformance/e2e/pause:3.10.1"}
	if !slices.Equal(refs, want) {
		t.Errorf("kept %v, want %v", refs, want)
	}
	if kept, err := OnlyConformanceImages(all, nil); err != nil || len(kept) != len(all) {
		t.Errorf("no names kept %d of %d images (%v), want all", len(kept), len(all), err)
	}
	_, err = OnlyConformanceImages(all, []string{"agnhost", "agnhosts"})
	if err == nil || !strings.Contains(err.Error(), `"agnhosts"`) || !strings.Contains(err.Error(), "agnhost, busybox") {
		t.Errorf("an unknown name: got %v, want an error naming it and the images there are", err)
	}
}

func TestConformanceRepoList(t *testing.T) {
	var got map[string]string
	if err := yaml.Unmarshal(ConformanceRepoList("localhost/conformance/e2e"), &got); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"promoterE2eRegistry", "gcEtcdRegistry", "gcRegistry", "sigStorageRegistry", "buildImageRegistry", "dockerLibraryRegistry", "cloudProviderGcpRegistry"} {
		if got[r] != "localhost/conformance/e2e" {
			t.Errorf("%s: %q, want the local prefix", r, got[r])
		}
	}
	// The invalid registry must stay invalid; the authenticated ones cannot be served locally.
	for _, r := range []string{"invalidRegistry", "gcAuthenticatedRegistry", "privateRegistry"} {
		if v, ok := got[r]; ok {
			t.Errorf("%s is set (%q): it must keep e2e.test's default", r, v)
		}
	}
}

func TestConformanceRecipesCovered(t *testing.T) {
	// Every image with a recipe is built by conformanceRecipe; an unknown one is an error, not a
	// silent empty image.
	b := &Builder{}
	_, _, err := b.conformanceRecipe(context.Background(), &conformanceBuild{}, ConformanceImage{Name: "kitten", Tag: "1.7"})
	if err == nil || !strings.Contains(err.Error(), "no recipe") {
		t.Errorf("unknown image: %v, want no recipe", err)
	}
	for _, spec := range []RootfsSpec{e2eAgnhostRootfs(), e2eBusyboxRootfs([]byte("source")), e2eHTTPDRootfs(), e2eNginxRootfs(), e2eDNSUtilsRootfs()} {
		if !strings.HasPrefix(spec.Name, "e2e-") || len(spec.Packages) == 0 {
			t.Errorf("root filesystem %+v: want an e2e- name and packages", spec)
		}
	}
}

// The busybox image: the binary, and every applet (sh included) a link to it in /bin.
func TestBusyboxFiles(t *testing.T) {
	files := busyboxFiles([]byte("bin"), []string{"[", "ash", "busybox", "env", "sh", "usr/bin/odd"})
	got := map[string]string{}
	for _, f := range files {
		if _, dup := got[f.Dst]; dup {
			t.Errorf("%s is in the layer twice", f.Dst)
		}
		got[f.Dst] = f.Link
	}
	want := map[string]string{"/bin/busybox": "", "/bin/sh": "busybox", "/bin/[": "busybox", "/bin/ash": "busybox", "/bin/env": "busybox"}
	if len(got) != len(want) {
		t.Errorf("files %v, want %v", got, want)
	}
	for dst, link := range want {
		if l, ok := got[dst]; !ok || l != link {
			t.Errorf("%s links to %q (present %v), want %q", dst, l, ok, link)
		}
	}
}

// A source tarball whose checksum differs from the pinned one is refused, and one in the cache
// with the right checksum is used without the mirror.
func TestSourceTarball(t *testing.T) {
	data := []byte("the release")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pool/x.tar.bz2" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	defer srv.Close()
	b := &Builder{CacheDir: t.TempDir(), Mirror: srv.URL}
	ctx := context.Background()
	if _, err := b.sourceTarball(ctx, debianSource{Pool: "pool/x.tar.bz2", SHA256: hashHex([]byte("another"))}); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("wrong checksum: %v, want it refused", err)
	}
	src := debianSource{Pool: "pool/x.tar.bz2", SHA256: hashHex(data)}
	got, err := b.sourceTarball(ctx, src)
	if err != nil || string(got) != string(data) {
		t.Fatalf("got %q, %v", got, err)
	}
	srv.Close()
	if got, err := b.sourceTarball(ctx, src); err != nil || string(got) != string(data) {
		t.Errorf("from the cache: %q, %v", got, err)
	}
	if _, err := b.sourceTarball(ctx, debianSource{Pool: "pool/missing", SHA256: hashHex([]byte("x"))}); err == nil {
		t.Error("a file the mirror does not serve: no error")
	}
}
