package gobuild

import (
	"fmt"
	"strings"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/version"
)

// kubernetesStagingModules are the k8s.io modules that k8s.io/kubernetes replaces with local
// paths; a wrapper module pins each to the v0.x.y release matching the Kubernetes version.
var kubernetesStagingModules = []string{
	"api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime", "client-go",
	"cloud-provider", "cluster-bootstrap", "code-generator", "component-base", "component-helpers",
	"controller-manager", "cri-api", "cri-client", "csi-translation-lib",
	"dynamic-resource-allocation", "endpointslice", "externaljwt", "kms", "kube-aggregator",
	"kube-controller-manager", "kube-proxy", "kube-scheduler", "kubectl", "kubelet", "metrics",
	"mount-utils", "pod-security-admission", "sample-apiserver", "sample-cli-plugin",
	"sample-controller",
}

// KubernetesCommands are the commands of k8s.io/kubernetes Dockyard builds.
var KubernetesCommands = []string{
	"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy",
	"kubeadm", "kubelet", "kubectl",
}

// Kubernetes returns the build of the named k8s.io/kubernetes commands at a version such as
// v1.34.4. The binaries are stamped with the version: kubeadm's preflight refuses a kubelet
// that reports the module proxy's placeholder version.
func Kubernetes(kubernetesVersion string, commands ...string) (Build, error) {
	build, ldflags, err := kubernetesModule("kubernetes", kubernetesVersion)
	if err != nil {
		return Build{}, err
	}
	for _, c := range commands {
		build.Binaries = append(build.Binaries, Binary{Name: c, Package: "k8s.io/kubernetes/cmd/" + c, LDFlags: ldflags})
	}
	return build, nil
}

// Names of the binaries KubernetesTest builds.
const (
	// E2ETest is Kubernetes' end-to-end suite, conformance included (test/e2e).
	E2ETest = "e2e.test"
	// Agnhost is the multi-purpose program of the e2e-test-images agnhost image.
	Agnhost = "agnhost"
	// NoNewPrivs prints its effective user ID, for the nonewprivs image.
	NoNewPrivs = "nnp"
)

// KubernetesTest returns the build of Kubernetes' end-to-end suite, e2e.test (`go test -c
// k8s.io/kubernetes/test/e2e`, stamped with the version like the commands), and of the programs
// of its test images that live in the module (agnhost, nonewprivs' nnp). It is a build of its
// own, so the command builds of Kubernetes keep their resolved module.
func KubernetesTest(kubernetesVersion string) (Build, error) {
	build, ldflags, err := kubernetesModule("kubernetes-test", kubernetesVersion)
	if err != nil {
		return Build{}, err
	}
	build.Binaries = []Binary{
		{Name: E2ETest, Package: "k8s.io/kubernetes/test/e2e", LDFlags: ldflags, Test: true},
		{Name: Agnhost, Package: "k8s.io/kubernetes/test/images/agnhost", LDFlags: ldflags},
		{Name: NoNewPrivs, Package: "k8s.io/kubernetes/test/images/nonewprivs", LDFlags: ldflags},
	}
	return build, nil
}

// kubernetesModule is a wrapper module requiring k8s.io/kubernetes at a version, with every
// staging module pinned to its release, and the linker flags that stamp the version.
func kubernetesModule(name, kubernetesVersion string) (Build, []string, error) {
	v, err := version.ParseSemantic(kubernetesVersion)
	if err != nil {
		return Build{}, nil, errors.Wrapf(err, "parsing Kubernetes version %q", kubernetesVersion)
	}
	if v.Major() != 1 {
		return Build{}, nil, errors.Errorf("Kubernetes version %s: only 1.x is supported", kubernetesVersion)
	}
	staging := StagingVersion(v)
	replace := map[string]string{}
	for _, m := range kubernetesStagingModules {
		replace["k8s.io/"+m] = staging
	}
	ldflags := append(versionLDFlags("k8s.io/component-base/version", kubernetesVersion, v),
		versionLDFlags("k8s.io/client-go/pkg/version", kubernetesVersion, v)...)
	return Build{
		Name:    name,
		Version: kubernetesVersion,
		Require: map[string]string{"k8s.io/kubernetes": kubernetesVersion},
		Replace: replace,
	}, ldflags, nil
}

