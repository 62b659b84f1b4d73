package capie2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/yaml"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/cmd/tools/release"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

// Upgrade describes the provider versions Cluster API's ClusterctlUpgradeSpec moves between:
// earlier releases of Dockyard, as make release wrote them, and this tree, listed as the
// version its release would carry.
type Upgrade struct {
	// Provider is the provider's name in the suite's configuration ("dockyard").
	Provider string
	// Previous are the earlier releases' directories (make release RELEASE_DIR=…); each base
	// name is its version, e.g. …/v0.1.0.
	Previous []string
	// Current is the version this tree is listed as, e.g. v0.2.0: newer than every previous one.
	Current string
	// MetadataDir receives the tree's metadata.yaml with Current's series added, as the
	// release commit of Current would have it.
	MetadataDir string
}

// WithUpgrade changes a suite's configuration for ClusterctlUpgradeSpec: the provider's version
// built from this tree (the first listed) is renamed Current, and each release of Previous is
// listed beside it with its components, metadata and flavors as released, so clusterctl's
// repository holds them all. Each release is checked against its SHA256SUMS first; on an error
// the configuration is left as it was. It returns the previous releases' versions, in order.
func WithUpgrade(cfg *clusterctl.E2EConfig, u Upgrade) ([]string, error) {
	cur, err := version.ParseSemantic(u.Current)
	if err != nil {
		return nil, errors.Wrapf(err, "the version this tree is released as, %q", u.Current)
	}
	var versions []string
	for _, dir := range u.Previous {
		v, err := checkPrevious(dir, cur)
		if err != nil {
			return nil, err
		}
		if slices.Contains(versions, v) {
			return nil, errors.Errorf("release %s is listed twice (%s)", v, dir)
		}
		versions = append(versions, v)
	}
	i := slices.IndexFunc(cfg.Providers, func(p clusterctl.ProviderConfig) bool { return p.Name == u.Provider })
	if i < 0 || len(cfg.Providers[i].Versions) == 0 {
		return nil, errors.Errorf("the suite's configuration has no version of provider %s", u.Provider)
	}
	p := &cfg.Providers[i]
	tree := &p.Versions[0]
	metadata := slices.IndexFunc(tree.Files, func(f clusterctl.Files) bool { return f.TargetName == release.MetadataFile })
	if metadata < 0 {
		return nil, errors.Errorf("provider %s %s has no %s", u.Provider, tree.Name, release.MetadataFile)
	}
	var listed []clusterctl.ProviderVersionSource
	for k, dir := range u.Previous {
		released, err := releasedVersion(dir, versions[k], tree.Contract)
		if err != nil {
			return nil, err
		}
		listed = append(listed, released)
	}
	written, err := withSeries(tree.Files[metadata].SourcePath, cur, u.MetadataDir)
	if err != nil {
		return nil, err
	}
	tree.Name = u.Current
	tree.Files[metadata].SourcePath = written
	p.Versions = append(p.Versions, listed...)
	return versions, nil
}

// checkPrevious returns the version of the release in dir, which must be named after it, be
// older than current and hold what its SHA256SUMS lists.
func checkPrevious(dir string, current *version.Version) (string, error) {
	previous := filepath.Base(dir)
	prev, err := version.ParseSemantic(previous)
	if err != nil {
		return "", errors.Wrapf(err, "the previous release's directory %s is not named after its version", dir)
	}
	if !prev.LessThan(current) {
		return "", errors.Errorf("the previous release %s is not older than v%s", previous, current)
	}
	if err := release.Verify(dir); err != nil {
		return "", errors.Wrapf(err, "the previous release in %s", dir)
	}
	return previous, nil
}

// releasedVersion is the release of version v in dir as the suite lists it: its components,
// at contract, with its metadata and flavors.
func releasedVersion(dir, v, contract string) (clusterctl.ProviderVersionSource, error) {
	released := clusterctl.ProviderVersionSource{
		Name: v, Value: filepath.Join(dir, release.ComponentsFile), Type: clusterctl.URLSource, Contract: contract,
	}
	flavors, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return released, errors.Wrapf(err, "listing the files of release %s", v)
	}
	for _, f := range flavors {
		if filepath.Base(f) == release.ComponentsFile {
			continue
		}
		released.Files = append(released.Files, clusterctl.Files{SourcePath: f, TargetName: filepath.Base(f)})
	}
	return released, nil
}

