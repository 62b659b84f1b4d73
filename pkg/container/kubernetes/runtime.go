package kubernetes

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/distribution/reference"
	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// EngineName is how Info names the engine.
const EngineName = "kubernetes"

// Runtime runs containers as Pods in one namespace of a Kubernetes cluster.
type Runtime struct {
	// config reaches the cluster for streams (exec); client makes its calls, each bounded by
	// RequestTimeout; watches makes its watches, which last as long as their context.
	config    *rest.Config
	client    kubernetes.Interface
	watches   kubernetes.Interface
	namespace string
	// fronts is the type of the Services fronts are: NodePort (clients in the cluster's
	// network, or through a node), LoadBalancer (clients elsewhere: ExternalFronts).
	fronts corev1.ServiceType
	// owner is whom the engine acts for (owners.go); check, when set, is the owner's check of
	// a spec an ended Pod kept, before the Pod is made again from it.
	owner string
	check func(container.ContainerSpec) error
}

// Option changes how an engine works.
type Option func(*Runtime)

// ExternalFronts makes fronts Services of type LoadBalancer: their address is the one the
// cluster's load balancer implementation (a cloud's, MetalLB, ...) gives them, which clients
// outside the cluster's network reach; a management cluster that is not the infrastructure
// cluster is such a client. Until the Service has one, the front has no address and says why.
func ExternalFronts() Option {
	return func(r *Runtime) { r.fronts = corev1.ServiceTypeLoadBalancer }
}

var _ container.Runtime = &Runtime{}

// RequestTimeout bounds every request to the infrastructure cluster but watches and the
// streams of commands, whatever its kubeconfig says: a server that accepts connections and
// never answers fails a call after it, not never.
const RequestTimeout = 30 * time.Second

// New returns the engine of a cluster's namespace, reached with a REST configuration, acting for
// one owner (WithOwner; owners.go). Connecting does not talk to the cluster: call Info to learn
// whether it answers.
func New(config *rest.Config, namespace string, opts ...Option) (*Runtime, error) {
	if namespace == "" {
		return nil, errors.New("the infrastructure cluster's namespace for Dockyard's Pods is empty")
	}
	cfg := rest.CopyConfig(config)
	// Pod names with dots (Dockyard qualifies nodes by namespace) draw a warning on every call.
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return trimmedAnswers{next: rt} })
	calls := rest.CopyConfig(cfg)
	if calls.Timeout <= 0 || calls.Timeout > RequestTimeout {
		calls.Timeout = RequestTimeout
	}
	cs, err := kubernetes.NewForConfig(calls)
	if err != nil {
		return nil, errors.Wrap(err, "making a client of the infrastructure cluster")
	}
	watches, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "making a client of the infrastructure cluster")
	}
	r := newRuntime(cfg, cs, namespace, opts...)
	if len(r.owner) > MaxOwnerLength {
		return nil, errors.Errorf("the owner %q of the engine of namespace %s is longer than %d characters", r.owner, namespace, MaxOwnerLength)
	}
	r.watches = watches
	return r, nil
}

// newRuntime is an engine of one clientset for calls and watches (tests give a fake).
func newRuntime(cfg *rest.Config, cs kubernetes.Interface, namespace string, opts ...Option) *Runtime {
	r := &Runtime{config: cfg, client: cs, watches: cs, namespace: namespace, fronts: corev1.ServiceTypeNodePort, owner: DefaultOwner}
	for _, o := range opts {
		o(r)
	}
	return r
}

// NewFromKubeconfig returns the engine of a cluster's namespace from a kubeconfig's bytes.
func NewFromKubeconfig(kubeconfig []byte, namespace string, opts ...Option) (*Runtime, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, errors.Wrap(err, "reading the infrastructure cluster's kubeconfig")
	}
	return New(cfg, namespace, opts...)
}

// Namespace is where the engine's Pods live.
func (r *Runtime) Namespace() string { return r.namespace }

