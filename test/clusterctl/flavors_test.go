package clusterctl

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	nodeimages "github.com/dockyard-dev/dockyard/images"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
	"github.com/dockyard-dev/dockyard/test/framework"
)

// watchFilter is the only cluster.x-k8s.io/watch-filter value the plane's Dockyard manager
// reconciles: the flavors' objects lack it, so Dockyard validates and defaults them (webhooks)
// but never touches the engine for them.
const watchFilter = prefix + "-reconcile"

// flavorVariables sets every documented variable of the flavors to something other than its
// default, so the output shows each one was substituted.
var flavorVariables = map[string]string{
	"DOCKYARD_NODE_IMAGE":            "localhost/dockyard/node:" + kubernetesVersion,
	"DOCKYARD_NODE_IMAGE_REPOSITORY": "localhost/dockyard/node",
	"DOCKYARD_LB_IMAGE":              "localhost/dockyard/haproxy:latest",
	"DOCKYARD_BOOTSTRAP_TIMEOUT":     "12m",
	"DOCKYARD_POD_CIDR":              "10.200.0.0/16",
	"DOCKYARD_SERVICE_CIDR":          "10.112.0.0/12",
	"DOCKYARD_POD_CIDR_IPV6":         "fd00:200:96::/48",
	"DOCKYARD_SERVICE_CIDR_IPV6":     "fd00:200:64::/108",
	"DOCKYARD_POD_SECURITY_ENABLED":  "true",
	"DOCKYARD_POD_SECURITY_ENFORCE":  "restricted",
	"DOCKYARD_POD_SECURITY_AUDIT":    "restricted",
	"DOCKYARD_POD_SECURITY_WARN":     "baseline",
	"DOCKYARD_WORKER_CPU":            "1500m",
	"DOCKYARD_WORKER_MEMORY":         "1Gi",
	"DOCKYARD_NETWORK":               "dockyard-shared",
	"DOCKYARD_WORKER_PORTS":          "[{containerPort: 30080, hostPort: 18080}]",
	"DOCKYARD_REGISTRY":              "dockyard-test-registry",
	// The kubernetes flavor's: a kubeconfig Secret (admission does not read it) and a namespace.
	"DOCKYARD_INFRASTRUCTURE_KUBECONFIG_SECRET": "cctl-infrastructure",
	"DOCKYARD_INFRASTRUCTURE_NAMESPACE":         "cctl-pods",
}

func withVariables(overrides map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range flavorVariables {
		out[k] = v
	}
	for k, v := range overrides {
		out[k] = v
	}
	return out
}

