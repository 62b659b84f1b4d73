package capie2e

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/pkg/errors"
	"go.yaml.in/yaml/v3"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

// A test flavor is one of Dockyard's shipped flavors (the repository's templates/) with what a
// shared spec of Cluster API needs added: a MachineHealthCheck, a label, a script in the
// bootstrap data. They are written for the suite, never shipped, as CAPD derives its test
// flavors from its own with kustomize.
type flavor struct {
	// name is the flavor's, as the specs ask for it ("" is the default flavor).
	name string
	// from is the shipped template it starts from.
	from string
	// about says what it adds, in its header.
	about string
	// edit changes the template; nil copies it.
	edit func(t *template) error
}

// Flavors are the test flavors, by name.
var flavors = []flavor{
	{name: "", from: "cluster-template.yaml", about: "The default flavor, as shipped."},
	{name: "topology", from: "cluster-template-topology.yaml", about: "The topology flavor, as shipped."},
	{name: "ignition", from: "cluster-template-ignition.yaml", about: "The ignition flavor, as shipped."},
	{name: "ipv6", from: "cluster-template-ipv6.yaml", about: "The ipv6 flavor, as shipped."},
	{name: "machine-pool", from: "cluster-template-machinepool.yaml", about: "The machinepool flavor, as shipped (MachinePoolSpec asks for machine-pool)."},
	{name: "md-remediation", from: "cluster-template.yaml", edit: mdRemediation,
		about: "The default flavor with its workers labelled e2e.remediation.label and a MachineHealthCheck\nreplacing those whose Node has the condition e2e.remediation.condition False for 10 s\n(MachineDeploymentRemediationSpec)."},
	{name: "kcp-remediation", from: "cluster-template.yaml", edit: kcpRemediation,
		about: "The default flavor whose control plane machines wait, before kubeadm, for the signal\nKCPRemediationSpec gives through a ConfigMap of the management cluster (wait-signal.sh,\nwith curl and jq), and a MachineHealthCheck replacing control plane machines labelled\nmhc-test=fail (KCPRemediationSpec)."},
	{name: "kcp-adoption", from: "cluster-template.yaml", edit: kcpAdoption,
		about: "The default flavor's control plane in two steps (KCPAdoptionSpec): objects labelled\nkcp-adoption.step1 make a Cluster without a control plane provider and one control plane\nMachine with its KubeadmConfig (the KubeadmControlPlane's kubeadmConfigSpec) and\nDockyardMachine; those labelled kcp-adoption.step2 add the KubeadmControlPlane, which adopts it."},
	{name: "kcp-md-taints", from: "cluster-template.yaml", edit: kcpMDTaints,
		about: "The default flavor with two taints on the control plane and worker Machines, one\npropagated to their Nodes on initialization only, one always (KCPAndMachineDeploymentRolloutSpec)."},
	{name: "topology-taints", from: "cluster-template-topology.yaml", edit: topologyTaints,
		about: "The topology flavor with kcp-md-taints' two taints set in the Cluster's topology\n(ClusterClassRolloutSpec)."},
	{name: "upgrades", from: "cluster-template.yaml", edit: conformanceNodes,
		about: "The default flavor, whose node images follow each Machine's version (the\nKubernetes upgrade specs change the version, not the machine templates), made ready for\nthe conformance tests that follow the upgrade as the conformance flavor is."},
	{name: "conformance", from: "cluster-template.yaml", edit: conformanceNodes,
		about: "The default flavor made ready for Kubernetes' conformance tests run by Cluster API's\nkubetest (K8SConformanceSpec): the cluster on the engine network kind, where kubetest runs\nits container, and every node loaded with the images the tests run\n(DOCKYARD_CONFORMANCE_IMAGES, made by make conformance-images)."},
	{name: "self-hosted", from: "cluster-template.yaml", edit: selfHosted,
		about: "The default flavor whose nodes can host the providers: the engine's socket mounted\n(the management cluster's manager must allow it: DOCKYARD_ALLOWED_HOST_PATHS) and the\nimages of DOCKYARD_PRELOAD_IMAGES preloaded (SelfHostedSpec)."},
	{name: "kubernetes", from: "cluster-template-kubernetes.yaml", about: "The kubernetes flavor, as shipped: nodes as Pods of the management cluster, its zones as\nfailure domains (make test-e2e-kubernetes)."},
	{name: "kcp-remediation-kubernetes", from: "cluster-template-kubernetes.yaml", edit: kcpRemediation,
		about: "The kubernetes flavor with kcp-remediation's signal and MachineHealthCheck\n(KCPRemediationSpec on nodes as Pods)."},
	{name: "in-memory", from: "cluster-template-topology.yaml", edit: inMemoryTopology,
		about: "The topology flavor with the ClusterClass's inMemory variable true: the nodes in the\nmanager's memory (ScaleSpec on in-memory clusters, make test-e2e-inmemory)."},
	{name: "in-memory-topology-taints", from: "cluster-template-topology.yaml", edit: inMemoryTopologyTaints,
		about: "The in-memory flavor with topology-taints' two taints set in the Cluster's topology\n(ClusterClassRolloutSpec on in-memory clusters, make test-e2e-inmemory)."},
	{name: "in-memory-md-remediation", from: "cluster-template-in-memory.yaml", edit: mdRemediation,
		about: "The shipped in-memory flavor with md-remediation's label on its workers and its\nMachineHealthCheck (MachineDeploymentRemediationSpec on in-memory clusters, make test-e2e-inmemory)."},
	{name: "in-memory-machine-pool", from: "cluster-template-in-memory.yaml", edit: inMemoryMachinePool,
		about: "The shipped in-memory flavor whose workers are a MachinePool of WORKER_MACHINE_COUNT\ninstances on a DockyardMachinePool instead of its MachineDeployment, each instance made as\nthe MachineDeployment's workers were (make test-e2e-inmemory scales it from 0 and back)."},
	{name: "clusterctl-upgrade-management", from: "cluster-template.yaml", edit: upgradeManagement,
		about: "The self-hosted flavor whose nodes pull from the local registry\nDOCKYARD_RELEASE_REGISTRY, where the suite publishes the release the cluster is first\ninitialized with (ClusterctlUpgradeSpec's management cluster)."},
}

