package controllers

import (
	"testing"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestFailureDomainsAreTheEnginesZones(t *testing.T) {
	spec := []clusterv1.FailureDomain{{Name: "c", ControlPlane: ptr.To(false)}, {Name: "gone", ControlPlane: ptr.To(true)}}
	if got := failureDomains(spec, nil); len(got) != 2 || got[0].Name != "c" {
		t.Errorf("on an engine of one host the spec's are kept: %+v", got)
	}
	got := failureDomains(spec, []string{"a", "b", "c"})
	want := map[string]bool{"a": true, "b": true, "c": false}
	if len(got) != 3 {
		t.Fatalf("failure domains %+v, want a, b and c", got)
	}
	for _, fd := range got {
		if cp, ok := want[fd.Name]; !ok || ptr.Deref(fd.ControlPlane, false) != cp {
			t.Errorf("failure domain %s control plane %v, want %v", fd.Name, ptr.Deref(fd.ControlPlane, false), cp)
		}
	}
}
