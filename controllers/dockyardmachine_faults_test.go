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
	got, errs := infrav1.FaultsOf(map[string]string{infrav1.StopAnnotation: " kubelet,etcd ,, kubelet"})
	if len(errs) > 0 || !slices.Equal(got.Stop, []string{"kubelet", "etcd"}) {
		t.Errorf("FaultsOf = %v, %v; want kubelet and etcd", got.Stop, errs)
	}
	if _, errs := infrav1.FaultsOf(map[string]string{infrav1.StopAnnotation: "kubelet,containerd"}); errs.ToAggregate() == nil || !strings.Contains(errs.ToAggregate().Error(), `"containerd"`) {
		t.Errorf("an unknown service: %v", errs)
	}
	if _, errs := infrav1.FaultsOf(map[string]string{infrav1.BootDelayAnnotation: "-1s"}); len(errs) == 0 {
		t.Error("a negative boot delay was taken")
	}
	if _, errs := infrav1.FaultsOf(map[string]string{infrav1.NetworkDelayAnnotation: "11s"}); len(errs) == 0 {
		t.Error("a network delay over 10s was taken")
	}
}
