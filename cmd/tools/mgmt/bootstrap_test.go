package mgmt

import (
	"bytes"
	"fmt"
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
		if step.File == nil || !strings.HasPrefix(step.File.Path, "/run/kubeadm/") {
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

// Every node of the management cluster registers its fixed address on the cluster's own network
// as its Node's internal IP, whatever networks it joins later: kubelet's own choice follows the
// default route, which the engine gives any network after it restarts.
func TestManagementNodesPinTheirAddressOnTheirOwnNetwork(t *testing.T) {
	c := &Cluster{Name: "mgmt", Node: "mgmt-control-plane", Address: "172.18.0.3"}
	opts := Options{KubernetesVersion: "v1.34.4"}
	init, err := initData(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	join, err := joinData(c, opts, joining{hostname: "mgmt-worker-a", zone: "a", address: "172.18.0.4", token: "abcdef.0123456789abcdef", caHash: "sha256:00"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		data []byte
		kind string
		want string
	}{{init, "InitConfiguration", "172.18.0.3"}, {join, "JoinConfiguration", "172.18.0.4"}} {
		reg, _ := kubeadmDocument(t, tc.data, tc.kind)["nodeRegistration"].(map[string]any)
		list, _ := reg["kubeletExtraArgs"].([]any)
		var got []string
		for _, a := range list {
			arg, _ := a.(map[string]any)
			if arg["name"] == "node-ip" {
				got = append(got, fmt.Sprint(arg["value"]))
			}
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: kubelet's node-ip %v, want %s (kubeletExtraArgs %v)", tc.kind, got, tc.want, list)
		}
	}
}

// The API server's environment (GOGC for a management cluster of thousands of objects) reaches
// its static Pod through kubeadm's extraEnvs, sorted by name; none by default.
func TestManagementAPIServerEnvironment(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []any
	}{
		{env: nil, want: nil},
		{env: map[string]string{"GOMEMLIMIT": "8GiB", "GOGC": "400"}, want: []any{
			map[string]any{"name": "GOGC", "value": "400"}, map[string]any{"name": "GOMEMLIMIT", "value": "8GiB"},
		}},
	} {
		data, err := initData(&Cluster{Name: "mgmt", Node: "mgmt-control-plane"}, Options{KubernetesVersion: "v1.34.4", APIServerEnv: tc.env})
		if err != nil {
			t.Fatal(err)
		}
		section, _ := kubeadmDocument(t, data, "ClusterConfiguration")["apiServer"].(map[string]any)
		if got, _ := section["extraEnvs"].([]any); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("APIServerEnv %v: apiServer.extraEnvs %v, want %v", tc.env, got, tc.want)
		}
	}
}