// WriteFlavors writes the test flavors (cluster-template-<flavor>.yaml) and the ClusterClasses
// (clusterclass-*.yaml, as shipped) made from the shipped templates in templatesDir into dir,
// and returns the files written, sorted.
func WriteFlavors(templatesDir, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errors.Wrap(err, "creating the test flavors' directory")
	}
	var written []string
	for _, f := range flavors {
		t, err := loadTemplate(filepath.Join(templatesDir, f.from))
		if err != nil {
			return nil, errors.Wrapf(err, "flavor %q", f.name)
		}
		if f.edit != nil {
			if err := f.edit(t); err != nil {
				return nil, errors.Wrapf(err, "flavor %q", f.name)
			}
		}
		// The shipped template's header describes it, not the test flavor.
		if len(t.docs) > 0 {
			first := t.docs[0].Content[0]
			t.docs[0].HeadComment, first.HeadComment = "", ""
			if len(first.Content) > 0 {
				first.Content[0].HeadComment = ""
			}
		}
		out, err := t.bytes("Written by Dockyard's Cluster API end-to-end suite from templates/" + f.from + "; not shipped.\n" + f.about)
		if err != nil {
			return nil, errors.Wrapf(err, "flavor %q", f.name)
		}
		name := "cluster-template.yaml"
		if f.name != "" {
			name = "cluster-template-" + f.name + ".yaml"
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return nil, errors.Wrapf(err, "writing %s", path)
		}
		written = append(written, path)
	}
	classes, err := filepath.Glob(filepath.Join(templatesDir, "clusterclass-*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, src := range classes {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, errors.Wrap(err, "reading a ClusterClass")
		}
		path := filepath.Join(dir, filepath.Base(src))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, errors.Wrapf(err, "writing %s", path)
		}
		written = append(written, path)
	}
	sort.Strings(written)
	return written, nil
}

func mdRemediation(t *template) error {
	md, err := t.object("MachineDeployment", "-md-0")
	if err != nil {
		return err
	}
	if err := set(md, "spec.template.metadata.labels", `{e2e.remediation.label: ""}`); err != nil {
		return err
	}
	return t.add(remediationCheck("e2e.remediation.label: \"\"", ""))
}

