package capie2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/test/framework"
)

// InMemoryProxy is a management cluster whose Dockyard manager runs as a Pod and serves the API
// servers of in-memory clusters (docs/in-memory.md): their endpoints name the manager's
// headless Service (dockyard-in-memory.<namespace>.svc) or its Pod's IP, which a test process
// outside the management cluster can neither resolve nor route to. Its workload proxies reach
// such an endpoint through a port-forward to the manager Pod, made by the management cluster's
// API server; only the TCP connection is replaced, so the kubeconfig's TLS (the cluster's CA,
// the endpoint's name as the server name, the client certificate) is checked as it would be.
type InMemoryProxy struct {
	framework.ClusterProxy
}

// GetWorkloadCluster returns the proxy of a workload cluster whose connections go through
// InMemoryProxy.DialContext. It is an InMemoryProxy itself: a workload cluster that is a
// management cluster in turn (Cluster API's clusterctl upgrade spec) reaches the in-memory
// clusters its own manager Pod serves the same way.
func (p InMemoryProxy) GetWorkloadCluster(ctx context.Context, namespace, name string, options ...framework.Option) framework.ClusterProxy {
	return InMemoryProxy{ClusterProxy: p.ClusterProxy.GetWorkloadCluster(ctx, namespace, name, append(options, framework.WithRESTConfigModifier(func(cfg *rest.Config) {
		cfg.Dial = p.DialContext
	}))...)}
}

// DialContext connects to address (host:port) as rest.Config.Dial does. An address whose host
// is <service>.<namespace>.svc (with or without the cluster's domain) names a Service of the
// management cluster: the connection is a port-forward to that port of the Service's Pod (the
// newest Ready one of those running). A host that is the address of a Pod (not on the host's
// network) is reached the same way through that Pod. Any other address is dialed directly.
// What the Pod's side of a port-forward reports (nothing listening there, say) is returned by
// the connection's Read once its stream ends.
func (p InMemoryProxy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ep, err := parseEndpoint(address)
	if err != nil {
		return nil, err
	}
	pod, err := endpointPod(ctx, p.GetClient(), ep)
	if err != nil {
		return nil, errors.Wrapf(err, "dialing %s", address)
	}
	if pod == nil {
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	return portForward(p.GetRESTConfig(), pod, ep.port)
}

// endpoint is where an in-memory cluster's kubeconfig points: a Service by name or a Pod by
// address, and a port of the Pod.
type endpoint struct {
	// service and namespace name a Service (<service>.<namespace>.svc[.<domain>]); empty for an
	// address.
	service, namespace string
	// ip is the host when it is an address.
	ip   string
	port int
}

// parseEndpoint reads host:port. A host that is neither a Service's name nor an address
// gives an endpoint with neither.
func parseEndpoint(address string) (endpoint, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return endpoint{}, errors.Wrapf(err, "dialing %s", address)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port <= 0 || port > 65535 {
		return endpoint{}, errors.Errorf("dialing %s: port %q is not a port", address, portText)
	}
	ep := endpoint{port: port}
	if ip := net.ParseIP(host); ip != nil {
		ep.ip = ip.String()
		return ep, nil
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(labels) >= 3 && labels[2] == "svc" && labels[0] != "" && labels[1] != "" {
		ep.service, ep.namespace = labels[0], labels[1]
	}
	return ep, nil
}

// endpointPod is the Pod an endpoint reaches in the management cluster: its Service's, or the
// one with its address; nil when the endpoint names neither.
func endpointPod(ctx context.Context, c client.Reader, ep endpoint) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	switch {
	case ep.service != "":
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ep.namespace, Name: ep.service}, svc); err != nil {
			return nil, errors.Wrapf(err, "reading the management cluster's Service %s/%s", ep.namespace, ep.service)
		}
		if len(svc.Spec.Selector) == 0 {
			return nil, errors.Errorf("the management cluster's Service %s/%s selects no Pods", ep.namespace, ep.service)
		}
		if err := c.List(ctx, pods, client.InNamespace(ep.namespace), client.MatchingLabels(svc.Spec.Selector)); err != nil {
			return nil, errors.Wrapf(err, "listing the Pods of the management cluster's Service %s/%s", ep.namespace, ep.service)
		}
		pod := choosePod(pods.Items)
		if pod == nil {
			return nil, errors.Errorf("the management cluster's Service %s/%s has no running Pod", ep.namespace, ep.service)
		}
		return pod, nil
	case ep.ip != "":
		if err := c.List(ctx, pods); err != nil {
			return nil, errors.Wrap(err, "listing the management cluster's Pods")
		}
		var owners []corev1.Pod
		for _, p := range pods.Items {
			if !p.Spec.HostNetwork && slices.ContainsFunc(p.Status.PodIPs, func(a corev1.PodIP) bool { return sameIP(a.IP, ep.ip) }) {
				owners = append(owners, p)
			}
		}
		return choosePod(owners), nil
	}
	return nil, nil
}

