package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capiyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/dockyard-dev/dockyard/pkg/gobuild"
	"github.com/dockyard-dev/dockyard/pkg/mgmt"
	dyscheme "github.com/dockyard-dev/dockyard/pkg/scheme"
)

// workloadFlags describe the quickstart's workload cluster.
type workloadFlags struct {
	managementFlags
	name, namespace, clusterctl string
	controlPlanes, workers      int
	timeout                     time.Duration
}

func (w *workloadFlags) register(fs *flag.FlagSet) {
	w.managementFlags.register(fs)
	fs.StringVar(&w.name, "name", "dockyard", "name of the workload cluster")
	fs.StringVar(&w.namespace, "namespace", "default", "namespace of the workload cluster's objects")
	fs.StringVar(&w.clusterctl, "clusterctl", "", "clusterctl binary; built from the Go module proxy (cached) when empty")
	fs.IntVar(&w.controlPlanes, "control-plane-machines", 1, "control plane machines")
	fs.IntVar(&w.workers, "worker-machines", 1, "worker machines")
	fs.DurationVar(&w.timeout, "timeout", 20*time.Minute, "how long to wait for the workload cluster to be ready")
}

func quickstartCommand(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var w workloadFlags
	w.register(fs)
	_ = fs.Parse(args)
	nodeImage, lbImage, err := w.nodeImages()
	if err != nil {
		return err
	}
	nodes, done, err := engine(ctx, &w.managementFlags)
	if err != nil {
		return err
	}
	defer done()
	if err := loadImages(ctx, &w.managementFlags, nodes, []string{lbImage}); err != nil {
		return err
	}
	clusterctl, err := clusterctlBinary(ctx, w.clusterctl)
	if err != nil {
		return err
	}

	start := time.Now()
	say("management cluster %s: Kubernetes %s in a node container", w.managementName, w.kubernetesVersion)
	mc, err := createManagement(ctx, nodes, &w.managementFlags)
	if err != nil {
		return err
	}
	mgmtKubeconfig := w.kubeconfigPath(mc.Name)
	say("management cluster ready in %s", time.Since(start).Round(time.Second))

	step := time.Now()
	say("clusterctl init: cert-manager, Cluster API (core, kubeadm bootstrap and control plane) and Dockyard")
	env := []string{
		"DOCKYARD_LB_IMAGE=" + lbImage,
		"DOCKYARD_NODE_IMAGE_REPOSITORY=" + strings.TrimSuffix(nodeImage, ":"+w.kubernetesVersion),
		"DOCKYARD_NODE_IMAGE=" + nodeImage,
		"DOCKYARD_CONTAINER_RUNTIME=" + w.runtime.Name,
	}
	if err := runClusterctl(ctx, clusterctl, env, os.Stdout, "init", "--infrastructure", "dockyard", "--config", w.config,
		"--kubeconfig", mgmtKubeconfig, "--wait-providers", "--wait-provider-timeout", "600"); err != nil {
		return err
	}
	say("every provider's pods are ready in %s", time.Since(step).Round(time.Second))

	var manifest bytes.Buffer
	if err := runClusterctl(ctx, clusterctl, env, &manifest, "generate", "cluster", w.name, "--config", w.config,
		"--kubeconfig", mgmtKubeconfig, "--target-namespace", w.namespace, "--kubernetes-version", w.kubernetesVersion,
		"--control-plane-machine-count", fmt.Sprint(w.controlPlanes), "--worker-machine-count", fmt.Sprint(w.workers)); err != nil {
		return err
	}
	c, err := managementClient(mc.Kubeconfig)
	if err != nil {
		return err
	}
	if err := apply(ctx, c, w.namespace, manifest.Bytes()); err != nil {
		return err
	}
	step = time.Now()
	say("created cluster %s/%s: %d control plane and %d worker machines, node image %s", w.namespace, w.name, w.controlPlanes, w.workers, nodeImage)
	if err := waitReady(ctx, c, w); err != nil {
		return err
	}
	say("workload cluster ready in %s", time.Since(step).Round(time.Second))
	workloadKubeconfig := w.kubeconfigPath(w.name)
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: w.name + "-kubeconfig"}, secret); err != nil {
		return err
	}
	if err := writeKubeconfig(workloadKubeconfig, secret.Data["value"]); err != nil {
		return err
	}
	fmt.Printf(`
Done in %[1]s. Workload cluster %[2]s: %[3]d control plane and %[4]d worker nodes.

  kubectl --kubeconfig %[5]s get nodes

The management cluster, where cert-manager, Cluster API and Dockyard run as pods:

  kubectl --kubeconfig %[6]s -n %[7]s get clusters,machines,dockyardmachines

Both stay until you delete them: go run ./cmd/dockyard delete (or make quickstart-delete).
`, time.Since(start).Round(time.Second), w.name, w.controlPlanes, w.workers, workloadKubeconfig, mgmtKubeconfig, w.namespace)
	return nil
}

