package mgmt

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	capiversion "sigs.k8s.io/cluster-api/util/version"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// ZoneLabel is the label a worker of a zone carries, Kubernetes' well-known one: a management
// cluster with zones is an infrastructure cluster whose zones are failure domains.
const ZoneLabel = corev1.LabelTopologyZone

// workerMachine names the worker of a zone: its container is "<cluster name>-worker-<zone>".
func workerMachine(zone string) string { return "worker-" + zone }

// WorkerName is the name of the node container of a zone's worker.
func WorkerName(name, zone string) string { return docker.NodeName(key(name), workerMachine(zone)) }

// ensureWorkers makes one worker per zone join the cluster, labelled with its zone, each with
// the engine's socket and the images of the control plane node. A worker that joined before is
// left as it is; one that stopped is started.
func ensureWorkers(ctx context.Context, nodes *docker.Manager, c *Cluster, opts Options) error {
	if len(opts.Zones) == 0 {
		return nil
	}
	cs, err := clientOf(c.Kubeconfig)
	if err != nil {
		return err
	}
	for _, zone := range opts.Zones {
		name := WorkerName(c.Name, zone)
		node, err := nodes.FindNode(ctx, key(c.Name), workerMachine(zone))
		switch {
		case err != nil:
			return err
		case node == nil:
			opts.Logf("Creating worker %s of zone %s", name, zone)
			node, err = nodes.AddNode(ctx, docker.NodeSpec{
				Cluster: key(c.Name), Machine: workerMachine(zone), Image: opts.NodeImage, Role: docker.RoleWorker,
				Network:      c.Network,
				ExtraMounts:  []docker.Mount{{HostPath: opts.EngineSocket, ContainerPath: DefaultEngineSocket}},
				ServiceCIDRs: []string{serviceSubnet},
			})
		case !node.Running:
			opts.Logf("Starting worker %s", name)
			err = node.Start(ctx)
		}
		if err != nil {
			return errors.Wrapf(err, "management cluster %s: worker of zone %s", c.Name, zone)
		}
		if err := waitBooted(ctx, node, c.Name); err != nil {
			return err
		}
		if err := node.LoadImages(ctx, opts.Images, nil); err != nil {
			return errors.Wrapf(err, "management cluster %s: preloading images into %s", c.Name, name)
		}
		if err := joinWorker(ctx, cs, node, c, opts, zone); err != nil {
			return err
		}
	}
	for _, zone := range opts.Zones {
		if err := waitReady(ctx, c.Kubeconfig, docker.NodeHostname(key(c.Name).Name, workerMachine(zone))); err != nil {
			return errors.Wrapf(err, "management cluster %s: worker of zone %s", c.Name, zone)
		}
	}
	return nil
}

func clientOf(kubeconfig []byte) (kubernetes.Interface, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, errors.Wrap(err, "reading the management cluster's kubeconfig")
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// joinWorker runs kubeadm join in a worker once, with a bootstrap token made for it.
func joinWorker(ctx context.Context, cs kubernetes.Interface, node *docker.Node, c *Cluster, opts Options, zone string) error {
	st, err := node.BootstrapStatus(ctx, bootstrapTimeout)
	if err != nil {
		return err
	}
	if st.Phase == bootstrap.NotStarted {
		token, err := bootstrapToken(ctx, cs)
		if err != nil {
			return errors.Wrapf(err, "management cluster %s: a bootstrap token for %s", c.Name, node.Name)
		}
		caHash, err := caCertHash(c.Kubeconfig)
		if err != nil {
			return err
		}
		address := node.Address(c.Network)
		if address == "" {
			return errors.Errorf("management cluster %s: worker %s has no address on network %s", c.Name, node.Name, c.Network)
		}
		data, err := joinData(c, opts, joining{hostname: node.Hostname, zone: zone, address: address, token: token, caHash: caHash})
		if err != nil {
			return errors.Wrapf(err, "management cluster %s: rendering the join data of %s", c.Name, node.Name)
		}
		plan, err := bootstrap.Parse(bootstrap.FormatCloudConfig, data, bootstrap.Options{Hostname: node.Hostname})
		if err != nil {
			return errors.Wrapf(err, "management cluster %s: translating the join data of %s", c.Name, node.Name)
		}
		opts.Logf("Running kubeadm join in %s (zone %s)", node.Name, zone)
		if err := node.StartBootstrap(ctx, plan, bootstrapTimeout); err != nil {
			return err
		}
	}
	return waitBootstrapped(ctx, node, c.Name)
}

// bootstrapToken makes a bootstrap token valid for an hour, for kubeadm join (the RBAC of
// kubeadm's default node token group was made by kubeadm init).
func bootstrapToken(ctx context.Context, cs kubernetes.Interface) (string, error) {
	id, secret := randomLower(6), randomLower(16)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": id, "token-secret": secret,
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
			"expiration":        time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"description":       "Dockyard: a management cluster's worker joining",
		},
	}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	return id + "." + secret, nil
}

