//go:build e2e

package e2e

import (
	"context"
	"math"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// memoryTolerance is how far a template's published memory may be from the memory its Node
// reports: both read the host's MemTotal, the template through the engine's info.
const memoryTolerance = 0.03

// expectTemplateMatchesNode checks, for autoscaling from zero, that the DockyardMachineTemplate of
// the cluster's MachineDeployment publishes in status.capacity the cpu of the worker's Node and
// (within memoryTolerance) its memory, and in status.nodeInfo its operating system and
// architecture: what the cluster autoscaler would assume a new node of the group looks like.
func expectTemplateMatchesNode(ctx context.Context, c clusterSpec, wl client.Client, nodeName string) {
	GinkgoHelper()
	mds := &clusterv1.MachineDeploymentList{}
	Expect(c.client().List(ctx, mds, client.InNamespace(c.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.name})).To(Succeed())
	Expect(mds.Items).To(HaveLen(1), "MachineDeployments of cluster %s", c.name)
	ref := mds.Items[0].Spec.Template.Spec.InfrastructureRef
	Expect(ref.Kind).To(Equal("DockyardMachineTemplate"))

	node := &corev1.Node{}
	Expect(wl.Get(ctx, client.ObjectKey{Name: nodeName}, node)).To(Succeed())
	nodeCPU, nodeMemory := node.Status.Capacity[corev1.ResourceCPU], node.Status.Capacity[corev1.ResourceMemory]
	Expect(nodeCPU.IsZero() || nodeMemory.IsZero()).To(BeFalse(), "Node %s capacity %v", nodeName, node.Status.Capacity)

	Eventually(func(g Gomega) {
		mt := &infrav1.DockyardMachineTemplate{}
		g.Expect(c.client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: ref.Name}, mt)).To(Succeed())
		g.Expect(mt.Spec.Template.Spec.Resources.CPU == nil && mt.Spec.Template.Spec.Resources.Memory == nil).To(BeTrue(),
			"the quick start's workers have no limits, so their template publishes the host's capacity, which the Node reports too")
		cpu, ok := mt.Status.Capacity[corev1.ResourceCPU]
		g.Expect(ok).To(BeTrue(), "DockyardMachineTemplate %s status.capacity %v has no cpu", mt.Name, mt.Status.Capacity)
		g.Expect(cpu.Cmp(nodeCPU)).To(BeZero(), "DockyardMachineTemplate %s cpu %s, Node %s cpu %s", mt.Name, cpu.String(), nodeName, nodeCPU.String())
		memory, ok := mt.Status.Capacity[corev1.ResourceMemory]
		g.Expect(ok).To(BeTrue(), "DockyardMachineTemplate %s status.capacity %v has no memory", mt.Name, mt.Status.Capacity)
		off := math.Abs(float64(memory.Value()-nodeMemory.Value())) / float64(nodeMemory.Value())
		g.Expect(off).To(BeNumerically("<=", memoryTolerance), "DockyardMachineTemplate %s memory %s, Node %s memory %s", mt.Name, memory.String(), nodeName, nodeMemory.String())
		g.Expect(mt.Status.NodeInfo.OperatingSystem).To(Equal(node.Status.NodeInfo.OperatingSystem))
		g.Expect(string(mt.Status.NodeInfo.Architecture)).To(Equal(node.Status.NodeInfo.Architecture))
		GinkgoWriter.Printf("DockyardMachineTemplate %s publishes cpu %s, memory %s, %s/%s; Node %s has cpu %s, memory %s\n", mt.Name, cpu.String(), memory.String(), mt.Status.NodeInfo.OperatingSystem, mt.Status.NodeInfo.Architecture, nodeName, nodeCPU.String(), nodeMemory.String())
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
}
