package controllers

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

const (
	cpName = "c1-control-plane-abc12"
	// cpNode is its node container: the hostname (the machine's name) with the namespace.
	cpNode = cpName + "." + testNS
)

func TestMachineWaitsForItsOwner(t *testing.T) {
	_, dm, _ := machineObjects(cpName, true)
	dm.OwnerReferences = nil
	f := newFixture(t, dm)
	f.reconcileMachine(cpName)

	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.WaitingForOwnerMachineReason)
	expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.WaitingForOwnerMachineReason)
	if controllerutil.ContainsFinalizer(got, infrav1.MachineFinalizer) {
		t.Error("finalizer added before the owner is known")
	}
	if n := len(f.rt.ContainerNames()); n != 0 {
		t.Errorf("%d containers created without an owner", n)
	}
}

func TestMachineWaitsForItsCluster(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	m.Labels[clusterv1.ClusterNameLabel], dm.Labels[clusterv1.ClusterNameLabel] = "missing", "missing"
	m.Spec.ClusterName = "missing"
	f := newFixture(t, m, dm, s)
	f.reconcileMachine(cpName)
	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.WaitingForClusterReason, "missing")
	if controllerutil.ContainsFinalizer(got, infrav1.MachineFinalizer) {
		t.Error("finalizer added before the cluster exists")
	}
}

func TestMachinePausedByTheCluster(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.pauseCluster()
	f.reconcileMachine(cpName)
	got := f.getMachine(cpName)
	expectCondition(t, got, clusterv1.PausedCondition, metav1.ConditionTrue, clusterv1.PausedReason)
	if n := len(f.rt.ContainerNames()); n != 1 { // only the load balancer
		t.Errorf("containers while paused: %v", f.rt.ContainerNames())
	}
}

func TestMachineWaitsForClusterInfrastructure(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.reconcileMachine(cpName)
	got := f.getMachine(cpName)
	if !controllerutil.ContainsFinalizer(got, infrav1.MachineFinalizer) {
		t.Error("finalizer missing once the owner and the cluster are known")
	}
	expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason, "DockyardCluster c1")
	// One reconcile records all of it: the finalizer, then Paused=False with the conditions
	// in the one deferred patch.
	expectCondition(t, got, clusterv1.PausedCondition, metav1.ConditionFalse, clusterv1.NotPausedReason)
}

func TestMachineWaitsForBootstrapData(t *testing.T) {
	for _, tt := range []struct {
		name         string
		controlPlane bool
		cpReady      bool
		reason       string
	}{
		{"worker before the control plane is initialized", false, false, infrav1.WaitingForControlPlaneInitializedReason},
		{"worker after the control plane is initialized", false, true, infrav1.WaitingForBootstrapDataReason},
		{"control plane", true, false, infrav1.WaitingForBootstrapDataReason},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, dm, s := machineObjects("c1-m", tt.controlPlane)
			m.Spec.Bootstrap.DataSecretName = nil
			f := newFixture(t, m, dm, s)
			f.provisionCluster()
			if tt.cpReady {
				f.setClusterStatus(func(c *clusterv1.Cluster) { c.Status.Initialization.ControlPlaneInitialized = ptr.To(true) })
			}
			// The node boots while the bootstrap provider writes the data: it runs as soon as
			// it lands instead of after a container start.
			for range 3 { // create, start, systemd and containerd up
				f.reconcileMachine("c1-m")
			}
			got := f.getMachine("c1-m")
			expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionTrue, infrav1.ContainerProvisionedReason)
			expectCondition(t, got, infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, tt.reason, "c1-m")
			expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionFalse, tt.reason)
		})
	}
}