// randomLower returns n characters of [a-z0-9], as bootstrap tokens are made of.
func randomLower(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// caCertHash is the sha256 of the cluster CA's public key, which kubeadm join checks.
func caCertHash(kubeconfig []byte) (string, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", errors.Wrap(err, "reading the management cluster's kubeconfig")
	}
	for _, cluster := range cfg.Clusters {
		block, _ := pem.Decode(cluster.CertificateAuthorityData)
		if block == nil {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "", errors.Wrap(err, "parsing the management cluster's CA")
		}
		sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
		return "sha256:" + hex.EncodeToString(sum[:]), nil
	}
	return "", errors.New("the management cluster's kubeconfig has no CA")
}

// joining is a worker as it joins: its hostname, zone and fixed address on the cluster's
// network (its Node's internal IP, as the control plane node's: Cluster.Address), and the
// bootstrap token and CA hash it joins with.
type joining struct{ hostname, zone, address, token, caHash string }

// joinData renders a worker's cloud-config the way Cluster API's kubeadm bootstrap provider
// does for a worker machine, with the zone as a label of its Node.
func joinData(c *Cluster, opts Options, w joining) ([]byte, error) {
	version, err := capiversion.ParseTolerantImageTag(opts.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	join := bootstrapv1.JoinConfiguration{
		Discovery: bootstrapv1.Discovery{BootstrapToken: bootstrapv1.BootstrapTokenDiscovery{
			APIServerEndpoint: fmt.Sprintf("%s:%d", c.Node, docker.APIServerPort), Token: w.token, CACertHashes: []string{w.caHash},
		}},
		NodeRegistration: bootstrapv1.NodeRegistrationOptions{
			Name: w.hostname,
			KubeletExtraArgs: []bootstrapv1.Arg{
				{Name: "eviction-hard", Value: ptr.To(evictionHard)},
				{Name: "node-labels", Value: ptr.To(ZoneLabel + "=" + w.zone)},
				{Name: "node-ip", Value: ptr.To(w.address)},
			},
		},
	}
	data, err := kubeadmtypes.MarshalJoinConfigurationForVersion(&join, version)
	if err != nil {
		return nil, errors.Wrap(err, "rendering the JoinConfiguration")
	}
	return cloudinit.NewNode(&cloudinit.NodeInput{
		BaseUserData:      cloudinit.BaseUserData{KubernetesVersion: version},
		JoinConfiguration: data,
	})
}

// validZone checks a zone name, which becomes a label value and part of a container's name.
func validZone(zone string) error {
	if zone == "" || strings.Trim(zone, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || strings.HasPrefix(zone, "-") || strings.HasSuffix(zone, "-") || len(zone) > 20 {
		return errors.Errorf("zone %q: want lowercase letters, digits and inner dashes, at most 20", zone)
	}
	return nil
}
