package dockerengine_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	"github.com/dockyard-dev/dockyard/pkg/container/dockerengine"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

const testLabel = "dockyard.x-k8s.io/runtime-test"

// engineTest returns the real engine and a label value unique to this test, and removes
// everything carrying it afterwards (and before, in case an earlier run was killed).
func engineTest(t *testing.T) (*dockerengine.Runtime, map[string]string) {
	t.Helper()
	rt := dockerenv.Runtime(t)
	dockerenv.RequireImages(t, rt, dockerenv.LoadBalancerImage())
	labels := map[string]string{testLabel: strings.ToLower(t.Name())}
	sweep := func() {
		ctx := context.Background()
		cs, _ := rt.ListContainers(ctx, labels)
		for _, c := range cs {
			_ = rt.RemoveContainer(ctx, c.Name)
		}
		vs, _ := rt.ListVolumes(ctx, labels)
		for _, v := range vs {
			_ = rt.RemoveVolume(ctx, v.Name)
		}
		ns, _ := rt.ListNetworks(ctx, labels)
		for _, n := range ns {
			_ = rt.RemoveNetwork(ctx, n.Name)
		}
	}
	sweep()
	t.Cleanup(sweep)
	return rt, labels
}

func TestContainerLifecycleOnARealEngine(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	name := "dockyard-rt-test-lifecycle"

	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: name + "-net", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	net, err := rt.InspectNetwork(ctx, name+"-net")
	if err != nil {
		t.Fatal(err)
	}
	if len(net.Subnets) == 0 || len(net.Gateways) == 0 || net.Labels[testLabel] == "" {
		t.Errorf("network: %+v", net)
	}
	if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: name + "-vol", Labels: labels}); err != nil {
		t.Fatal(err)
	}

	spec := container.ContainerSpec{
		Name: name, Hostname: name, Image: dockerenv.LoadBalancerImage(), Labels: labels,
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{"echo started; exec sleep 600"},
		Network: name + "-net",
		Ports:   []container.PortMapping{{ContainerPort: 8080, HostIP: "127.0.0.1"}},
		Mounts: []container.Mount{
			{Type: container.MountVolume, Source: name + "-vol", Target: "/data"},
			{Type: container.MountTmpfs, Target: "/scratch"},
		},
		StopSignal: "SIGTERM",
		Resources:  container.Resources{NanoCPUs: 500_000_000, MemoryBytes: 256 << 20},
	}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.CreateContainer(ctx, spec); err == nil {
		t.Error("creating a container twice should fail")
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}

	c, err := rt.InspectContainer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Running || c.State != "running" || c.Networks[name+"-net"].IPv4 == "" || c.StartedAt.IsZero() {
		t.Errorf("inspect: %+v", c)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8080 || c.Ports[0].HostIP != "127.0.0.1" || c.Ports[0].HostPort == 0 {
		t.Errorf("ports: %+v", c.Ports)
	}
	list, err := rt.ListContainers(ctx, labels)
	if err != nil || len(list) != 1 || list[0].Name != name || !list[0].Running {
		t.Errorf("list by label: %+v %v", list, err)
	}
	net, _ = rt.InspectNetwork(ctx, name+"-net")
	if len(net.Containers) != 1 || net.Containers[0] != name {
		t.Errorf("network containers: %v", net.Containers)
	}

	// Exec: stdin streams in, stdout comes back, exit codes are reported without an error.
	secret := "not-in-any-argument"
	var out bytes.Buffer
	code, err := rt.Exec(ctx, name, container.ExecOptions{
		Cmd: []string{"sh", "-c", "cat > /data/secret && cat /data/secret && echo err >&2"}, Stdin: strings.NewReader(secret),
		Stdout: &out, Stderr: io.Discard,
	})
	if err != nil || code != 0 || out.String() != secret {
		t.Errorf("exec with stdin: code %d err %v out %q", code, err, out.String())
	}
	code, err = rt.Exec(ctx, name, container.ExecOptions{Cmd: []string{"sh", "-c", "exit 3"}})
	if err != nil || code != 3 {
		t.Errorf("exit code: %d %v", code, err)
	}

	// An exec that outlives its context returns promptly.
	short, cancel := context.WithTimeout(ctx, time.Second)
	start := time.Now()
	_, err = rt.Exec(short, name, container.ExecOptions{Cmd: []string{"sleep", "30"}})
	cancel()
	if err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("exec past its deadline: err %v after %s", err, time.Since(start))
	}

	// Copy in and out through the archive API.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o640, Size: 5})
	_, _ = tw.Write([]byte("hello"))
	_ = tw.Close()
	if err := rt.CopyToContainer(ctx, name, "/scratch", &buf); err != nil {
		t.Fatal(err)
	}
	rc, err := rt.CopyFromContainer(ctx, name, "/scratch/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	content, _ := io.ReadAll(tr)
	rc.Close()
	if string(content) != "hello" {
		t.Errorf("copied back %q", content)
	}

	logs, err := rt.ContainerLogs(ctx, name, 10)
	if err != nil || !strings.Contains(logs, "started") {
		t.Errorf("logs %q %v", logs, err)
	}
	if err := rt.SignalContainer(ctx, name, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	dockerenv.WaitFor(t, 20*time.Second, "container to exit", func() error {
		c, err := rt.InspectContainer(ctx, name)
		if err != nil {
			return err
		}
		if c.Running {
			return errors.Errorf("still %s", c.State)
		}
		return nil
	})

	if err := rt.RemoveContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveContainer(ctx, name); err != nil {
		t.Errorf("removing a missing container: %v", err)
	}
	if _, err := rt.InspectContainer(ctx, name); !container.IsNotFound(err) {
		t.Errorf("inspect after removal: %v", err)
	}
	vols, _ := rt.ListVolumes(ctx, labels)
	if len(vols) != 1 {
		t.Errorf("named volume should outlive its container: %+v", vols)
	}
	for _, v := range vols {
		if err := rt.RemoveVolume(ctx, v.Name); err != nil {
			t.Error(err)
		}
	}
	if err := rt.RemoveNetwork(ctx, name+"-net"); err != nil {
		t.Error(err)
	}
	if _, err := rt.InspectNetwork(ctx, name+"-net"); !container.IsNotFound(err) {
		t.Errorf("inspect removed network: %v", err)
	}
}

// An optional bind mount whose source the engine's host lacks is left out (a node on a host
// without /lib/modules); one whose source exists is kept; a required one fails, naming it.
func TestOptionalBindMountsOnARealEngine(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	name := "dockyard-rt-test-optional-mount"
	missing := "/dockyard-test-missing-" + strings.ToLower(t.Name())
	spec := container.ContainerSpec{
		Name: name, Image: dockerenv.LoadBalancerImage(), Labels: labels,
		Entrypoint: []string{"sleep"}, Cmd: []string{"600"},
		Mounts: []container.Mount{
			{Type: container.MountBind, Source: missing, Target: "/missing", ReadOnly: true, Optional: true},
			{Type: container.MountBind, Source: "/etc", Target: "/host-etc", ReadOnly: true, Optional: true},
		},
	}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatalf("an optional mount with a missing source should be left out: %v", err)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]int{"test -e /missing": 1, "test -f /host-etc/hostname": 0} {
		code, err := rt.Exec(ctx, name, container.ExecOptions{Cmd: []string{"sh", "-c", cmd}})
		if err != nil || code != want {
			t.Errorf("%s: exit %d, want %d (%v)", cmd, code, want, err)
		}
	}

	spec.Name = name + "-required"
	spec.Mounts[0].Optional = false
	err := rt.CreateContainer(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("a required mount with a missing source: want an error naming %s, got %v", missing, err)
	}
}