// TestControlPlaneMachineProvisions walks one control plane machine through the whole flow.
func TestControlPlaneMachineProvisions(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	dm.Spec.PreLoadImages = []string{"localhost/dockyard/flannel:v1"}
	f := newFixture(t, m, dm, s)
	if err := f.rt.LoadImages(f.ctx, mustSave(t, "localhost/dockyard/flannel:v1")); err != nil {
		t.Fatal(err)
	}
	f.sim.HoldBootstrap = true
	f.provisionCluster()

	res := f.reconcileMachine(cpName)
	if res.RequeueAfter == 0 {
		t.Error("expected a requeue while the bootstrap runs")
	}

	// The node container: kind labels, control plane port on loopback, node mounts.
	node, err := f.rt.InspectContainer(f.ctx, cpNode)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"io.x-k8s.kind.cluster": testCluster + "." + testNS, "io.x-k8s.kind.role": "control-plane",
		"dockyard.x-k8s.io/cluster": testNS + "/" + testCluster, "dockyard.x-k8s.io/machine": testNS + "/" + cpName,
	} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	f.rt.WithContainer(cpNode, func(c *inmemory.Container) {
		spec := c.Spec
		if spec.Image != testNodeImage || spec.Hostname != cpName || spec.StopSignal != "SIGRTMIN+3" || !spec.Tty {
			t.Errorf("unexpected node spec: image %s hostname %s stop %s tty %v", spec.Image, spec.Hostname, spec.StopSignal, spec.Tty)
		}
		if len(spec.Ports) != 1 || spec.Ports[0].ContainerPort != 6443 || spec.Ports[0].HostIP != "127.0.0.1" {
			t.Errorf("control plane port not published on loopback: %+v", spec.Ports)
		}
		targets := map[string]container.MountType{}
		for _, m := range spec.Mounts {
			targets[m.Target] = m.Type
		}
		for target, typ := range map[string]container.MountType{"/var": container.MountVolume, "/run": container.MountTmpfs, "/tmp": container.MountTmpfs, "/lib/modules": container.MountBind} {
			if targets[target] != typ {
				t.Errorf("mount %s is %q, want %q", target, targets[target], typ)
			}
		}
		if !spec.Security.Privileged || !spec.Security.PrivateCgroupNamespace || !spec.Security.Unconfined {
			t.Errorf("node security: %+v", spec.Security)
		}
		// The Cluster names no Service range: the node guards kubeadm's.
		if !slices.Contains(spec.Env, "DOCKYARD_SERVICE_CIDRS=10.96.0.0/12") {
			t.Errorf("node environment %v, want kubeadm's Service range", spec.Env)
		}
		// The preloaded image is in the node's containerd.
		imgs, _ := c.Data["images"].([]string)
		if len(imgs) != 1 || imgs[0] != "localhost/dockyard/flannel:v1" {
			t.Errorf("preloaded images: %v", imgs)
		}
	})

	// The control plane joined the load balancer before its bootstrap finished.
	cfg := f.loadBalancerConfig()
	if !strings.Contains(cfg, "server "+cpNode+" ") {
		t.Errorf("control plane node missing from the load balancer:\n%s", cfg)
	}

	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionTrue, infrav1.ContainerProvisionedReason)
	expectCondition(t, got, infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootstrapRunningReason,
		"ignored what a container cannot honour", "ntp")
	if ptr.Deref(got.Status.Initialization.Provisioned, false) || got.Spec.ProviderID != "" {
		t.Error("provisioned before the bootstrap succeeded")
	}

	// The bootstrap finishes; the node registers.
	f.sim.Complete(cpNode)
	f.reconcileMachine(cpName) // provisioned; waits for the Node
	f.registerNode(cpName)
	f.reconcileMachine(cpName)

	got = f.getMachine(cpName)
	wantID := "dockyard:////" + cpNode
	if got.Spec.ProviderID != wantID || !ptr.Deref(got.Status.Initialization.Provisioned, false) {
		t.Fatalf("providerID %q provisioned %v", got.Spec.ProviderID, got.Status.Initialization.Provisioned)
	}
	if got.Status.FailureDomain != "fd1" {
		t.Errorf("failure domain %q", got.Status.FailureDomain)
	}
	types := map[clusterv1.MachineAddressType]string{}
	for _, a := range got.Status.Addresses {
		types[a.Type] = a.Address
	}
	if types[clusterv1.MachineHostName] != cpName || types[clusterv1.MachineInternalIP] == "" || types[clusterv1.MachineExternalIP] == "" {
		t.Errorf("addresses: %+v", got.Status.Addresses)
	}
	expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason)

	// The bootstrap files landed with their modes; the staged copies are gone.
	f.rt.WithContainer(cpNode, func(c *inmemory.Container) {
		if !strings.Contains(string(c.Files["/etc/kubernetes/pki/ca.key"]), "not-a-real-key") || string(c.Files["/etc/kubernetes/pki/ca.key.mode"]) != "0600" {
			t.Errorf("ca.key not installed with mode 0600")
		}
		if c.HasPrefix("/var/lib/dockyard/bootstrap/files/") {
			t.Error("staged bootstrap files left in the node")
		}
	})
	if cmds := f.sim.Commands[cpNode]; len(cmds) != 1 || !strings.Contains(cmds[0], testKubeadmCmd) {
		t.Errorf("bootstrap commands: %q", cmds)
	}

	node1 := &corev1.Node{}
	if err := f.workload.Get(f.ctx, client.ObjectKey{Name: cpName}, node1); err != nil {
		t.Fatal(err)
	}
	if node1.Spec.ProviderID != wantID {
		t.Errorf("workload Node providerID %q, want %q", node1.Spec.ProviderID, wantID)
	}
	events := strings.Join(f.events(), "\n")
	for _, e := range []string{"NodeCreated", "BootstrapStarted", "BootstrapSucceeded"} {
		if !strings.Contains(events, e) {
			t.Errorf("event %s missing from:\n%s", e, events)
		}
	}
}

