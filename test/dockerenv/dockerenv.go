// Package dockerenv gives tests the real container engines and the images the project builds
// (make images): Runtime is always Docker (DOCKER_HOST), Engine is the engine the test run
// chose (DOCKYARD_CONTAINER_RUNTIME and DOCKYARD_CONTAINER_RUNTIME_ENDPOINT, Docker by
// default), so the node layer's tests run on every engine. Without an engine, tests skip
// loudly, except in CI (CI set), where a missing engine fails them: CI installs and starts one.
package dockerenv

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/dockerengine"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/test/ci"
)

// Default images; the Makefile passes the ones it built.
const (
	defaultNodeImage = "localhost/dockyard/node:v1.34.4"
	defaultLBImage   = "localhost/dockyard/haproxy:latest"
)

// NodeImage is the node image tests boot (DOCKYARD_TEST_NODE_IMAGE).
func NodeImage() string { return envOr("DOCKYARD_TEST_NODE_IMAGE", defaultNodeImage) }

// LoadBalancerImage is the haproxy image tests use (DOCKYARD_TEST_LB_IMAGE).
func LoadBalancerImage() string { return envOr("DOCKYARD_TEST_LB_IMAGE", defaultLBImage) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Runtime connects to the Docker engine, or skips (fails in CI) when none answers.
func Runtime(t testing.TB) *dockerengine.Runtime {
	t.Helper()
	rt, err := dockerengine.New()
	answers(t, rt, err, "These tests need a Docker engine: run `make test`, which starts one (hack/ensure-docker.sh)")
	return rt
}

// Engine connects to the engine the test run chose, or skips (fails in CI) when none answers.
func Engine(t testing.TB) container.Runtime {
	t.Helper()
	cfg := runtimes.FromEnv()
	rt, err := runtimes.New(cfg)
	answers(t, rt, err, fmt.Sprintf("These tests need %s: start it with hack/ensure-%s.sh, or run the make target that does", cfg, EngineName()))
	return rt
}

// answers asks a connected engine for its info, and skips the test (fails it in CI) when the
// connection failed or the engine does not answer; the connection is closed after the test.
func answers(t testing.TB, rt runtimes.Runtime, err error, hint string) {
	t.Helper()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = rt.Info(ctx)
	}
	if err != nil {
		ci.Missing(t, fmt.Sprintf("NO CONTAINER ENGINE: %v. %s", err, hint))
	}
	t.Cleanup(func() { _ = rt.Close() })
}

// Unavailable ends a test of one engine's own package whose engine (or image) is missing: it
// fails when the test run chose that engine (make test-engine CONTAINER_RUNTIME=<engine> sets
// DOCKYARD_CONTAINER_RUNTIME, and installs and starts it first) or runs in CI (where make test
// leaves these packages to make test-engines), and skips loudly otherwise, so `go test ./...`
// on a developer's host needs no engine but Docker.
func Unavailable(t testing.TB, engine, msg string) {
	t.Helper()
	if EngineName() == engine {
		t.Fatal(msg)
	}
	ci.Missing(t, fmt.Sprintf("%s (make test-engine CONTAINER_RUNTIME=%s runs them)", msg, engine))
}

// EngineEndpoint is the endpoint of an engine's own tests: the run's endpoint when the run chose
// that engine, else the engine's default.
func EngineEndpoint(engine string) string {
	if EngineName() == engine {
		return runtimes.FromEnv().Endpoint
	}
	return ""
}

// EngineName is the name of the engine the test run chose.
func EngineName() string {
	if n := runtimes.FromEnv().Name; n != "" {
		return n
	}
	return runtimes.Docker
}

// RequireImages fails the test when the engine lacks an image the project builds.
func RequireImages(t testing.TB, rt container.Runtime, refs ...string) {
	t.Helper()
	for _, ref := range refs {
		ok, err := rt.ImageExists(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("image %s is missing on %s: run `make test` (it builds it) or `make engine-images CONTAINER_RUNTIME=%s`", ref, EngineName(), EngineName())
		}
	}
}

// WaitFor polls check every 200ms until it returns nil, failing the test with its last error
// after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