func sameIP(a, b string) bool {
	ip := net.ParseIP(a)
	return ip != nil && ip.String() == b
}

// choosePod returns the Pod a port-forward goes to: of those running with an address and not
// being deleted, a Ready one before one that is not, then the newest (a manager Pod replaced
// serves from its successor), then by name; nil when none runs.
func choosePod(pods []corev1.Pod) *corev1.Pod {
	var running []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return nil
	}
	slices.SortStableFunc(running, func(a, b *corev1.Pod) int {
		if ra, rb := podReady(a), podReady(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return running[0]
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// portForward opens a port-forward to port of pod through the API server of cfg, as kubectl
// port-forward does for each connection: one SPDY connection with an error stream and a data
// stream.
func portForward(cfg *rest.Config, pod *corev1.Pod, port int) (net.Conn, error) {
	target := pod.Namespace + "/" + pod.Name + ":" + strconv.Itoa(port)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrapf(err, "port-forward to %s", target)
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, errors.Wrapf(err, "port-forward to %s", target)
	}
	u := core.RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	conn, _, err := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, errors.Wrapf(err, "port-forward to %s", target)
	}
	headers := http.Header{}
	headers.Set(corev1.PortHeader, strconv.Itoa(port))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		return nil, kerrors.NewAggregate([]error{errors.Wrapf(err, "port-forward to %s: the error stream", target), conn.Close()})
	}
	// Nothing is written to it; the Pod's side writes what failed, then closes it.
	if err := errorStream.Close(); err != nil {
		return nil, kerrors.NewAggregate([]error{errors.Wrapf(err, "port-forward to %s: the error stream", target), conn.Close()})
	}
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return nil, kerrors.NewAggregate([]error{errors.Wrapf(err, "port-forward to %s: the data stream", target), conn.Close()})
	}
	failed := make(chan error, 1)
	go func() {
		defer close(failed)
		msg, err := io.ReadAll(errorStream)
		switch {
		case err != nil:
			failed <- errors.Wrapf(err, "port-forward to %s: reading its error stream", target)
		case len(msg) > 0:
			failed <- errors.Errorf("port-forward to %s: %s", target, msg)
		}
	}()
	return &forwardedConn{conn: conn, data: data, failed: failed, addr: forwardedAddr(target)}, nil
}

// forwardedConn is one port-forwarded connection.
type forwardedConn struct {
	// conn is the SPDY connection to the API server, data its data stream.
	conn io.Closer
	data io.ReadWriteCloser
	// failed says what the error stream reported, if anything, and is closed when it ends.
	failed <-chan error
	addr   forwardedAddr
}

// errorStreamWait bounds how long a Read that met the end of the data stream waits for the
// error stream to say why.
const errorStreamWait = time.Second

// Read reads the data stream; when it ends, with what the error stream reported, if anything.
func (c *forwardedConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	if err != nil {
		select {
		case failed := <-c.failed:
			if failed != nil {
				return n, failed
			}
		case <-time.After(errorStreamWait):
		}
	}
	return n, err
}

// Write writes to the data stream.
func (c *forwardedConn) Write(b []byte) (int, error) { return c.data.Write(b) }

// Close ends the data stream and the SPDY connection.
func (c *forwardedConn) Close() error {
	return kerrors.NewAggregate([]error{c.data.Close(), c.conn.Close()})
}

// LocalAddr is the port-forward's target.
func (c *forwardedConn) LocalAddr() net.Addr { return c.addr }

// RemoteAddr is the port-forward's target.
func (c *forwardedConn) RemoteAddr() net.Addr { return c.addr }

// SetDeadline and the other deadlines are not enforced: a port-forward's streams have none.
// client-go bounds its requests with its own timeouts.
func (c *forwardedConn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline is not enforced (SetDeadline).
func (c *forwardedConn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline is not enforced (SetDeadline).
func (c *forwardedConn) SetWriteDeadline(time.Time) error { return nil }

// forwardedAddr is a port-forward's target, <namespace>/<pod>:<port>.
type forwardedAddr string

// Network is client-go's port-forward protocol.
func (a forwardedAddr) Network() string { return portforward.PortForwardProtocolV1Name }

func (a forwardedAddr) String() string { return string(a) }