// mustSave returns a docker-save archive of an image, as another engine saves it.
func mustSave(t *testing.T, img string) io.Reader {
	t.Helper()
	archive, err := inmemory.New(img).SaveImages(context.Background(), []string{img})
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

func (f *fixture) loadBalancerConfig() string {
	f.t.Helper()
	var cfg string
	f.rt.WithContainer(docker.LoadBalancerName(docker.ClusterKey{Namespace: testNS, Name: testCluster}), func(c *inmemory.Container) {
		cfg = string(c.Files[docker.LoadBalancerConfigPath])
	})
	return cfg
}

// provisionMachine drives a machine to provisioned.
func (f *fixture) provisionMachine(name string) {
	f.t.Helper()
	for range 5 {
		f.reconcileMachine(name)
	}
	if got := f.getMachine(name); !ptr.Deref(got.Status.Initialization.Provisioned, false) {
		f.t.Fatalf("machine %s not provisioned: %+v", name, got.Status.Conditions)
	}
}

func TestWorkerMachineDoesNotJoinTheLoadBalancer(t *testing.T) {
	m, dm, s := machineObjects("c1-md-0-xyz", false)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.provisionMachine("c1-md-0-xyz")
	node, err := f.rt.InspectContainer(f.ctx, "c1-md-0-xyz."+testNS)
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels["io.x-k8s.kind.role"] != "worker" || len(node.Ports) != 0 {
		t.Errorf("worker role %q ports %v", node.Labels["io.x-k8s.kind.role"], node.Ports)
	}
	if strings.Contains(f.loadBalancerConfig(), "c1-md-0-xyz") {
		t.Error("worker added to the load balancer")
	}
}

func TestMachineWaitsForSystemd(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.sim.BootChecks = 2
	f.provisionCluster()
	res := f.reconcileMachine(cpName)
	expectCondition(t, f.getMachine(cpName), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.ContainerStartingReason, "systemd is starting")
	if res.RequeueAfter == 0 {
		t.Error("no requeue while the node boots")
	}
	f.reconcileMachine(cpName)
	f.reconcileMachine(cpName)
	expectCondition(t, f.getMachine(cpName), infrav1.ContainerProvisionedCondition, metav1.ConditionTrue, infrav1.ContainerProvisionedReason)
}

func TestMachineWhoseContainerRuntimeCannotRunPodsIsReportedNotBootstrapped(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	// What containerd logs when the engine's host has no inotify instance left.
	f.sim.CRIFailure = "failed to create CRI service: failed to create cni conf monitor for default: failed to create fsnotify watcher: too many open files"
	f.provisionCluster()
	res := f.reconcileMachine(cpName)
	f.reconcileMachine(cpName)
	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.NodeRuntimeFailedReason,
		"CRI plugin failed to load", "too many open files", "fs.inotify.max_user_instances")
	expectCondition(t, got, infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.WaitingForContainerReason)
	if n := len(f.sim.Commands[cpNode]); n != 0 {
		t.Errorf("the bootstrap ran %d commands in a node that cannot run pods", n)
	}
	if res.RequeueAfter == 0 {
		t.Error("no requeue: the condition would go stale")
	}
	if events := strings.Join(f.events(), "\n"); !strings.Contains(events, "Warning NodeRuntimeFailed") {
		t.Errorf("no warning event; events:\n%s", events)
	}
}

// Objects admitted before the administrator tightened the policy (or without the webhook) are
// checked again before anything is created on the engine.
func TestMachineOutsideThePolicyCreatesNothing(t *testing.T) {
	for name, mutate := range map[string]func(*infrav1.DockyardMachine){
		"host root mount": func(dm *infrav1.DockyardMachine) {
			dm.Spec.ExtraMounts = []infrav1.Mount{{HostPath: "/", ContainerPath: "/host"}}
		},
		"foreign image": func(dm *infrav1.DockyardMachine) { dm.Spec.Image = "alpine:3" },
	} {
		t.Run(name, func(t *testing.T) {
			m, dm, s := machineObjects(cpName, true)
			mutate(dm)
			f := newFixture(t, m, dm, s)
			f.nodes = docker.NewManager(f.rt, docker.ManagerOptions{Policy: policy.Default()})
			f.provisionCluster()
			lbCreates := f.rt.CallCount("CreateContainer")
			if err := f.reconcileMachineErr(cpName); err != nil {
				t.Fatalf("a refusal is not an error to retry: %v", err)
			}
			expectCondition(t, f.getMachine(cpName), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.NotAllowedReason, "--allowed-")
			if n := f.rt.CallCount("CreateContainer") - lbCreates; n != 0 {
				t.Errorf("%d containers created besides the load balancer", n)
			}
		})
	}
}

func TestMachineImageFailures(t *testing.T) {
	t.Run("node image missing and not pullable", func(t *testing.T) {
		m, dm, s := machineObjects(cpName, true)
		dm.Spec.Image = "localhost/dockyard/node:v9.9.9"
		f := newFixture(t, m, dm, s)
		f.provisionCluster()
		if err := f.reconcileMachineErr(cpName); err == nil {
			t.Fatal("expected an error")
		}
		expectCondition(t, f.getMachine(cpName), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.ImageFailedReason, "localhost/dockyard/node:v9.9.9")
	})
	t.Run("pullable node image is pulled", func(t *testing.T) {
		m, dm, s := machineObjects(cpName, true)
		dm.Spec.Image = "registry.example/node:v1"
		f := newFixture(t, m, dm, s)
		f.rt.Pullable["registry.example/node:v1"] = true
		f.provisionCluster()
		f.provisionMachine(cpName)
		if f.rt.CallCount("PullImage") != 1 {
			t.Errorf("PullImage called %d times", f.rt.CallCount("PullImage"))
		}
	})
	t.Run("preload image missing on the engine", func(t *testing.T) {
		m, dm, s := machineObjects(cpName, true)
		dm.Spec.PreLoadImages = []string{"localhost/missing:v1"}
		f := newFixture(t, m, dm, s)
		f.provisionCluster()
		if err := f.reconcileMachineErr(cpName); err == nil {
			t.Fatal("expected an error")
		}
		expectCondition(t, f.getMachine(cpName), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.PreloadFailedReason, "localhost/missing:v1")
	})
	t.Run("machine without version or image", func(t *testing.T) {
		m, dm, s := machineObjects(cpName, true)
		m.Spec.Version = ""
		f := newFixture(t, m, dm, s)
		f.provisionCluster()
		f.reconcileMachine(cpName)
		expectCondition(t, f.getMachine(cpName), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.ImageFailedReason, "spec.version")
	})
}

