package fake_test

import (
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

func TestFakeNetworkAttachmentsConform(t *testing.T) {
	conformance.NetworkAttachments(t, conformance.Subject{
		Runtime: fake.New("busybox"), Image: "busybox", Prefix: "fake",
		Labels: map[string]string{"test": "conformance"},
	})
}
