package mgmt

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types/upstream"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/secret"
	capiversion "sigs.k8s.io/cluster-api/util/version"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// adminKubeconfig is where kubeadm writes the administrator's kubeconfig in the node.
const adminKubeconfig = "/etc/kubernetes/admin.conf"

// evictionHard keeps kubelet from evicting pods of a node whose disk is the host's (kind does
// the same).
const evictionHard = "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"

// bootstrapNode runs kubeadm init in the node, once: a plan that started before (this command
// was interrupted) is waited for, not started again.
func bootstrapNode(ctx context.Context, node *docker.Node, c *Cluster, opts Options) error {
	st, err := node.BootstrapStatus(ctx, bootstrapTimeout)
	if err != nil {
		return err
	}
	if st.Phase == bootstrap.NotStarted {
		data, err := initData(c, opts)
		if err != nil {
			return errors.Wrapf(err, "management cluster %s: rendering the bootstrap data", c.Name)
		}
		plan, err := bootstrap.Parse(bootstrap.FormatCloudConfig, data, bootstrap.Options{Hostname: c.Node})
		if err != nil {
			return errors.Wrapf(err, "management cluster %s: translating the bootstrap data", c.Name)
		}
		opts.Logf("Running kubeadm init in %s", c.Node)
		if err := node.StartBootstrap(ctx, plan, bootstrapTimeout); err != nil {
			return err
		}
	}
	return waitBootstrapped(ctx, node, c.Name)
}

// waitBootstrapped waits for the bootstrap of a node of the cluster to succeed, and says how
// it failed otherwise.
func waitBootstrapped(ctx context.Context, node *docker.Node, cluster string) error {
	return poll(ctx, bootstrapTimeout+time.Minute, func() (bool, string, error) {
		st, err := node.BootstrapStatus(ctx, bootstrapTimeout)
		if err != nil {
			return false, "", err
		}
		switch st.Phase {
		case bootstrap.Succeeded:
			return true, "", nil
		case bootstrap.NotStarted, bootstrap.Running:
			return false, fmt.Sprintf("bootstrap %s at step %d", st.Phase, st.Step), nil
		}
		return false, "", errors.Errorf("management cluster %s: bootstrap of %s %s at step %d (exit %d); output:\n%s",
			cluster, node.Name, st.Phase, st.Step, st.ExitCode, st.Output)
	})
}

// loadedHostLeases keep the management cluster's controller manager and scheduler leading
// while the host is loaded by workload nodes (renewals then take seconds; with client-go's
// 15 s / 10 s both exit and restart): the durations Cluster API's components get in the
// clusterctl repository (hack/release-manifests.sh).
func loadedHostLeases() []bootstrapv1.Arg {
	return []bootstrapv1.Arg{
		{Name: "leader-elect-lease-duration", Value: ptr.To("60s")},
		{Name: "leader-elect-renew-deadline", Value: ptr.To("40s")},
		{Name: "leader-elect-retry-period", Value: ptr.To("5s")},
	}
}

// controllerManagerArgs are the controller manager's flags: leases for a loaded host and, in a
// cluster with zones (an infrastructure cluster whose zones are failure domains), a node
// declared lost after 20 s without news instead of 50, so the machines of a zone that went are
// replaced sooner.
func controllerManagerArgs(opts Options) []bootstrapv1.Arg {
	args := loadedHostLeases()
	if len(opts.Zones) > 0 {
		args = append(args, bootstrapv1.Arg{Name: "node-monitor-grace-period", Value: ptr.To("20s")})
	}
	return args
}

// envVars are the variables of env as kubeadm's extraEnvs, sorted by name.
func envVars(env map[string]string) []bootstrapv1.EnvVar {
	out := make([]bootstrapv1.EnvVar, 0, len(env))
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, bootstrapv1.EnvVar{EnvVar: corev1.EnvVar{Name: name, Value: env[name]}})
	}
	return out
}