func deleteCommand(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var w workloadFlags
	w.register(fs)
	_ = fs.Parse(args)
	nodes, done, err := engine(ctx, &w.managementFlags)
	if err != nil {
		return err
	}
	defer done()
	mc, err := mgmt.Get(ctx, nodes, w.managementName)
	if err == nil {
		c, err := managementClient(mc.Kubeconfig)
		if err != nil {
			return err
		}
		if err := deleteCluster(ctx, c, nodes, w); err != nil {
			return err
		}
	} else {
		say("no running management cluster %s (%v): deleting what is left on the engine", w.managementName, err)
	}
	if err := mgmt.Delete(ctx, nodes, w.managementName); err != nil {
		return err
	}
	_ = os.Remove(w.kubeconfigPath(w.name))
	_ = os.Remove(w.kubeconfigPath(w.managementName))
	say("management cluster %s deleted; nothing of either cluster is left on the engine", w.managementName)
	return nil
}

func managementClient(kubeconfig []byte) (client.Client, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, errors.Wrap(err, "reading the management cluster's kubeconfig")
	}
	return client.New(cfg, client.Options{Scheme: dyscheme.New()})
}

// apply creates or updates every object of a multi-document YAML (server-side apply), so
// running the quickstart again changes nothing.
func apply(ctx context.Context, c client.Client, namespace string, manifest []byte) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, ns)); err != nil {
		return errors.Wrapf(err, "creating namespace %s", namespace)
	}
	objs, err := capiyaml.ToUnstructured(manifest)
	if err != nil {
		return errors.Wrap(err, "decoding the generated cluster")
	}
	for i := range objs {
		obj := &objs[i]
		// Right after clusterctl init the webhooks' Service may not route yet: retry a while.
		var lastErr error
		err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			lastErr = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner("dockyard-quickstart"), client.ForceOwnership)
			return lastErr == nil, nil
		})
		if err != nil {
			return errors.Wrapf(lastErr, "applying %s %s", obj.GetKind(), obj.GetName())
		}
	}
	return nil
}

// clusterctlBinary returns the clusterctl to run: the one given, or the release of the
// Cluster API module Dockyard is built with, built from the module proxy (cached).
func clusterctlBinary(ctx context.Context, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "sigs.k8s.io/cluster-api" {
				version = d.Version
			}
		}
	}
	build, err := gobuild.ClusterAPI(version, gobuild.Clusterctl)
	if err != nil {
		return "", errors.Wrap(err, "finding clusterctl's version (pass --clusterctl)")
	}
	dir, err := (&gobuild.Builder{CacheDir: filepath.Join(gobuild.DockyardCache(), "build"), Log: os.Stderr}).Run(ctx, build)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, gobuild.Clusterctl), nil
}

// runClusterctl runs clusterctl with extra environment variables; its standard output goes to
// stdout, its progress to the terminal.
func runClusterctl(ctx context.Context, clusterctl string, env []string, stdout io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, clusterctl, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	return errors.Wrapf(cmd.Run(), "clusterctl %s", strings.Join(args[:2], " "))
}
