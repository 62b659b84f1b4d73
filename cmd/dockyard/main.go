// Command dockyard is Dockyard's command line. `dockyard quickstart` starts a Cluster API
// management plane on this machine (test/framework), creates a workload cluster whose nodes
// are containers, prints its progress and how to use it, and deletes everything on Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	dockerruntime "github.com/dockyard-dev/dockyard/pkg/container/docker"
	"github.com/dockyard-dev/dockyard/test/framework"
)

const usage = `usage: dockyard quickstart [flags]

Starts a Cluster API management plane on this machine (etcd, kube-apiserver, Cluster API's
controllers and Dockyard's manager, as local processes), creates a workload cluster from
templates/cluster-template.yaml, prints its progress and how to use it, and on Ctrl-C deletes
the cluster and stops the management plane. make quickstart builds what it needs first.

flags:
`

type options struct {
	name, namespace, kubernetesVersion, images string
	controlPlanes, workers                     int
	exitWhenReady                              bool
	timeout                                    time.Duration
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "quickstart" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	fs := flag.NewFlagSet("quickstart", flag.ExitOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	var o options
	fs.StringVar(&o.name, "name", "dockyard", "name of the workload cluster")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace of the cluster's objects")
	fs.StringVar(&o.kubernetesVersion, "kubernetes-version", "v1.34.4", "Kubernetes version of the workload cluster")
	fs.StringVar(&o.images, "images", "local", `node and load balancer images: "local" (built by make images, no registry) or "kind" (kindest/node and kindest/haproxy, pulled from Docker Hub)`)
	fs.IntVar(&o.controlPlanes, "control-plane-machines", 1, "control plane machines")
	fs.IntVar(&o.workers, "worker-machines", 1, "worker machines")
	fs.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "delete the cluster and stop as soon as it is ready (for scripts and CI)")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Minute, "how long to wait for the cluster to be ready")
	_ = fs.Parse(os.Args[2:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := quickstart(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "\ndockyard quickstart: %v\n", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func quickstart(ctx context.Context, o options) (rerr error) {
	nodeImage, lbImage, err := images(o)
	if err != nil {
		return err
	}
	engine, err := dockerruntime.New()
	if err != nil {
		return err
	}
	defer engine.Close()
	if _, err := engine.Info(ctx); err != nil {
		return errors.Wrap(err, "no container engine answers (make quickstart starts one)")
	}
	if o.images == "local" {
		for _, img := range []string{nodeImage, lbImage} {
			if ok, err := engine.ImageExists(ctx, img); err != nil || !ok {
				return errors.Errorf("image %s is missing: run make images (make quickstart does)", img)
			}
		}
	}

	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	cache := os.Getenv("DOCKYARD_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "dockyard")
	}
	dir := filepath.Join(cache, "quickstart")
	if err := os.RemoveAll(filepath.Join(dir, "management-plane")); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	start := time.Now()
	say("starting the management plane: etcd, kube-apiserver, Cluster API %s and Dockyard's manager", framework.DefaultClusterAPIVersion)
	plane, err := framework.Start(ctx, framework.Options{
		WorkDir: filepath.Join(dir, "management-plane"),
		DockyardArgs: []string{
			"--node-image-repository=" + strings.TrimSuffix(nodeImage, ":"+o.kubernetesVersion),
			"--load-balancer-image=" + lbImage,
		},
	})
	if err != nil {
		return err
	}
	say("management plane ready in %s (KUBECONFIG=%s)", time.Since(start).Round(100*time.Millisecond), plane.Kubeconfig())
	c := plane.Client()
	cleanup := func() {
		// A fresh context: the signal that ends the wait has cancelled ctx.
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := deleteCluster(stopCtx, c, engine, o); err != nil {
			fmt.Fprintf(os.Stderr, "deleting the cluster: %v\n", err)
			rerr = err
		}
		say("stopping the management plane")
		if err := plane.Stop(stopCtx); err != nil {
			rerr = err
		}
	}
	defer cleanup()

	if err := client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.namespace}})); err != nil {
		return err
	}
	rendered, err := framework.RenderTemplate(filepath.Join(repo, "templates", "cluster-template.yaml"), map[string]string{
		"CLUSTER_NAME":                o.name,
		"NAMESPACE":                   o.namespace,
		"KUBERNETES_VERSION":          o.kubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": fmt.Sprint(o.controlPlanes),
		"WORKER_MACHINE_COUNT":        fmt.Sprint(o.workers),
		"DOCKYARD_NODE_IMAGE":         nodeImage,
		"DOCKYARD_LB_IMAGE":           lbImage,
	})
	if err != nil {
		return err
	}
	if err := framework.CreateObjects(ctx, c, rendered); err != nil {
		return err
	}
	say("created cluster %s/%s: %d control plane and %d worker machines, node image %s", o.namespace, o.name, o.controlPlanes, o.workers, nodeImage)

	if err := waitReady(ctx, c, o); err != nil {
		plane.Dump(context.Background(), os.Stderr)
		return err
	}
	kubeconfig := filepath.Join(dir, o.name+".kubeconfig")
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name + "-kubeconfig"}, secret); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, secret.Data["value"], 0o600); err != nil {
		return err
	}
	fmt.Printf(`
Cluster %[1]s is ready (%[2]s): %[3]d control plane and %[4]d worker nodes.

  kubectl --kubeconfig %[5]s get nodes

Cluster API's view of it (the management cluster):

  kubectl --kubeconfig %[6]s -n %[7]s get clusters,machines,dockyardmachines

The nodes are containers: docker ps --filter label=dockyard.x-k8s.io/cluster=%[7]s/%[1]s
`, o.name, time.Since(start).Round(time.Second), o.controlPlanes, o.workers, kubeconfig, plane.Kubeconfig(), o.namespace)

	if o.exitWhenReady {
		return nil
	}
	fmt.Println("Press Ctrl-C to delete the cluster (nothing stays on the engine) and stop the management plane.")
	<-ctx.Done()
	fmt.Println()
	return nil
}