// Close releases nothing: the client's connections are pooled by its transport.
func (r *Runtime) Close() error { return nil }

// Info describes the cluster: its version, and the largest schedulable node's CPUs, memory,
// operating system and architecture (what a Pod without limits can get). Kubernetes does not
// publish its nodes' cgroup version or driver; they are empty.
func (r *Runtime) Info(ctx context.Context) (container.EngineInfo, error) {
	var v version.Info
	body, err := r.client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err == nil {
		err = json.Unmarshal(body, &v)
	}
	if err != nil {
		return container.EngineInfo{}, errors.Wrap(err, "asking the infrastructure cluster for its version")
	}
	nodes, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return container.EngineInfo{}, errors.Wrap(err, "listing the infrastructure cluster's nodes")
	}
	info := container.EngineInfo{Name: EngineName, Version: v.GitVersion}
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		cpu := n.Status.Allocatable.Cpu().Value()
		mem := n.Status.Allocatable.Memory().Value()
		if int(cpu) < info.CPUs || (int(cpu) == info.CPUs && mem <= info.MemoryBytes) {
			continue
		}
		info.CPUs, info.MemoryBytes = int(cpu), mem
		info.OperatingSystem = n.Status.NodeInfo.OSImage
		info.Architecture = container.GoArch(n.Status.NodeInfo.Architecture)
	}
	return info, nil
}

// notFound wraps container.ErrNotFound when the API says an object does not exist.
func notFound(err error, format string, args ...any) error {
	if apierrors.IsNotFound(err) {
		return errors.Wrapf(container.ErrNotFound, format+": %v", append(args, err)...)
	}
	return errors.Wrapf(err, format, args...)
}

// ImageExists reports whether a node of the cluster holds the image (the nodes' status lists
// the images they have).
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	nodes, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, errors.Wrap(err, "listing the infrastructure cluster's nodes")
	}
	want := imageNames(ref)
	for _, n := range nodes.Items {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				if slices.Contains(want, name) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// PullImage leaves the image to the kubelet of the node each Pod lands on, which pulls it
// from its registry when the Pod starts (a Pod waiting for it says so in its state).
func (r *Runtime) PullImage(context.Context, string) error { return nil }

// errNoImageTransfer is what the image copies answer.
var errNoImageTransfer = errors.New("a Kubernetes infrastructure cluster takes images from a registry its nodes pull from, not from copies: push the image there (dockyard push images)")

// SaveImages is refused: images are the nodes' own.
func (r *Runtime) SaveImages(context.Context, []string) (io.ReadCloser, error) {
	return nil, errNoImageTransfer
}

// LoadImages is refused: images reach the nodes from a registry.
func (r *Runtime) LoadImages(context.Context, io.Reader) error { return errNoImageTransfer }

// InspectImage says ErrNotFound: the cluster has no images of its own to inspect (nodes pull
// by name).
func (r *Runtime) InspectImage(_ context.Context, ref string) (*container.Image, error) {
	return nil, errors.Wrapf(container.ErrNotFound, "image %s: a Kubernetes infrastructure cluster has no image store Dockyard reads", ref)
}

// RemoveImage leaves the nodes' images to their kubelets' garbage collection.
func (r *Runtime) RemoveImage(context.Context, string) error { return nil }

// imageNames are the names a node's status may list an image under.
func imageNames(ref string) []string {
	names := []string{ref}
	if n, err := reference.ParseNormalizedNamed(ref); err == nil {
		names = append(names, reference.TagNameOnly(n).String())
	}
	return names
}

// podPhaseEnded reports whether a Pod ended for good: its phase says so, or its container
// ended and its restart policy never starts it again (the phase follows a moment later).
func podPhaseEnded(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	st := mainStatus(p)
	return p.Spec.RestartPolicy == corev1.RestartPolicyNever && st != nil && st.State.Terminated != nil
}
