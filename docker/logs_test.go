package docker

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
)

// Secrets as a node prints them: kubeadm init --upload-certs' output (the certificate key on
// the line after its name, prefixed by the journal), a CA's private key, a kubeconfig's key
// data and a service account token.
const (
	logToken   = "9a08jv.c0izixklcxtmnze7"
	logCertKey = "3c9a0f4b1e27d5c86a4e0d3b9f1c7a2e5d8b6f0a4c3e1d9b7a5f3e1c0b8d6f4a"
	logKeyBody = "MHcCAQEEIIo+uOy0vWf/HxjOkDSUTqwOyapRQ3XW/5ooeZ03axdIoAoGCCqGSM49"
	logJWT     = "eyJhbGciOiJSUzI1NiIsImtpZCI6IkRfWk1uZnEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06ZGVmYXVsdCJ9.TmljZVRyeUFfc2lnbmF0dXJl"
)

var (
	logKey       = "-----BEGIN EC PRIVATE KEY-----\n" + logKeyBody + "\nAwEHoUQDQgAEhZNiV2TmwayY5bYvliGJMCNKnaYMpKVy2rRcvu0hwbgr/ze9gzAh\n-----END EC PRIVATE KEY-----\n"
	logKeyData   = base64.StdEncoding.EncodeToString([]byte(logKey))
	logSecrets   = []string{logToken, "c0izixklcxtmnze7", logCertKey, logKeyBody, logKeyData[14:], logJWT}
	secretOutput = "Mar 03 10:12:01.123456 n dockyard-bootstrap.sh[812]: [upload-certs] Using certificate key:\n" +
		"Mar 03 10:12:01.123470 n dockyard-bootstrap.sh[812]: " + logCertKey + "\n" +
		"kubeadm join 172.18.0.3:6443 --token " + logToken + " --control-plane --certificate-key " + logCertKey + "\n" +
		logKey + "    client-key-data: " + logKeyData + "\nAuthorization: Bearer " + logJWT + "\n"
)

// logFixture is a cluster of the fake engine with a running node whose every command, file,
// pod log and console line carries secrets.
func logFixture(t *testing.T) (*Manager, *inmemory.Runtime, ClusterKey) {
	t.Helper()
	ctx := context.Background()
	rt := inmemory.New("node:v1", "lb:v1")
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "c1"}
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: "c1"}); err != nil {
		t.Fatal(err)
	}
	node, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "m1", Image: "node:v1", Role: RoleWorker, Network: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	rt.WithContainer(node.Name, func(c *inmemory.Container) {
		c.Logs = append(c.Logs, "systemd is up", secretOutput)
		c.State.Labels["note"] = logToken
	})
	rt.SetExec(func(_ context.Context, c *inmemory.Container, opts container.ExecOptions) (int, error) {
		switch opts.Cmd[0] {
		case "sh":
			if !strings.Contains(opts.Cmd[2], "tar -c") {
				break
			}
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			_, _ = zw.Write([]byte("rotated etcd log " + secretOutput))
			_ = zw.Close()
			tw := tar.NewWriter(opts.Stdout)
			for _, f := range []struct{ name, content string }{
				{"pods/kube-system_etcd/etcd/0.log", "etcd log " + secretOutput},
				{"pods/kube-system_etcd/etcd/0.log.20250303-101201.gz", gz.String()},
				{"../escape", "x"},
				{"pods/../../escape", "x"},
			} {
				_ = tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.content)), Typeflag: tar.TypeReg})
				_, _ = tw.Write([]byte(f.content))
			}
			_ = tw.Close()
			return 0, nil
		case "kubelet":
			_, _ = opts.Stderr.Write([]byte("not in the fake"))
			return 127, nil
		}
		_, _ = opts.Stdout.Write([]byte(strings.Join(opts.Cmd, " ") + "\n" + secretOutput))
		return 0, nil
	})
	return m, rt, key
}

