// Package mgmt makes a management cluster: Kubernetes in one Dockyard node container on the
// local engine, with the images of the components to install preloaded and the engine's socket
// mounted, so Dockyard's manager can run in it as a pod and drive the same engine. It is made
// directly through Dockyard's node layer (package docker), as Cluster API's kubeadm bootstrap
// provider would make a first control plane machine, without Cluster API running anywhere,
// and it outlives the process that made it, like a kind cluster.
//
// Its containers carry Dockyard's cluster label with an empty namespace ("/<name>"), which no
// Cluster API cluster can have, so workload clusters' sweeps never select it, and the manager
// running in it recognises its node as a management node (docker.ManagementSelector).
package mgmt

import (
	"context"
	"net"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dockyard-dev/dockyard/docker"
)

const (
	// DefaultName is the management cluster's name when none is given.
	DefaultName = "dockyard-mgmt"
	// DefaultEngineSocket is where the engine's socket is, on the engine's host.
	DefaultEngineSocket = "/var/run/docker.sock"
	// nodeMachine names the one node: its container is "<cluster name>-control-plane".
	nodeMachine = "control-plane"
	// podSubnet and serviceSubnet are kubeadm's and kind's defaults.
	podSubnet     = "10.244.0.0/16"
	serviceSubnet = "10.96.0.0/12"
)

// managementCPUShares weighs the management node's CPU time at eight workload nodes' (each has
// the engine's default, 1024): when the host is saturated — ten 1+1 clusters on two cores —
// Cluster API's controllers, Dockyard's and the API server they talk to still get about a
// quarter of it, instead of one part in twenty-one. An idle host is not affected.
const managementCPUShares = 8 * 1024

// Timeouts, generous for two slow cores.
const (
	nodeBootTimeout  = 3 * time.Minute
	bootstrapTimeout = 10 * time.Minute
	readyTimeout     = 5 * time.Minute
	pollInterval     = 2 * time.Second
)

// Options describe a management cluster.
type Options struct {
	// Name of the cluster; DefaultName when empty.
	Name string
	// NodeImage is a Dockyard (or kind) node image.
	NodeImage string
	// KubernetesVersion the node image holds, e.g. "v1.34.4".
	KubernetesVersion string
	// Images are copied from the engine into the node, so pods using them never pull.
	Images []string
	// EngineSocket is the engine's socket on the engine's host, mounted at
	// /var/run/docker.sock in the node; DefaultEngineSocket when empty.
	EngineSocket string
	// AdmissionPlugins the API server enables besides its defaults, e.g.
	// OwnerReferencesPermissionEnforcement (as Cluster API's end-to-end suite has it on kind).
	AdmissionPlugins []string
	// APIServerEnv are environment variables of the API server's process, e.g. GOGC=400 and
	// GOMEMLIMIT=8GiB: at thousands of objects its garbage collector is a third of its CPU
	// (docs/performance.md).
	APIServerEnv map[string]string
	// Zones, when set, give the cluster one worker per zone, labelled topology.kubernetes.io/zone
	// with it: an infrastructure cluster whose zones are failure domains (the workers are
	// simulated hosts, the engine's containers).
	Zones []string
	// NetworkPolicyImage, when set, is kube-router's image (cmd/tools/imagebuild
	// NetworkPolicyImage), which the cluster then runs to enforce NetworkPolicies; Images must
	// hold it.
	NetworkPolicyImage string
	// Logf reports progress; nil is quiet.
	Logf func(format string, args ...any)
}