func TestMachineFallsBackWhenPrivilegedIsRefused(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.rt.StartHook = func(spec container.ContainerSpec) error {
		if spec.Security.Privileged {
			return errString("OCI runtime create failed: unable to apply caps: operation not permitted")
		}
		return nil
	}
	f.provisionCluster()
	f.provisionMachine(cpName)
	f.rt.WithContainer(cpNode, func(c *inmemory.Container) {
		sec := c.Spec.Security
		if sec.Privileged || len(sec.CapAdd) != 1 || sec.CapAdd[0] != "ALL" || len(sec.CapDrop) != 1 || sec.CapDrop[0] != "SYS_RESOURCE" ||
			len(sec.DeviceCgroupRules) != 1 || !sec.PrivateCgroupNamespace || !sec.Unconfined {
			t.Errorf("unprivileged node security: %+v", sec)
		}
	})
	// The next node goes straight to the unprivileged set.
	starts := f.rt.CallCount("StartContainer")
	m2, dm2, s2 := machineObjects("c1-md-0-aaa", false)
	for _, o := range []client.Object{m2, dm2, s2} {
		if err := f.c.Create(f.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.provisionMachine("c1-md-0-aaa")
	if got := f.rt.CallCount("StartContainer") - starts; got != 1 {
		t.Errorf("second node started %d times, want 1", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestMachineBootstrapDataInvalid(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	s.Data["value"] = []byte("#cloud-config\nwrite_files:\n- path: /x\n  encoding: b64\n  content: '***'\n")
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.reconcileMachine(cpName)
	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootstrapDataInvalidReason, cpName+"-bootstrap")
	expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.BootstrapDataInvalidReason)
}

func TestMachineBootstrapFailureShowsCommandAndOutput(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.sim.FailCommand = "kubeadm init"
	f.provisionCluster()
	f.reconcileMachine(cpName) // starts the bootstrap
	f.reconcileMachine(cpName) // sees it fail
	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootstrapFailedReason,
		"step 3/3", testKubeadmCmd, "exited 1", "simulated failure")
	if ptr.Deref(got.Status.Initialization.Provisioned, false) {
		t.Error("provisioned after a failed bootstrap")
	}
	// It is not started again.
	f.reconcileMachine(cpName)
	if n := len(f.sim.Commands[cpNode]); n != 1 {
		t.Errorf("kubeadm ran %d times", n)
	}
}

func TestMachineBootstrapTimesOut(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	dm.Spec.BootstrapTimeout = &metav1.Duration{Duration: time.Minute}
	f := newFixture(t, m, dm, s)
	f.sim.HoldBootstrap = true
	f.provisionCluster()
	f.reconcileMachine(cpName)
	// Two minutes later the bootstrap still runs: Dockyard stops it and reports the timeout.
	f.backdateBootstrap(cpNode, 2*time.Minute)
	f.reconcileMachine(cpName)
	f.reconcileMachine(cpName)
	expectCondition(t, f.getMachine(cpName), infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootstrapTimedOutReason, "1m0s")
}

// While kubeadm runs, a poll that finds the same step writes nothing: every status write wakes
// Cluster API's Machine controller, and with ten clusters coming up at once a message that
// counted the seconds wrote each DockyardMachine every two seconds.
func TestMachineBootstrapPollWritesOnlyWhenTheStepChanges(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.sim.HoldBootstrap = true
	f.provisionCluster()
	f.reconcileMachine(cpName) // starts the bootstrap
	f.reconcileMachine(cpName) // finds it running
	before := f.getMachine(cpName)
	expectCondition(t, before, infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootstrapRunningReason, "since")

	time.Sleep(1100 * time.Millisecond) // later polls (a second on: a count of seconds would differ), the same step
	f.reconcileMachine(cpName)
	f.reconcileMachine(cpName)
	if after := f.getMachine(cpName); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("a poll with nothing new wrote the DockyardMachine: %q -> %q", conditions.GetMessage(before, infrav1.BootstrapSucceededCondition),
			conditions.GetMessage(after, infrav1.BootstrapSucceededCondition))
	}
}

func TestMachineBootstrapSurvivesAManagerRestart(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.sim.HoldBootstrap = true
	f.provisionCluster()
	f.reconcileMachine(cpName)

	// A new manager process: a fresh node manager, nothing remembered in memory.
	f.nodes = docker.NewManager(f.rt, docker.ManagerOptions{})
	for range 3 {
		f.reconcileMachine(cpName)
	}
	expectCondition(t, f.getMachine(cpName), infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootstrapRunningReason)
	f.sim.Complete(cpNode)
	f.reconcileMachine(cpName)
	if n := len(f.sim.Commands[cpNode]); n != 1 {
		t.Errorf("kubeadm ran %d times across the restart", n)
	}
	if !ptr.Deref(f.getMachine(cpName).Status.Initialization.Provisioned, false) {
		t.Error("not provisioned after the bootstrap finished")
	}
}

func TestMachineContainerStoppedOrVanishedIsReportedNotRecreated(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.provisionMachine(cpName)

	f.rt.StopContainer(cpNode, 137)
	f.reconcileMachine(cpName)
	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.ContainerStoppedReason, "exit code 137")
	expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.ContainerStoppedReason)

	if err := f.rt.RemoveContainer(f.ctx, cpNode); err != nil {
		t.Fatal(err)
	}
	creates := f.rt.CallCount("CreateContainer")
	f.reconcileMachine(cpName)
	expectCondition(t, f.getMachine(cpName), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.ContainerNotFoundReason, "not recreated")
	if f.rt.CallCount("CreateContainer") != creates {
		t.Error("a vanished node container was recreated")
	}
}

