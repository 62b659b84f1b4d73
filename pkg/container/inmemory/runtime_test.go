package inmemory_test

import (
	"context"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// The fake passes the suite every engine passes, so unit tests built on it stay truthful.
func TestFakeConforms(t *testing.T) {
	conformance.Run(t, conformance.Subject{
		Runtime: inmemory.New("busybox"), Image: "busybox", Prefix: "fake",
		Labels: map[string]string{"test": "conformance"},
	})
}

// With fronts and networks without subnets, as an engine of many hosts has, it passes what
// applies of the suite.
func TestBalancingFakeConforms(t *testing.T) {
	conformance.Run(t, conformance.Subject{
		Runtime: inmemory.NewBalancing(inmemory.New("busybox")), Image: "busybox", Prefix: "fake-balancing",
		Labels: map[string]string{"test": "conformance"}, Balances: true,
		NotApplicable: map[string]string{
			"Networks":       "its networks report no subnet, like an engine whose network gives containers their addresses",
			"FixedAddresses": "its networks report no subnet, so containers have no fixed addresses",
			"DualStack":      "its networks report no subnet",
		},
	})
}

// The engine of in-memory clusters passes the whole suite, its fronts (listeners) included. It
// listens on a loopback address of its own: the suite's front asks for 6443, which the node
// layer's in-memory tests, run at once by go test, take on 127.0.0.1.
func TestEngineConforms(t *testing.T) {
	e := inmemory.NewEngine(inmemory.EngineOptions{Address: "127.0.0.3"})
	if err := e.PullImage(context.Background(), "busybox"); err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, conformance.Subject{
		Runtime: e, Image: "busybox", Prefix: "inmemory",
		Labels: map[string]string{"test": "conformance"}, Balances: true,
	})
}
