// Command genrepository finishes make release-manifests: it makes
// pkg/repository/embedded/components hold the components hack/release-manifests.sh rendered (the
// tree the dockyard command embeds, committed), then lays the whole clusterctl repository out in
// out/repository as the dockyard command does (the components and templates/'s flavors, with
// clusterctl.yaml), and copies what a release and the suites read into out/: clusterctl.yaml,
// infrastructure-components.yaml, metadata.yaml. Only files whose content changed are written,
// each by a rename.
//
//	go run ./hack/genrepository RENDERED_COMPONENTS_DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
	"github.com/dockyard-dev/dockyard/pkg/repository"
)

const (
	embedDir = "pkg/repository/embedded/components"
	outDir   = "out"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/genrepository RENDERED_COMPONENTS_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "genrepository:", err)
		os.Exit(1)
	}
}

func run(rendered string) error {
	if err := repository.New(os.DirFS(rendered), nil).SyncComponents(embedDir); err != nil {
		return err
	}
	r := repository.New(os.DirFS(embedDir), os.DirFS("templates"))
	config, err := r.Write(filepath.Join(outDir, "repository"))
	if err != nil {
		return err
	}
	version, err := r.Version()
	if err != nil {
		return err
	}
	dockyard := filepath.Join(embedDir, "infrastructure-dockyard", version)
	for dst, src := range map[string]string{
		"clusterctl.yaml":                config,
		"infrastructure-components.yaml": filepath.Join(dockyard, "infrastructure-components.yaml"),
		"metadata.yaml":                  filepath.Join(dockyard, "metadata.yaml"),
	} {
		if err := copyIfChanged(src, filepath.Join(outDir, dst)); err != nil {
			return err
		}
	}
	fmt.Printf("clusterctl repository of Dockyard %s in %s (embedded from %s); configuration %s\n", version, filepath.Dir(config), embedDir, filepath.Join(outDir, "clusterctl.yaml"))
	return nil
}

func copyIfChanged(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return errors.Wrap(err, "reading the rendered repository")
	}
	return fileutil.WriteIfChanged(dst, data, 0o644)
}