func TestDeletingAControlPlaneMachineLeavesTheLoadBalancerFirst(t *testing.T) {
	m1, dm1, s1 := machineObjects(cpName, true)
	m2, dm2, s2 := machineObjects("c1-control-plane-def34", true)
	f := newFixture(t, m1, dm1, s1, m2, dm2, s2)
	f.provisionCluster()
	f.provisionMachine(cpName)
	f.provisionMachine("c1-control-plane-def34")
	cfg := f.loadBalancerConfig()
	if !strings.Contains(cfg, "server "+cpName) || !strings.Contains(cfg, "server c1-control-plane-def34") {
		t.Fatalf("both control planes expected in the load balancer:\n%s", cfg)
	}

	// Cluster API deletes the Machine first: the node leaves the backends while it still runs.
	machine := &clusterv1.Machine{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(m1), machine); err != nil {
		t.Fatal(err)
	}
	machine.Finalizers = []string{"test.cluster.x-k8s.io/hold"}
	if err := f.c.Update(f.ctx, machine); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(f.ctx, machine); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(cpName)
	if cfg := f.loadBalancerConfig(); strings.Contains(cfg, "server "+cpName) {
		t.Errorf("deleting machine still a backend:\n%s", cfg)
	}
	if _, err := f.rt.InspectContainer(f.ctx, cpNode); err != nil {
		t.Errorf("container removed before the DockyardMachine was deleted: %v", err)
	}
	signals := 0
	f.rt.WithContainer(docker.LoadBalancerName(docker.ClusterKey{Namespace: testNS, Name: testCluster}), func(c *inmemory.Container) { signals = len(c.Signals) })
	if signals < 3 {
		t.Errorf("load balancer reloaded %d times, want a reload per change", signals)
	}

	// Then the DockyardMachine: container and volume go, the finalizer with them.
	if err := f.c.Delete(f.ctx, f.getMachine(cpName)); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(cpName)
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: cpName}, &infrav1.DockyardMachine{}); err == nil {
		t.Error("DockyardMachine still exists: finalizer not removed")
	}
	for _, n := range f.rt.ContainerNames() {
		if n == cpNode {
			t.Error("node container left behind")
		}
	}
	for _, v := range f.rt.VolumeNames() {
		if strings.HasPrefix(v, cpName) {
			t.Errorf("volume %s left behind", v)
		}
	}
	if !strings.Contains(f.loadBalancerConfig(), "server c1-control-plane-def34") {
		t.Error("the remaining control plane left the load balancer")
	}
}

func TestDeletionWorksWhenThingsAreAlreadyGone(t *testing.T) {
	t.Run("container already gone", func(t *testing.T) {
		m, dm, s := machineObjects(cpName, true)
		f := newFixture(t, m, dm, s)
		f.provisionCluster()
		f.provisionMachine(cpName)
		if err := f.rt.RemoveContainer(f.ctx, cpNode); err != nil {
			t.Fatal(err)
		}
		f.deleteAndExpectGone(cpName)
	})
	t.Run("cluster and machine already gone", func(t *testing.T) {
		m, dm, s := machineObjects(cpName, true)
		f := newFixture(t, m, dm, s)
		f.provisionCluster()
		f.provisionMachine(cpName)
		for _, o := range []client.Object{m, f.cluster} {
			if err := f.c.Delete(f.ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		f.deleteAndExpectGone(cpName)
		if len(f.rt.VolumeNames()) != 0 {
			t.Errorf("volumes left: %v", f.rt.VolumeNames())
		}
	})
	t.Run("owner reference never set", func(t *testing.T) {
		_, dm, _ := machineObjects(cpName, true)
		dm.OwnerReferences = nil
		dm.Finalizers = []string{infrav1.MachineFinalizer}
		f := newFixture(t, dm)
		f.deleteAndExpectGone(cpName)
	})
}

func (f *fixture) deleteAndExpectGone(name string) {
	f.t.Helper()
	if err := f.c.Delete(f.ctx, f.getMachine(name)); err != nil {
		f.t.Fatal(err)
	}
	f.reconcileMachine(name)
	f.reconcileMachine(name)
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: name}, &infrav1.DockyardMachine{}); err == nil {
		f.t.Error("DockyardMachine still exists: finalizer not removed")
	}
	for _, n := range f.rt.ContainerNames() {
		if n == name {
			f.t.Error("node container left behind")
		}
	}
}

