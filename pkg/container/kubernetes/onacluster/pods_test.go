package onacluster_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

func waitState(ctx context.Context, t *testing.T, rt container.Runtime, name string, ok func(*container.Container) bool, what string) *container.Container {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		c, err := rt.InspectContainer(ctx, name)
		if err == nil && ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s is not %s after 90s: %+v %v", name, what, c, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func execOut(ctx context.Context, t *testing.T, rt container.Runtime, name string, cmd ...string) string {
	t.Helper()
	var out bytes.Buffer
	code, err := rt.Exec(ctx, name, container.ExecOptions{Cmd: cmd, Stdout: &out, Stderr: &out})
	if err != nil || code != 0 {
		t.Fatalf("%v in %s: exit %d %v: %s", cmd, name, code, err, out.String())
	}
	return strings.TrimSpace(out.String())
}

// A container is a Pod held by its start gate until started; it runs with its hostname,
// environment, labels (one value Kubernetes refuses kept exactly), an address on its network
// and its port published by a Service; one that ends is reported exited with its exit code and
// starts again as a new Pod; removal is idempotent.
func TestPodLifecycle(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	network, name := "dockyard-k8s-life-net", "dockyard-k8s-life"
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: network, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"dockyard.x-k8s.io/machine": "default/md-0-abc", "io.x-k8s.kind.role": "worker"}
	for k, v := range labels {
		want[k] = v
	}
	spec := container.ContainerSpec{
		Name: name, Hostname: "life-host", Image: testImage(), Labels: want, Network: network,
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{"sleep 600 & wait; exit 4"},
		Env:   []string{"CONFORMANCE=yes"},
		Ports: []container.PortMapping{{ContainerPort: 6443, Protocol: "tcp", HostIP: "127.0.0.1"}},
		Mounts: []container.Mount{{Type: container.MountTmpfs, Target: "/run"},
			{Type: container.MountBind, Source: "/lib/modules-not-on-this-host", Target: "/lib/modules", Optional: true}},
		RestartPolicy: "no",
		Resources:     container.Resources{NanoCPUs: 500_000_000, MemoryBytes: 128 << 20, CPUShares: 512},
	}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if c, err := rt.InspectContainer(ctx, name); err != nil || c.Running || c.State != "created" {
		t.Fatalf("a created container: %+v %v, want created", c, err)
	}
	time.Sleep(2 * time.Second)
	if c, _ := rt.InspectContainer(ctx, name); c.State != "created" {
		t.Fatalf("a created container started by itself: %+v", c)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	c := waitState(ctx, t, rt, name, func(c *container.Container) bool { return c.Running }, "running")
	if c.Hostname != "life-host" || c.Image != testImage() || c.StartedAt.IsZero() || !container.MatchLabels(c.Labels, want) || len(c.Labels) != len(want) {
		t.Errorf("a running container: %+v", c)
	}
	if c.Networks[network].IPv4 == "" {
		t.Errorf("no address on %s: %+v", network, c.Networks)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 6443 || c.Ports[0].HostIP == "" || c.Ports[0].HostPort == 0 {
		t.Errorf("published ports %+v, want 6443 on the Service's address", c.Ports)
	}
	if got := execOut(ctx, t, rt, name, "sh", "-c", "echo $CONFORMANCE $(hostname)"); got != "yes life-host" {
		t.Errorf("environment and hostname: %q", got)
	}
	listed, err := rt.ListContainers(ctx, map[string]string{"dockyard.x-k8s.io/machine": "default/md-0-abc"})
	if err != nil || len(listed) != 1 || listed[0].Name != name {
		t.Errorf("listing by a label value Kubernetes refuses: %+v %v", listed, err)
	}
	if other, _ := rt.ListContainers(ctx, map[string]string{"dockyard.x-k8s.io/machine": "default/md-0-abd"}); len(other) != 0 {
		t.Errorf("listing by another value: %+v", other)
	}

	// Its command ends with exit code 4 once its sleep is gone.
	execOut(ctx, t, rt, name, "sh", "-c", "kill $(pidof sleep)")
	c = waitState(ctx, t, rt, name, func(c *container.Container) bool { return c.State == "exited" }, "exited")
	if c.ExitCode != 4 {
		t.Errorf("a container whose command exited 4 reports exit code %d", c.ExitCode)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	again := waitState(ctx, t, rt, name, func(c *container.Container) bool { return c.Running }, "running again")
	if again.ID == c.ID {
		t.Errorf("a Pod that ended started again as the same Pod %s", c.ID)
	}
	for range 2 {
		if err := rt.RemoveContainer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.InspectContainer(ctx, name); !container.IsNotFound(err) {
		t.Errorf("a removed container: %v", err)
	}
}

// A named volume is seeded from the image's files at its mount point when it is empty, and
// keeps what the container wrote when the container restarts (its Pod stays).
func TestVolumeSeededAndKeptAcrossRestarts(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	name, vol := "dockyard-k8s-vol", "dockyard-k8s-vol-var"
	if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: vol, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	spec := container.ContainerSpec{
		Name: name, Image: testImage(), Labels: labels, RestartPolicy: "unless-stopped",
		Entrypoint: []string{"sh", "-c"},
		// The first run writes a file and exits; the restarted one finds it and stays.
		Cmd:    []string{"if [ -e /etc/mine/once ]; then exec sleep 600; fi; date > /etc/mine/once; exit 7"},
		Mounts: []container.Mount{{Type: container.MountVolume, Source: vol, Target: "/etc/mine"}},
	}
	// /etc/mine does not exist in the image: seed /bin instead to see the seeding.
	spec.Mounts = append(spec.Mounts, container.Mount{Type: container.MountVolume, Source: vol + "-bin", Target: "/bin"})
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	waitState(ctx, t, rt, name, func(c *container.Container) bool { return c.Running }, "running after its restart")
	if got := execOut(ctx, t, rt, name, "sh", "-c", "ls /etc/mine; ls /bin | grep -c ."); !strings.HasPrefix(got, "once\n") {
		t.Errorf("the volume after a restart: %q, want the file the first run wrote and the seeded /bin", got)
	}
	if err := rt.RemoveVolume(ctx, vol); err == nil {
		t.Error("a volume a Pod mounts was removed")
	}
	// Copies in and out of a running Pod.
	var tarball bytes.Buffer
	writeTar(t, &tarball, "copied.txt", "hello")
	if err := rt.CopyToContainer(ctx, name, "/etc/mine", &tarball); err != nil {
		t.Fatal(err)
	}
	rc, err := rt.CopyFromContainer(ctx, name, "/etc/mine/copied.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := readTar(t, rc)
	if got["copied.txt"] != "hello" {
		t.Errorf("copied back: %v", got)
	}
	if _, err := rt.CopyFromContainer(ctx, name, "/etc/mine/absent"); !container.IsNotFound(err) {
		t.Errorf("copying a missing file: %v", err)
	}
	logs, err := rt.ContainerLogs(ctx, name, 5)
	if err != nil {
		t.Fatal(err)
	}
	_ = logs
}

// The event stream sees a Pod carrying the labels start, die (its command ends) and go, and a
// network go; a Pod without the labels is not seen.
func TestPodEvents(t *testing.T) {
	rt, labels := engineTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	network, name, stranger := "dockyard-k8s-ev-net", "dockyard-k8s-ev", "dockyard-k8s-ev-stranger"
	events, errs := rt.Events(ctx, labels)
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: network, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{name, stranger} {
		l := labels
		if n == stranger {
			l = map[string]string{testLabel: "stranger"}
		}
		spec := container.ContainerSpec{Name: n, Image: testImage(), Labels: l, Network: network, Entrypoint: []string{"sh", "-c"}, Cmd: []string{"sleep 3; exit 1"}}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	waitState(ctx, t, rt, name, func(c *container.Container) bool { return c.State == "exited" && c.ExitCode == 1 }, "exited with 1")
	for _, n := range []string{name, stranger} {
		if err := rt.RemoveContainer(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.RemoveNetwork(ctx, network); err != nil {
		t.Fatal(err)
	}
	want := []string{"container start " + name, "container die " + name, "container destroy " + name, "network destroy " + network}
	var got []string
	timeout := time.After(60 * time.Second)
	for len(got) < len(want) {
		select {
		case e := <-events:
			if e.Name == stranger {
				t.Errorf("an event of a Pod without the labels: %+v", e)
			}
			if e.Name != name && (e.Name != network || e.Action != "destroy") {
				continue
			}
			got = append(got, e.Type+" "+e.Action+" "+e.Name)
		case err := <-errs:
			t.Fatalf("the stream ended: %v (events so far %v)", err, got)
		case <-timeout:
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	cancel()
	select {
	case <-errs:
	case <-time.After(10 * time.Second):
		t.Error("the stream did not end with its context")
	}
}