// waitSignal is KCPRemediationSpec's script: it polls the ConfigMap mhc-test of the
// management cluster until its signal is "pass", acknowledges it and exits, so the spec decides
// when each control plane machine may run kubeadm. Shell variables are written $$ (clusterctl
// would substitute $name).
const waitSignal = `#!/bin/bash
set -o errexit
set -o pipefail
echo "Waiting for signal..."
TOKEN=$$1
SERVER=$$2
NAMESPACE=$$3
while true; do
  sleep 1s
  signal=$$(curl -k -s --header "Authorization: Bearer $$TOKEN" "$$SERVER/api/v1/namespaces/$$NAMESPACE/configmaps/mhc-test" | jq -r '.data.signal?')
  echo "signal $$signal"
  if [ "$$signal" == "pass" ]; then
    curl -k -s --header "Authorization: Bearer $$TOKEN" -XPATCH -H "Content-Type: application/strategic-merge-patch+json" --data '{"data": {"signal": "ack-pass"}}' "$$SERVER/api/v1/namespaces/$$NAMESPACE/configmaps/mhc-test"
    exit 0
  fi
done
`

func kcpRemediation(t *template) error {
	kcp, err := t.object("KubeadmControlPlane", "-control-plane")
	if err != nil {
		return err
	}
	file, err := valueNode("{path: /wait-signal.sh, permissions: \"0777\", content: \"\"}")
	if err != nil {
		return err
	}
	file.Content[5].Value, file.Content[5].Style = waitSignal, yaml.LiteralStyle
	files := get(kcp, "spec", "kubeadmConfigSpec", "files")
	if files == nil {
		return errors.New("the control plane has no files")
	}
	files.Content = append(files.Content, file)
	// Relative to /, where bootstrap commands start (as cloud-init's do).
	if err := appendTo(kcp, "spec.kubeadmConfigSpec.preKubeadmCommands", `['./wait-signal.sh "${TOKEN}" "${SERVER}" "${NAMESPACE}"']`); err != nil {
		return err
	}
	return t.add(remediationCheck("cluster.x-k8s.io/control-plane: \"\"\n      mhc-test: fail", "nodeStartupTimeoutSeconds: 30\n    "))
}

// remediationCheck is the MachineHealthCheck of the remediation specs: Machines matching
// selector (YAML lines under matchLabels) are unhealthy once their Node has the condition the
// spec sets False for 10 s; extraChecks go first under checks.
func remediationCheck(selector, extraChecks string) string {
	return `apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineHealthCheck
metadata:
  name: ${CLUSTER_NAME}-mhc-0
  namespace: ${NAMESPACE}
spec:
  clusterName: ${CLUSTER_NAME}
  selector:
    matchLabels:
      ` + selector + `
  checks:
    ` + extraChecks + `unhealthyNodeConditions:
    - type: e2e.remediation.condition
      status: "False"
      timeoutSeconds: 10
  remediation:
    triggerIf:
      unhealthyLessThanOrEqualTo: 100%
`
}

func selfHosted(t *template) error {
	for _, tmpl := range t.objects("DockyardMachineTemplate") {
		if err := set(tmpl, "spec.template.spec.extraMounts", `[{hostPath: /var/run/docker.sock, containerPath: /var/run/docker.sock}]`); err != nil {
			return err
		}
		if err := set(tmpl, "spec.template.spec.preLoadImages", `${DOCKYARD_PRELOAD_IMAGES:=[]}`); err != nil {
			return err
		}
	}
	return nil
}

// upgradeManagement is selfHosted with the cluster's nodes pointed at the local registry
// DOCKYARD_RELEASE_REGISTRY: a release's components name its images by digest, which only a
// registry keeps (an image copied from the engine into a node gets a new one).
func upgradeManagement(t *template) error {
	if err := selfHosted(t); err != nil {
		return err
	}
	dc, err := t.object("DockyardCluster", "")
	if err != nil {
		return err
	}
	return set(dc, "spec.registry", "${DOCKYARD_RELEASE_REGISTRY}")
}

// ConformanceNetwork is the engine network Cluster API's kubetest runs its conformance container
// on (CAPD's clusters are on it, made by kind); the conformance flavors' clusters join it so the
// container reaches their API server.
const ConformanceNetwork = "kind"

// conformanceNodes puts the cluster on ConformanceNetwork and has Dockyard load the images the
// conformance tests run into every node (the DockyardCluster's loadImages), since the tests
// cannot pull them.
func conformanceNodes(t *template) error {
	dc, err := t.object("DockyardCluster", "")
	if err != nil {
		return err
	}
	if err := set(dc, "spec.network.existing.name", ConformanceNetwork); err != nil {
		return err
	}
	return set(dc, "spec.loadImages", `${DOCKYARD_CONFORMANCE_IMAGES:=[]}`)
}

