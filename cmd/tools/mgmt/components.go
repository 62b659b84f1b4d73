package mgmt

import (
	"os"
	"regexp"
	"sort"

	"github.com/pkg/errors"
	"sigs.k8s.io/yaml"
)

// clusterctlConfig is the part of clusterctl's configuration naming the component files.
type clusterctlConfig struct {
	Providers []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	} `json:"providers"`
	CertManager struct {
		URL string `json:"url"`
	} `json:"cert-manager"`
}

var imageField = regexp.MustCompile(`(?m)^[ \t-]*image:[ \t]*["']?([^"'\s]+)`)

// ComponentImages lists the container images of every component file a clusterctl
// configuration names (local repositories only: they are what a machine without a registry
// has).
func ComponentImages(configPath string) ([]string, error) {
	raw, err := os.ReadFile(configPath)
	if err != nil {
		return nil, errors.Wrapf(err, "reading the clusterctl configuration (run make release-manifests)")
	}
	var cfg clusterctlConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, errors.Wrapf(err, "parsing %s", configPath)
	}
	files := []string{cfg.CertManager.URL}
	for _, p := range cfg.Providers {
		files = append(files, p.URL)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if f == "" {
			continue
		}
		content, err := os.ReadFile(f)
		if err != nil {
			return nil, errors.Wrapf(err, "reading component file %s named by %s", f, configPath)
		}
		for _, m := range imageField.FindAllSubmatch(content, -1) {
			seen[string(m[1])] = true
		}
	}
	images := make([]string, 0, len(seen))
	for img := range seen {
		images = append(images, img)
	}
	sort.Strings(images)
	return images, nil
}
