package controllers

import (
	"slices"
	"strings"
	"testing"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
)

// The API's services are the ones the node commands can stop, and the annotation reads as the
// webhook checks it: trimmed, each once, an unknown one refused with the list.
func TestStopAnnotation(t *testing.T) {
	if !slices.Equal(infrav1.StoppableServices, nodecmd.Services) {
		t.Errorf("the API's stoppable services %v differ from the node commands' %v", infrav1.StoppableServices, nodecmd.Services)
	}
	got, err := stoppedServices(" kubelet,etcd ,, kubelet")
	if err != nil || !slices.Equal(got, []string{"kubelet", "etcd"}) {
		t.Errorf("stoppedServices = %v, %v; want kubelet and etcd", got, err)
	}
	if _, err := stoppedServices("kubelet,containerd"); err == nil || !strings.Contains(err.Error(), `"containerd"`) {
		t.Errorf("an unknown service: %v", err)
	}
	if _, err := durationAnnotation(map[string]string{infrav1.BootDelayAnnotation: "-1s"}, infrav1.BootDelayAnnotation); err == nil {
		t.Error("a negative boot delay was taken")
	}
}
