package framework

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/gobuild"
	"github.com/dockyard-dev/dockyard/test/reporoot"
)

// Binaries are the paths of the commands a management plane runs.
type Binaries struct {
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	// ClusterAPICore, ClusterAPIKubeadmBootstrap and ClusterAPIKubeadmControlPlane are Cluster
	// API's managers, unmodified; Clusterctl is its command-line tool (not run by the plane,
	// built for the suites that need it).
	ClusterAPICore                string
	ClusterAPIKubeadmBootstrap    string
	ClusterAPIKubeadmControlPlane string
	Clusterctl                    string
	// DockyardManager is Dockyard's manager built from the repository (or Options.DockyardBinary).
	DockyardManager string
	// ClusterAPIModuleDir is the sigs.k8s.io/cluster-api module at ClusterAPIVersion in the
	// module cache: its CRDs and webhook configurations match the binaries.
	ClusterAPIModuleDir string
}

// BuildBinaries builds (or finds in the cache) everything but Dockyard's manager. gobuild locks
// each build, so test binaries started in parallel (go test ./...) do not build the same thing
// twice.
func BuildBinaries(ctx context.Context, opts Options) (Binaries, error) {
	opts = opts.withDefaults()
	b := &gobuild.Builder{CacheDir: filepath.Join(opts.CacheDir, "build"), Log: opts.Log}

	etcd, err := gobuild.Etcd(opts.EtcdVersion)
	if err != nil {
		return Binaries{}, err
	}
	kube, err := gobuild.Kubernetes(opts.KubernetesVersion, "kube-apiserver", "kube-controller-manager")
	if err != nil {
		return Binaries{}, err
	}
	capi, err := gobuild.ClusterAPI(opts.ClusterAPIVersion)
	if err != nil {
		return Binaries{}, err
	}
	// At Dockyard's versions of the modules both use, the managers share their compilations
	// with Dockyard's tests.
	root := opts.RepoRoot
	if root == "" {
		if root, err = repoRoot(); err != nil {
			return Binaries{}, err
		}
	}
	if capi, err = capi.PinnedTo(filepath.Join(root, "go.mod")); err != nil {
		return Binaries{}, err
	}
	dirs := map[string]string{}
	for _, build := range []gobuild.Build{etcd, kube, capi} {
		start := time.Now()
		dir, err := b.Run(ctx, build)
		if err != nil {
			return Binaries{}, err
		}
		logf(opts.Log, "binaries of %s %s ready in %s (%s)", build.Name, build.Version, time.Since(start).Round(time.Millisecond), dir)
		dirs[build.Name] = dir
	}
	moduleDir, err := moduleDir(ctx, "sigs.k8s.io/cluster-api", opts.ClusterAPIVersion)
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{
		Etcd:                          filepath.Join(dirs[etcd.Name], "etcd"),
		KubeAPIServer:                 filepath.Join(dirs[kube.Name], "kube-apiserver"),
		KubeControllerManager:         filepath.Join(dirs[kube.Name], "kube-controller-manager"),
		ClusterAPICore:                filepath.Join(dirs[capi.Name], gobuild.ClusterAPICore),
		ClusterAPIKubeadmBootstrap:    filepath.Join(dirs[capi.Name], gobuild.ClusterAPIKubeadmBootstrap),
		ClusterAPIKubeadmControlPlane: filepath.Join(dirs[capi.Name], gobuild.ClusterAPIKubeadmControlPlane),
		Clusterctl:                    filepath.Join(dirs[capi.Name], gobuild.Clusterctl),
		DockyardManager:               opts.DockyardBinary,
		ClusterAPIModuleDir:           moduleDir,
	}, nil
}

// moduleDir returns where a module version is in the module cache, downloading it if needed.
func moduleDir(ctx context.Context, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	cmd.Dir = os.TempDir() // outside any module: the answer must not depend on a go.mod
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.Errorf("go mod download %s@%s: %v\n%s%s", module, version, err, out, stderr.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", errors.Wrapf(err, "reading the output of go mod download %s@%s", module, version)
	}
	if info.Dir == "" {
		return "", errors.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	return info.Dir, nil
}

// buildDockyard builds Dockyard's manager from the repository into
// <cache>/dockyard-manager/<hash of the repository path>/: go build skips the link when the
// binary there is up to date (about 1s instead of 6s), and each checkout of the repository has
// its own binary. A lock serializes test binaries building from the same checkout; replacing
// the file is safe while a manager built earlier still runs (go build unlinks it first).
func buildDockyard(ctx context.Context, repoRoot, cacheDir string, log io.Writer) (string, error) {
	sum := sha256.Sum256([]byte(repoRoot))
	dir := filepath.Join(cacheDir, "dockyard-manager", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", errors.Wrapf(err, "creating %s", dir)
	}
	unlock, err := gobuild.Lock(ctx, filepath.Join(dir, "lock"), nil)
	if err != nil {
		return "", errors.Wrap(err, "locking the build of Dockyard's manager")
	}
	defer unlock()

	out := filepath.Join(dir, "dockyard-manager")
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Errorf("building Dockyard's manager (go build in %s): %v\n%s", repoRoot, err, output)
	}
	logf(log, "built Dockyard's manager from %s in %s (%s)", repoRoot, time.Since(start).Round(time.Millisecond), out)
	return out, nil
}

// repoRoot finds the Dockyard repository (reporoot.Find); Options.RepoRoot names it otherwise.
func repoRoot() (string, error) {
	root, err := reporoot.Find()
	return root, errors.Wrap(err, "set Options.RepoRoot")
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
