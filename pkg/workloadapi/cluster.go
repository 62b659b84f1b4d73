package workloadapi

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// controlPlaneRole labels and taints kubeadm's control plane nodes.
const controlPlaneRole = "node-role.kubernetes.io/control-plane"

// controlPlaneComponents are the static Pods kubeadm runs on a control plane node, named
// COMPONENT-NODE in kube-system, which KubeadmControlPlane checks.
var controlPlaneComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// kubeadmImages are the etcd and CoreDNS image tags kubeadm deploys with a Kubernetes minor
// version (its constants SupportedEtcdVersion and CoreDNSVersion, as of each minor's newest
// patch release), which Cluster API's upgrade checks read back from the static Pods and the
// Deployment: 1.31 to 1.34, the minors a chained upgrade to 1.34 passes through.
var kubeadmImages = map[string]struct{ etcd, coreDNS string }{
	"1.31": {etcd: "3.5.24-0", coreDNS: "v1.11.3"},
	"1.32": {etcd: "3.5.24-0", coreDNS: "v1.11.3"},
	"1.33": {etcd: "3.5.24-0", coreDNS: "v1.12.0"},
	"1.34": {etcd: "3.6.5-0", coreDNS: "v1.12.1"},
}

// newestKubeadm is the newest minor of kubeadmImages: what a newer or unknown version gets.
const newestKubeadm = "1.34"