func openLogDir(t *testing.T, path string, overwrite bool) *logdir.Dir {
	t.Helper()
	d, err := logdir.Open(path, overwrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func collectNode(t *testing.T, m *Manager, key ClusterKey, dir *logdir.Dir) error {
	t.Helper()
	node, err := m.FindNode(context.Background(), key, "m1")
	if err != nil {
		t.Fatal(err)
	}
	return node.CollectLogs(context.Background(), dir)
}

func TestCollectLogsWritesWhatTheEngineKnowsAndRedactsEveryFile(t *testing.T) {
	m, rt, key := logFixture(t)
	dir := filepath.Join(t.TempDir(), "logs")
	if err := collectNode(t, m, key, openLogDir(t, dir, false)); err != nil {
		t.Fatal(err)
	}
	files := checkTree(t, dir)
	want := []string{"bootstrap-output.log", "bootstrap-state", "bootstrap-unit.log", "console.log", "containerd.log", "containers.txt",
		"images.txt", "inspect.json", "journal.log", "kubelet-version.txt", "kubelet.log",
		"pods/kube-system_etcd/etcd/0.log", "pods/kube-system_etcd/etcd/0.log.20250303-101201", "processes.txt"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("files %v, want %v", files, want)
	}
	for file, content := range map[string]string{
		"kubelet.log":                                      "--unit=kubelet.service",
		"pods/kube-system_etcd/etcd/0.log":                 "etcd log",
		"pods/kube-system_etcd/etcd/0.log.20250303-101201": "rotated etcd log",
		"console.log":                                      "systemd is up",
		"inspect.json":                                     "c1-m1",
		"kubelet-version.txt":                              "kubelet exited 127: not in the fake",
		"journal.log":                                      "[upload-certs] Using certificate key:",
	} {
		if got := read(t, dir, file); !strings.Contains(got, content) {
			t.Errorf("%s does not hold %q:\n%s", file, content, got)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("a path leaving the directory was written")
	}

	// A stopped node: only what the engine knows.
	node, _ := m.FindNode(context.Background(), key, "m1")
	rt.StopContainer(node.Name, 137)
	stopped := t.TempDir()
	if err := collectNode(t, m, key, openLogDir(t, stopped, false)); err != nil {
		t.Fatal(err)
	}
	if files := checkTree(t, stopped); strings.Join(files, " ") != "console.log inspect.json" {
		t.Errorf("a stopped node's logs: %v, want inspect.json and console.log", files)
	}
}

// checkTree walks a collection: every directory under dir 0700, every file 0600 and free of
// the fixture's secrets. It returns the files' paths.
func checkTree(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case fi.IsDir() && rel != "." && fi.Mode().Perm() != 0o700:
			t.Errorf("directory %s is %v, want 0700", rel, fi.Mode().Perm())
		case fi.Mode().IsRegular():
			files = append(files, rel)
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("file %s is %v, want 0600", rel, fi.Mode().Perm())
			}
			data := read(t, dir, rel)
			for _, secret := range logSecrets {
				if strings.Contains(data, secret) {
					t.Errorf("%s shows the secret %s:\n%s", rel, secret, data)
				}
			}
		case !fi.IsDir():
			t.Errorf("%s is a %v", rel, fi.Mode().Type())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Directories are 0700 and files 0600 whatever the umask: a permissive one (0) does not open
// them, a strict one (0277, no write for the owner) does not keep the collection from writing.
func TestLogDirModesWhateverTheUmask(t *testing.T) {
	for _, umask := range []int{0, 0o277} {
		m, _, key := logFixture(t)
		old := syscall.Umask(umask)
		dir := filepath.Join(t.TempDir(), "missing", "parent", "logs")
		out, err := logdir.Open(dir, false)
		if err == nil {
			var node *logdir.Dir
			if node, err = out.Dir("c1-m1"); err == nil {
				err = collectNode(t, m, key, node)
				node.Close()
			}
			out.Close()
		}
		syscall.Umask(old)
		if err != nil {
			t.Fatalf("umask %#o: %v", umask, err)
		}
		checkTree(t, filepath.Dir(filepath.Dir(dir)))
	}
}

// A link already in the target tree is never written through, whether it names a file
// (journal.log -> a file elsewhere) or a directory (the load balancer's -> a directory
// elsewhere), or stays inside the tree, where os.Root alone would follow it (kubelet.log ->
// a file of the tree, pods -> a directory of the tree): with --overwrite the link itself is
// replaced.
func TestCollectLogsNeverFollowsALink(t *testing.T) {
	m, _, key := logFixture(t)
	dir, elsewhere := t.TempDir(), t.TempDir()
	victim := filepath.Join(elsewhere, "shadow")
	node, lb, other := filepath.Join(dir, "c1-m1"), filepath.Join(dir, "c1-lb"), filepath.Join(dir, "other")
	for _, d := range []string{node, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for path, content := range map[string]string{victim: "root:x:0:0", filepath.Join(dir, "kept"): "kept"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		lb:                                 elsewhere,
		filepath.Join(node, "journal.log"): victim,
		filepath.Join(node, "kubelet.log"): filepath.Join(dir, "kept"),
		filepath.Join(node, "pods"):        other,
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}

	// Without --overwrite, the tree is refused as it is not empty.
	if _, err := logdir.Open(dir, false); !errors.Is(err, logdir.ErrNotEmpty) {
		t.Fatalf("a directory holding links: %v, want logdir.ErrNotEmpty", err)
	}

	out := openLogDir(t, dir, true)
	for _, name := range []string{"c1-m1", "c1-lb"} {
		d, err := out.Dir(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "c1-m1" {
			err = collectNode(t, m, key, d)
		} else {
			err = d.WriteFile("haproxy.cfg", []byte("global\n"))
		}
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(victim); string(got) != "root:x:0:0" {
		t.Errorf("the link's target was written: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "kept")); string(got) != "kept" {
		t.Errorf("the in-tree link's target was written: %q", got)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 1 {
		t.Errorf("written through a directory link: %v", entries)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Errorf("written through an in-tree directory link: %v", entries)
	}
	for _, path := range []string{node + "/journal.log", node + "/kubelet.log", node + "/pods", lb} {
		if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("%s: %v, %v: the link was not replaced", path, fi, err)
		}
	}
	if got := read(t, node, "journal.log"); !strings.Contains(got, "journalctl") {
		t.Errorf("journal.log: %q", got)
	}
}

func TestCollectLoadBalancerLogsOfTheControlPlaneAndOfServices(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("lb:v1")
	inmemory.NewNodes(rt) // haproxy confirms each load in its log
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "c1"}
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: "c1"}); err != nil {
		t.Fatal(err)
	}
	lb, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: "lb:v1", Network: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsureServiceLoadBalancer(ctx, ServiceLoadBalancerSpec{Cluster: key, Service: "default/web", UID: "uid-web", Image: "lb:v1", Network: "c1",
		Ports: []haproxy.ServicePort{{Port: 80, NodePort: 30080}}, Nodes: []haproxy.ServiceBackend{{Name: "n1", Address: "172.30.0.4"}}}); err != nil {
		t.Fatal(err)
	}
	services, err := m.ServiceLoadBalancers(ctx, key)
	if err != nil || len(services) != 1 {
		t.Fatalf("Service load balancers %v, %v", services, err)
	}
	rt.WithContainer(lb.Name, func(c *inmemory.Container) { c.Logs = append(c.Logs, secretOutput) })
	dir := t.TempDir()
	out := openLogDir(t, dir, false)
	for name, collect := range map[string]func(*logdir.Dir) error{
		"lb":  func(d *logdir.Dir) error { return lb.CollectLogs(ctx, d) },
		"web": func(d *logdir.Dir) error { return services[0].CollectLogs(ctx, d) },
	} {
		d, err := out.Dir(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := collect(d); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		d.Close()
	}
	files := checkTree(t, dir)
	if strings.Join(files, " ") != "lb/console.log lb/haproxy.cfg lb/inspect.json web/console.log web/haproxy.cfg web/inspect.json" {
		t.Errorf("files %v", files)
	}
	if got := read(t, dir, "web/haproxy.cfg"); !strings.Contains(got, "server n1 172.30.0.4:30080") {
		t.Errorf("the Service's haproxy.cfg:\n%s", got)
	}
}

func TestLimitWriterKeepsTheStartAndReportsEverythingWritten(t *testing.T) {
	var b bytes.Buffer
	l := &limitWriter{w: &b, left: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := l.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if b.String() != "abcde" || !l.dropped {
		t.Errorf("kept %q dropped=%v", b.String(), l.dropped)
	}
}

func read(t *testing.T, dir, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A container removed between the listing and the collection (a Service's load balancer
// replaced, a node scaled away) is no error: its directory says so.
func TestCollectLogsOfAContainerRemovedSinceItWasListed(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("lb:v1", "node")
	inmemory.NewNodes(rt)
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "c1"}
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsureServiceLoadBalancer(ctx, ServiceLoadBalancerSpec{Cluster: key, Service: "default/web", UID: "uid-web", Image: "lb:v1", Network: "c1",
		Ports: []haproxy.ServicePort{{Port: 80, NodePort: 30080}}, Nodes: []haproxy.ServiceBackend{{Name: "n1", Address: "172.30.0.4"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "c1-md-1", Image: "node", Role: RoleWorker, Network: "c1"}); err != nil {
		t.Fatal(err)
	}
	services, err := m.ServiceLoadBalancers(ctx, key)
	if err != nil || len(services) != 1 {
		t.Fatalf("Service load balancers %v, %v", services, err)
	}
	nodes, err := m.Nodes(ctx, key, "")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes %v, %v", nodes, err)
	}
	for _, name := range []string{services[0].Name, nodes[0].Name} {
		if err := rt.RemoveContainer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	out := openLogDir(t, dir, false)
	for name, collect := range map[string]func(*logdir.Dir) error{
		"web":  func(d *logdir.Dir) error { return services[0].CollectLogs(ctx, d) },
		"node": func(d *logdir.Dir) error { return nodes[0].CollectLogs(ctx, d) },
	} {
		d, err := out.Dir(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := collect(d); err != nil {
			t.Errorf("%s: %v, want no error for a container removed since it was listed", name, err)
		}
		d.Close()
	}
	if files := checkTree(t, dir); strings.Join(files, " ") != "node/inspect.json node/removed.txt web/inspect.json web/removed.txt" {
		t.Errorf("files %v", files)
	}
	if got := read(t, dir, "web/removed.txt"); !strings.Contains(got, services[0].Name+" was removed after it was listed") {
		t.Errorf("removed.txt: %s", got)
	}
}
