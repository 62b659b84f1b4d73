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

func TestFakeFixedAddressesConform(t *testing.T) {
	conformance.FixedAddresses(t, conformance.Subject{
		Runtime: fake.New("busybox"), Image: "busybox", Prefix: "fake",
		Labels: map[string]string{"test": "conformance"},
	})
}

func TestFakeEventsConform(t *testing.T) {
	conformance.Events(t, conformance.Subject{
		Runtime: fake.New("busybox"), Image: "busybox", Prefix: "fake",
		Labels: map[string]string{"test": "conformance"},
	})
}