// TestFlavors renders every flavor of the repository with `clusterctl generate cluster` and
// hands the result to a management plane running Cluster API's and Dockyard's controllers and
// webhooks: server-side dry runs for the objects, the ClusterClass for real, a topology Cluster
// for real to see the ClusterClass patches applied, and `clusterctl describe` on a cluster whose
// load balancer image cannot be found.
func TestFlavors(t *testing.T) {
	repo := requireRepository(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	start := time.Now()
	plane, err := framework.Start(ctx, framework.Options{
		Log:                 t.Output(),
		ClusterctlInventory: true,
		DockyardArgs: []string{
			"--watch-filter=" + watchFilter,
			"--load-balancer-image=" + dockerenv.LoadBalancerImage(),
			"--node-image-repository=localhost/dockyard/node",
			// The shared network DOCKYARD_NETWORK names, as an administrator allows it.
			"--allowed-networks=" + flavorVariables["DOCKYARD_NETWORK"],
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("management plane started in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			var dump strings.Builder
			plane.Dump(context.Background(), &dump)
			t.Log("\n" + dump.String())
			plane.KeepWorkDir()
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := plane.Stop(stopCtx); err != nil {
			t.Error(err)
		}
	})

	flavors := repositoryFlavors(t, repo)
	if len(flavors) < 2 {
		t.Fatalf("the repository has flavors %v; want at least the default and topology", flavors)
	}
	for _, flavor := range flavors {
		name := flavor
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) { testFlavor(ctx, t, repo, plane, flavor) })
	}
	t.Run("topology variables are validated", func(t *testing.T) { testTopologyValidation(ctx, t, repo, plane) })
	t.Run("topology patches", func(t *testing.T) { testTopologyPatches(ctx, t, repo, plane) })
	t.Run("describe", func(t *testing.T) { testDescribe(ctx, t, repo, plane) })
}

// repositoryFlavors lists the flavors of Dockyard's version in the repository ("" is the
// default).
func repositoryFlavors(t *testing.T, repo repository) []string {
	files, err := filepath.Glob(filepath.Join(repo.dir, "infrastructure-dockyard", repo.dockyardVersion, "cluster-template*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var flavors []string
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".yaml")
		flavors = append(flavors, strings.TrimPrefix(strings.TrimPrefix(base, "cluster-template"), "-"))
	}
	sort.Strings(flavors)
	return flavors
}

// generate runs clusterctl generate cluster from the repository (flavor) or from a file.
func generate(ctx context.Context, t *testing.T, repo repository, plane *framework.ManagementPlane, cluster, namespace, flavor, from string, controlPlanes, workers int, vars map[string]string) []unstructured.Unstructured {
	t.Helper()
	args := []string{"generate", "cluster", cluster, "--config", repo.config, "--kubeconfig", plane.Kubeconfig(),
		"--target-namespace", namespace, "--kubernetes-version", kubernetesVersion,
		"--control-plane-machine-count", fmt.Sprint(controlPlanes), "--worker-machine-count", fmt.Sprint(workers)}
	if from != "" {
		args = append(args, "--from", from)
	} else {
		args = append(args, "--infrastructure", "dockyard:"+repo.dockyardVersion)
		if flavor != "" {
			args = append(args, "--flavor", flavor)
		}
	}
	out, _ := repo.run(ctx, t, run{args: args, env: vars})
	if strings.Contains(out, "${") || strings.Contains(out, "$(") {
		t.Errorf("clusterctl left variables in the output:\n%s", out)
	}
	objs := decode(t, []byte(out))
	for i := range objs {
		if objs[i].GetNamespace() != namespace {
			t.Errorf("%s is not in the target namespace %s", id(&objs[i]), namespace)
		}
	}
	return objs
}

// classObjects are the kinds clusterctl takes from clusterclass-<name>.yaml.
func isClassObject(o *unstructured.Unstructured) bool {
	return o.GetKind() == "ClusterClass" || strings.HasSuffix(o.GetKind(), "Template")
}

func testFlavor(ctx context.Context, t *testing.T, repo repository, plane *framework.ManagementPlane, flavor string) {
	c := plane.Client()
	name := "cctl-" + flavor
	if flavor == "" {
		name = "cctl-default"
	}
	ns := createNamespace(ctx, t, c, prefix+"-"+strings.TrimPrefix(name, "cctl-"))

	objs := generate(ctx, t, repo, plane, name, ns, flavor, "", 3, 2, flavorVariables)
	file := "cluster-template.yaml"
	if flavor != "" {
		file = "cluster-template-" + flavor + ".yaml"
	}
	fromFile := generate(ctx, t, repo, plane, name, ns, "", filepath.Join(repo.dir, "infrastructure-dockyard", repo.dockyardVersion, file), 3, 2, flavorVariables)

	// With a ClusterClass in the output, its templates are part of the class.
	hasClass := false
	for i := range objs {
		hasClass = hasClass || objs[i].GetKind() == "ClusterClass"
	}
	var class, rest []unstructured.Unstructured
	for i := range objs {
		if hasClass && isClassObject(&objs[i]) {
			class = append(class, objs[i])
		} else {
			rest = append(rest, objs[i])
		}
	}
	if len(fromFile) != len(rest) {
		t.Errorf("--from %s gave %d objects, the repository's flavor %d besides its ClusterClass", file, len(fromFile), len(rest))
	}

	if hasClass {
		// The ClusterClass and its templates, for real: the ClusterClass webhook checks the
		// variables and patches, the controller resolves the templates and the variables.
		for i := range class {
			if err := c.Create(ctx, &class[i]); err != nil {
				t.Fatalf("creating %s: %v", id(&class[i]), err)
			}
		}
		for i := range class {
			if class[i].GetKind() == "ClusterClass" {
				waitClusterClassReady(ctx, t, c, ns, class[i].GetName())
			}
		}
		// Now that the class exists, clusterctl leaves it out.
		again := generate(ctx, t, repo, plane, name, ns, flavor, "", 3, 2, flavorVariables)
		for i := range again {
			if isClassObject(&again[i]) {
				t.Errorf("clusterctl generated %s although the ClusterClass exists", id(&again[i]))
			}
		}
	}

	// Everything else: a server-side dry run through every webhook.
	kinds := map[string]int{}
	for i := range rest {
		o := rest[i].DeepCopy()
		if err := c.Create(ctx, o, client.DryRunAll); err != nil {
			t.Errorf("dry run of %s: %v", id(&rest[i]), err)
		}
		kinds[rest[i].GetKind()]++
	}
	t.Logf("flavor %q: dry-run %v; ClusterClass objects created %d", flavor, kinds, len(class))
	if kinds["Cluster"] != 1 || kinds["ClusterResourceSet"] != 0 {
		t.Errorf("flavor %q: want one Cluster and no ClusterResourceSet (the CNI follows the node image): %v", flavor, kinds)
	}

	// The variables reached the objects (as JSON: one object per line).
	all, err := jsonLines(objs)
	if err != nil {
		t.Fatal(err)
	}
	if flavor == "kubernetes" {
		// Nodes as Pods: no load balancer image, host ports, local registry or engine network
		// (the webhook refuses the last three beside spec.infrastructure).
		for _, v := range flavorCIDRVariables(flavor, "DOCKYARD_BOOTSTRAP_TIMEOUT", "DOCKYARD_INFRASTRUCTURE_KUBECONFIG_SECRET", "DOCKYARD_INFRASTRUCTURE_NAMESPACE") {
			if !strings.Contains(all, flavorVariables[v]) {
				t.Errorf("flavor %q ignores %s=%s", flavor, v, flavorVariables[v])
			}
		}
		checkCNIInstaller(t, flavor, objs)
		return
	}
	if flavor == "in-memory" {
		// Nodes in the manager's memory: nothing runs, so no load balancer image, host ports,
		// registry, engine network, bootstrap deadline or CNI (kubeadm is simulated; the
		// webhook refuses the network, host ports and registry beside spec.infrastructure).
		for _, v := range flavorCIDRVariables(flavor) {
			if !strings.Contains(all, flavorVariables[v]) {
				t.Errorf("flavor %q ignores %s=%s", flavor, v, flavorVariables[v])
			}
		}
		if !strings.Contains(all, `"infrastructure":{"inMemory":{}}`) {
			t.Errorf("flavor %q: no DockyardCluster with spec.infrastructure.inMemory", flavor)
		}
		return
	}
	for _, v := range flavorCIDRVariables(flavor, "DOCKYARD_LB_IMAGE", "DOCKYARD_BOOTSTRAP_TIMEOUT") {
		if !strings.Contains(all, flavorVariables[v]) {
			t.Errorf("flavor %q ignores %s=%s", flavor, v, flavorVariables[v])
		}
	}
	if flavor != "topology" && flavor != "machinepool" && !strings.Contains(all, `"hostPort":18080`) {
		t.Errorf("flavor %q ignores DOCKYARD_WORKER_PORTS=%s", flavor, flavorVariables["DOCKYARD_WORKER_PORTS"])
	}
	if flavor != "topology" && !strings.Contains(all, `"registry":"`+flavorVariables["DOCKYARD_REGISTRY"]+`"`) {
		t.Errorf("flavor %q ignores DOCKYARD_REGISTRY", flavor)
	}
	checkNetworkVariable(ctx, t, repo, plane, flavor, ns, objs)
	// The control plane applies the CNI its node image ships (kind's convention), with the
	// script of images/cni/install-cni.sh as it is; the pod CIDR comes from kubeadm's
	// configuration, which follows the Cluster's: no template carries its own.
	checkCNIInstaller(t, flavor, objs)
	for _, hardcoded := range []string{"10.244.0.0/16", "fd00:100:96::/48"} {
		if strings.Contains(all, hardcoded) {
			t.Errorf("flavor %q hardcodes the pod CIDR %s although its variables set another", flavor, hardcoded)
		}
	}
}

// flavorCIDRVariables adds to vars the CIDR variables a flavor takes: the IPv4 ones, the IPv6
// ones (ipv6), or both (dual-stack flavors).
func flavorCIDRVariables(flavor string, vars ...string) []string {
	v4 := []string{"DOCKYARD_POD_CIDR", "DOCKYARD_SERVICE_CIDR"}
	v6 := []string{"DOCKYARD_POD_CIDR_IPV6", "DOCKYARD_SERVICE_CIDR_IPV6"}
	switch {
	case flavor == "ipv6":
		return append(vars, v6...)
	case strings.HasPrefix(flavor, "dual-stack"):
		return append(append(vars, v4...), v6...)
	}
	return append(vars, v4...)
}

// checkNetworkVariable: a flavor with a DockyardCluster puts it on the network DOCKYARD_NETWORK
// names (spec.network.existing.name); left unset, the name is empty, which the API server
// takes and which means the cluster's own network, as before. DOCKYARD_LB_IMAGE left unset
// too, the load balancer image is the manager's --load-balancer-image (a machine without a
// registry has only the one clusterctl init was given).
func checkNetworkVariable(ctx context.Context, t *testing.T, repo repository, plane *framework.ManagementPlane, flavor, ns string, objs []unstructured.Unstructured) {
	t.Helper()
	existingName := func(objs []unstructured.Unstructured) (string, bool) {
		for i := range objs {
			if objs[i].GetKind() == "DockyardCluster" {
				name, _, _ := unstructured.NestedString(objs[i].Object, "spec", "network", "existing", "name")
				return name, true
			}
		}
		return "", false
	}
	name, ok := existingName(objs)
	if !ok {
		return // the topology flavor: its DockyardCluster comes from the ClusterClass
	}
	if want := flavorVariables["DOCKYARD_NETWORK"]; name != want {
		t.Errorf("flavor %q: spec.network.existing.name %q, want DOCKYARD_NETWORK=%s", flavor, name, want)
	}

	vars := withVariables(nil)
	delete(vars, "DOCKYARD_NETWORK")
	delete(vars, "DOCKYARD_LB_IMAGE")
	clusterName := "cctl-own-net"
	unset := generate(ctx, t, repo, plane, clusterName, ns, flavor, "", 1, 0, vars)
	if name, _ := existingName(unset); name != "" {
		t.Errorf("flavor %q without DOCKYARD_NETWORK: spec.network.existing.name %q, want empty", flavor, name)
	}
	for i := range unset {
		if unset[i].GetKind() != "DockyardCluster" {
			continue
		}
		o := unset[i].DeepCopy()
		if err := plane.Client().Create(ctx, o, client.DryRunAll); err != nil {
			t.Errorf("flavor %q without DOCKYARD_NETWORK: dry run of %s: %v", flavor, id(&unset[i]), err)
			continue
		}
		// An empty existing name selects Dockyard's own network (NetworkSpec.NetworkName).
		network, _, _ := unstructured.NestedMap(o.Object, "spec", "network")
		if name, _, _ := unstructured.NestedString(o.Object, "spec", "network", "existing", "name"); name != "" || len(network) > 1 {
			t.Errorf("flavor %q without DOCKYARD_NETWORK: the API server stores spec.network %v, want no network named (Dockyard's own)", flavor, network)
		}
		if image, _, _ := unstructured.NestedString(o.Object, "spec", "loadBalancer", "image"); image != dockerenv.LoadBalancerImage() {
			t.Errorf("flavor %q without DOCKYARD_LB_IMAGE: load balancer image %q, want the manager's --load-balancer-image %s", flavor, image, dockerenv.LoadBalancerImage())
		}
	}
}

// checkCNIInstaller: the flavor's control plane (its KubeadmControlPlane or the ClusterClass's
// KubeadmControlPlaneTemplate) writes images/cni/install-cni.sh and runs it after kubeadm.
func checkCNIInstaller(t *testing.T, flavor string, objs []unstructured.Unstructured) {
	t.Helper()
	script, err := nodeimages.Files.ReadFile("cni/install-cni.sh")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for i := range objs {
		var path []string
		switch objs[i].GetKind() {
		case "KubeadmControlPlane":
			path = []string{"spec", "kubeadmConfigSpec"}
		case "KubeadmControlPlaneTemplate":
			path = []string{"spec", "template", "spec", "kubeadmConfigSpec"}
		default:
			continue
		}
		found++
		files, _, _ := unstructured.NestedSlice(objs[i].Object, append(path, "files")...)
		commands, _, _ := unstructured.NestedStringSlice(objs[i].Object, append(path, "postKubeadmCommands")...)
		written := false
		for _, f := range files {
			f, _ := f.(map[string]any)
			if f["path"] == "/etc/dockyard/install-cni.sh" {
				written = f["content"] == string(script) && f["permissions"] == "0755"
			}
		}
		if !written || !slices.Contains(commands, "sh /etc/dockyard/install-cni.sh") {
			t.Errorf("flavor %q: %s does not write images/cni/install-cni.sh to /etc/dockyard/install-cni.sh (0755) and run it after kubeadm (commands %q)",
				flavor, id(&objs[i]), commands)
		}
	}
	if found == 0 {
		t.Errorf("flavor %q: no KubeadmControlPlane or KubeadmControlPlaneTemplate", flavor)
	}
}

// jsonLines is the objects as JSON, one per line, with escaped quotes unescaped so that
// values written as YAML inside a field (a script, a file) can be searched for too.
func jsonLines(objs []unstructured.Unstructured) (string, error) {
	var b strings.Builder
	for i := range objs {
		data, err := objs[i].MarshalJSON()
		if err != nil {
			return "", err
		}
		b.Write(data)
		b.WriteString("\n")
	}
	return strings.ReplaceAll(b.String(), `\"`, `"`), nil
}

// testTopologyValidation shows that the API server checks the topology variables against the
// ClusterClass's schema: values the schema refuses are rejected at a dry run.
func testTopologyValidation(ctx context.Context, t *testing.T, repo repository, plane *framework.ManagementPlane) {
	c := plane.Client()
	ns := prefix + "-topology" // the ClusterClass is there (subtest topology)
	for variable, value := range map[string]string{
		"DOCKYARD_POD_SECURITY_ENFORCE": "lenient",
		"DOCKYARD_WORKER_MEMORY":        "lots",
		"DOCKYARD_BOOTSTRAP_TIMEOUT":    "soon",
	} {
		objs := generate(ctx, t, repo, plane, "cctl-invalid", ns, "topology", "", 1, 1, withVariables(map[string]string{variable: value}))
		for i := range objs {
			if objs[i].GetKind() != "Cluster" {
				continue
			}
			err := c.Create(ctx, objs[i].DeepCopy(), client.DryRunAll)
			if err == nil {
				t.Errorf("%s=%s: the Cluster was accepted", variable, value)
				continue
			}
			t.Logf("%s=%s rejected: %v", variable, value, err)
		}
	}
}

// testTopologyPatches creates a topology Cluster for real and checks the objects Cluster API
// rendered from the ClusterClass: the patches put the variables where they belong. Dockyard
// does not reconcile this cluster (no watch filter label), so the control plane never gets
// machines and Cluster API defers the MachineDeployment: the worker patches (workerImage,
// bootstrapTimeout, workerResources) are checked on the workers of Cluster API's quick start of
// the topology flavor (expectWorkerPatches in test/capie2e/e2e/specs_test.go).
func testTopologyPatches(ctx context.Context, t *testing.T, repo repository, plane *framework.ManagementPlane) {
	c := plane.Client()
	ns := prefix + "-topology"
	name := "cctl-patched"
	vars := withVariables(map[string]string{"DOCKYARD_LB_IMAGE": "localhost/dockyard/haproxy:cctl"})
	for _, o := range generate(ctx, t, repo, plane, name, ns, "topology", "", 1, 1, vars) {
		if isClassObject(&o) {
			t.Fatalf("the ClusterClass should exist already, clusterctl generated %s", id(&o))
		}
		if err := c.Create(ctx, &o); err != nil {
			t.Fatalf("creating %s: %v", id(&o), err)
		}
	}
	t.Cleanup(func() {
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := c.Delete(context.Background(), cluster); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})

	var dc *infrav1.DockyardCluster
	var kcp *controlplanev1.KubeadmControlPlane
	var cpTemplate *infrav1.DockyardMachineTemplate
	mhcs := &clusterv1.MachineHealthCheckList{}
	poll(ctx, t, 2*time.Minute, "the topology controller to render the cluster", func() error {
		dcs := &infrav1.DockyardClusterList{}
		kcps := &controlplanev1.KubeadmControlPlaneList{}
		for _, l := range []client.ObjectList{dcs, kcps, mhcs} {
			if err := c.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
				return err
			}
		}
		if len(dcs.Items) != 1 || len(kcps.Items) != 1 {
			return errors.Errorf("%d DockyardClusters, %d KubeadmControlPlanes", len(dcs.Items), len(kcps.Items))
		}
		dc, kcp = &dcs.Items[0], &kcps.Items[0]
		cpTemplate = &infrav1.DockyardMachineTemplate{}
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name}, cpTemplate)
	})

	if got := dc.Spec.LoadBalancer.Image; got != "localhost/dockyard/haproxy:cctl" {
		t.Errorf("DockyardCluster load balancer image %q, want the loadBalancerImage variable", got)
	}
	if got, want := cpTemplate.Spec.Template.Spec.Image, "localhost/dockyard/node:"+kubernetesVersion; got != want {
		t.Errorf("control plane DockyardMachineTemplate image %q, want %q", got, want)
	}
	if d := cpTemplate.Spec.Template.Spec.BootstrapTimeout; d == nil || d.Duration != 12*time.Minute {
		t.Errorf("control plane bootstrapTimeout %v, want 12m", d)
	}
	if r := cpTemplate.Spec.Template.Spec.Resources; r.CPU != nil || r.Memory != nil {
		t.Errorf("control plane nodes got the worker resources: %+v", r)
	}
	spec := kcp.Spec.KubeadmConfigSpec
	var admission string
	installer := false
	for _, f := range spec.Files {
		switch f.Path {
		case "/etc/kubernetes/dockyard/admission.yaml":
			admission = f.Content
		case "/etc/dockyard/install-cni.sh":
			installer = true
		}
	}
	// The Pod Security patch appends its file to the template's CNI installer.
	if !installer || !slices.Contains(spec.PostKubeadmCommands, "sh /etc/dockyard/install-cni.sh") {
		t.Errorf("the KubeadmControlPlane lost the CNI installer: files %d, postKubeadmCommands %q", len(spec.Files), spec.PostKubeadmCommands)
	}
	for _, want := range []string{`enforce: "restricted"`, `audit: "restricted"`, `warn: "baseline"`, "namespaces: [kube-system]"} {
		if !strings.Contains(admission, want) {
			t.Errorf("admission configuration lacks %s:\n%s", want, admission)
		}
	}
	args := spec.ClusterConfiguration.APIServer.ExtraArgs
	if len(args) != 1 || args[0].Name != "admission-control-config-file" || ptr.Deref(args[0].Value, "") != "/etc/kubernetes/dockyard/admission.yaml" {
		t.Errorf("API server extraArgs %+v, want the admission configuration file", args)
	}
	if vols := spec.ClusterConfiguration.APIServer.ExtraVolumes; len(vols) != 1 || vols[0].MountPath != "/etc/kubernetes/dockyard" {
		t.Errorf("API server extraVolumes %+v, want /etc/kubernetes/dockyard", vols)
	}
	if len(spec.ClusterConfiguration.APIServer.CertSANs) != 2 {
		t.Errorf("certSANs %v: the template's own settings were lost", spec.ClusterConfiguration.APIServer.CertSANs)
	}
	if len(mhcs.Items) < 1 {
		t.Errorf("no MachineHealthCheck for the control plane")
	}
	for _, mhc := range mhcs.Items {
		t.Logf("MachineHealthCheck %s: %d unhealthy node conditions", mhc.Name, len(mhc.Spec.Checks.UnhealthyNodeConditions))
	}

	// Disabling the Pod Security patch leaves the API server alone.
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cluster.DeepCopy())
	for i, v := range cluster.Spec.Topology.Variables {
		if v.Name == "podSecurityStandard" {
			cluster.Spec.Topology.Variables[i].Value.Raw = []byte(`{"enabled":false}`)
		}
	}
	if err := c.Patch(ctx, cluster, patch); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 2*time.Minute, "the Pod Security patch to be removed", func() error {
		got := &controlplanev1.KubeadmControlPlane{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(kcp), got); err != nil {
			return err
		}
		if n := len(got.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs); n != 0 {
			return errors.Errorf("API server still has %d extraArgs", n)
		}
		return nil
	})

	if err := c.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 3*time.Minute, "the topology Cluster to be deleted", func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return errors.Wrap(err, "still there")
		}
		return errors.New("still there")
	})
}