func TestReadySummaryNamesWhatTheMachineWaitsFor(t *testing.T) {
	dm := &infrav1.DockyardMachine{}
	setWaiting(dm, infrav1.WaitingForBootstrapDataReason, "waiting")
	if err := setReadySummary(dm, infrav1.ContainerProvisionedCondition, infrav1.BootstrapSucceededCondition); err != nil {
		t.Fatal(err)
	}
	expectCondition(t, dm, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, "waiting")
	if !conditions.IsFalse(dm, clusterv1.ReadyCondition) {
		t.Error("Ready should be false")
	}
}

func TestDeletionForClusterctlMoveKeepsTheContainers(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.provisionMachine(cpName)

	// clusterctl move deletes the source's objects with this annotation once the target has them.
	for _, obj := range []client.Object{f.getMachine(cpName), f.getDockyardCluster()} {
		obj.SetAnnotations(map[string]string{"clusterctl.cluster.x-k8s.io/delete-for-move": ""})
		if err := f.c.Update(f.ctx, obj); err != nil {
			t.Fatal(err)
		}
		if err := f.c.Delete(f.ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	f.reconcileMachine(cpName)
	f.reconcileMachine(cpName)
	f.reconcileClusterN(2)
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: cpName}, &infrav1.DockyardMachine{}); err == nil {
		t.Error("DockyardMachine still exists: finalizer not removed")
	}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.dc), &infrav1.DockyardCluster{}); err == nil {
		t.Error("DockyardCluster still exists: finalizer not removed")
	}
	if names := f.rt.ContainerNames(); len(names) != 2 {
		t.Errorf("containers after a move: %v, want the node and the load balancer kept", names)
	}
	if len(f.rt.VolumeNames()) == 0 || len(f.rt.NetworkNames()) != 1 {
		t.Errorf("volumes %v networks %v removed by a move", f.rt.VolumeNames(), f.rt.NetworkNames())
	}
}