// initData renders the node's cloud-config the way Cluster API's kubeadm bootstrap provider
// does for a cluster's first control plane machine: kubeadm's configuration through CABPK's
// own types for the version, certificates from Cluster API's secret package. The node keeps
// no control plane taint (it runs every pod) and applies the CNI its image ships.
func initData(c *Cluster, opts Options) ([]byte, error) {
	kubernetesVersion := opts.KubernetesVersion
	version, err := capiversion.ParseTolerantImageTag(kubernetesVersion)
	if err != nil {
		return nil, err
	}
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		return nil, errors.Wrap(err, "generating the cluster certificates")
	}
	clusterConfig := bootstrapv1.ClusterConfiguration{
		ControlPlaneEndpoint: fmt.Sprintf("%s:%d", c.Node, docker.APIServerPort),
		APIServer:            bootstrapv1.APIServer{CertSANs: []string{"localhost", "127.0.0.1", c.Node}},
		ControllerManager:    bootstrapv1.ControllerManager{ExtraArgs: controllerManagerArgs(opts)},
		Scheduler:            bootstrapv1.Scheduler{ExtraArgs: loadedHostLeases()},
	}
	if env := envVars(opts.APIServerEnv); len(env) > 0 {
		clusterConfig.APIServer.ExtraEnvs = &env
	}
	if len(opts.AdmissionPlugins) > 0 {
		// kubeadm's own default is NodeRestriction; the flag replaces it.
		plugins := strings.Join(append([]string{"NodeRestriction"}, opts.AdmissionPlugins...), ",")
		clusterConfig.APIServer.ExtraArgs = []bootstrapv1.Arg{{Name: "enable-admission-plugins", Value: ptr.To(plugins)}}
	}
	kubelet := []bootstrapv1.Arg{{Name: "eviction-hard", Value: ptr.To(evictionHard)}, {Name: "node-ip", Value: ptr.To(c.Address)}}
	initConfig := bootstrapv1.InitConfiguration{
		NodeRegistration: bootstrapv1.NodeRegistrationOptions{
			Name: c.Node, KubeletExtraArgs: kubelet, Taints: ptr.To([]corev1.Taint{}),
		},
	}
	clusterData, err := kubeadmtypes.MarshalClusterConfigurationForVersion(&clusterConfig, version, &upstream.AdditionalData{
		ClusterName:       ptr.To(c.Name),
		KubernetesVersion: ptr.To(kubernetesVersion),
		PodSubnet:         ptr.To(podSubnet),
		ServiceSubnet:     ptr.To(serviceSubnet),
		DNSDomain:         ptr.To("cluster.local"),
	})
	if err != nil {
		return nil, errors.Wrap(err, "rendering the ClusterConfiguration")
	}
	initData, err := kubeadmtypes.MarshalInitConfigurationForVersion(&initConfig, version)
	if err != nil {
		return nil, errors.Wrap(err, "rendering the InitConfiguration")
	}
	files, commands, err := cniInstaller()
	if err != nil {
		return nil, err
	}
	return cloudinit.NewInitControlPlane(&cloudinit.ControlPlaneInput{
		BaseUserData: cloudinit.BaseUserData{
			AdditionalFiles:     files,
			PostKubeadmCommands: commands,
			KubernetesVersion:   version,
		},
		Certificates:         certs,
		ClusterConfiguration: clusterData,
		InitConfiguration:    initData,
	})
}

// readKubeconfig reads the administrator's kubeconfig from the node and points it at the API
// server's port published on the host's loopback.
func readKubeconfig(ctx context.Context, node *docker.Node) ([]byte, error) {
	_, port := node.PublishedPort(docker.APIServerPort)
	if port == 0 || !node.Running {
		return nil, errors.Errorf("management cluster node %s is %s and publishes no API server port", node.Name, node.State)
	}
	raw, err := node.Run(ctx, nil, "cat", adminKubeconfig)
	if err != nil {
		return nil, errors.Wrapf(err, "reading %s in %s (was kubeadm init run?)", adminKubeconfig, node.Name)
	}
	cfg, err := clientcmd.Load([]byte(raw))
	if err != nil {
		return nil, errors.Wrapf(err, "parsing %s of %s", adminKubeconfig, node.Name)
	}
	for _, cluster := range cfg.Clusters {
		u := url.URL{Scheme: "https", Host: "127.0.0.1:" + strconv.Itoa(port)}
		cluster.Server = u.String()
	}
	return clientcmd.Write(*cfg)
}

// waitReady waits until the node reports Ready (its CNI runs) and CoreDNS has a ready pod.
func waitReady(ctx context.Context, kubeconfig []byte, node string) error {
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return errors.Wrap(err, "reading the kubeconfig")
	}
	restConfig.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return errors.Wrap(err, "making a client")
	}
	return poll(ctx, readyTimeout, func() (bool, string, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Sprintf("reading node %s: %v", node, err), nil
		}
		if !util.IsNodeReady(n) {
			return false, fmt.Sprintf("node %s is not Ready", node), nil
		}
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return false, fmt.Sprintf("listing CoreDNS pods: %v", err), nil
		}
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				return true, "", nil
			}
		}
		return false, "CoreDNS has no ready pod", nil
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