// StagingVersion is the release of the staging modules (k8s.io/api, k8s.io/sample-apiserver,
// ...) published with a Kubernetes version: v0.<minor>.<patch>.
func StagingVersion(v *version.Version) string {
	staging := fmt.Sprintf("v0.%d.%d", v.Minor(), v.Patch())
	if pre := v.PreRelease(); pre != "" {
		staging += "-" + pre
	}
	return staging
}

// SampleAPIServer returns the build of k8s.io/sample-apiserver, the aggregated API server the
// conformance suite registers, at the staging release of a Kubernetes version.
func SampleAPIServer(kubernetesVersion string) (Build, error) {
	v, err := version.ParseSemantic(kubernetesVersion)
	if err != nil {
		return Build{}, errors.Wrapf(err, "parsing Kubernetes version %q", kubernetesVersion)
	}
	staging := StagingVersion(v)
	return Build{
		Name:     "sample-apiserver",
		Version:  staging,
		Require:  map[string]string{"k8s.io/sample-apiserver": staging},
		Binaries: []Binary{{Name: "sample-apiserver", Package: "k8s.io/sample-apiserver"}},
	}, nil
}

// GinkgoModule is the module of Ginkgo, the runner of Kubernetes' e2e.test.
const GinkgoModule = "github.com/onsi/ginkgo/v2"

// Ginkgo returns the build of the ginkgo command at a release such as v2.21.0 (use the one
// the e2e.test it runs was built with: KubernetesRequirement(..., GinkgoModule)).
func Ginkgo(ginkgoVersion string) (Build, error) {
	if _, err := version.ParseSemantic(ginkgoVersion); err != nil {
		return Build{}, errors.Wrapf(err, "parsing Ginkgo version %q", ginkgoVersion)
	}
	return Build{
		Name: "ginkgo", Version: ginkgoVersion,
		Require:  map[string]string{GinkgoModule: ginkgoVersion},
		Binaries: []Binary{{Name: "ginkgo", Package: GinkgoModule + "/ginkgo"}},
	}, nil
}

// etcdMain runs etcd's server: the etcd root module replaces its own submodules with local
// paths, so its main package cannot be built from the proxy, but etcdmain.Main can.
const etcdMain = `package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
`

// Etcd returns the build of the etcd server at a version such as v3.6.5.
func Etcd(etcdVersion string) (Build, error) {
	if !strings.HasPrefix(etcdVersion, "v3.") {
		return Build{}, errors.Errorf("etcd version %q: only v3.x is supported", etcdVersion)
	}
	return Build{
		Name:     "etcd",
		Version:  etcdVersion,
		Require:  map[string]string{"go.etcd.io/etcd/server/v3": etcdVersion},
		Binaries: []Binary{{Name: "etcd", MainSource: etcdMain}},
	}, nil
}

// versionLDFlags stamps a Kubernetes-style version package (gitVersion, gitMajor, ...) with a
// release version: commands built from the module proxy otherwise report a placeholder.
func versionLDFlags(pkg, release string, v *version.Version) []string {
	return []string{
		fmt.Sprintf("-X %s.gitVersion=%s", pkg, release),
		fmt.Sprintf("-X %s.gitMajor=%d", pkg, v.Major()),
		fmt.Sprintf("-X %s.gitMinor=%d", pkg, v.Minor()),
		fmt.Sprintf("-X %s.gitCommit=%s", pkg, "go-module-proxy"),
		fmt.Sprintf("-X %s.gitTreeState=%s", pkg, "clean"),
		fmt.Sprintf("-X %s.buildDate=%s", pkg, "1970-01-01T00:00:00Z"),
	}
}