// imagesOf returns kubeadm's etcd and CoreDNS tags for a Kubernetes version (v1.34.4).
func imagesOf(kubernetesVersion string) (etcd, coreDNS string) {
	major, rest, _ := strings.Cut(strings.TrimPrefix(kubernetesVersion, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	tags, ok := kubeadmImages[major+"."+minor]
	if !ok {
		tags = kubeadmImages[newestKubeadm]
	}
	return tags.etcd, tags.coreDNS
}

// ClusterOptions make a simulated cluster: its Kubernetes version and its CAs (the cluster's,
// which signs the API server's certificate and its clients', and etcd's), as Cluster API keeps
// them in the cluster's Secrets.
type ClusterOptions struct {
	KubernetesVersion string
	CACert            *x509.Certificate
	CAKey             crypto.Signer
	EtcdCACert        *x509.Certificate
	EtcdCAKey         crypto.Signer
	// Hosts are the names and addresses of the cluster's endpoint, in the serving certificate.
	Hosts []string
}

// Cluster is a simulated workload cluster: its objects, the API server serving them over TLS
// and its etcd, with what kubeadm leaves in a cluster when a node runs init, join or reset.
type Cluster struct {
	Store  *Store
	Server *Server
	Etcd   *Etcd
	tls    *tls.Config
	http   *http.Server
	// opts are the options the cluster was made with (State keeps them).
	opts ClusterOptions

	mu sync.Mutex
	// stopped are the control plane components a fault stopped, as NODE/COMPONENT.
	stopped map[string]bool
	// delays are the nodes' network delays (SetNetworkDelay); turn counts the connections
	// Route handed out.
	delays map[string]time.Duration
	turn   int
}

// NewCluster returns a cluster with no node, not serving yet.
func NewCluster(opts ClusterOptions) (*Cluster, error) {
	tlsConfig, err := TLSConfig(opts.CACert, opts.CAKey, opts.Hosts)
	if err != nil {
		return nil, err
	}
	etcd, err := NewEtcd(opts.EtcdCACert, opts.EtcdCAKey)
	if err != nil {
		return nil, err
	}
	store := NewStore()
	c := &Cluster{Store: store, Server: NewServer(store, opts.KubernetesVersion), Etcd: etcd, tls: tlsConfig, opts: opts, stopped: map[string]bool{}, delays: map[string]time.Duration{}}
	c.Server.SetForwarder(c.forward)
	c.http = &http.Server{Handler: c.Server, TLSConfig: tlsConfig, ReadHeaderTimeout: 30 * time.Second}
	return c, nil
}

// Serve serves the cluster's API on a listener until Close.
func (c *Cluster) Serve(l net.Listener) error {
	err := c.http.Serve(tls.NewListener(l, c.tls))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return errors.Wrap(err, "serving the cluster's API")
}

// Close stops serving and stops the cluster's etcd.
func (c *Cluster) Close() error {
	c.Etcd.Close()
	return c.http.Close()
}

// apiServerPort is where kubeadm binds a control plane node's API server.
const apiServerPort = 6443

// forward connects port-forwards to the static Pods something listens behind: etcd's to their
// member's client port, and kube-apiserver's to the cluster's API server on kubeadm's port,
// where KubeadmControlPlane reads the serving certificate's expiry.
func (c *Cluster) forward(namespace, pod string, port int) (net.Conn, error) {
	var node string
	var dial func() (net.Conn, error)
	if namespace == metav1.NamespaceSystem {
		if member, ok := strings.CutPrefix(pod, "etcd-"); ok && port == 2379 {
			node, dial = member, func() (net.Conn, error) { return c.Etcd.Dial(member) }
		} else if n, ok := strings.CutPrefix(pod, "kube-apiserver-"); ok && port == apiServerPort {
			node, dial = n, c.dialAPIServer
		}
	}
	if dial == nil {
		return nil, errors.Errorf("nothing listens on port %d of Pod %s/%s", port, namespace, pod)
	}
	conn, err := dial()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delayed(node, conn), nil
}

// dialAPIServer connects to the cluster's API server in the process, over the TLS it serves.
func (c *Cluster) dialAPIServer() (net.Conn, error) {
	l := NewListener(nil)
	go func() { _ = c.http.Serve(tls.NewListener(l, c.tls)) }()
	// Served once handed over: the server goes on with the connection when its listener closes.
	defer func() { _ = l.Close() }()
	conn, err := l.Pipe()
	return conn, errors.Wrap(err, "connecting to the cluster's API server")
}

// Node is a node as kubeadm joins it to the cluster.
type Node struct {
	Name              string
	ProviderID        string
	KubernetesVersion string
	ControlPlane      bool
	Labels            map[string]string
}

// Init is kubeadm init on the first control plane node: the cluster's kubeadm-config (the
// ClusterConfiguration kubeadm was given, as YAML), kubelet-config, kube-proxy and CoreDNS,
// then the node joined as a control plane node.
func (c *Cluster) Init(ctx context.Context, n Node, clusterConfiguration string) error {
	sys := metav1.NamespaceSystem
	_, coreDNS := imagesOf(n.KubernetesVersion)
	for _, ns := range []string{sys, metav1.NamespaceDefault, metav1.NamespacePublic, "kube-node-lease"} {
		if err := c.ensure(&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	objects := []runtime.Object{
		&corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "kubeadm-config"},
			Data: map[string]string{"ClusterConfiguration": clusterConfiguration}},
		&corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "kubelet-config"},
			Data: map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"}},
		&corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "coredns"},
			Data: map[string]string{"Corefile": ".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n}\n"}},
		daemonSet(sys, "kube-proxy", "registry.k8s.io/kube-proxy:"+n.KubernetesVersion),
		deployment(sys, "coredns", "registry.k8s.io/coredns/coredns:"+coreDNS),
	}
	for _, o := range objects {
		if err := c.ensure(o); err != nil {
			return err
		}
	}
	return c.Join(ctx, n)
}