func kcpAdoption(t *template) error {
	var errs []error
	find := func(kind, nameSuffix string) *yaml.Node {
		o, err := t.object(kind, nameSuffix)
		errs = append(errs, err)
		return o
	}
	cluster, dc := find("Cluster", ""), find("DockyardCluster", "")
	cpTemplate, kcp := find("DockyardMachineTemplate", "-control-plane"), find("KubeadmControlPlane", "-control-plane")
	if err := kerrors.NewAggregate(errs); err != nil {
		return err
	}
	// step copies an object with the label of a step.
	step := func(n *yaml.Node, label string) *yaml.Node {
		c := cloneNode(n)
		errs = append(errs, setIn(c, []string{"metadata", "labels", "kcp-adoption." + label}, `""`))
		return c
	}

	// Step 1: the Cluster without a control plane provider, and its first machine by hand: a
	// DockyardMachine of the control plane's template, a KubeadmConfig of the control plane's
	// kubeadmConfigSpec for kubeadm init (so the KubeadmControlPlane finds it up to date), and
	// their Machine.
	c1, dc1 := step(cluster, "step1"), step(dc, "step1")
	unset(c1, "spec.controlPlaneRef")
	machine := &template{}
	errs = append(errs, machine.add(`apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: DockyardMachine
metadata:
  name: ${CLUSTER_NAME}-control-plane-0
  namespace: ${NAMESPACE}
  labels: {cluster.x-k8s.io/control-plane: "", kcp-adoption.step1: ""}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata:
  name: ${CLUSTER_NAME}-control-plane-0
  namespace: ${NAMESPACE}
  labels: {cluster.x-k8s.io/control-plane: "", kcp-adoption.step1: ""}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  name: ${CLUSTER_NAME}-control-plane-0
  namespace: ${NAMESPACE}
  labels: {cluster.x-k8s.io/control-plane: "", kcp-adoption.step1: ""}
spec:
  clusterName: ${CLUSTER_NAME}
  version: ${KUBERNETES_VERSION}
  bootstrap:
    configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: "${CLUSTER_NAME}-control-plane-0"}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockyardMachine, name: "${CLUSTER_NAME}-control-plane-0"}
`))
	if err := kerrors.NewAggregate(errs); err != nil {
		return err
	}
	objects := machine.objectsInOrder()
	objects[0].Content = append(objects[0].Content, scalar("spec"), cloneNode(get(cpTemplate, "spec", "template", "spec")))
	// What the KubeadmControlPlane itself gives its first machine: its kubeadmConfigSpec
	// without the joinConfiguration, which it compares (an init machine with a join
	// configuration differs from what it would make, and is rolled out).
	config := cloneNode(get(kcp, "spec", "kubeadmConfigSpec"))
	unset(config, "joinConfiguration")
	// And the kubeadm feature gate the KubeadmControlPlane adds for Kubernetes 1.31 to 1.35
	// (kubelets of control plane nodes talk to their local API server), which the suite's
	// KUBERNETES_VERSION (v1.34) is: without it the adopted machine is rolled out at once.
	errs = append(errs, set(config, "clusterConfiguration.featureGates.ControlPlaneKubeletLocalMode", "true"))
	objects[1].Content = append(objects[1].Content, scalar("spec"), config)

	// Step 2: the KubeadmControlPlane of one replica, its template, and the Cluster naming it.
	kcp2 := step(kcp, "step2")
	errs = append(errs, set(kcp2, "spec.replicas", "1"))
	objects = append([]*yaml.Node{c1, dc1}, append(objects, step(cluster, "step2"), step(dc, "step2"), step(cpTemplate, "step2"), kcp2)...)
	t.docs = nil
	for _, n := range objects {
		t.docs = append(t.docs, &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}})
	}
	return kerrors.NewAggregate(errs)
}

func scalar(value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
}

// objectsInOrder returns the top-level mappings of every document.
func (t *template) objectsInOrder() []*yaml.Node {
	out := make([]*yaml.Node, 0, len(t.docs))
	for _, d := range t.docs {
		out = append(out, d.Content[0])
	}
	return out
}

// preexistingTaints are the taints Cluster API's rollout specs expect the flavor to carry.
const preexistingTaints = `[{key: pre-existing-on-initialization-taint, value: on-initialization-value, effect: PreferNoSchedule, propagation: OnInitialization},
  {key: pre-existing-always-taint, value: always-value, effect: PreferNoSchedule, propagation: Always}]`

