package containerd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	containerdruntime "github.com/dockyard-dev/dockyard/pkg/container/containerd"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

const testLabel = "dockyard.x-k8s.io/runtime-test"

// engine connects to Dockyard's containerd (DOCKYARD_CONTAINERD_ENDPOINT or the default
// socket), or skips loudly (fails in CI) when it does not answer.
func engine(t *testing.T) *containerdruntime.Runtime {
	t.Helper()
	endpoint := os.Getenv("DOCKYARD_CONTAINERD_ENDPOINT")
	rt, err := containerdruntime.New(endpoint, containerdruntime.Options{})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err = rt.Info(ctx); err != nil {
			_ = rt.Close()
		}
	}
	if err != nil {
		msg := fmt.Sprintf("NO CONTAINERD: %v. These tests need Dockyard's containerd: run hack/ensure-containerd.sh", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, "\n*** SKIPPING CONTAINERD TESTS *** "+msg)
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// requireImage fails when containerd lacks an image the tests need.
func requireImage(t *testing.T, rt container.Runtime, ref string) {
	t.Helper()
	ok, err := rt.ImageExists(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("containerd has no image %s: run `make engine-images CONTAINER_RUNTIME=containerd`", ref)
	}
}

// engineTest returns the engine and a label unique to the test, and sweeps everything carrying
// it before and after.
func engineTest(t *testing.T) (*containerdruntime.Runtime, map[string]string) {
	t.Helper()
	rt := engine(t)
	requireImage(t, rt, dockerenv.LoadBalancerImage())
	labels := map[string]string{testLabel: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))}
	conformance.Sweep(context.Background(), t, rt, labels)
	t.Cleanup(func() { conformance.Sweep(context.Background(), t, rt, labels) })
	return rt, labels
}

func subject(rt container.Runtime, labels map[string]string) conformance.Subject {
	return conformance.Subject{
		Runtime: rt, Image: dockerenv.LoadBalancerImage(), Labels: labels, Prefix: "dockyard-ctrd-conf",
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{"exec sleep 600"},
	}
}

func TestRuntimeConformsOnContainerd(t *testing.T) {
	rt, labels := engineTest(t)
	conformance.Run(t, subject(rt, labels))
}

func TestInfoOnContainerd(t *testing.T) {
	rt := engine(t)
	info, err := rt.Info(context.Background())
	if err != nil || info.Name != "containerd" || info.Version == "" || info.CgroupDriver != "cgroupfs" {
		t.Errorf("info %+v %v", info, err)
	}
}