func images(o options) (node, lb string, err error) {
	switch o.images {
	case "local":
		return "localhost/dockyard/node:" + o.kubernetesVersion, "localhost/dockyard/haproxy:latest", nil
	case "kind":
		return docker.DefaultNodeImageRepository + ":" + o.kubernetesVersion, docker.DefaultLoadBalancerImage, nil
	}
	return "", "", errors.Errorf(`--images=%q: want "local" or "kind"`, o.images)
}

// waitReady prints what changes until every Machine runs and its Node is Ready.
func waitReady(ctx context.Context, c client.Client, o options) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last := map[string]string{}
	for {
		status, ready, err := progress(ctx, c, o)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		keys := make([]string, 0, len(status))
		for k := range status {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if last[k] != status[k] {
				say("%-40s %s", k, status[k])
				last[k] = status[k]
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Wrap(ctx.Err(), "waiting for the cluster")
		case <-time.After(2 * time.Second):
		}
	}
}

// progress summarizes the cluster: the load balancer, then each machine's phase and what its
// DockyardMachine waits for.
func progress(ctx context.Context, c client.Client, o options) (map[string]string, bool, error) {
	status := map[string]string{}
	dc := &infrav1.DockyardCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, dc); err != nil {
		return status, false, err
	}
	status["load balancer"] = conditionSummary(conditions.Get(dc, infrav1.LoadBalancerAvailableCondition))
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(o.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: o.name}); err != nil {
		return status, false, err
	}
	running := 0
	for _, m := range machines.Items {
		line := m.Status.Phase
		if line == "" {
			line = string(clusterv1.MachinePhasePending)
		}
		dm := &infrav1.DockyardMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: m.Spec.InfrastructureRef.Name}, dm); err == nil {
			line += ", " + conditionSummary(conditions.Get(dm, clusterv1.ReadyCondition))
		}
		if m.Status.NodeRef.IsDefined() {
			nodeReady := conditions.Get(&m, clusterv1.MachineNodeReadyCondition)
			line += ", node " + conditionSummary(nodeReady)
			if nodeReady != nil && nodeReady.Status == metav1.ConditionTrue && m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
				running++
			}
		}
		status["machine "+m.Name] = line
	}
	return status, running == o.controlPlanes+o.workers && len(machines.Items) == running, nil
}

func conditionSummary(c *metav1.Condition) string {
	if c == nil {
		return "pending"
	}
	if c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	msg := strings.SplitN(c.Message, "\n", 2)[0]
	if len(msg) > 100 {
		msg = msg[:100] + "..."
	}
	return fmt.Sprintf("%s (%s)", c.Reason, msg)
}

// deleteCluster deletes the Cluster and waits until nothing of it is left on the engine.
func deleteCluster(ctx context.Context, c client.Client, engine container.Runtime, o options) error {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.name}}
	say("deleting cluster %s/%s", o.namespace, o.name)
	if err := c.Delete(ctx, cluster); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	labels := docker.ClusterKey{Namespace: o.namespace, Name: o.name}.ClusterLabels()
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		cs, lerr := engine.ListContainers(ctx, labels)
		if apierrors.IsNotFound(err) && lerr == nil && len(cs) == 0 {
			say("cluster deleted; no container, volume or network of it is left")
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Wrap(ctx.Err(), "waiting for the cluster's deletion")
		case <-time.After(2 * time.Second):
		}
	}
}
