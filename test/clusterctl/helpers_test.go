// Package clusterctl proves Dockyard's clusterctl provider contract with the real clusterctl
// (built from sigs.k8s.io/cluster-api/cmd/clusterctl at the release go.mod requires) against
// real API servers: the local provider repository `make release-manifests` writes, offline
// `clusterctl init`, every flavor through `clusterctl generate cluster` and the API server's
// webhooks, ClusterClass variables and patches, and `clusterctl describe`.
//
// The static checks run everywhere; the rest needs the repository and runs with
// `make test-clusterctl`, which builds it and sets DOCKYARD_CLUSTERCTL_CONFIG.
package clusterctl

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	capiyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/dockyard-dev/dockyard/pkg/scheme"
	"github.com/dockyard-dev/dockyard/test/ci"
	"github.com/dockyard-dev/dockyard/test/envtest"
	"github.com/dockyard-dev/dockyard/test/framework"
)

// Every namespace and cluster these tests create starts with this prefix (the end-to-end suite
// uses dockyard-e2e), so leftovers of an interrupted run are easy to tell apart.
const prefix = "dockyard-cctl"

func init() {
	// envtest logs through controller-runtime; its lines add nothing here.
	crlog.SetLogger(logr.Discard())
}

// kubernetesVersion is what the generated clusters ask for.
const kubernetesVersion = "v1.34.4"

// repository is the clusterctl setup `make release-manifests` wrote.
type repository struct {
	// config is out/clusterctl.yaml, dir out/repository.
	config, dir string
	// dockyardVersion and capiVersion are the versions in the repository.
	dockyardVersion, capiVersion, certManagerVersion string
	// clusterctl is the binary.
	clusterctl string
}

// requireRepository returns the repository, or skips the test (fails it in CI) when
// DOCKYARD_CLUSTERCTL_CONFIG is unset (go test ./... without `make test-clusterctl`).
func requireRepository(t *testing.T) repository {
	t.Helper()
	config := os.Getenv("DOCKYARD_CLUSTERCTL_CONFIG")
	if config == "" {
		ci.Missing(t, "DOCKYARD_CLUSTERCTL_CONFIG is not set: run `make test-clusterctl`, which writes the clusterctl repository (make release-manifests) and sets it")
	}
	r := repository{config: config, dir: filepath.Join(filepath.Dir(config), "repository")}
	var err error
	if r.dockyardVersion, err = onlyVersion(filepath.Join(r.dir, "infrastructure-dockyard")); err != nil {
		t.Fatal(err)
	}
	if r.capiVersion, err = onlyVersion(filepath.Join(r.dir, "cluster-api")); err != nil {
		t.Fatal(err)
	}
	if r.certManagerVersion, err = onlyVersion(filepath.Join(r.dir, "cert-manager")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bins, err := framework.BuildBinaries(ctx, framework.Options{ClusterAPIVersion: r.capiVersion})
	if err != nil {
		t.Fatal(err)
	}
	r.clusterctl = bins.Clusterctl
	return r
}

// onlyVersion returns the single version directory under a provider's directory.
func onlyVersion(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", errors.Wrap(err, "the clusterctl repository is incomplete (run make release-manifests)")
	}
	var versions []string
	for _, e := range entries {
		if e.IsDir() {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) != 1 {
		return "", errors.Errorf("%s holds versions %v, want exactly one", dir, versions)
	}
	return versions[0], nil
}

// clusterctl runs the clusterctl binary with a clean environment: a private HOME (no user
// configuration, overrides or cache), no KUBECONFIG, the given variables. It returns stdout and
// fails the test with both outputs when clusterctl fails, unless allowFailure.
type run struct {
	args         []string
	env          map[string]string
	allowFailure bool
}

func (r repository) run(ctx context.Context, t *testing.T, c run) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, r.clusterctl, c.args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	keys := make([]string, 0, len(c.env))
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("clusterctl %s (variables %s): %s", strings.Join(c.args, " "), strings.Join(keys, ","), time.Since(start).Round(time.Millisecond))
	if err != nil {
		err = errors.Errorf("clusterctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), err, tail(stdout.String(), 40), stderr.String())
		if !c.allowFailure {
			t.Fatal(err)
		}
	}
	return stdout.String() + stderr.String(), err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// bareAPIServer starts etcd and kube-apiserver only (controller-runtime's envtest, no CRDs, no
// controllers) and returns a kubeconfig file of a system:masters user and a client.
func bareAPIServer(t *testing.T) (string, client.Client) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: make test-clusterctl builds kube-apiserver and etcd (make envtest-assets)")
	}
	env := &crenvtest.Environment{}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting etcd and kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	t.Logf("bare API server ready in %s", time.Since(start).Round(time.Millisecond))
	user, err := env.AddUser(crenvtest.User{Name: prefix + "-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	restConfig.QPS, restConfig.Burst = 100, 200
	c, err := client.New(restConfig, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return path, c
}

// decode splits a YAML stream into objects.
func decode(t *testing.T, data []byte) []unstructured.Unstructured {
	t.Helper()
	objs, err := capiyaml.ToUnstructured(data)
	if err != nil {
		t.Fatalf("decoding YAML: %v", err)
	}
	return objs
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func repoPath(parts ...string) string {
	return filepath.Join(append([]string{envtest.RepoRoot()}, parts...)...)
}

func id(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}
