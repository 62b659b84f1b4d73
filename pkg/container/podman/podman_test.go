package podman_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	"github.com/dockyard-dev/dockyard/pkg/container/podman"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

const testLabel = "dockyard.x-k8s.io/runtime-test"

// testImage is the haproxy image the project builds (DOCKYARD_TEST_LB_IMAGE overrides it, as
// for the other engines' tests); it has sh, sleep, cat, printenv and hostname.
func testImage() string {
	if v := os.Getenv("DOCKYARD_TEST_LB_IMAGE"); v != "" {
		return v
	}
	return "localhost/dockyard/haproxy:latest"
}

// engine connects to the Podman engine (the run's endpoint, else the rootful socket); when none
// answers, it fails if the run chose Podman and skips loudly otherwise (dockerenv.Unavailable).
func engine(t *testing.T) *podman.Runtime {
	t.Helper()
	endpoint := dockerenv.EngineEndpoint("podman")
	rt, err := podman.New(endpoint)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = rt.Info(ctx)
	}
	if err != nil {
		dockerenv.Unavailable(t, "podman", fmt.Sprintf("NO PODMAN ENGINE at %q: %v. These tests need a rootful Podman API service: run hack/ensure-podman.sh", endpoint, err))
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// engineTest returns the engine, with the test image present, and a label value unique to
// the test; everything carrying it is removed before (an earlier run may have been killed)
// and after.
func engineTest(t *testing.T) (*podman.Runtime, map[string]string) {
	t.Helper()
	rt := engine(t)
	ok, err := rt.ImageExists(context.Background(), testImage())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		dockerenv.Unavailable(t, "podman", fmt.Sprintf("image %s is missing from Podman: run `make engine-images CONTAINER_RUNTIME=podman`", testImage()))
	}
	labels := map[string]string{testLabel: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))}
	sweep := func() { conformance.Sweep(context.Background(), t, rt, labels) }
	sweep()
	t.Cleanup(sweep)
	return rt, labels
}

func subject(rt container.Runtime, labels map[string]string, prefix string) conformance.Subject {
	return conformance.Subject{
		Runtime: rt, Image: testImage(), Labels: labels, Prefix: prefix,
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{"exec sleep 600"},
		CutsUnreadStdinOutput: true,
	}
}

func TestConformanceOnPodman(t *testing.T) {
	rt, labels := engineTest(t)
	conformance.Run(t, subject(rt, labels, "dockyard-pm-conf"))
}

// Podman's volume label filter matches volumes carrying ANY of the labels: the runtime must
// return only those carrying all of them.
func TestVolumeLabelsAreAllMatchedOnPodman(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	mine := map[string]string{testLabel: labels[testLabel], "dockyard.x-k8s.io/machine": "mine"}
	theirs := map[string]string{testLabel: labels[testLabel], "dockyard.x-k8s.io/machine": "theirs"}
	for name, l := range map[string]map[string]string{"dockyard-pm-vol-mine": mine, "dockyard-pm-vol-theirs": theirs} {
		if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: name, Labels: l}); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := rt.ListVolumes(ctx, mine)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Name != "dockyard-pm-vol-mine" {
		t.Errorf("volumes with %v: %+v, want only dockyard-pm-vol-mine", mine, vs)
	}
}

// Removing a running container does not wait for a stop timeout (the compatible API waits 10s).
func TestRemovalIsPromptOnPodman(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	name := "dockyard-pm-remove"
	s := subject(rt, labels, name)
	if err := rt.CreateContainer(ctx, container.ContainerSpec{Name: name, Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Cmd, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := rt.RemoveContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("removing a running container took %s", took)
	}
}

// A network removed behind the runtime's back (Podman emits no network events) is reported
// by the stream's poll.
func TestNetworkRemovedElsewhereIsReportedOnPodman(t *testing.T) {
	rt, labels := engineTest(t)
	other := engine(t) // another client, as another process would be
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := "dockyard-pm-net-elsewhere"
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: name, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	events, errs := rt.Events(ctx, labels)
	time.Sleep(500 * time.Millisecond) // the stream lists the networks it knows first
	if err := other.RemoveNetwork(ctx, name); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Type == container.EventNetwork && e.Action == "destroy" && e.Name == name {
				return
			}
		case err := <-errs:
			t.Fatalf("the stream ended: %v", err)
		case <-timeout:
			t.Fatalf("no destroy event of network %s", name)
		}
	}
}

