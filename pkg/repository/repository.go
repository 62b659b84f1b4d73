// Package repository reads and lays out a clusterctl repository: the components of Cluster
// API's core, kubeadm bootstrap and kubeadm control plane providers, cert-manager's, and
// Dockyard's own with its metadata, flavors and ClusterClasses. `make release-manifests` renders
// the components into pkg/repository/embedded/components, which is committed and which the
// dockyard command embeds (package embedded), so `go install ./cmd/dockyard` gives a command
// that needs no checkout.
//
// A components tree follows clusterctl's local repository layout: <label>/<version>/<file>,
// where label is cluster-api, bootstrap-<name>, control-plane-<name>, infrastructure-<name> or
// cert-manager.
package repository

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pkg/errors"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
)

// Provider is one provider of the repository, as clusterctl's configuration names it.
type Provider struct {
	// Name is clusterctl's provider name: cluster-api, kubeadm, dockyard.
	Name string
	// Type is clusterctl's provider type: CoreProvider, BootstrapProvider, ...
	Type clusterctlv1.ProviderType
	// Version is the one version the repository holds.
	Version string
	// Components is the path of the components file inside the repository, slash-separated.
	Components string
}

// Repository is a clusterctl repository: the providers' components and metadata, laid out as
// clusterctl reads them, and Dockyard's flavors and ClusterClasses, which belong in Dockyard's
// directory.
type Repository struct {
	components, flavors fs.FS
}

// New is the repository of the components tree (files/'s layout) and the flavors (files named
// cluster-template*.yaml and clusterclass-*.yaml at its root; nil: none).
func New(components, flavors fs.FS) *Repository {
	return &Repository{components: components, flavors: flavors}
}

// Contents is the repository's layout: its providers, sorted by label, and cert-manager's
// version. A label directory that does not hold exactly one version is an error: the binary
// carries the components of its own version only.
func (r *Repository) Contents() (providers []Provider, certManager string, err error) {
	labels, err := fs.ReadDir(r.components, ".")
	if err != nil {
		return nil, "", errors.Wrap(err, "reading the clusterctl repository")
	}
	for _, l := range labels {
		if !l.IsDir() {
			continue
		}
		versions, err := fs.ReadDir(r.components, l.Name())
		if err != nil {
			return nil, "", errors.Wrapf(err, "reading the clusterctl repository's %s", l.Name())
		}
		if len(versions) != 1 || !versions[0].IsDir() {
			return nil, "", errors.Errorf("the clusterctl repository's %s holds %d entries, want one version directory", l.Name(), len(versions))
		}
		version := versions[0].Name()
		if l.Name() == "cert-manager" {
			certManager = version
			continue
		}
		p, err := provider(l.Name(), version)
		if err != nil {
			return nil, "", err
		}
		if _, err := fs.Stat(r.components, p.Components); err != nil {
			return nil, "", errors.Wrapf(err, "the clusterctl repository's %s has no components file", l.Name())
		}
		providers = append(providers, p)
	}
	if certManager == "" {
		return nil, "", errors.New("the clusterctl repository has no cert-manager")
	}
	return providers, certManager, nil
}

// provider is the Provider of a label directory holding version. The label is clusterctl's
// (clusterctlv1.ManifestLabel), and the components file is named after its prefix, as in
// Cluster API's releases: core-components.yaml, bootstrap-components.yaml, ...
func provider(label, version string) (Provider, error) {
	if label == "cluster-api" { // the core provider's name is its label
		return Provider{Name: label, Type: clusterctlv1.CoreProviderType, Version: version, Components: path.Join(label, version, "core-components.yaml")}, nil
	}
	for _, typ := range []clusterctlv1.ProviderType{clusterctlv1.BootstrapProviderType, clusterctlv1.ControlPlaneProviderType,
		clusterctlv1.InfrastructureProviderType, clusterctlv1.IPAMProviderType, clusterctlv1.RuntimeExtensionProviderType, clusterctlv1.AddonProviderType} {
		prefix := clusterctlv1.ManifestLabel("", typ)
		if name, ok := strings.CutPrefix(label, prefix); ok && name != "" {
			return Provider{Name: name, Type: typ, Version: version, Components: path.Join(label, version, prefix+"components.yaml")}, nil
		}
	}
	return Provider{}, errors.Errorf("the clusterctl repository's %s is no provider label clusterctl knows (cluster-api, bootstrap-, control-plane-, infrastructure-, ipam-, runtime-extension-, addon-<name>)", label)
}

