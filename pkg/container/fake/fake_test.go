package fake_test

import (
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

// The fake passes the suite every engine passes, so unit tests built on it stay truthful.
func TestFakeConforms(t *testing.T) {
	conformance.Run(t, conformance.Subject{
		Runtime: fake.New("busybox"), Image: "busybox", Prefix: "fake",
		Labels: map[string]string{"test": "conformance"},
	})
}
