package controllers

import (
	"time"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// zoneResync is how often a cluster on an engine with zones looks at them again: a zone whose
// hosts are all gone, or cordoned, stops being a failure domain Cluster API places machines in.
const zoneResync = 15 * time.Second

// failureDomains are a cluster's failure domains: the spec's on an engine of one host (names
// only); the engine's zones where it has them, each able to hold control planes unless the
// spec lists it with controlPlane false (and a spec entry naming no zone is left out: nothing
// could run there).
func failureDomains(spec []clusterv1.FailureDomain, zones []string) []clusterv1.FailureDomain {
	if len(zones) == 0 {
		return spec
	}
	out := make([]clusterv1.FailureDomain, 0, len(zones))
	for _, z := range zones {
		fd := clusterv1.FailureDomain{Name: z, ControlPlane: ptr.To(true)}
		for _, s := range spec {
			if s.Name == z {
				fd.ControlPlane = ptr.To(ptr.Deref(s.ControlPlane, false))
				fd.Attributes = s.Attributes
			}
		}
		out = append(out, fd)
	}
	return out
}
