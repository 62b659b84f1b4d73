//go:build images

package images

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// kubeClient talks to the workload cluster from the host, through the API server port the
// control plane node publishes on 127.0.0.1.
type kubeClient struct {
	server     string
	kubeconfig string // file, for kubectl
	kubectlBin string
	config     *rest.Config
	cs         kubernetes.Interface
	generic    client.Client
}

// kubeClient reads the admin kubeconfig kubeadm wrote in the control plane node, points it at
// the published port and waits until the API server answers.
func (p *proof) kubeClient(ctx context.Context, cp *node) *kubeClient {
	t := p.t
	_, port := cp.handle.PublishedPort(docker.APIServerPort)
	if port == 0 {
		t.Fatalf("node %s publishes no port for %d", cp.name, docker.APIServerPort)
	}
	raw, err := p.readFile(ctx, cp.name, "/etc/kubernetes/admin.conf")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatalf("parsing admin.conf: %v", err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	file := filepath.Join(p.workDir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", file)
	if err != nil {
		t.Fatal(err)
	}
	rc.Timeout = 30 * time.Second
	kc := &kubeClient{server: server, kubeconfig: file, config: rc}
	if kc.cs, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	if kc.generic, err = client.New(rc, client.Options{}); err != nil {
		t.Fatal(err)
	}
	kc.kubectlBin = kubectl(ctx, t)
	p.kube = kc

	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := kc.cs.Discovery().ServerVersion()
		if err == nil {
			t.Logf("API server %s answers from the host: %s", server, v.GitVersion)
			return kc
		}
		if time.Now().After(deadline) {
			t.Fatalf("API server %s does not answer from the host: %v", server, err)
		}
		time.Sleep(time.Second)
	}
}

// readFile copies one file out of a container (CopyFromContainer's tar stream).
func (p *proof) readFile(ctx context.Context, name, path string) ([]byte, error) {
	rc, err := p.rt.CopyFromContainer(ctx, name, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, errors.Wrapf(err, "reading %s from %s", path, name)
		}
		if h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}

// kubectl returns the host's kubectl for the Kubernetes version, from Dockyard's build cache
// (make images built it for the node image; built here if missing).
func kubectl(ctx context.Context, t *testing.T) string {
	if bin := os.Getenv("KUBECTL"); bin != "" {
		return bin
	}
	home, _ := os.UserHomeDir()
	cache := envOr("DOCKYARD_CACHE", filepath.Join(home, ".cache", "dockyard"))
	build, err := gobuild.Kubernetes(kubernetesVersion, "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := (&gobuild.Builder{CacheDir: filepath.Join(cache, "build")}).Run(ctx, build)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kubectl")
}

// kubectl runs the host's kubectl against the workload cluster.
func (kc *kubeClient) kubectl(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, kc.kubectlBin, append([]string{"--kubeconfig", kc.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (kc *kubeClient) waitNodeReady(ctx context.Context, t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, err := kc.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && nodeReady(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not Ready within %s (%v)", name, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitCoreDNS waits for every CoreDNS pod to be Running and Ready.
func (kc *kubeClient) waitCoreDNS(ctx context.Context, t *testing.T, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		pods, err := kc.cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		ready := 0
		if err == nil {
			for i := range pods.Items {
				if podReady(&pods.Items[i]) {
					ready++
				}
			}
			if ready > 0 && ready == len(pods.Items) {
				t.Logf("CoreDNS: %d pods Running and Ready", ready)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("CoreDNS pods not Ready within %s (%d ready, %v)", timeout, ready, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// createBootstrapToken creates a kubeadm bootstrap token Secret in kube-system (the format
// kubeadm's token discovery and the node bootstrap authenticator read) and returns the token.
func (kc *kubeClient) createBootstrapToken(ctx context.Context, ttl time.Duration) (string, error) {
	id, secretPart, err := newBootstrapToken()
	if err != nil {
		return "", err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id":                       id,
			"token-secret":                   secretPart,
			"expiration":                     time.Now().UTC().Add(ttl).Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"usage-bootstrap-signing":        "true",
			"auth-extra-groups":              "system:bootstrappers:kubeadm:default-node-token",
			"description":                    "Dockyard image test worker join",
		},
	}
	if _, err := kc.cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return "", errors.Wrap(err, "creating the bootstrap token secret")
	}
	return id + "." + secretPart, nil
}

// removeTaint removes a taint (any effect) from a node.
func (kc *kubeClient) removeTaint(ctx context.Context, t *testing.T, name, key string) {
	for attempt := 0; ; attempt++ {
		n, err := kc.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var kept []corev1.Taint
		for _, tn := range n.Spec.Taints {
			if tn.Key != key {
				kept = append(kept, tn)
			}
		}
		if len(kept) == len(n.Spec.Taints) {
			t.Logf("node %s has no taint %s", name, key)
			return
		}
		n.Spec.Taints = kept
		_, err = kc.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			t.Logf("removed taint %s from node %s", key, name)
			return
		}
		if !apierrors.IsConflict(err) || attempt > 5 {
			t.Fatal(err)
		}
	}
}

const (
	proofNamespace = "dockyard-images"
	echoPort       = 5353
)

// podNetworkCheck runs a CoreDNS server pod on the control plane node and, on the worker, a
// pod that opens a TCP connection to the server pod's IP; both use preloaded images only.
func (kc *kubeClient) podNetworkCheck(ctx context.Context, t *testing.T, serverNode, clientNode, clientImage string) {
	core := kc.cs.CoreV1()
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: proofNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	coreDNSImage, err := kc.coreDNSImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	corefile := fmt.Sprintf(".:%d {\n    whoami\n}\n", echoPort)
	if _, err := core.ConfigMaps(proofNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"}, Data: map[string]string{"Corefile": corefile},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	onNode := func(n string) map[string]string { return map[string]string{"kubernetes.io/hostname": n} }
	tolerateAll := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	server := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-server", Labels: map[string]string{"app": "echo"}},
		Spec: corev1.PodSpec{
			NodeSelector: onNode(serverNode),
			Tolerations:  tolerateAll,
			Containers: []corev1.Container{{
				Name: "coredns", Image: coreDNSImage, ImagePullPolicy: corev1.PullNever,
				Args:         []string{"-conf", "/etc/echo/Corefile"},
				Ports:        []corev1.ContainerPort{{ContainerPort: echoPort, Protocol: corev1.ProtocolTCP}},
				VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/echo"}},
			}},
			Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "echo"}},
			}}},
		},
	}
	if _, err := core.Pods(proofNamespace).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var serverPod *corev1.Pod
	deadline := time.Now().Add(3 * time.Minute)
	for {
		serverPod, err = core.Pods(proofNamespace).Get(ctx, server.Name, metav1.GetOptions{})
		if err == nil && podReady(serverPod) && serverPod.Status.PodIP != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server pod not ready within 3m: %v %s", err, podState(serverPod))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("server pod on %s at %s:%d", serverPod.Spec.NodeName, serverPod.Status.PodIP, echoPort)

	script := `for i in $(seq 1 30); do
  if (exec 3<>"/dev/tcp/$TARGET/$PORT") 2>/dev/null; then echo "connected from $POD_IP to $TARGET:$PORT"; exit 0; fi
  sleep 1
done
echo "no connection from $POD_IP to $TARGET:$PORT"; exit 1`
	clientPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-client"},
		Spec: corev1.PodSpec{
			NodeSelector:  onNode(clientNode),
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "connect", Image: clientImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/bash", "-c", script},
				Env: []corev1.EnvVar{
					{Name: "TARGET", Value: serverPod.Status.PodIP},
					{Name: "PORT", Value: fmt.Sprint(echoPort)},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	}
	if _, err := core.Pods(proofNamespace).Create(ctx, clientPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(3 * time.Minute)
	var got *corev1.Pod
	for {
		got, err = core.Pods(proofNamespace).Get(ctx, clientPod.Name, metav1.GetOptions{})
		if err == nil && (got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client pod did not finish within 3m: %v %s", err, podState(got))
		}
		time.Sleep(250 * time.Millisecond)
	}
	logs, err := core.Pods(proofNamespace).GetLogs(clientPod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	t.Logf("client pod on %s (%s): %s %s", got.Spec.NodeName, got.Status.PodIP, got.Status.Phase, strings.TrimSpace(string(logs)))
	if err != nil {
		t.Logf("reading the client pod's logs: %v", err)
	}
	if got.Spec.NodeName != clientNode || serverPod.Spec.NodeName != serverNode {
		t.Fatalf("pods ran on %s and %s, want %s and %s", got.Spec.NodeName, serverPod.Spec.NodeName, clientNode, serverNode)
	}
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the pod on %s could not connect to %s:%d on %s over the pod network", clientNode, serverPod.Status.PodIP, echoPort, serverNode)
	}
}

func podState(p *corev1.Pod) string {
	if p == nil {
		return "(no pod)"
	}
	return fmt.Sprintf("phase %s on %q, conditions %v, containers %v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions, p.Status.ContainerStatuses)
}

// coreDNSImage is the image of the cluster's CoreDNS deployment (preloaded in every node).
func (kc *kubeClient) coreDNSImage(ctx context.Context) (string, error) {
	d, err := kc.cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return d.Spec.Template.Spec.Containers[0].Image, nil
}

// assertNoPullingEvents fails when any kubelet reported pulling an image, or failing to.
func (kc *kubeClient) assertNoPullingEvents(ctx context.Context, t *testing.T) {
	events, err := kc.cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pulled := 0
	for _, e := range events.Items {
		switch {
		case e.Reason == "Pulling" || e.Reason == "ErrImageNeverPull" || strings.Contains(e.Message, "ErrImagePull"):
			t.Errorf("event %s/%s: %s %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Reason, e.Message)
		case e.Reason == "Pulled":
			pulled++ // "already present on machine"
		}
	}
	t.Logf("%d events, none about pulling (%d say the image was already present)", len(events.Items), pulled)
}

// dump prints the workload cluster's nodes, pods and recent warnings.
func (kc *kubeClient) dump(ctx context.Context, t *testing.T) {
	for _, args := range [][]string{
		{"get", "nodes", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "events", "-A", "--field-selector", "type=Warning"},
	} {
		cmd := exec.CommandContext(ctx, kc.kubectlBin, append([]string{"--kubeconfig", kc.kubeconfig, "--request-timeout", "20s"}, args...)...)
		out, err := cmd.CombinedOutput()
		t.Logf("=== kubectl %s (%v)\n%s", strings.Join(args, " "), err, out)
	}
}