func TestImagesOnARealEngine(t *testing.T) {
	rt, _ := engineTest(t)
	ctx := context.Background()
	if ok, err := rt.ImageExists(ctx, "localhost/dockyard/does-not-exist:v0"); err != nil || ok {
		t.Errorf("missing image reported %v %v", ok, err)
	}
	// Save an image and load it back: the stream Dockyard preloads into nodes.
	stream, err := rt.SaveImages(ctx, []string{dockerenv.LoadBalancerImage()})
	if err != nil {
		t.Fatal(err)
	}
	saved, err := io.ReadAll(stream)
	stream.Close()
	if err != nil || len(saved) < 1<<20 {
		t.Fatalf("saved %d bytes: %v", len(saved), err)
	}
	if err := rt.LoadImages(ctx, bytes.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	// A stream that is not an image archive is an error, not a silent no-op.
	if err := rt.LoadImages(ctx, strings.NewReader("not a tar archive")); err == nil {
		t.Error("loading garbage succeeded")
	}
	img, err := rt.InspectImage(ctx, dockerenv.LoadBalancerImage())
	if err != nil || !strings.HasPrefix(img.ID, "sha256:") {
		t.Errorf("inspect image: %+v %v", img, err)
	}
	if _, err := rt.InspectImage(ctx, "localhost/dockyard/does-not-exist:v0"); !container.IsNotFound(err) {
		t.Errorf("inspect missing image: %v", err)
	}
	if err := rt.RemoveImage(ctx, "localhost/dockyard/does-not-exist:v0"); err != nil {
		t.Errorf("removing a missing image: %v", err)
	}
	// Pulling from a registry that cannot be reached fails with an error, not a hang.
	pullCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := rt.PullImage(pullCtx, "registry.invalid/dockyard/nothing:v0"); err == nil {
		t.Error("pulling from an unreachable registry succeeded")
	}
	info, err := rt.Info(ctx)
	if err != nil || info.Name != "docker" || info.Version == "" {
		t.Errorf("info %+v %v", info, err)
	}
}

// TestRuntimeConformsOnARealEngine runs the suite every runtime (and the fake) passes.
func TestRuntimeConformsOnARealEngine(t *testing.T) {
	rt, labels := engineTest(t)
	conformance.Run(t, conformance.Subject{
		Runtime: rt, Image: dockerenv.LoadBalancerImage(), Labels: labels, Prefix: "dockyard-rt-conf",
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{"exec sleep 600"},
	})
}
