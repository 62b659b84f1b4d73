package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// registryImage is the image `make registry-image` builds (DOCKYARD_TEST_REGISTRY_IMAGE).
func registryImage() string {
	if v := os.Getenv("DOCKYARD_TEST_REGISTRY_IMAGE"); v != "" {
		return v
	}
	return "localhost/dockyard/registry:v3.1.2"
}

// engineRegistry creates a local registry on the real engine, on a free host port, serving
// namespaces; it is deleted after the test.
func engineRegistry(t *testing.T, m *Manager, rt container.Runtime, spec RegistrySpec) *Registry {
	t.Helper()
	dockerenv.RequireImages(t, rt, registryImage())
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	spec.Name, spec.Image, spec.HostPort = "dytest-registry-"+hex.EncodeToString(suffix), registryImage(), freeHostPort(t)
	ctx := context.Background()
	t.Cleanup(func() {
		left, err := m.DeleteRegistry(context.Background(), spec.Name, false)
		if err != nil || len(left) > 0 {
			t.Errorf("deleting registry %s: left %v, %v", spec.Name, left, err)
		}
	})
	r, err := m.CreateRegistry(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "registry "+r.Name+" answers", func() error {
		resp, err := http.Get("http://" + r.Host() + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return r
}

func freeHostPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pushRandom pushes a small random image to the registry as repo:v1 and returns its digest.
func pushRandom(r *Registry, repo string, opts ...remote.Option) (string, error) {
	img, err := random.Image(1024, 1)
	if err != nil {
		return "", err
	}
	return pushImage(r, repo+":v1", img, opts...)
}

// pushImage pushes img to the registry as ref (repo:tag) and returns its digest.
func pushImage(r *Registry, ref string, img v1.Image, opts ...remote.Option) (string, error) {
	parsed, err := name.ParseReference(r.Host()+"/"+ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(parsed, img, opts...); err != nil {
		return "", err
	}
	digest, err := img.Digest()
	return digest.String(), err
}

// as is the option that pushes or pulls with a registry credential.
func as(cred *RegistryCredential) remote.Option {
	return remote.WithAuth(&authn.Basic{Username: cred.Username, Password: cred.Password})
}

// deleteManifest sends DELETE /v2/<repo>/manifests/<digest> and returns the status and body.
func deleteManifest(t *testing.T, r *Registry, repo, digest string, cred *RegistryCredential) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, fmt.Sprintf("http://%s/v2/%s/manifests/%s", r.Host(), repo, digest), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		req.SetBasicAuth(cred.Username, cred.Password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The registry image refuses deletes (405, UNSUPPORTED) unless the registry was created with
// them allowed.
func TestRegistryDeletesOnlyWhenAllowedOnTheEngine(t *testing.T) {
	rt := dockerenv.Engine(t)
	m := NewManager(rt, ManagerOptions{})
	for _, allow := range []bool{false, true} {
		r := engineRegistry(t, m, rt, RegistrySpec{Namespaces: []string{testNamespace}, AllowDeletes: allow})
		digest, err := pushRandom(r, "test/app")
		if err != nil {
			t.Fatalf("pushing to %s: %v", r.Name, err)
		}
		status, body := deleteManifest(t, r, "test/app", digest, nil)
		switch {
		case !allow && (status != http.StatusMethodNotAllowed || !strings.Contains(body, "UNSUPPORTED")):
			t.Errorf("deleting a manifest from a registry without deletes: %d %s, want 405 UNSUPPORTED", status, body)
		case allow && status != http.StatusAccepted:
			t.Errorf("deleting a manifest from a registry with deletes allowed: %d %s, want 202", status, body)
		}
	}
}

// A registry with authentication refuses a push without its credential and takes the host's;
// the password is in none of the container's labels, environment, command or logs; a node of
// a cluster of its namespace pulls from it through its containerd (CRI), which sends the
// namespace's credential written in its hosts.toml (not the host's).
func TestRegistryAuthenticationOnTheEngine(t *testing.T) {
	t.Parallel()
	m, rt, key := engineCluster(t)
	r := engineRegistry(t, m, rt, RegistrySpec{Namespaces: []string{key.Namespace}, Auth: true})
	ctx := context.Background()
	if _, err := pushRandom(r, "test/app"); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Errorf("pushing without the credential: %v, want 401 Unauthorized", err)
	}
	cred, err := m.RegistryCredential(ctx, r.Name)
	if err != nil || cred == nil {
		t.Fatalf("credential: %v, %v", cred, err)
	}
	if _, err := pushRandom(r, "test/app", as(cred)); err != nil {
		t.Fatalf("pushing with the credential: %v", err)
	}
	c, err := rt.InspectContainer(ctx, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := rt.ContainerLogs(ctx, r.Name, 200)
	seen := fmt.Sprint(c.Labels) + logs
	if dockerenv.EngineName() == "docker" {
		if out, err := exec.Command("docker", "inspect", r.Name).CombinedOutput(); err == nil {
			seen += string(out)
		}
	}
	if strings.Contains(seen, cred.Password) || strings.Contains(seen, cred.basic()[len("Basic "):]) {
		t.Error("the registry's password shows in its labels, environment, command or logs")
	}

	// A node of the cluster pulls with the credential.
	node := m.node(key, "w-0", bootNode(t, m, key, "w-0", RoleWorker))
	network := DefaultNetworkName(key)
	attached, err := m.ConnectRegistry(ctx, r.Name, network, key.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.UseRegistry(ctx, attached, network); err != nil {
		t.Fatal(err)
	}
	version, _ := execOut(t, rt, node.Name, "containerd", "--version")
	t.Logf("node's containerd: %s", version)
	hosts := registryHostsFile(r.Host())
	if mode, _ := execOut(t, rt, node.Name, "stat", "-c", "%a", hosts); mode != "600" {
		t.Errorf("%s holds the credential with mode %s, want 600", hosts, mode)
	}
	if content, _ := execOut(t, rt, node.Name, "cat", hosts); strings.Contains(content, cred.basic()) || !strings.Contains(content, "Authorization") {
		t.Errorf("%s does not hold the namespace's credential, or holds the host's", hosts)
	}
	ref := r.Host() + "/test/app:v1"
	criPull := func() (string, int) {
		return execOut(t, rt, node.Name, "/usr/local/bin/cripull", "/run/containerd/containerd.sock", ref)
	}
	copyCRIPull(t, rt, node.Name)
	out, code := criPull()
	if code != 0 {
		t.Fatalf("the node's containerd could not pull %s with the credential (exit %d):\n%s", ref, code, out)
	}
	t.Logf("pulled with the credential through CRI: %s", out)
	// Without it, the same pull is refused: the header is what lets the node in.
	if _, code := execOut(t, rt, node.Name, "sed", "-i", "/header/,$d", hosts); code != 0 {
		t.Fatal("removing the header from hosts.toml failed")
	}
	if out, code := execOut(t, rt, node.Name, "ctr", "--namespace", "k8s.io", "images", "rm", ref); code != 0 {
		t.Fatalf("removing the pulled image: %s", out)
	}
	out, code = criPull()
	if code == 0 || !strings.Contains(out, "401") && !strings.Contains(strings.ToLower(out), "unauthorized") {
		t.Fatalf("pulling without the credential: exit %d, %s; want 401 Unauthorized", code, out)
	}
	t.Logf("refused without the credential: %s", out)
}

// On a registry with a user per namespace, team-a's user pushes under team-a/ only: a push into
// team-b/ is refused (403 DENIED naming team-a/), while it pulls team-b's images and the
// host's user pushes anywhere. A tag keeps naming its image: pushing another under it is
// refused (TAG_INVALID), the same image again is not; a registry with mutable tags lets it
// move.
func TestRegistryPushPrefixesAndImmutableTagsOnTheEngine(t *testing.T) {
	rt := dockerenv.Engine(t)
	m := NewManager(rt, ManagerOptions{})
	ctx := context.Background()
	r := engineRegistry(t, m, rt, RegistrySpec{Namespaces: []string{"team-a", "team-b"}, Auth: true})
	host, err := m.RegistryCredential(ctx, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	teamA, err := m.namespaceCredential(ctx, r, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pushRandom(r, "team-a/app", as(teamA)); err != nil {
		t.Fatalf("team-a pushing team-a/app:v1: %v", err)
	}
	_, err = pushRandom(r, "team-b/app", as(teamA))
	if err == nil || !strings.Contains(err.Error(), "DENIED") || !strings.Contains(err.Error(), "team-a/") {
		t.Errorf("team-a pushing team-b/app:v1: %v, want 403 DENIED naming team-a/", err)
	}
	if _, err := pushRandom(r, "team-b/app", as(host)); err != nil {
		t.Fatalf("the host pushing team-b/app:v1: %v", err)
	}
	ref, _ := name.ParseReference(r.Host()+"/team-b/app:v1", name.Insecure)
	if _, err := remote.Image(ref, as(teamA)); err != nil {
		t.Errorf("team-a pulling team-b/app:v1: %v", err)
	}

	// The tag team-a/app:v1 names the image pushed first.
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pushImage(r, "team-a/app:v2", img, as(teamA)); err != nil {
		t.Fatalf("pushing team-a/app:v2: %v", err)
	}
	if _, err := pushImage(r, "team-a/app:v2", img, as(teamA)); err != nil {
		t.Errorf("pushing the same image as team-a/app:v2 again: %v", err)
	}
	for _, cred := range []*RegistryCredential{teamA, host} {
		_, err := pushRandom(r, "team-a/app", as(cred))
		if err == nil || !strings.Contains(err.Error(), "TAG_INVALID") || !strings.Contains(err.Error(), "tag v1") {
			t.Errorf("%s pushing another image as team-a/app:v1: %v, want TAG_INVALID naming the tag", cred.Username, err)
		}
	}

	mutable := engineRegistry(t, m, rt, RegistrySpec{Namespaces: []string{testNamespace}, MutableTags: true})
	for range 2 {
		if _, err := pushRandom(mutable, "test/app"); err != nil {
			t.Errorf("pushing an image as test/app:v1 on a registry with mutable tags: %v", err)
		}
	}
}

// copyCRIPull builds testdata/cripull, a client of containerd's CRI image service (the kubelet's
// way to pull; node images have no crictl), into a node's /usr/local/bin.
func copyCRIPull(t *testing.T, rt container.Runtime, node string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "cripull")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/cripull")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building cripull: %v\n%s", err, msg)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "cripull", Mode: 0o755, Size: int64(len(bin))})
	_, _ = tw.Write(bin)
	_ = tw.Close()
	if err := rt.CopyToContainer(context.Background(), node, "/usr/local/bin", &buf); err != nil {
		t.Fatal(err)
	}
}
