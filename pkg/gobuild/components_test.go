package gobuild

import (
	"slices"
	"strings"
	"testing"
)

func TestKubernetesTest(t *testing.T) {
	build, err := KubernetesTest("v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	// Its own cache directory: the commands' wrapper module stays as it is.
	if build.Name != "kubernetes-test" || build.Version != "v1.34.4" {
		t.Errorf("cache key %s-%s, want kubernetes-test-v1.34.4", build.Name, build.Version)
	}
	if got := build.Replace["k8s.io/sample-apiserver"]; got != "v0.34.4" {
		t.Errorf("staging modules pinned to %q, want v0.34.4", got)
	}
	want := map[string]struct {
		pkg  string
		test bool
	}{
		E2ETest:    {"k8s.io/kubernetes/test/e2e", true},
		Agnhost:    {"k8s.io/kubernetes/test/images/agnhost", false},
		NoNewPrivs: {"k8s.io/kubernetes/test/images/nonewprivs", false},
	}
	if len(build.Binaries) != len(want) {
		t.Fatalf("%d binaries, want %d", len(build.Binaries), len(want))
	}
	for _, bin := range build.Binaries {
		w, ok := want[bin.Name]
		if !ok || w.pkg != bin.Package || w.test != bin.Test {
			t.Errorf("binary %s: package %q test %v, want %+v", bin.Name, bin.Package, bin.Test, w)
		}
		if flags := strings.Join(bin.LDFlags, " "); !strings.Contains(flags, "k8s.io/component-base/version.gitVersion=v1.34.4") {
			t.Errorf("binary %s is not stamped with the version: %s", bin.Name, flags)
		}
	}
}

func TestBinaryArgs(t *testing.T) {
	test := Binary{Name: E2ETest, Package: "k8s.io/kubernetes/test/e2e", Test: true, LDFlags: []string{"-X a.b=c"}}
	if got, want := test.args("out"), []string{"test", "-c", "-vet=off", "-trimpath", "-ldflags", "-s -w -X a.b=c", "-o", "out", "k8s.io/kubernetes/test/e2e"}; !slices.Equal(got, want) {
		t.Errorf("test binary: go %v, want go %v", got, want)
	}
	cmd := Binary{Name: "ginkgo", Package: GinkgoModule + "/ginkgo"}
	if got, want := cmd.args("out"), []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", "out", GinkgoModule + "/ginkgo"}; !slices.Equal(got, want) {
		t.Errorf("command: go %v, want go %v", got, want)
	}
}

func TestSampleAPIServerAndGinkgo(t *testing.T) {
	sample, err := SampleAPIServer("v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	if sample.Version != "v0.34.4" || sample.Require["k8s.io/sample-apiserver"] != "v0.34.4" || sample.Binaries[0].Package != "k8s.io/sample-apiserver" {
		t.Errorf("sample-apiserver build %+v, want k8s.io/sample-apiserver v0.34.4", sample)
	}
	g, err := Ginkgo("v2.21.0")
	if err != nil {
		t.Fatal(err)
	}
	if g.Require[GinkgoModule] != "v2.21.0" || g.Binaries[0].Name != "ginkgo" {
		t.Errorf("ginkgo build %+v", g)
	}
	for _, bad := range []string{"", "latest"} {
		if _, err := Ginkgo(bad); err == nil {
			t.Errorf("Ginkgo(%q) succeeded", bad)
		}
		if _, err := KubernetesTest(bad); err == nil {
			t.Errorf("KubernetesTest(%q) succeeded", bad)
		}
	}
}

func TestRequiredVersion(t *testing.T) {
	gomod := []byte(`module k8s.io/kubernetes

go 1.24.0

require (
	github.com/onsi/ginkgo/v2 v2.21.0
	github.com/onsi/gomega v1.35.1
)

require github.com/google/go-cmp v0.7.0 // indirect

replace k8s.io/api => ./staging/src/k8s.io/api
`)
	if v, err := requiredVersion("go.mod", gomod, GinkgoModule); err != nil || v != "v2.21.0" {
		t.Errorf("ginkgo: %q, %v; want v2.21.0", v, err)
	}
	if v, err := requiredVersion("go.mod", gomod, "github.com/google/go-cmp"); err != nil || v != "v0.7.0" {
		t.Errorf("indirect: %q, %v; want v0.7.0", v, err)
	}
	if _, err := requiredVersion("go.mod", gomod, "example.com/absent"); err == nil {
		t.Error("a module go.mod does not require: no error")
	}
}