// An image loaded under a short docker.io name (Podman stores docker.io/library/...) is found
// under either form, and removed through either.
func TestShortImageNamesOnPodman(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	short := "dockyard-test-short:" + labels[testLabel]
	var archive bytes.Buffer
	tag, err := name.NewTag(short)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Config(empty.Image, v1.Config{Labels: map[string]string{"short": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.Write(tag, img, &archive); err != nil {
		t.Fatal(err)
	}
	if err := rt.LoadImages(ctx, &archive); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveImage(context.Background(), short) })
	for _, ref := range []string{short, "docker.io/library/" + short, "docker.io/" + short} {
		if ok, err := rt.ImageExists(ctx, ref); !ok || err != nil {
			t.Errorf("ImageExists(%s) of a loaded image: %v %v", ref, ok, err)
		}
		if got, err := rt.InspectImage(ctx, ref); err != nil || got.Labels["short"] != "yes" || !strings.HasPrefix(got.ID, "sha256:") {
			t.Errorf("InspectImage(%s): %+v %v", ref, got, err)
		}
	}
	if err := rt.RemoveImage(ctx, short); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{short, "docker.io/library/" + short} {
		if ok, err := rt.ImageExists(ctx, ref); ok || err != nil {
			t.Errorf("ImageExists(%s) of a removed image: %v %v", ref, ok, err)
		}
	}
	info, err := rt.Info(ctx)
	if err != nil || info.Name != "podman" || info.CgroupDriver == "" || info.Version == "" {
		t.Errorf("info %+v %v", info, err)
	}
}

// A container created as Dockyard creates nodes (terminal, systemd's stop signal, a restart
// policy, every capability but one, all devices, no confinement, a private cgroup namespace,
// tmpfs, a /var volume, an optional bind whose source is missing) on Docker's default network
// runs, reports its address on "bridge", answers signals and gives its terminal's last lines.
func TestNodeLikeContainerOnPodman(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	name := "dockyard-pm-nodelike"
	if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: name + "-var", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	spec := container.ContainerSpec{
		Name: name, Hostname: name, Image: testImage(), Labels: labels, Network: "bridge",
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{"trap 'echo hup' HUP; for i in 1 2 3 4 5; do echo line$i; done; while :; do sleep 1; done"},
		Tty: true, StopSignal: "SIGRTMIN+3", RestartPolicy: "unless-stopped",
		Mounts: []container.Mount{
			{Type: container.MountVolume, Source: name + "-var", Target: "/var"},
			{Type: container.MountTmpfs, Target: "/run"},
			{Type: container.MountTmpfs, Target: "/tmp"},
			{Type: container.MountBind, Source: "/dockyard-pm-missing-modules", Target: "/lib/modules", ReadOnly: true, Optional: true},
		},
		Security: container.SecuritySpec{
			CapAdd: []string{"ALL"}, CapDrop: []string{"SYS_RESOURCE"}, DeviceCgroupRules: []string{"a *:* rwm"},
			Unconfined: true, PrivateCgroupNamespace: true,
		},
		Resources: container.Resources{NanoCPUs: 1_000_000_000, MemoryBytes: 512 << 20},
	}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	c, err := rt.InspectContainer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Running || c.Networks["bridge"].IPv4 == "" {
		t.Errorf("a node-like container on bridge: running %v networks %v", c.Running, c.Networks)
	}
	// The shell traps HUP before it prints: once line5 is out, a HUP is caught, not fatal (a
	// HUP sent before the trap killed the shell, and the restart policy began it again).
	dockerenv.WaitFor(t, 10*time.Second, "line5", func() error {
		logs, err := rt.ContainerLogs(ctx, name, 5)
		if err != nil {
			return err
		}
		if !strings.Contains(logs, "line5") {
			return errors.Errorf("last lines %q, want line5", logs)
		}
		return nil
	})
	if err := rt.SignalContainer(ctx, name, "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	dockerenv.WaitFor(t, 10*time.Second, "the last lines", func() error {
		logs, err := rt.ContainerLogs(ctx, name, 2)
		if err != nil {
			return err
		}
		if got := strings.Fields(logs); len(got) != 2 || got[0] != "line5" || got[1] != "hup" {
			return errors.Errorf("last 2 lines %q, want line5 and hup", logs)
		}
		return nil
	})
}

// Pulling from a registry that cannot be reached fails, not hangs; loading garbage fails.
func TestImageErrorsOnPodman(t *testing.T) {
	rt, _ := engineTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := rt.PullImage(ctx, "registry.invalid/dockyard/nothing:v0"); err == nil {
		t.Error("pulling from an unreachable registry succeeded")
	}
	if err := rt.LoadImages(ctx, strings.NewReader("not a tar archive")); err == nil {
		t.Error("loading garbage succeeded")
	}
}
