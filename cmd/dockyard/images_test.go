package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
)

func TestPlanImagesBuildsWhatIsMissingAndRefusesOthers(t *testing.T) {
	release, err := componentRelease()
	if err != nil {
		t.Fatal(err)
	}
	if release.Dockyard == "" || release.ClusterAPI == "" || release.CertManager == "" {
		t.Fatalf("the carried repository's versions: %+v", release)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if release.ManagerBinary != self {
		t.Errorf("the manager image is made of %s, want this binary %s", release.ManagerBinary, self)
	}
	if v := release.Modules["sigs.k8s.io/controller-runtime"]; v == "" {
		t.Errorf("Cluster API's managers would not be pinned to this binary's controller-runtime: %v", release.Modules)
	}

	plan, err := planImages("v1.34.4", []string{imagebuild.NodeImageName("v1.34.4"), localLoadBalancerImage, imagebuild.ManagerImageName(release.Dockyard)})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.node || !plan.loadBalancer || plan.components == nil {
		t.Fatalf("plan %+v: want the node, load balancer and component images built", plan)
	}
	if want := []string{imagebuild.ManagerImageName(release.Dockyard)}; !slices.Equal(plan.components.Only, want) {
		t.Errorf("component images to build: %v, want only the missing %v", plan.components.Only, want)
	}
	plan, err = planImages("v1.34.4", []string{imagebuild.ClusterAPIImageName("cluster-api-controller", release.ClusterAPI)})
	if err != nil || plan.node || plan.loadBalancer || plan.components == nil {
		t.Errorf("plan %+v, %v: want only the component images built", plan, err)
	}

	plan, err = planImages("v1.34.4", []string{localNetworkPolicyImage})
	if err != nil || !plan.networkPolicy || plan.node || plan.components != nil || !slices.Equal(plan.makeTargets(), []string{"netpol-image"}) {
		t.Errorf("plan %+v, %v: want only the network policy image built (make netpol-image)", plan, err)
	}

	for _, foreign := range []string{imagebuild.NodeImageName("v1.33.13"), "kindest/node:v1.34.0", imagebuild.ManagerImageName("v9.9.9")} {
		if _, err := planImages("v1.34.4", []string{foreign}); err == nil || !strings.Contains(err.Error(), foreign) {
			t.Errorf("planImages(%s): %v, want a refusal naming it", foreign, err)
		}
	}
}
