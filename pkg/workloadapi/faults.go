package workloadapi

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// unreachable is the taint Kubernetes' node lifecycle controller puts on a Node whose kubelet
// stopped posting its status.
var unreachable = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}

// SetKubelet stops (running false) or starts again a node's kubelet. A stopped kubelet posts
// nothing, so its Node's conditions turn Unknown ("NodeStatusUnknown") and it is tainted
// unreachable, as the node lifecycle controller does once the grace period passed; started, the
// Node is Ready again and the taint goes. A node not in the cluster is not an error.
func (c *Cluster) SetKubelet(_ context.Context, node string, running bool) error {
	obj, err := c.node(node)
	if obj == nil || err != nil {
		return err
	}
	n := &corev1.Node{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, n); err != nil {
		return errors.Wrapf(err, "reading Node %s", node)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == unreachable.Key })
	if running {
		n.Status.Conditions = nodeConditions(now)
	} else {
		for i := range n.Status.Conditions {
			cond := &n.Status.Conditions[i]
			if cond.Status != corev1.ConditionUnknown {
				cond.LastTransitionTime = now
			}
			cond.Status, cond.Reason, cond.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: unreachable.Key, Effect: unreachable.Effect, TimeAdded: &now})
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
	if err != nil {
		return errors.Wrapf(err, "writing Node %s", node)
	}
	_, err = c.Store.Update(nodesResource, &unstructured.Unstructured{Object: content})
	return err
}

// nodesResource is where the Store keeps Nodes.
var nodesResource = schema.GroupResource{Resource: "nodes"}

// node returns a Node of the cluster; nil, and no error, when there is none of that name.
func (c *Cluster) node(name string) (*unstructured.Unstructured, error) {
	obj, err := c.Store.Get(nodesResource, "", name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// isControlPlane says whether a Node is a control plane node (kubeadm's role label).
func isControlPlane(node *unstructured.Unstructured) bool {
	_, ok := node.GetLabels()[controlPlaneRole]
	return ok
}

// SetComponent stops (running false) or starts again a control plane component of a node
// (kube-apiserver, kube-controller-manager, kube-scheduler or etcd), as setting its static Pod's
// manifest aside and back does: stopped, its Pod is gone from the API (kubelet deletes the mirror
// Pod of a manifest that went), an etcd member answers nothing and an API server takes no
// connection; started, they run again. A node without that component is not an error.
func (c *Cluster) SetComponent(_ context.Context, node, component string, running bool) error {
	if !slices.Contains(controlPlaneComponents, component) {
		return errors.Errorf("%s is no control plane component (%v)", component, controlPlaneComponents)
	}
	obj, err := c.node(node)
	if obj == nil || err != nil || !isControlPlane(obj) {
		return err
	}
	c.mu.Lock()
	if running {
		delete(c.stopped, node+"/"+component)
	} else {
		c.stopped[node+"/"+component] = true
	}
	c.mu.Unlock()
	if component == "etcd" {
		c.Etcd.SetDown(node, !running)
	}
	if !running {
		return c.remove(schema.GroupResource{Resource: "pods"}, metav1.NamespaceSystem, component+"-"+node)
	}
	return c.ensure(staticPod(component, Node{Name: node, KubernetesVersion: kubeletVersion(obj)}))
}

// SetNetworkDelay delays what a node sends by d (zero: no delay), as netem on its interface
// does: the answers of its API server to the connections the front hands it, and of its etcd
// member.
func (c *Cluster) SetNetworkDelay(node string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		delete(c.delays, node)
	} else {
		c.delays[node] = d
	}
}

// Route picks the control plane node whose API server takes a new connection, in turn among
// those whose API server runs, as a load balancer does, and wraps the connection in that node's
// network delay; ok is false when no API server runs.
func (c *Cluster) Route(conn net.Conn) (routed net.Conn, ok bool) {
	nodes, _ := c.Store.List(nodesResource, "", Selector{})
	c.mu.Lock()
	defer c.mu.Unlock()
	var serving []string
	for _, n := range nodes {
		if isControlPlane(n) && !c.stopped[n.GetName()+"/kube-apiserver"] {
			serving = append(serving, n.GetName())
		}
	}
	if len(serving) == 0 {
		return nil, false
	}
	c.turn++
	return c.delayed(serving[c.turn%len(serving)], conn), true
}

// delayed wraps a connection to a node in the node's network delay; c.mu is held.
func (c *Cluster) delayed(node string, conn net.Conn) net.Conn {
	if d := c.delays[node]; d > 0 {
		return &delayedConn{Conn: conn, delay: d}
	}
	return conn
}

// delayedConn is a connection whose writes, what the node sends, wait a delay first.
type delayedConn struct {
	net.Conn
	delay time.Duration
}

func (d *delayedConn) Write(b []byte) (int, error) {
	time.Sleep(d.delay)
	return d.Conn.Write(b)
}

func kubeletVersion(node *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(node.Object, "status", "nodeInfo", "kubeletVersion")
	return v
}