// withSeries writes the metadata file at path with v's release series added (at the contract of
// its newest series) into dir, and returns the file written.
func withSeries(path string, v *version.Version, dir string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", errors.Wrap(err, "reading the tree's metadata")
	}
	md := &clusterctlv1.Metadata{}
	if err := yaml.UnmarshalStrict(raw, md); err != nil {
		return "", errors.Wrapf(err, "parsing %s", path)
	}
	if len(md.ReleaseSeries) == 0 {
		return "", errors.Errorf("%s lists no release series", path)
	}
	if md.GetReleaseSeriesForVersion(v) == nil {
		md.ReleaseSeries = append(md.ReleaseSeries, clusterctlv1.ReleaseSeries{
			Major: int32(v.Major()), Minor: int32(v.Minor()), Contract: md.ReleaseSeries[len(md.ReleaseSeries)-1].Contract, //nolint:gosec // a version's parts are small
		})
	}
	out, err := yaml.Marshal(md)
	if err != nil {
		return "", errors.Wrap(err, "encoding the metadata")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", errors.Wrap(err, "creating the metadata's directory")
	}
	written := filepath.Join(dir, release.MetadataFile)
	return written, errors.Wrapf(os.WriteFile(written, out, 0o644), "writing %s", written) //nolint:gosec // read by clusterctl only
}

// ReleaseRegistry is the local registry the clusterctl upgrade spec publishes a release into,
// standing in for the public registry a release's images are pushed to: the release's
// components name its images by digest, which a registry keeps and an image copied into a
// node does not.
type ReleaseRegistry struct {
	// Name of the registry (its container's).
	Name string
	// HostPort it is published on, on the host's loopback: the release must name its images
	// localhost:<HostPort>/… (make release RELEASE_IMAGE_REPOSITORY=…).
	HostPort int
	// Engine is the container engine; the environment's when empty.
	Engine runtimes.Config
}

// Host is the address images name the registry by.
func (r ReleaseRegistry) Host() string { return "localhost:" + strconv.Itoa(r.HostPort) }

// Serve makes the registry anew for the clusters of namespace (one an interrupted run left is
// removed with its images first) and publishes the release in dir into it, from its archives.
// It returns the images pushed.
func (r ReleaseRegistry) Serve(ctx context.Context, dir, namespace string) ([]release.Published, error) {
	nodes, done, err := connect(r.Engine)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := r.remove(ctx, nodes); err != nil {
		return nil, err
	}
	if _, err := nodes.CreateRegistry(ctx, docker.RegistrySpec{
		Name: r.Name, Image: imagebuild.RegistryImageName(imagebuild.DefaultDistributionVersion),
		HostPort: r.HostPort, Namespaces: []string{namespace},
	}); err != nil {
		return nil, errors.Wrapf(err, "creating the local registry %s (make registry-image builds its image)", r.Name)
	}
	// The registry's container has started; its server may not answer yet.
	api := "http://" + r.Host() + "/v2/"
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api, http.NoBody)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not serving yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return nil, errors.Wrapf(err, "the local registry %s does not answer at %s", r.Name, api)
	}
	pushed, err := release.Publish(ctx, dir)
	return pushed, errors.Wrapf(err, "publishing the release in %s to %s", dir, r.Host())
}

// Remove removes the registry with its images; one that does not exist is not an error.
func (r ReleaseRegistry) Remove(ctx context.Context) error {
	nodes, done, err := connect(r.Engine)
	if err != nil {
		return err
	}
	defer done()
	return r.remove(ctx, nodes)
}

func (r ReleaseRegistry) remove(ctx context.Context, nodes *docker.Manager) error {
	left, err := nodes.DeleteRegistry(ctx, r.Name, false)
	if err != nil {
		return errors.Wrapf(err, "removing the local registry %s", r.Name)
	}
	if len(left) > 0 {
		return errors.Errorf("removing the local registry %s: not its own, so left: %v", r.Name, left)
	}
	return nil
}
