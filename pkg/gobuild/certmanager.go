package gobuild

import (
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/version"
)

// CertManagerCommands are the cert-manager commands a Cluster API management cluster runs.
var CertManagerCommands = []string{"controller", "webhook", "cainjector"}

// CertManager returns the build of cert-manager's controller, webhook and cainjector at a
// release such as v1.11.5, from the root module. From v1.12 on the commands are modules of
// their own (cmd/controller, ...), which the module proxy does not serve; v1.11 is the newest
// release whose root module holds them.
func CertManager(certManagerVersion string) (Build, error) {
	v, err := version.ParseSemantic(certManagerVersion)
	if err != nil {
		return Build{}, errors.Wrapf(err, "parsing cert-manager version %q", certManagerVersion)
	}
	if v.Major() != 1 || v.Minor() > 11 {
		return Build{}, errors.Errorf("cert-manager version %s: only v1.11 and older can be built from the module proxy "+
			"(newer releases keep their commands in nested modules the proxy does not serve)", certManagerVersion)
	}
	const module = "github.com/cert-manager/cert-manager"
	ldflags := []string{
		"-X " + module + "/pkg/util.AppVersion=" + certManagerVersion,
		"-X " + module + "/pkg/util.AppGitCommit=go-module-proxy",
	}
	build := Build{Name: "cert-manager", Version: certManagerVersion, Require: map[string]string{module: certManagerVersion}}
	for _, c := range CertManagerCommands {
		build.Binaries = append(build.Binaries, Binary{Name: c, Package: module + "/cmd/" + c, LDFlags: ldflags})
	}
	return build, nil
}

// DistributionModule is the module of distribution's registry, the OCI registry Dockyard's
// local registry runs.
const DistributionModule = "github.com/distribution/distribution/v3"

// Distribution returns the build of distribution's registry command at a release such as
// v3.1.2.
func Distribution(distributionVersion string) (Build, error) {
	if _, err := version.ParseSemantic(distributionVersion); err != nil {
		return Build{}, errors.Wrapf(err, "parsing distribution version %q", distributionVersion)
	}
	return Build{
		Name: "distribution", Version: distributionVersion,
		Require: map[string]string{DistributionModule: distributionVersion},
		Binaries: []Binary{{
			Name: "registry", Package: DistributionModule + "/cmd/registry",
			LDFlags: []string{"-X " + DistributionModule + "/version.version=" + distributionVersion},
		}},
	}, nil
}
