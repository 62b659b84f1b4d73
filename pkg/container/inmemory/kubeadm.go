package inmemory

import (
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/pkg/errors"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/yaml"

	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
	"github.com/dockyard-dev/dockyard/pkg/workloadapi"
)

// Keys of a node container's simulated state (Container.Data).
const (
	// dataFront is the front of the cluster the node joined; dataNode its Node's name.
	dataFront = "inmemory.front"
	dataNode  = "inmemory.node"
)

// kubeadmConfig is what the simulation reads of kubeadm's configuration documents
// (kubeadm.k8s.io v1beta3 and v1beta4 alike).
type kubeadmConfig struct {
	Kind                 string `json:"kind"`
	KubernetesVersion    string `json:"kubernetesVersion"`
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint"`
	CertificatesDir      string `json:"certificatesDir"`
	NodeRegistration     struct {
		Name string `json:"name"`
	} `json:"nodeRegistration"`
	Discovery struct {
		BootstrapToken *struct {
			APIServerEndpoint string `json:"apiServerEndpoint"`
		} `json:"bootstrapToken"`
	} `json:"discovery"`
	ControlPlane *struct{} `json:"controlPlane"`

	// raw is the document as the file has it.
	raw string
}

// kubeadmRun is one kubeadm command of a bootstrap step: its subcommand and configuration
// file.
type kubeadmRun struct {
	action, config string
}

// parseKubeadm finds kubeadm's subcommand and --config in a shell command; ok is false when the
// command does not run kubeadm.
func parseKubeadm(command string) (run kubeadmRun, ok bool) {
	fields := strings.Fields(command)
	for i, f := range fields {
		if path.Base(f) != "kubeadm" || i+1 >= len(fields) {
			continue
		}
		run.action = fields[i+1]
		for j := i + 2; j < len(fields) && !strings.ContainsAny(fields[j], "&|;"); j++ {
			if v, found := strings.CutPrefix(fields[j], "--config="); found {
				run.config = v
			} else if fields[j] == "--config" && j+1 < len(fields) {
				run.config = fields[j+1]
			}
		}
		return run, true
	}
	return run, false
}

// kubeadm plays a kubeadm command of a node's bootstrap (Nodes.Kubeadm): init makes the cluster
// of the front its ClusterConfiguration names as the control plane endpoint, join registers the
// node in the cluster of the front its discovery names, reset takes it out again. It fails, as
// kubeadm would, when its configuration is missing or wrong or the endpoint serves no cluster.
func (e *Engine) kubeadm(c *Container, command string) (string, bool) {
	run, ok := parseKubeadm(command)
	if !ok {
		return "", true
	}
	var err error
	switch run.action {
	case "init":
		err = e.kubeadmInit(c, run.config)
	case "join":
		err = e.kubeadmJoin(c, run.config)
	case "reset":
		e.leave(c)
	case "version", "config", "certs", "token", "upgrade", "kubeconfig":
		// Nothing a simulated node keeps.
	default:
		err = errors.Errorf("unknown command %q for \"kubeadm\"", run.action)
	}
	if err != nil {
		return fmt.Sprintf("error execution phase %s: %v\n", run.action, err), false
	}
	return fmt.Sprintf("[%s] simulated in memory: node %s\n", run.action, nodeName(c, kubeadmConfig{})), true
}

// readKubeadmConfig reads the documents of a kubeadm configuration file in a node.
func readKubeadmConfig(c *Container, file string) (map[string]kubeadmConfig, error) {
	if file == "" {
		return nil, errors.New("kubeadm runs without --config: an in-memory node is configured only by its bootstrap data's files")
	}
	content, ok := c.Files[file]
	if !ok {
		return nil, errors.Errorf("unable to read config from %q: no such file", file)
	}
	docs := map[string]kubeadmConfig{}
	for _, doc := range strings.Split("\n"+string(content), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		cfg := kubeadmConfig{raw: strings.TrimSpace(doc) + "\n"}
		if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
			return nil, errors.Wrapf(err, "reading %s", file)
		}
		docs[cfg.Kind] = cfg
	}
	return docs, nil
}

func (e *Engine) kubeadmInit(c *Container, file string) error {
	docs, err := readKubeadmConfig(c, file)
	if err != nil {
		return err
	}
	cc, ok := docs["ClusterConfiguration"]
	if !ok {
		return errors.Errorf("%s has no ClusterConfiguration", file)
	}
	opts := workloadapi.ClusterOptions{KubernetesVersion: cc.KubernetesVersion}
	pki := cc.CertificatesDir
	if pki == "" {
		pki = "/etc/kubernetes/pki"
	}
	if opts.CACert, opts.CAKey, err = keyPair(c, pki, "ca"); err != nil {
		return err
	}
	if opts.EtcdCACert, opts.EtcdCAKey, err = keyPair(c, pki, "etcd/ca"); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.frontAt(cc.ControlPlaneEndpoint)
	if f == nil {
		return errors.Errorf("controlPlaneEndpoint %q is no front of the in-memory engine (%s)", cc.ControlPlaneEndpoint, e.host)
	}
	if f.cluster != nil {
		return errors.Errorf("the cluster at %s was initialized already: this node should join it", cc.ControlPlaneEndpoint)
	}
	opts.Hosts = []string{e.host}
	if e.address != e.host {
		opts.Hosts = append(opts.Hosts, e.address)
	}
	cluster, err := workloadapi.NewCluster(opts)
	if err != nil {
		return err
	}
	node := workloadapi.Node{Name: nodeName(c, docs["InitConfiguration"]), KubernetesVersion: nodeVersion(c, cc.KubernetesVersion), ControlPlane: true}
	if err := cluster.Init(context.Background(), node, cc.raw); err != nil {
		return err
	}
	f.cluster = cluster
	go func() { _ = cluster.Serve(f.served) }()
	c.Data[dataFront], c.Data[dataNode] = f.spec.Name, node.Name
	return nil
}

