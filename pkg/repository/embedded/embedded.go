// Package embedded is the clusterctl repository the dockyard command carries: the components
// make release-manifests renders into components/ (committed) and templates/'s flavors.
package embedded

import (
	"embed"
	"io/fs"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/repository"
	"github.com/dockyard-dev/dockyard/templates"
)

//go:embed all:components
var components embed.FS

// Repository is the repository carried in the binary.
func Repository() (*repository.Repository, error) {
	sub, err := fs.Sub(components, "components")
	if err != nil {
		return nil, errors.Wrap(err, "the clusterctl repository in the binary")
	}
	return repository.New(sub, templates.Flavors), nil
}
