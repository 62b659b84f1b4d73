package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/docker"
	dockerruntime "github.com/dockyard-dev/dockyard/pkg/container/docker"
	"github.com/dockyard-dev/dockyard/pkg/mgmt"
)

// managementFlags are the flags every command touching the management cluster shares.
type managementFlags struct {
	managementName, kubernetesVersion, images, config, stateDir string
}

func (m *managementFlags) register(fs *flag.FlagSet) {
	home, _ := os.UserHomeDir()
	fs.StringVar(&m.managementName, "management-name", mgmt.DefaultName, "name of the management cluster (its node container is <name>-control-plane)")
	fs.StringVar(&m.kubernetesVersion, "kubernetes-version", "v1.34.4", "Kubernetes version of the node image")
	fs.StringVar(&m.images, "images", "local", `node and load balancer images: "local" (built by make images, no registry) or "kind" (kindest/node and kindest/haproxy, pulled from Docker Hub)`)
	fs.StringVar(&m.config, "config", "out/clusterctl.yaml", "clusterctl configuration naming the components to install (make release-manifests writes it)")
	fs.StringVar(&m.stateDir, "kubeconfig-dir", filepath.Join(home, ".dockyard"), "directory the kubeconfigs are written to")
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

// engine connects to the container engine DOCKER_HOST names.
func engine(ctx context.Context) (*dockerruntime.Runtime, *docker.Manager, error) {
	rt, err := dockerruntime.New()
	if err != nil {
		return nil, nil, err
	}
	if _, err := rt.Info(ctx); err != nil {
		rt.Close()
		return nil, nil, errors.Wrap(err, "no container engine answers (make quickstart starts one)")
	}
	return rt, docker.NewManager(rt, docker.ManagerOptions{}), nil
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
	c, err := mgmt.Create(ctx, nodes, mgmt.Options{
		Name: m.managementName, NodeImage: nodeImage, KubernetesVersion: m.kubernetesVersion, Images: images,
		Logf: say,
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
		rt, nodes, err := engine(ctx)
		if err != nil {
			return err
		}
		defer rt.Close()
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