// Version is the version of Dockyard's components in the repository.
func (r *Repository) Version() (string, error) {
	providers, _, err := r.Contents()
	if err != nil {
		return "", err
	}
	for _, p := range providers {
		if p.Type == clusterctlv1.InfrastructureProviderType && p.Name == "dockyard" {
			return p.Version, nil
		}
	}
	return "", errors.New("the clusterctl repository has no infrastructure-dockyard")
}

// Config is clusterctl's configuration for the repository laid out at root (an absolute
// directory): every provider and cert-manager from there, and the variables Dockyard's flavors
// need.
func (r *Repository) Config(root string) ([]byte, error) {
	providers, certManager, err := r.Contents()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# clusterctl reads every provider and cert-manager from the local repository in %s.\n", root)
	b.WriteString("providers:\n")
	for _, p := range providers {
		fmt.Fprintf(&b, "- {name: %s, type: %s, url: %s}\n", p.Name, p.Type, filepath.Join(root, filepath.FromSlash(p.Components)))
	}
	fmt.Fprintf(&b, "cert-manager:\n  url: %s\n  version: %s\n", filepath.Join(root, "cert-manager", certManager, "cert-manager.yaml"), certManager)
	b.WriteString(`# No GitHub: do not look for a newer clusterctl.
CLUSTERCTL_DISABLE_VERSIONCHECK: "true"
# ClusterClass (the topology flavor) needs the ClusterTopology feature in Cluster API.
CLUSTER_TOPOLOGY: "true"
# The ignition flavor needs the kubeadm providers' Ignition feature gate.
EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION: "true"
`)
	return b.Bytes(), nil
}

// Write lays the repository out in dir and writes clusterctl's configuration for it,
// dir/clusterctl.yaml, whose path it returns. Files already there with the same content are
// left alone, others replaced whole (a clusterctl reading dir at the same time never sees a
// file half-written), and files the repository does not hold are removed: dir is the
// repository's alone.
func (r *Repository) Write(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", errors.Wrap(err, "the clusterctl repository's directory")
	}
	if err := r.sync(dir, "clusterctl.yaml"); err != nil {
		return "", err
	}
	config, err := r.Config(dir)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "clusterctl.yaml")
	return path, writeIfChanged(path, config)
}

// SyncComponents makes dir hold the components tree and nothing else (no flavors, no
// configuration), changing only what differs: how make release-manifests writes the tree the
// binary embeds.
func (r *Repository) SyncComponents(dir string) error {
	return New(r.components, nil).sync(dir)
}

// sync makes dir hold the repository's files, and of other files only those named in keep.
func (r *Repository) sync(dir string, keep ...string) error {
	version, err := r.Version()
	if err != nil {
		return err
	}
	held := map[string]bool{}
	for _, k := range keep {
		held[k] = true
	}
	copyTree := func(fsys fs.FS, into string, match func(name string) bool) error {
		return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !match(p) {
				return err
			}
			data, err := fs.ReadFile(fsys, p)
			if err != nil {
				return errors.Wrapf(err, "reading %s of the clusterctl repository", p)
			}
			rel := path.Join(into, p)
			held[rel] = true
			return writeIfChanged(filepath.Join(dir, filepath.FromSlash(rel)), data)
		})
	}
	if err := copyTree(r.components, ".", func(string) bool { return true }); err != nil {
		return err
	}
	if r.flavors != nil {
		if err := copyTree(r.flavors, path.Join("infrastructure-dockyard", version), IsFlavor); err != nil {
			return err
		}
	}
	return removeOthers(dir, held)
}

// IsFlavor reports whether a file name is one clusterctl reads as a flavor or a ClusterClass.
func IsFlavor(name string) bool {
	return !strings.Contains(name, "/") && strings.HasSuffix(name, ".yaml") &&
		(strings.HasPrefix(name, "cluster-template") || strings.HasPrefix(name, "clusterclass-"))
}

func writeIfChanged(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return errors.Wrapf(err, "making %s", filepath.Dir(path))
	}
	return fileutil.WriteIfChanged(path, data, 0o644)
}

// removeOthers removes the files under dir that keep does not name (slash-separated, relative),
// then the directories left empty.
func removeOthers(dir string, keep map[string]bool) error {
	var stale, dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel != "." {
				dirs = append(dirs, p)
			}
		case !keep[filepath.ToSlash(rel)]:
			stale = append(stale, p)
		}
		return nil
	})
	if err != nil {
		return errors.Wrapf(err, "reading %s", dir)
	}
	for _, p := range stale {
		if err := os.Remove(p); err != nil {
			return errors.Wrapf(err, "removing %s, which the clusterctl repository no longer holds", p)
		}
	}
	// Deepest first, so a directory's empty children go before it.
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if entries, err := os.ReadDir(d); err == nil && len(entries) == 0 {
			_ = os.Remove(d)
		}
	}
	return nil
}