func kcpMDTaints(t *template) error {
	kcp, err := t.object("KubeadmControlPlane", "-control-plane")
	if err != nil {
		return err
	}
	md, err := t.object("MachineDeployment", "-md-0")
	if err != nil {
		return err
	}
	if err := set(kcp, "spec.machineTemplate.spec.taints", preexistingTaints); err != nil {
		return err
	}
	return set(md, "spec.template.spec.taints", preexistingTaints)
}

func topologyTaints(t *template) error {
	cluster, err := t.object("Cluster", "")
	if err != nil {
		return err
	}
	if err := set(cluster, "spec.topology.controlPlane.taints", preexistingTaints); err != nil {
		return err
	}
	mds := get(cluster, "spec", "topology", "workers", "machineDeployments")
	if mds == nil || len(mds.Content) == 0 {
		return errors.New("the topology has no MachineDeployment")
	}
	return set(mds.Content[0], "taints", preexistingTaints)
}

// inMemoryTopology sets the Cluster's inMemory variable: its nodes exist in the manager's memory.
func inMemoryTopology(t *template) error {
	cluster, err := t.object("Cluster", "")
	if err != nil {
		return err
	}
	variables := get(cluster, "spec", "topology", "variables")
	if variables == nil || variables.Kind != yaml.SequenceNode {
		return errors.New("the topology has no variables")
	}
	v, err := valueNode("{name: inMemory, value: true}")
	if err != nil {
		return err
	}
	variables.Content = append(variables.Content, v)
	return nil
}

// inMemoryTopologyTaints is the in-memory flavor with topologyTaints' taints.
func inMemoryTopologyTaints(t *template) error {
	if err := inMemoryTopology(t); err != nil {
		return err
	}
	return topologyTaints(t)
}

// machinePool is the MachinePool of inMemoryMachinePool, with its bootstrap configuration and
// DockyardMachinePool, whose specs are filled in from the workers' templates.
const machinePool = `apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata:
  name: ${CLUSTER_NAME}-mp-0
  namespace: ${NAMESPACE}
spec:
  clusterName: ${CLUSTER_NAME}
  replicas: ${WORKER_MACHINE_COUNT}
  template:
    spec:
      clusterName: ${CLUSTER_NAME}
      version: ${KUBERNETES_VERSION}
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: "${CLUSTER_NAME}-mp-0"}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockyardMachinePool, name: "${CLUSTER_NAME}-mp-0"}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata:
  name: ${CLUSTER_NAME}-mp-0
  namespace: ${NAMESPACE}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: DockyardMachinePool
metadata:
  name: ${CLUSTER_NAME}-mp-0
  namespace: ${NAMESPACE}
`

// inMemoryMachinePool replaces the MachineDeployment -md-0, its DockyardMachineTemplate and its
// KubeadmConfigTemplate by a MachinePool -mp-0 whose KubeadmConfig is the KubeadmConfigTemplate's
// spec and whose DockyardMachinePool's template is the DockyardMachineTemplate's: the pool's
// instances are made as the MachineDeployment's workers were.
func inMemoryMachinePool(t *template) error {
	var errs []error
	find := func(kind string) *yaml.Node {
		o, err := t.object(kind, "-md-0")
		errs = append(errs, err)
		return o
	}
	md, machineTemplate, configTemplate := find("MachineDeployment"), find("DockyardMachineTemplate"), find("KubeadmConfigTemplate")
	if err := kerrors.NewAggregate(errs); err != nil {
		return err
	}
	machineSpec, configSpec := get(machineTemplate, "spec", "template", "spec"), get(configTemplate, "spec", "template", "spec")
	if machineSpec == nil || configSpec == nil {
		return errors.New("the workers' templates have no spec.template.spec")
	}
	pool := &template{}
	if err := pool.add(machinePool); err != nil {
		return err
	}
	objects := pool.objectsInOrder()
	objects[1].Content = append(objects[1].Content, scalar("spec"), cloneNode(configSpec))
	poolSpec := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{scalar("template"), cloneNode(machineSpec)}}
	objects[2].Content = append(objects[2].Content, scalar("spec"), poolSpec)

	kept := t.docs[:0]
	for _, d := range t.docs {
		if o := d.Content[0]; o != md && o != machineTemplate && o != configTemplate {
			kept = append(kept, d)
		}
	}
	t.docs = append(kept, pool.docs...)
	return nil
}
