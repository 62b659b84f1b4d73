package mgmt

import (
	"bytes"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// TestManagementControlPlaneKeepsLeadingOnALoadedHost: the management cluster's controller
// manager and scheduler hold their leases through 40 s of slow renewals (client-go's 10 s
// restarted them with a handful of workload clusters on two cores).
func TestManagementControlPlaneKeepsLeadingOnALoadedHost(t *testing.T) {
	data, err := initData(&Cluster{Name: "mgmt", Node: "mgmt-control-plane"}, Options{KubernetesVersion: "v1.34.4"})
	if err != nil {
		t.Fatal(err)
	}
	cc := kubeadmDocument(t, data, "ClusterConfiguration")
	for _, component := range []string{"controllerManager", "scheduler"} {
		section, _ := cc[component].(map[string]any)
		args := map[string]string{}
		list, _ := section["extraArgs"].([]any)
		for _, a := range list {
			arg, _ := a.(map[string]any)
			name, _ := arg["name"].(string)
			value, _ := arg["value"].(string)
			args[name] = value
		}
		for flag, want := range map[string]string{
			"leader-elect-lease-duration": "60s", "leader-elect-renew-deadline": "40s", "leader-elect-retry-period": "5s",
		} {
			if args[flag] != want {
				t.Errorf("%s: %s=%q, want %q (extraArgs %v)", component, flag, args[flag], want, args)
			}
		}
	}
}

// kubeadmDocument returns the document of the given kind in the kubeadm configuration file
// of the cloud-config, as the node receives it (pkg/bootstrap's translation).
func kubeadmDocument(t *testing.T, cloudConfig []byte, kind string) map[string]any {
	t.Helper()
	plan, err := bootstrap.Parse(bootstrap.FormatCloudConfig, cloudConfig, bootstrap.Options{Hostname: "mgmt-control-plane"})
	if err != nil {
		t.Fatalf("translating the cloud-config: %v", err)
	}
	for _, step := range plan.Steps {
		if step.File == nil || !strings.HasSuffix(step.File.Path, "kubeadm.yaml") {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(step.File.Content), 4096)
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); err != nil {
				break
			}
			if doc["kind"] == kind {
				return doc
			}
		}
	}
	t.Fatalf("no %s in the cloud-config's kubeadm configuration", kind)
	return nil
}
