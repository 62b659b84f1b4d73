package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/docker/internal/runner"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

func TestCollectLogsWritesWhatTheEngineKnowsAndRedactsBootstrapSecrets(t *testing.T) {
	ctx := context.Background()
	rt := fake.New("node:v1")
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "c1"}
	if _, err := m.EnsureNetwork(ctx, key, "c1"); err != nil {
		t.Fatal(err)
	}
	node, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "m1", Image: "node:v1", Role: RoleWorker, Network: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	const token = "abcdef.0123456789abcdef"
	rt.WithContainer(node.Name, func(c *fake.Container) {
		c.Files[m.bootstrap.Path(runner.OutputFile)] = []byte("kubeadm join 172.18.0.3:6443 --token " + token + "\n")
		c.Logs = append(c.Logs, "systemd is up")
	})
	rt.SetExec(func(_ context.Context, c *fake.Container, opts container.ExecOptions) (int, error) {
		switch opts.Cmd[0] {
		case "cat":
			_, _ = opts.Stdout.Write(c.Files[opts.Cmd[1]])
			return 0, nil
		case "sh":
			tw := tar.NewWriter(opts.Stdout)
			for name, content := range map[string]string{"pods/kube-system_etcd/etcd/0.log": "etcd log", "../escape": "x"} {
				_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
				_, _ = tw.Write([]byte(content))
			}
			_ = tw.Close()
			return 0, nil
		}
		_, _ = opts.Stderr.Write([]byte("not in the fake"))
		return 127, nil
	})

	dir := t.TempDir()
	node, _ = m.FindNode(ctx, key, "m1")
	if err := node.CollectLogs(ctx, dir); err != nil {
		t.Fatal(err)
	}
	out := read(t, dir, "bootstrap-output.log")
	if strings.Contains(out, token) || !strings.Contains(out, "kubeadm join") {
		t.Errorf("bootstrap output not redacted or missing: %q", out)
	}
	if !strings.Contains(read(t, dir, "inspect.json"), node.Name) || !strings.Contains(read(t, dir, "console.log"), "systemd is up") {
		t.Error("inspect data or console missing")
	}
	if got := read(t, dir, "pods/kube-system_etcd/etcd/0.log"); got != "etcd log" {
		t.Errorf("pod log %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("a path leaving the directory was written")
	}
	if got := read(t, dir, "kubelet.log"); !strings.Contains(got, "journalctl exited 127: not in the fake") {
		t.Errorf("a failing command should say so in its file: %q", got)
	}

	// A stopped node: only what the engine knows.
	rt.StopContainer(node.Name, 137)
	node, _ = m.FindNode(ctx, key, "m1")
	stopped := t.TempDir()
	if err := node.CollectLogs(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(stopped)
	if len(entries) != 2 {
		t.Errorf("a stopped node's logs: %v, want inspect.json and console.log", entries)
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