func (o *Options) defaults() error {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.EngineSocket == "" {
		o.EngineSocket = DefaultEngineSocket
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.NodeImage == "" || o.KubernetesVersion == "" {
		return errors.New("a management cluster needs a node image and its Kubernetes version")
	}
	for _, z := range o.Zones {
		if err := validZone(z); err != nil {
			return err
		}
	}
	return nil
}

// Cluster is a management cluster on the engine.
type Cluster struct {
	Name string
	// Node is the node container's name (and the Kubernetes node's).
	Node string
	// Network is the engine network the node is on.
	Network string
	// Address is the node's fixed address on Network, which its kubelet registers as the
	// Node's only internal IP: the node joins workload networks, whose interfaces the engine
	// may bring up in any order when it restarts, and kubelet would otherwise take the address
	// of whichever holds the default route (admission webhooks then answered "no route to host"
	// for minutes).
	Address string
	// Kubeconfig is the administrator's kubeconfig, pointing at the API server's port
	// published on the host's loopback.
	Kubeconfig []byte
}

// key is the cluster's identity in Dockyard's labels.
func key(name string) docker.ClusterKey { return docker.ClusterKey{Name: name} }

// NodeName is the name of the management cluster's node container.
func NodeName(name string) string { return docker.NodeName(key(name), nodeMachine) }

// Create makes the management cluster, or finishes making it: every step is skipped when
// already done, so running it again (after an interruption too) converges.
func Create(ctx context.Context, nodes *docker.Manager, opts Options) (*Cluster, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	c := &Cluster{Name: opts.Name, Node: NodeName(opts.Name), Network: opts.Name}
	if _, err := nodes.EnsureNetwork(ctx, key(c.Name), docker.NetworkSpec{Name: c.Network}); err != nil {
		return nil, errors.Wrapf(err, "management cluster %s: network", c.Name)
	}
	node, err := ensureNode(ctx, nodes, c, opts)
	if err != nil {
		return nil, err
	}
	if c.Address = node.Address(c.Network); c.Address == "" {
		return nil, errors.Errorf("management cluster %s: node %s has no address on network %s", c.Name, c.Node, c.Network)
	}
	opts.Logf("Copying %d images into %s", len(opts.Images), c.Node)
	if err := node.LoadImages(ctx, opts.Images, nil); err != nil {
		return nil, errors.Wrapf(err, "management cluster %s: preloading images (build them with `make component-images`)", c.Name)
	}
	if err := bootstrapNode(ctx, node, c, opts); err != nil {
		return nil, err
	}
	if node, err = FindNode(ctx, nodes, c.Name); err != nil || node == nil {
		return nil, errors.Wrapf(err, "management cluster %s: its node is gone", c.Name)
	}
	kubeconfig, err := readKubeconfig(ctx, node)
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = kubeconfig
	opts.Logf("Waiting for node %s to be Ready", c.Node)
	if err := waitReady(ctx, c.Kubeconfig, c.Node); err != nil {
		return nil, errors.Wrapf(err, "management cluster %s", c.Name)
	}
	if err := ensureWorkers(ctx, nodes, c, opts); err != nil {
		return nil, err
	}
	if err := ensureNetworkPolicy(ctx, node, c, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// FindNode returns the handle of the management cluster's node, nil when it does not exist.
func FindNode(ctx context.Context, nodes *docker.Manager, name string) (*docker.Node, error) {
	if name == "" {
		name = DefaultName
	}
	return nodes.FindNode(ctx, key(name), nodeMachine)
}

// Get returns an existing management cluster with its kubeconfig.
func Get(ctx context.Context, nodes *docker.Manager, name string) (*Cluster, error) {
	if name == "" {
		name = DefaultName
	}
	c := &Cluster{Name: name, Node: NodeName(name), Network: name}
	node, err := FindNode(ctx, nodes, name)
	if err != nil {
		return nil, err
	}
	if node == nil {
		return nil, errors.Errorf("management cluster %s has no node on the engine", name)
	}
	kubeconfig, err := readKubeconfig(ctx, node)
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = kubeconfig
	return c, nil
}

// Delete removes everything of the management cluster from the engine: its node, volume and
// network. Workload clusters it managed are not touched (delete them first).
func Delete(ctx context.Context, nodes *docker.Manager, name string) error {
	if name == "" {
		name = DefaultName
	}
	return errors.Wrapf(nodes.DeleteCluster(ctx, key(name), name), "deleting management cluster %s", name)
}

// ensureNode creates the node container unless it exists, starts it when it stopped, and
// waits for systemd and containerd in it.
func ensureNode(ctx context.Context, nodes *docker.Manager, c *Cluster, opts Options) (*docker.Node, error) {
	node, err := FindNode(ctx, nodes, c.Name)
	switch {
	case err == nil && node == nil:
		opts.Logf("Creating node %s from %s", c.Node, opts.NodeImage)
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		node, err = nodes.AddNode(ctx, docker.NodeSpec{
			Cluster: key(c.Name), Machine: nodeMachine, Image: opts.NodeImage, Role: docker.RoleControlPlane,
			Network: c.Network, APIServerHostPort: port,
			ExtraMounts:  []docker.Mount{{HostPath: opts.EngineSocket, ContainerPath: DefaultEngineSocket}},
			Resources:    docker.Resources{CPUShares: managementCPUShares},
			ServiceCIDRs: []string{serviceSubnet},
		})
	case err == nil && !node.Running:
		opts.Logf("Starting node %s", c.Node)
		err = node.Start(ctx)
	}
	if err != nil {
		return nil, errors.Wrapf(err, "management cluster %s: node", c.Name)
	}
	return node, waitBooted(ctx, node, c.Name)
}

// waitBooted waits for systemd and containerd in a node of the cluster.
func waitBooted(ctx context.Context, node *docker.Node, cluster string) error {
	return poll(ctx, nodeBootTimeout, func() (bool, string, error) {
		st, err := node.Ready(ctx)
		if err == nil && st.Failed {
			err = errors.Errorf("management cluster %s: %s", cluster, st.Detail)
		}
		return st.Ready, st.Detail, err
	})
}

// freePort finds a free port on the host's loopback for the API server. A fixed port (kind
// does the same) stays when the engine publishes the node's ports anew, which Docker does when
// the node joins a workload cluster's network (docker/engine_test.go); the kubeconfig names it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.Wrap(err, "finding a free port for the API server")
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// poll calls check until it reports done, fails, or the timeout passes; the last detail it
// gave is in the timeout's error.
func poll(ctx context.Context, timeout time.Duration, check func() (bool, string, error)) error {
	var detail string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(context.Context) (bool, error) {
		done, d, err := check()
		detail = d
		return done, err
	})
	if wait.Interrupted(err) {
		return errors.Errorf("not done after %s: %s", timeout, detail)
	}
	return err
}
