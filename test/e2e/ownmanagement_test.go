//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/cmd/tools/mgmt"
	"github.com/dockyard-dev/dockyard/docker"
)

// ownManagement is a management cluster in containers that a spec makes with the dockyard
// command line (dockyard create management: Kubernetes in a node container, cert-manager,
// Cluster API and Dockyard installed in it), and a cluster it manages, made with dockyard create
// cluster.
type ownManagement struct {
	name    string
	cluster clusterSpec
	cli     *dockyardCLI
}

// global are the command line's flags that choose this management cluster.
func (o *ownManagement) global() []string { return []string{"--management-name", o.name} }

// node is the name of the management cluster's node container, and of its Node.
func (o *ownManagement) node() string { return mgmt.NodeName(o.name) }

// create removes what an earlier run left of both, then makes the management cluster and its
// cluster in the background, while the spec makes others; the channel says when both are
// Ready, or why not.
func (o *ownManagement) create(ctx context.Context) <-chan error {
	o.removeLeftovers(ctx)
	o.cli = newDockyardCLI(ctx)
	made := make(chan error, 1)
	go func() {
		_, err := o.cli.exec(ctx, o.global(), "create", "management")
		if err == nil {
			_, err = o.cli.exec(ctx, o.global(), "create", "cluster", o.cluster.name, "--namespace", o.cluster.namespace,
				"--control-planes", strconv.Itoa(o.cluster.controlPlane), "--workers", strconv.Itoa(o.cluster.workers))
		}
		made <- err
	}()
	return made
}

// delete runs dockyard delete management, which must end and leave nothing of either on the
// engine; what it leaves is removed and the spec fails.
func (o *ownManagement) delete(ctx SpecContext) {
	if o.cli == nil {
		return
	}
	start := time.Now()
	_, err := o.cli.exec(ctx, o.global(), "delete", "management")
	whenDone("dockyard delete management, with a cluster of its own", start)
	left := o.removeLeftovers(ctx)
	Expect(err).NotTo(HaveOccurred(), "dockyard delete management")
	Expect(left).To(BeEmpty(), "what dockyard delete management left on the engine (removed since)")
}

// removeLeftovers removes the containers, volumes and networks of both from the engine and
// says what they were.
func (o *ownManagement) removeLeftovers(ctx context.Context) []string {
	var left []string
	for _, key := range []docker.ClusterKey{{Name: o.name}, o.cluster.key()} {
		res, err := nodes.Leftovers(ctx, key)
		Expect(err).NotTo(HaveOccurred())
		if res == nil {
			continue
		}
		left = append(left, fmt.Sprintf("%v: containers %v, volumes %v, networks %v", key, res.Containers, res.Volumes, res.Networks))
		Expect(nodes.RemoveCluster(ctx, *res)).To(Succeed())
	}
	return left
}

// client is a client of the management cluster, through the kubeconfig the command line wrote.
func (o *ownManagement) client() client.Client {
	return kubeClient(filepath.Join(o.cli.dir, o.name+".kubeconfig"))
}

// nodeAddress is the management node's address on its own network.
func (o *ownManagement) nodeAddress(ctx context.Context) string {
	c, err := engine.InspectContainer(ctx, o.node())
	Expect(err).NotTo(HaveOccurred())
	Expect(c.Networks).To(HaveKey(o.name), "the management node is on its own network")
	Expect(c.Networks).To(HaveKey(docker.DefaultNetworkName(o.cluster.key())), "the management node is on its cluster's network")
	return c.Networks[o.name].IPv4
}

// internalIP is the management node's Node's internal IP, once its API server answers.
func (o *ownManagement) internalIP(ctx context.Context) string {
	c := o.client()
	var ip string
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: o.node()}, n)).To(Succeed())
		var ips []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		g.Expect(ips).To(HaveLen(1), "the Node's addresses: %v", n.Status.Addresses)
		ip = ips[0]
	}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return ip
}

// waitWebhooks waits until the management cluster admits objects through Cluster API's and
// Dockyard's webhooks: a Cluster and a DockyardCluster created in a dry run, once a second.
func (o *ownManagement) waitWebhooks(ctx context.Context) {
	c := o.client()
	var last error
	Eventually(func() error {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		meta := metav1.ObjectMeta{Namespace: o.cluster.namespace, Name: "webhook-probe"}
		dc := &infrav1.DockyardCluster{ObjectMeta: meta}
		cl := &clusterv1.Cluster{ObjectMeta: meta, Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardCluster", Name: meta.Name}}}
		last = c.Create(rctx, dc, client.DryRunAll)
		if last == nil {
			last = c.Create(rctx, cl, client.DryRunAll)
		}
		return last
	}).WithContext(ctx).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), "the management cluster's webhooks, after the engine restarted")
}

// expectSettledBeforeKubelet checks that, when the management node started again, Dockyard's
// unit isolated it from its workload network and set its routes, before kubelet started.
func (o *ownManagement) expectSettledBeforeKubelet(ctx context.Context) {
	show := func(unit, property string) string {
		out, code := execInNode(ctx, o.node(), "systemctl", "show", "--value", "-p", property, unit)
		Expect(code).To(Equal(0), out)
		return strings.TrimSpace(out)
	}
	journal, _ := execInNode(ctx, o.node(), "journalctl", "--no-pager", "-b", "-u", "dockyard-management")
	Expect(show("dockyard-management", "ExecMainStatus")).To(Equal("0"), "dockyard-management.service when the node started:\n%s", journal)
	done, err := strconv.ParseUint(show("dockyard-management", "ExecMainExitTimestampMonotonic"), 10, 64)
	Expect(err).NotTo(HaveOccurred())
	kubelet, err := strconv.ParseUint(show("kubelet", "ExecMainStartTimestampMonotonic"), 10, 64)
	Expect(err).NotTo(HaveOccurred())
	Expect(done).To(And(BeNumerically(">", 0), BeNumerically("<=", kubelet)),
		"dockyard-management.service ended at %d µs, kubelet started at %d µs:\n%s", done, kubelet, journal)
	rules, code := execInNode(ctx, o.node(), "iptables", "-t", "raw", "-S", "DOCKYARD-ISOLATION")
	Expect(code).To(Equal(0), rules)
	Expect(rules).To(ContainSubstring("-j DROP"), "the management node's isolation from its cluster's network")
}

// waitNodesReady waits until the Nodes of the management cluster's own cluster are Ready,
// through the kubeconfig the command line gives.
func (o *ownManagement) waitNodesReady(ctx context.Context) {
	Eventually(func(g Gomega) {
		kubeconfig, err := o.cli.exec(ctx, o.global(), "get", "kubeconfig", o.cluster.name, "--namespace", o.cluster.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		list := &corev1.NodeList{}
		g.Expect(clientFor([]byte(kubeconfig)).List(ctx, list)).To(Succeed())
		g.Expect(list.Items).To(HaveLen(o.cluster.controlPlane + o.cluster.workers))
		for _, n := range list.Items {
			g.Expect(nodeReady(&n)).To(BeTrue(), "node %s", n.Name)
		}
	}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(poll).Should(Succeed())
}