// The cluster's loadImages reach every node: one that joins, and running ones when the list
// grows or the engine's image is rebuilt.
func TestClusterImagesReachNewAndRunningNodes(t *testing.T) {
	const worker = "c1-md-0-img"
	m, dm, s := machineObjects(worker, false)
	f := newFixture(t, m, dm, s)
	for _, img := range []string{"localhost/app:dev", "localhost/tool:v1"} {
		if err := f.rt.LoadImages(f.ctx, mustSave(t, img)); err != nil {
			t.Fatal(err)
		}
	}
	f.provisionCluster()
	dc := f.getDockyardCluster()
	dc.Spec.LoadImages = []string{"localhost/app:dev"}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.provisionMachine(worker)
	node := worker + "." + testNS
	if imgs, _ := f.sim.Images(node); !slices.Equal(imgs, []string{"localhost/app:dev"}) {
		t.Fatalf("a new node has %v, want the cluster's image", imgs)
	}

	// Running nodes get what the list gains, and nothing twice.
	dc = f.getDockyardCluster()
	dc.Spec.LoadImages = append(dc.Spec.LoadImages, "localhost/tool:v1")
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(worker)
	f.reconcileMachine(worker)
	imgs, imports := f.sim.Images(node)
	if !slices.Equal(imgs, []string{"localhost/app:dev", "localhost/tool:v1"}) || imports != 2 {
		t.Fatalf("a running node has %v after %d imports, want both images, each imported once", imgs, imports)
	}

	// A rebuilt image (another ID under the same name) is not looked for by an idle node's
	// reconcile; `dockyard load image` copies it (Node.LoadImages), and a node joining later
	// gets the engine's current one.
	if err := f.rt.LoadImages(f.ctx, rebuiltImage(t, "localhost/app:dev")); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(worker)
	if _, imports := f.sim.Images(node); imports != 2 {
		t.Errorf("%d imports after a rebuild and a resync, want 2", imports)
	}
	handle, err := f.nodes.FindNode(f.ctx, docker.ClusterKey{Namespace: testNS, Name: testCluster}, worker)
	if err != nil {
		t.Fatal(err)
	}
	if err := handle.LoadImages(f.ctx, []string{"localhost/app:dev"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, imports := f.sim.Images(node); imports != 3 {
		t.Errorf("%d imports after loading the rebuilt image, want 3", imports)
	}

	// An image the cluster no longer lists is forgotten, and looked for again when listed again.
	dc = f.getDockyardCluster()
	dc.Spec.LoadImages = []string{"localhost/tool:v1"}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(worker)
	if got := f.getMachine(worker).Status.LoadedImages; !slices.Equal(got, []string{"localhost/tool:v1"}) {
		t.Errorf("status.loadedImages %v, want the cluster's one image", got)
	}
}

// An idle provisioned node costs no command: its bootstrap's outcome is final, its images are
// loaded, its registry configured; the reconciles that keep checking it (each minute, and at
// every resync) only look at the engine's record of its container.
func TestIdleProvisionedNodeRunsNoCommand(t *testing.T) {
	const worker = "c1-md-0-idle"
	m, dm, s := machineObjects(worker, false)
	dm.Spec.PreLoadImages = []string{"localhost/app:dev"}
	f := newFixture(t, m, dm, s)
	if err := f.rt.LoadImages(f.ctx, mustSave(t, "localhost/app:dev")); err != nil {
		t.Fatal(err)
	}
	f.provisionCluster()
	dc := f.getDockyardCluster()
	dc.Spec.LoadImages = []string{"localhost/app:dev"}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.registerNode(docker.NodeHostname(testCluster, worker))
	f.provisionMachine(worker)
	f.reconcileMachine(worker) // the Node's providerID
	before := f.rt.CallCount("Exec")
	for range 10 {
		f.reconcileMachine(worker)
	}
	if n := f.rt.CallCount("Exec") - before; n != 0 {
		t.Errorf("10 reconciles of an idle provisioned node ran %d commands in it, want 0", n)
	}
	expectCondition(t, f.getMachine(worker), infrav1.BootstrapSucceededCondition, metav1.ConditionTrue, infrav1.BootstrapSucceededReason)
}

// A failed bootstrap is final: the node is not asked again.
func TestFailedBootstrapIsNotReadAgain(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.sim.FailCommand = "kubeadm init"
	f.provisionCluster()
	for range 4 {
		f.reconcileMachine(cpName)
	}
	expectCondition(t, f.getMachine(cpName), infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootstrapFailedReason)
	before := f.rt.CallCount("Exec")
	for range 5 {
		f.reconcileMachine(cpName)
	}
	if n := f.rt.CallCount("Exec") - before; n != 0 {
		t.Errorf("reconciles after a failed bootstrap ran %d commands in the node, want 0", n)
	}
}

// A fixed host port another container holds leaves the machine waiting with a condition that
// says so, and the node starts once the port is free.
func TestMachineWithATakenHostPortWaitsForIt(t *testing.T) {
	const worker = "c1-md-0-port"
	m, dm, s := machineObjects(worker, false)
	dm.Spec.Ports = []infrav1.PortMapping{{ContainerPort: 30080, HostPort: 8080}, {ContainerPort: 30443}}
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	holder := container.ContainerSpec{Name: "holder", Image: testNodeImage, Ports: []container.PortMapping{{ContainerPort: 80, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: 8080}}}
	if err := f.rt.CreateContainer(f.ctx, holder); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.StartContainer(f.ctx, "holder"); err != nil {
		t.Fatal(err)
	}

	if res := f.reconcileMachine(worker); res.RequeueAfter != portRetry {
		t.Errorf("requeue after %s, want %s", res.RequeueAfter, portRetry)
	}
	expectCondition(t, f.getMachine(worker), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.PortUnavailableReason, "spec.ports", "8080")

	if err := f.rt.RemoveContainer(f.ctx, "holder"); err != nil {
		t.Fatal(err)
	}
	f.provisionMachine(worker)
	got := f.getMachine(worker).Status.Ports
	if len(got) != 2 || got[0].HostPort != 8080 || got[0].ListenAddress != "127.0.0.1" || got[1].ContainerPort != 30443 || got[1].HostPort == 0 {
		t.Errorf("status.ports %+v, want 30080 on 127.0.0.1:8080 and 30443 on a port the engine picked", got)
	}
}

// rebuiltImage is a docker-save archive of another image under ref.
func rebuiltImage(t *testing.T, ref string) io.Reader {
	t.Helper()
	cfg, err := empty.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Labels = map[string]string{"rebuilt": time.Now().String()}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := tarball.Write(tag, img, &archive); err != nil {
		t.Fatal(err)
	}
	return &archive
}

// A cluster naming a local registry waits for it, then its nodes' containerd is pointed at
// the registry's address on the cluster's network.
func TestMachineUsesTheClustersLocalRegistry(t *testing.T) {
	const worker = "c1-md-0-reg"
	m, dm, s := machineObjects(worker, false)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	dc := f.getDockyardCluster()
	dc.Spec.Registry = "dev-registry"
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.reconcileMachine(worker)
	}
	expectCondition(t, f.getMachine(worker), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.RegistryNotFoundReason,
		"dev-registry", "dockyard registry create --name dev-registry --namespaces "+testNS)

	if err := f.rt.LoadImages(f.ctx, mustSave(t, "localhost/dockyard/registry:v3")); err != nil {
		t.Fatal(err)
	}
	// A registry of another namespace is refused, and attached to nothing.
	other, err := f.nodes.CreateRegistry(f.ctx, docker.RegistrySpec{Name: "dev-registry", Image: "localhost/dockyard/registry:v3", HostPort: 5001, Namespaces: []string{"team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(worker)
	expectCondition(t, f.getMachine(worker), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.RegistryNotAllowedReason,
		"dev-registry", "team-b", "--namespaces team-b,"+testNS)
	if other, _ := f.nodes.FindRegistry(f.ctx, other.Name); other == nil || other.Address(docker.DefaultNetworkName(docker.ClusterKey{Namespace: testNS, Name: testCluster})) != "" {
		t.Errorf("a registry that does not serve %s was attached to its cluster's network", testNS)
	}
	if _, err := f.nodes.DeleteRegistry(f.ctx, other.Name, false); err != nil {
		t.Fatal(err)
	}

	reg, err := f.nodes.CreateRegistry(f.ctx, docker.RegistrySpec{Name: "dev-registry", Image: "localhost/dockyard/registry:v3", HostPort: 5001, Namespaces: []string{testNS}})
	if err != nil {
		t.Fatal(err)
	}
	f.provisionMachine(worker)
	reg, err = f.nodes.FindRegistry(f.ctx, reg.Name)
	if err != nil {
		t.Fatal(err)
	}
	network := docker.DefaultNetworkName(docker.ClusterKey{Namespace: testNS, Name: testCluster})
	address := reg.Address(network)
	if reg.Host() != "localhost:5001" || address == "" {
		t.Fatalf("registry %s on %q, address on the cluster network %q", reg.Name, reg.Host(), address)
	}
	f.rt.WithContainer(worker+"."+testNS, func(c *inmemory.Container) {
		hosts := string(c.Files["/etc/containerd/certs.d/localhost:5001/hosts.toml"])
		if !strings.Contains(hosts, `server = "http://`+address+`:5000"`) {
			t.Errorf("the node's hosts.toml for localhost:5001:\n%s", hosts)
		}
	})

	// Deleting the cluster detaches the registry from its network, which goes.
	if err := f.nodes.DeleteCluster(f.ctx, docker.ClusterKey{Namespace: testNS, Name: testCluster}, network); err != nil {
		t.Fatal(err)
	}
	if reg, _ := f.nodes.FindRegistry(f.ctx, reg.Name); reg == nil || reg.Address(network) != "" || !reg.Running() {
		t.Errorf("after the cluster's deletion the registry is %+v", reg)
	}
}

// A provisioned machine whose owner reference is taken away and given back (Cluster API's
// owner reference resilience check does both) waits meanwhile, and is Ready again after: the
// quiet path of a provisioned node must not leave the wait's condition behind, and the wait
// must not forget the bootstrap's outcome (the node would be asked for it again).
func TestProvisionedMachineIsReadyAgainWhenItsOwnerReturns(t *testing.T) {
	const worker = "c1-md-0-owner"
	m, dm, s := machineObjects(worker, false)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.registerNode(docker.NodeHostname(testCluster, worker))
	f.provisionMachine(worker)
	f.reconcileMachine(worker) // the Node's providerID
	expectCondition(t, f.getMachine(worker), clusterv1.ReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason)

	got := f.getMachine(worker)
	owners := got.OwnerReferences
	got.OwnerReferences = nil
	if err := f.c.Update(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(worker)
	expectCondition(t, f.getMachine(worker), infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.WaitingForOwnerMachineReason)

	expectCondition(t, f.getMachine(worker), infrav1.BootstrapSucceededCondition, metav1.ConditionTrue, infrav1.BootstrapSucceededReason)

	got = f.getMachine(worker)
	got.OwnerReferences = owners
	if err := f.c.Update(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	before := f.rt.CallCount("Exec")
	f.reconcileMachine(worker)
	if n := f.rt.CallCount("Exec") - before; n != 0 {
		t.Errorf("the reconcile after the owner came back ran %d commands in the node, want 0 (its bootstrap's outcome is known)", n)
	}
	got = f.getMachine(worker)
	expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionTrue, infrav1.ContainerProvisionedReason)
	expectCondition(t, got, infrav1.BootstrapSucceededCondition, metav1.ConditionTrue, infrav1.BootstrapSucceededReason)
	expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason)
}

func TestNodesGuardTheServiceRangesTheClusterNames(t *testing.T) {
	cluster := &clusterv1.Cluster{}
	if got := serviceCIDRs(cluster); !slices.Equal(got, []string{"10.96.0.0/12"}) {
		t.Errorf("no range named: %v, want kubeadm's", got)
	}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{" fd00:100:64::/108", "10.128.0.0/16 "}
	if got := serviceCIDRs(cluster); !slices.Equal(got, []string{"fd00:100:64::/108", "10.128.0.0/16"}) {
		t.Errorf("ranges named: %v, want them", got)
	}
}

// A slow boot (the boot-delay annotation): the node comes up and waits, the condition saying
// until when and the reconcile coming back then; without the annotation the bootstrap starts.
func TestMachineBootDelayHoldsTheBootstrap(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	dm.Annotations = map[string]string{infrav1.BootDelayAnnotation: "1h"}
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	result := f.reconcileMachine(cpName)
	expectCondition(t, f.getMachine(cpName), infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootDelayedReason,
		"holds its bootstrap until", infrav1.BootDelayAnnotation)
	if result.RequeueAfter < 59*time.Minute || result.RequeueAfter > time.Hour {
		t.Errorf("held for an hour: requeued after %s", result.RequeueAfter)
	}
	if n := len(f.sim.Commands[cpNode]); n != 0 {
		t.Errorf("%d bootstrap commands ran during the boot delay", n)
	}

	got := f.getMachine(cpName)
	delete(got.Annotations, infrav1.BootDelayAnnotation)
	if err := f.c.Update(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(cpName)
	f.reconcileMachine(cpName)
	if n := len(f.sim.Commands[cpNode]); n != 1 {
		t.Errorf("the delay removed: %d bootstrap commands ran, want 1", n)
	}
}
