package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/mgmt"
)

// managementFlags are the flags every command touching the management cluster shares.
type managementFlags struct {
	managementName, kubernetesVersion, images, config, stateDir string
	runtime                                                     runtimes.Config
}

func (m *managementFlags) register(fs *flag.FlagSet) {
	home, _ := os.UserHomeDir()
	fs.StringVar(&m.managementName, "management-name", mgmt.DefaultName, "name of the management cluster (its node container is <name>-control-plane)")
	fs.StringVar(&m.kubernetesVersion, "kubernetes-version", "v1.34.4", "Kubernetes version of the node image")
	fs.StringVar(&m.images, "images", "local", `node and load balancer images: "local" (built by make images, no registry) or "kind" (kindest/node and kindest/haproxy, pulled from Docker Hub)`)
	fs.StringVar(&m.config, "config", "out/clusterctl.yaml", "clusterctl configuration naming the components to install (make release-manifests writes it)")
	fs.StringVar(&m.stateDir, "kubeconfig-dir", filepath.Join(home, ".dockyard"), "directory the kubeconfigs are written to")
	m.runtime = runtimes.FromEnv()
	fs.StringVar(&m.runtime.Name, "container-runtime", m.runtime.Name, "container engine: docker or podman ($"+runtimes.RuntimeEnv+")")
	fs.StringVar(&m.runtime.Endpoint, "container-runtime-endpoint", m.runtime.Endpoint, "the engine's address; empty: its default ($"+runtimes.EndpointEnv+")")
}

// engineSocket is the engine's socket on its host, which the management cluster's node mounts
// for the manager's pod.
func (m *managementFlags) engineSocket() (string, error) {
	switch {
	case m.runtime.Name == runtimes.Containerd:
		// The containerd runtime keeps networks (CNI), network namespaces and volumes on the
		// engine's host; a manager in a pod cannot reach them.
		return "", errors.New("a management cluster drives its engine from a pod, which Docker and Podman allow but containerd does not " +
			"(Dockyard's containerd runtime keeps networks and volumes on the host): use --container-runtime docker or podman, " +
			"or run Dockyard's manager as a host process with --container-runtime containerd (docs/runtimes.md)")
	case m.runtime.Endpoint != "":
		return strings.TrimPrefix(m.runtime.Endpoint, "unix://"), nil
	}
	return runtimes.DefaultSocket(m.runtime.Name), nil
}

func (m *managementFlags) kubeconfigPath(cluster string) string {
	return filepath.Join(m.stateDir, cluster+".kubeconfig")
}

// nodeImages are the node and load balancer images of --images.
func (m *managementFlags) nodeImages() (node, lb string, err error) {
	switch m.images {
	case "local":
		return "localhost/dockyard/node:" + m.kubernetesVersion, "localhost/dockyard/haproxy:latest", nil
	case "kind":
		return docker.DefaultNodeImageRepository + ":" + m.kubernetesVersion, docker.DefaultLoadBalancerImage, nil
	}
	return "", "", errors.Errorf(`--images=%q: want "local" or "kind"`, m.images)
}

// engine connects to the container engine --container-runtime names, through the node layer;
// close it after use.
func engine(ctx context.Context, m *managementFlags) (*docker.Manager, func(), error) {
	name, err := runtimes.Parse(m.runtime.Name)
	if err != nil {
		return nil, nil, err
	}
	m.runtime.Name = name // engineSocket and loadImages compare it
	rt, err := runtimes.New(m.runtime)
	if err != nil {
		return nil, nil, err
	}
	nodes := docker.NewManager(rt, docker.ManagerOptions{})
	if _, err := nodes.HostInfo(ctx); err != nil {
		_ = rt.Close()
		return nil, nil, errors.Wrapf(err, "no container engine answers (%s; make quickstart starts one)", m.runtime)
	}
	return nodes, func() { _ = rt.Close() }, nil
}

// loadImages copies images from Docker, where `make images` builds them, into the engine when
// it is another one.
func loadImages(ctx context.Context, m *managementFlags, to *docker.Manager, refs []string) error {
	if m.runtime.Name == runtimes.Docker || m.images != "local" {
		return nil
	}
	from, err := runtimes.New(runtimes.Config{Name: runtimes.Docker})
	if err != nil {
		return err
	}
	defer func() { _ = from.Close() }()
	return errors.Wrap(to.CopyImagesFrom(ctx, docker.NewManager(from, docker.ManagerOptions{}), refs, os.Stderr),
		"copying the images from Docker, where make images builds them")
}

// createManagement makes (or finishes) the management cluster with the images of every
// component the clusterctl configuration installs preloaded, and writes its kubeconfig.
func createManagement(ctx context.Context, nodes *docker.Manager, m *managementFlags) (*mgmt.Cluster, error) {
	nodeImage, _, err := m.nodeImages()
	if err != nil {
		return nil, err
	}
	images, err := mgmt.ComponentImages(m.config)
	if err != nil {
		return nil, err
	}
	socket, err := m.engineSocket()
	if err != nil {
		return nil, err
	}
	if err := loadImages(ctx, m, nodes, append([]string{nodeImage}, images...)); err != nil {
		return nil, err
	}
	c, err := mgmt.Create(ctx, nodes, mgmt.Options{
		Name: m.managementName, NodeImage: nodeImage, KubernetesVersion: m.kubernetesVersion, Images: images,
		EngineSocket: socket, Logf: say,
	})
	if err != nil {
		return nil, err
	}
	return c, writeKubeconfig(m.kubeconfigPath(c.Name), c.Kubeconfig)
}

func writeKubeconfig(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return errors.Wrapf(os.WriteFile(path, content, 0o600), "writing %s", path)
}

// managementCommand is a command on the management cluster alone: it parses the management
// flags and connects to the engine before calling do.
func managementCommand(do func(ctx context.Context, nodes *docker.Manager, m *managementFlags) error) func(context.Context, *flag.FlagSet, []string) error {
	return func(ctx context.Context, fs *flag.FlagSet, args []string) error {
		var m managementFlags
		m.register(fs)
		_ = fs.Parse(args)
		nodes, done, err := engine(ctx, &m)
		if err != nil {
			return err
		}
		defer done()
		return do(ctx, nodes, &m)
	}
}

var managementCreateCommand = managementCommand(func(ctx context.Context, nodes *docker.Manager, m *managementFlags) error {
	c, err := createManagement(ctx, nodes, m)
	if err != nil {
		return err
	}
	fmt.Printf("Management cluster %s is ready:\n\n  kubectl --kubeconfig %s get nodes\n", c.Name, m.kubeconfigPath(c.Name))
	return nil
})

var managementDeleteCommand = managementCommand(func(ctx context.Context, nodes *docker.Manager, m *managementFlags) error {
	if err := mgmt.Delete(ctx, nodes, m.managementName); err != nil {
		return err
	}
	_ = os.Remove(m.kubeconfigPath(m.managementName))
	say("management cluster %s deleted", m.managementName)
	return nil
})

var managementKubeconfigCommand = managementCommand(func(ctx context.Context, nodes *docker.Manager, m *managementFlags) error {
	c, err := mgmt.Get(ctx, nodes, m.managementName)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(c.Kubeconfig)
	return err
})
