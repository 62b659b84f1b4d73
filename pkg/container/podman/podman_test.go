package podman_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	"github.com/dockyard-dev/dockyard/pkg/container/podman"
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

// engine connects to the Podman engine (DOCKYARD_PODMAN_ENDPOINT, else the rootful socket), or
// skips loudly when none answers; in CI (CI set) it fails instead.
func engine(t *testing.T) *podman.Runtime {
	t.Helper()
	endpoint := os.Getenv("DOCKYARD_PODMAN_ENDPOINT")
	rt, err := podman.New(endpoint)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = rt.Info(ctx)
	}
	if err != nil {
		msg := fmt.Sprintf("NO PODMAN ENGINE at %q: %v. These tests need a rootful Podman API service: run hack/ensure-podman.sh", endpoint, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, "\n*** SKIPPING PODMAN ENGINE TESTS *** "+msg)
		t.Skip(msg)
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
		t.Fatalf("image %s is missing from Podman: run `make engine-images CONTAINER_RUNTIME=podman`", testImage())
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

// Images Podman loads under a short docker.io name are found under either form.
func TestShortImageNamesOnPodman(t *testing.T) {
	rt, _ := engineTest(t)
	ctx := context.Background()
	img, err := rt.InspectImage(ctx, testImage())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img.ID, "sha256:") {
		t.Errorf("image ID %q, want a sha256 digest", img.ID)
	}
	for _, ref := range []string{"dockyard-test-short:v1", "docker.io/library/dockyard-test-short:v1"} {
		if ok, err := rt.ImageExists(ctx, ref); ok || err != nil {
			t.Errorf("ImageExists(%s) of a missing image: %v %v", ref, ok, err)
		}
	}
	info, err := rt.Info(ctx)
	if err != nil || info.Name != "podman" || info.CgroupDriver == "" {
		t.Errorf("info %+v %v", info, err)
	}
}