// testDescribe creates a default-flavor cluster Dockyard does reconcile (its DockyardCluster
// carries the watch filter label) with a load balancer image no engine has, and checks that
// `clusterctl describe cluster` tells the user what is wrong and where.
func testDescribe(ctx context.Context, t *testing.T, repo repository, plane *framework.ManagementPlane) {
	rt := dockerenv.Runtime(t)
	c := plane.Client()
	name := "cctl-describe"
	ns := createNamespace(ctx, t, c, prefix+"-describe")
	key := docker.ClusterKey{Namespace: ns, Name: name}
	sweep := func() {
		networks, _ := rt.ListNetworks(context.Background(), key.ClusterLabels())
		for _, n := range networks {
			_ = rt.RemoveNetwork(context.Background(), n.Name)
		}
	}
	sweep()
	t.Cleanup(sweep)

	missing := "localhost/dockyard/haproxy:cctl-missing"
	vars := withVariables(map[string]string{"DOCKYARD_LB_IMAGE": missing})
	delete(vars, "DOCKYARD_NETWORK") // the cluster's own network, which Dockyard creates
	for _, o := range generate(ctx, t, repo, plane, name, ns, "", "", 1, 0, vars) {
		if o.GetKind() == "DockyardCluster" {
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[clusterv1.WatchLabel] = watchFilter
			o.SetLabels(labels)
		}
		if err := c.Create(ctx, &o); err != nil {
			t.Fatalf("creating %s: %v", id(&o), err)
		}
	}
	// Cluster API copies the reason into the Cluster's InfrastructureReady at its own pace:
	// describe runs once both say it.
	poll(ctx, t, 3*time.Minute, "Dockyard to report the missing image, and Cluster API to copy the reason", func() error {
		dc := &infrav1.DockyardCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dc); err != nil {
			return err
		}
		if r := conditions.GetReason(dc, infrav1.LoadBalancerAvailableCondition); r != infrav1.LoadBalancerImageFailedReason {
			return errors.Errorf("LoadBalancerAvailable reason %q", r)
		}
		cluster := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster); err != nil {
			return err
		}
		if r := conditions.GetReason(cluster, clusterv1.ClusterInfrastructureReadyCondition); r != infrav1.LoadBalancerImageFailedReason {
			return errors.Errorf("the Cluster's InfrastructureReady reason %q", r)
		}
		return nil
	})

	// The default view and the one with every condition: both name the DockyardCluster, the
	// failing condition, its reason and the engine's error, and the Cluster's
	// InfrastructureReady carries the same reason.
	for _, extra := range [][]string{nil, {"--show-conditions", "all"}} {
		args := append([]string{"describe", "cluster", name, "--namespace", ns, "--kubeconfig", plane.Kubeconfig()}, extra...)
		out, _ := repo.run(ctx, t, run{args: args})
		t.Log("\n" + out)
		text := strings.Join(strings.Fields(strings.NewReplacer("│", " ", "├─", " ", "└─", " ").Replace(out)), " ")
		for _, want := range []string{
			"DockyardCluster " + ns + "/" + name,
			"LoadBalancerImageFailed",
			"image " + missing + " is not on the container engine and pulling it failed",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("clusterctl %s does not show %q", strings.Join(args, " "), want)
			}
		}
		if extra != nil && !regexp.MustCompile(`InfrastructureReady\s+False\s+LoadBalancerImageFailed`).MatchString(out) {
			t.Errorf("the Cluster's InfrastructureReady does not carry Dockyard's reason")
		}
	}

	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 3*time.Minute, "the cluster and its network to be deleted", func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		if err == nil {
			return errors.New("Cluster still there")
		}
		if !apierrors.IsNotFound(err) {
			return errors.Wrap(err, "Cluster still there")
		}
		networks, err := rt.ListNetworks(ctx, key.ClusterLabels())
		if err != nil {
			return err
		}
		if len(networks) != 0 {
			return errors.Errorf("%d networks left on the engine", len(networks))
		}
		return nil
	})
}

func waitClusterClassReady(ctx context.Context, t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	poll(ctx, t, 2*time.Minute, "ClusterClass "+name+" to be reconciled", func() error {
		cc := &clusterv1.ClusterClass{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cc); err != nil {
			return err
		}
		if cc.Status.ObservedGeneration != cc.Generation || !conditions.IsTrue(cc, clusterv1.ClusterClassVariablesReadyCondition) {
			return errors.Errorf("observed generation %d of %d, VariablesReady: %s", cc.Status.ObservedGeneration, cc.Generation,
				conditions.GetMessage(cc, clusterv1.ClusterClassVariablesReadyCondition))
		}
		var names []string
		for _, v := range cc.Status.Variables {
			names = append(names, v.Name)
		}
		t.Logf("ClusterClass %s reconciled; variables %v", name, names)
		return nil
	})
}

func createNamespace(ctx context.Context, t *testing.T, c client.Client, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"dockyard.x-k8s.io/test": prefix}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return name
}

// poll calls f until it returns nil or the timeout ends; then it fails with f's last error.
func poll(ctx context.Context, t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}
