package capie2e

import (
	"os"

	"github.com/pkg/errors"
	"sigs.k8s.io/yaml"
)

// AddCertManager points a clusterctl configuration (the one the framework's
// clusterctl.CreateRepository writes) at a local cert-manager manifest, so `clusterctl init`
// needs no network. The framework's e2e config cannot say it: its variables are flat strings,
// and clusterctl reads cert-manager's URL from the nested "cert-manager" key. manifest must be
// <dir>/cert-manager/<version>/cert-manager.yaml, clusterctl's layout for a local repository.
func AddCertManager(clusterctlConfigPath, manifest, version string) error {
	raw, err := os.ReadFile(clusterctlConfigPath)
	if err != nil {
		return errors.Wrap(err, "reading the clusterctl configuration")
	}
	if _, err := os.Stat(manifest); err != nil {
		return errors.Wrap(err, "cert-manager's manifest (make release-manifests writes it)")
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return errors.Wrapf(err, "parsing %s", clusterctlConfigPath)
	}
	cfg["cert-manager"] = map[string]any{"url": manifest, "version": version}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return errors.Wrap(err, "encoding the clusterctl configuration")
	}
	return errors.Wrapf(os.WriteFile(clusterctlConfigPath, out, 0o600), "writing %s", clusterctlConfigPath)
}