// Join is kubeadm join: the node registers Ready and, on a control plane node, its static Pods
// run and its etcd member is added.
func (c *Cluster) Join(_ context.Context, n Node) error {
	labels := map[string]string{corev1.LabelHostname: n.Name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}
	for k, v := range n.Labels {
		labels[k] = v
	}
	var taints []corev1.Taint
	if n.ControlPlane {
		labels[controlPlaneRole] = ""
		taints = []corev1.Taint{{Key: controlPlaneRole, Effect: corev1.TaintEffectNoSchedule}}
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	node := &corev1.Node{TypeMeta: typeMeta("v1", "Node"), ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Spec: corev1.NodeSpec{ProviderID: n.ProviderID, Taints: taints},
		Status: corev1.NodeStatus{
			Conditions: nodeConditions(now),
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: n.KubernetesVersion,
				OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "containerd://2.1.0"},
		}}
	if err := c.ensure(node); err != nil {
		return err
	}
	if !n.ControlPlane {
		return nil
	}
	for _, component := range controlPlaneComponents {
		if err := c.ensure(staticPod(component, n)); err != nil {
			return err
		}
	}
	c.Etcd.AddMember(n.Name)
	return nil
}

// nodeConditions are a healthy kubelet's: Ready, and no memory, disk or PID pressure (what
// Cluster API's NodeHealthy reads).
func nodeConditions(now metav1.Time) []corev1.NodeCondition {
	condition := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

// Reset is kubeadm reset, or a node gone: its Node, static Pods and etcd member go.
func (c *Cluster) Reset(_ context.Context, name string) error {
	c.Etcd.RemoveMember(name)
	c.mu.Lock()
	for _, component := range controlPlaneComponents {
		delete(c.stopped, name+"/"+component)
	}
	delete(c.delays, name)
	c.mu.Unlock()
	for _, component := range controlPlaneComponents {
		if err := c.remove(schema.GroupResource{Resource: "pods"}, metav1.NamespaceSystem, component+"-"+name); err != nil {
			return err
		}
	}
	return c.remove(nodesResource, "", name)
}

func (c *Cluster) remove(gr schema.GroupResource, namespace, name string) error {
	if _, err := c.Store.Delete(gr, namespace, name); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// ensure stores an object as it is given: created, or replacing the one of its name.
func (c *Cluster) ensure(o runtime.Object) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return errors.Wrap(err, "converting an object of the simulated cluster")
	}
	obj := &unstructured.Unstructured{Object: content}
	gr, err := c.resourceOf(obj)
	if err != nil {
		return err
	}
	if _, err := c.Store.Create(gr, obj); apierrors.IsAlreadyExists(err) {
		_, err = c.Store.Update(gr, obj)
		return err
	} else if err != nil {
		return err
	}
	return nil
}

// resourceOf is the served resource of an object's kind.
func (c *Cluster) resourceOf(obj *unstructured.Unstructured) (schema.GroupResource, error) {
	gvk := obj.GroupVersionKind()
	for _, r := range Resources {
		if r.Group == gvk.Group && r.Version == gvk.Version && r.Kind == gvk.Kind {
			return r.GroupResource(), nil
		}
	}
	return schema.GroupResource{}, errors.Errorf("kind %s is not served", gvk)
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// staticPod is a control plane component's Pod on a node, running and Ready.
func staticPod(component string, n Node) *corev1.Pod {
	image := "registry.k8s.io/" + component + ":" + n.KubernetesVersion
	if component == "etcd" {
		etcd, _ := imagesOf(n.KubernetesVersion)
		image = "registry.k8s.io/etcd:" + etcd
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return &corev1.Pod{
		TypeMeta: typeMeta("v1", "Pod"),
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: component + "-" + n.Name,
			Labels: map[string]string{"component": component, "tier": "control-plane"}},
		Spec: corev1.PodSpec{NodeName: n.Name, HostNetwork: true, PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{Name: component, Image: image}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: component, Image: image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}},
	}
}

func daemonSet(namespace, name, image string) *appsv1.DaemonSet {
	labels := map[string]string{"k8s-app": name}
	return &appsv1.DaemonSet{TypeMeta: typeMeta("apps/v1", "DaemonSet"), ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}}}}
}

func deployment(namespace, name, image string) *appsv1.Deployment {
	labels := map[string]string{"k8s-app": "kube-dns"}
	return &appsv1.Deployment{TypeMeta: typeMeta("apps/v1", "Deployment"), ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}}}}
}
