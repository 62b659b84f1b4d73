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
	v, err := version.ParseSemantic(kubernetesVersion)
	if err != nil {
		return Build{}, errors.Wrapf(err, "parsing Kubernetes version %q", kubernetesVersion)
	}
	if v.Major() != 1 {
		return Build{}, errors.Errorf("Kubernetes version %s: only 1.x is supported", kubernetesVersion)
	}
	staging := fmt.Sprintf("v0.%d.%d", v.Minor(), v.Patch())
	if pre := v.PreRelease(); pre != "" {
		staging += "-" + pre
	}
	replace := map[string]string{}
	for _, m := range kubernetesStagingModules {
		replace["k8s.io/"+m] = staging
	}
	ldflags := append(versionLDFlags("k8s.io/component-base/version", kubernetesVersion, v),
		versionLDFlags("k8s.io/client-go/pkg/version", kubernetesVersion, v)...)
	build := Build{
		Name:    "kubernetes",
		Version: kubernetesVersion,
		Require: map[string]string{"k8s.io/kubernetes": kubernetesVersion},
		Replace: replace,
	}
	for _, c := range commands {
		build.Binaries = append(build.Binaries, Binary{Name: c, Package: "k8s.io/kubernetes/cmd/" + c, LDFlags: ldflags})
	}
	return build, nil
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
