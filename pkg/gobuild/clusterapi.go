package gobuild

import (
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/version"
)

// Names of the Cluster API commands ClusterAPI knows how to build.
const (
	// ClusterAPICore is the core manager (Cluster, Machine, MachineSet, ... controllers).
	ClusterAPICore = "cluster-api-core"
	// ClusterAPIKubeadmBootstrap is the kubeadm bootstrap provider (CABPK).
	ClusterAPIKubeadmBootstrap = "cluster-api-kubeadm-bootstrap"
	// ClusterAPIKubeadmControlPlane is the kubeadm control plane provider (KCP).
	ClusterAPIKubeadmControlPlane = "cluster-api-kubeadm-control-plane"
	// Clusterctl is Cluster API's command-line tool.
	Clusterctl = "clusterctl"
)

// clusterAPIPackages maps each command name to its main package in the sigs.k8s.io/cluster-api
// module (v1.14 layout: there is no main package at the module root).
var clusterAPIPackages = map[string]string{
	ClusterAPICore:                "sigs.k8s.io/cluster-api/core",
	ClusterAPIKubeadmBootstrap:    "sigs.k8s.io/cluster-api/bootstrap/kubeadm",
	ClusterAPIKubeadmControlPlane: "sigs.k8s.io/cluster-api/controlplane/kubeadm",
	Clusterctl:                    "sigs.k8s.io/cluster-api/cmd/clusterctl",
}

// ClusterAPICommands are every command ClusterAPI builds, in the order it builds them.
var ClusterAPICommands = []string{
	ClusterAPICore, ClusterAPIKubeadmBootstrap, ClusterAPIKubeadmControlPlane, Clusterctl,
}

// ClusterAPI returns the build of Cluster API commands (ClusterAPICore and friends; all of
// ClusterAPICommands when none is named) at a release such as v1.14.2, unmodified. The
// sigs.k8s.io/cluster-api module requires sigs.k8s.io/cluster-api/api at a placeholder
// version the module proxy refuses, so the wrapper module pins it to the same release. The
// binaries are stamped with the version, as Cluster API's release builds are.
func ClusterAPI(clusterAPIVersion string, commands ...string) (Build, error) {
	build, ldflags, err := clusterAPIRelease(clusterAPIVersion)
	if err != nil {
		return Build{}, err
	}
	if len(commands) == 0 {
		commands = ClusterAPICommands
	}
	seen := map[string]bool{}
	for _, c := range commands {
		p, ok := clusterAPIPackages[c]
		if !ok {
			return Build{}, errors.Errorf("unknown Cluster API command %q (known: %v)", c, ClusterAPICommands)
		}
		if seen[c] {
			continue
		}
		seen[c] = true
		build.Binaries = append(build.Binaries, Binary{Name: c, Package: p, LDFlags: ldflags})
	}
	return build, nil
}

// clusterAPIRelease is the build of nothing yet at a Cluster API release: the module required,
// the api module's placeholder pinned to the release, and the linker flags that stamp a binary
// with the version, as Cluster API's release builds are.
func clusterAPIRelease(clusterAPIVersion string) (Build, []string, error) {
	v, err := version.ParseSemantic(clusterAPIVersion)
	if err != nil {
		return Build{}, nil, errors.Wrapf(err, "parsing Cluster API version %q", clusterAPIVersion)
	}
	if v.Major() != 1 || v.Minor() < 14 {
		// The layout this build relies on (mains under core/, bootstrap/kubeadm/,
		// controlplane/kubeadm/ and the separate api module) is the one of v1.14; older releases
		// were not tried.
		return Build{}, nil, errors.Errorf("Cluster API version %s: only v1.14 and later are supported", clusterAPIVersion)
	}
	return Build{
		Name:    "cluster-api",
		Version: clusterAPIVersion,
		Require: map[string]string{"sigs.k8s.io/cluster-api": clusterAPIVersion},
		Replace: map[string]string{"sigs.k8s.io/cluster-api/api": clusterAPIVersion},
	}, versionLDFlags("sigs.k8s.io/cluster-api/version", clusterAPIVersion, v), nil
}

// ClusterAPITestExtensionPackage is the main package of Cluster API's test extension: the
// Runtime SDK server its end-to-end suite deploys (lifecycle hooks that block until told,
// topology patches, upgrade plans, in-place updates), in the sigs.k8s.io/cluster-api/test module.
const ClusterAPITestExtensionPackage = "sigs.k8s.io/cluster-api/test/extension"

// ClusterAPITestExtension returns the build of Cluster API's test extension (binary
// "test-extension") at a release such as v1.14.2, unmodified. Its module asks for
// sigs.k8s.io/cluster-api and the api module at placeholders (its own go.mod replaces them with
// its repository's directories), so the wrapper module pins both to the same release.
func ClusterAPITestExtension(clusterAPIVersion string) (Build, error) {
	build, ldflags, err := clusterAPIRelease(clusterAPIVersion)
	if err != nil {
		return Build{}, err
	}
	build.Name = "cluster-api-test-extension"
	build.Require["sigs.k8s.io/cluster-api/test"] = clusterAPIVersion
	build.Replace["sigs.k8s.io/cluster-api"] = clusterAPIVersion
	build.Binaries = []Binary{{Name: "test-extension", Package: ClusterAPITestExtensionPackage, LDFlags: ldflags}}
	return build, nil
}