func (e *Engine) kubeadmJoin(c *Container, file string) error {
	docs, err := readKubeadmConfig(c, file)
	if err != nil {
		return err
	}
	jc, ok := docs["JoinConfiguration"]
	if !ok || jc.Discovery.BootstrapToken == nil {
		return errors.Errorf("%s has no JoinConfiguration with discovery.bootstrapToken", file)
	}
	endpoint := jc.Discovery.BootstrapToken.APIServerEndpoint
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.frontAt(endpoint)
	if f == nil || f.cluster == nil {
		return errors.Errorf("couldn't validate the identity of the API Server: Get \"https://%s/api/v1/namespaces/kube-public/configmaps/cluster-info\": connection refused", endpoint)
	}
	node := workloadapi.Node{Name: nodeName(c, jc), KubernetesVersion: nodeVersion(c, f.cluster.Server.Version()), ControlPlane: jc.ControlPlane != nil}
	if err := f.cluster.Join(context.Background(), node); err != nil {
		return err
	}
	c.Data[dataFront], c.Data[dataNode] = f.spec.Name, node.Name
	return nil
}

// leave takes a node out of the cluster it joined, as kubeadm reset does (or the node's
// removal: its Node, static Pods and etcd member go with it).
func (e *Engine) leave(c *Container) {
	name, _ := c.Data[dataFront].(string)
	node, _ := c.Data[dataNode].(string)
	if name == "" {
		return
	}
	delete(c.Data, dataFront)
	e.mu.Lock()
	f := e.fronts[name]
	e.mu.Unlock()
	if f != nil && f.cluster != nil {
		_ = f.cluster.Reset(context.Background(), node)
	}
}

// keyPair reads a CA's certificate and key from a node's PKI directory.
func keyPair(c *Container, pki, name string) (*x509.Certificate, crypto.Signer, error) {
	certFile, keyFile := path.Join(pki, name+".crt"), path.Join(pki, name+".key")
	certPEM, ok := c.Files[certFile]
	if !ok {
		return nil, nil, errors.Errorf("[certs] %s is missing: the bootstrap data of the first control plane node carries the cluster's CAs", certFile)
	}
	cert, err := certs.DecodeCertPEM(certPEM)
	if err != nil || cert == nil {
		return nil, nil, errors.Errorf("[certs] %s holds no PEM certificate", certFile)
	}
	key, err := certs.DecodePrivateKeyPEM(c.Files[keyFile])
	if err != nil || key == nil {
		return nil, nil, errors.Errorf("[certs] %s holds no PEM private key", keyFile)
	}
	return cert, key, nil
}

// nodeName is the name kubeadm gives the node: nodeRegistration.name, else the hostname.
func nodeName(c *Container, cfg kubeadmConfig) string {
	if n := cfg.NodeRegistration.Name; n != "" && !strings.Contains(n, "{{") {
		return n
	}
	if c.State.Hostname != "" {
		return c.State.Hostname
	}
	return c.Spec.Hostname
}

// nodeVersion is the node's kubelet version: its image's tag when it names a version (node
// images are tagged with theirs), else the cluster's.
func nodeVersion(c *Container, cluster string) string {
	if named, err := reference.ParseNormalizedNamed(c.Spec.Image); err == nil {
		if tagged, ok := named.(reference.Tagged); ok && strings.HasPrefix(tagged.Tag(), "v") {
			return tagged.Tag()
		}
	}
	return cluster
}

// networkDelay sets a node's network delay in the cluster it joined (Nodes.NetworkDelay).
func (e *Engine) networkDelay(c *Container, d time.Duration) {
	if f, node := e.joined(c); f != nil {
		f.cluster.SetNetworkDelay(node, d)
	}
}

// joined returns the front of the cluster a node joined and its Node's name; nil when it
// joined none.
func (e *Engine) joined(c *Container) (*front, string) {
	name, _ := c.Data[dataFront].(string)
	node, _ := c.Data[dataNode].(string)
	e.mu.Lock()
	defer e.mu.Unlock()
	if f := e.fronts[name]; name != "" && f != nil && f.cluster != nil {
		return f, node
	}
	return nil, ""
}

// service stops or starts a service of a node in the cluster it joined (Nodes.Service): kubelet,
// whose Node then goes Unknown, or a control plane component. A node that joined no cluster has
// nothing running to stop.
func (e *Engine) service(c *Container, service string, running bool) error {
	f, node := e.joined(c)
	if f == nil {
		return nil
	}
	if service == nodecmd.Kubelet {
		return f.cluster.SetKubelet(context.Background(), node, running)
	}
	return f.cluster.SetComponent(context.Background(), node, service, running)
}
