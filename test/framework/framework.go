// Package framework runs a Cluster API management plane as local processes for end-to-end suites.
//
// Start builds (or takes from the cache) and starts on 127.0.0.1: etcd, kube-apiserver,
// kube-controller-manager (garbage collector and namespace controllers), Cluster API's core,
// kubeadm bootstrap and kubeadm control plane managers (unmodified, built from the Go module
// proxy) and Dockyard's manager built from this repository, with every CRD installed and every
// conversion, defaulting and validating webhook served. Each process logs to its own file under
// LogDir. Stop ends only the processes Start started, by PID; RestartDockyard restarts only
// Dockyard's manager. If the test binary dies, the kernel kills the processes (Linux).
// InstallClusterctlInventory (or Options.ClusterctlInventory) registers the providers in
// clusterctl's provider inventory, so clusterctl move, describe and generate work against it.
package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkg/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the processes of a management plane: keys of Options.ExtraArgs and arguments of
// LogPath.
const (
	Etcd                          = "etcd"
	KubeAPIServer                 = "kube-apiserver"
	KubeControllerManager         = "kube-controller-manager"
	ClusterAPICore                = "capi-core"
	ClusterAPIKubeadmBootstrap    = "capi-kubeadm-bootstrap"
	ClusterAPIKubeadmControlPlane = "capi-kubeadm-control-plane"
	DockyardManager               = "dockyard-manager"
)

// Default versions of the management plane's components.
const (
	DefaultKubernetesVersion = "v1.34.4"
	DefaultEtcdVersion       = "v3.6.5"
	// DefaultClusterAPIVersion is the release Dockyard's go.mod requires (the test checks).
	DefaultClusterAPIVersion = "v1.14.2"
)

// Options configure Start. The zero value works.
type Options struct {
	// WorkDir holds the logs, certificates, etcd's data and kubeconfig. Empty: a new temporary
	// directory.
	WorkDir string
	// KeepWorkDir keeps WorkDir after Stop (see also ManagementPlane.KeepWorkDir); the
	// environment variable DOCKYARD_KEEP_WORKDIR=1 sets it for every plane.
	KeepWorkDir bool
	// CacheDir holds the built binaries under build/ and dockyard-manager/; default
	// $DOCKYARD_CACHE, else ~/.cache/dockyard.
	CacheDir string
	// KubernetesVersion of kube-apiserver and kube-controller-manager; DefaultKubernetesVersion.
	KubernetesVersion string
	// EtcdVersion; DefaultEtcdVersion.
	EtcdVersion string
	// ClusterAPIVersion of the Cluster API managers, CRDs and webhooks; DefaultClusterAPIVersion.
	ClusterAPIVersion string
	// RepoRoot is the Dockyard repository (its CRDs, webhooks and manager); found from the
	// sources or the working directory when empty.
	RepoRoot string
	// DockyardBinary is a prebuilt manager (e.g. bin/manager of `make build`); empty: Start
	// builds the repository's manager (cached under CacheDir, per checkout).
	DockyardBinary string
	// DockyardArgs are added to the manager's flags, e.g. --load-balancer-image=...
	DockyardArgs []string
	// GuardEngineHost runs the manager with --guard-engine-host, as it is deployed. Off unless
	// set: the manager guards every cluster network Dockyard made on the engine, and tests that
	// start a plane share the engine with other packages' engine tests running at once.
	GuardEngineHost bool
	// ExtraArgs are added to the flags of a process, by process name (Etcd, ClusterAPICore...).
	ExtraArgs map[string][]string
	// Log receives progress lines (builds, process starts, timings); nil discards them.
	Log io.Writer
	// ReadyTimeout bounds the wait for each process to be ready; default 2 minutes.
	ReadyTimeout time.Duration
	// ClusterctlInventory registers the providers in clusterctl's provider inventory, as
	// `clusterctl init` would (see InstallClusterctlInventory), so clusterctl move, describe
	// and generate treat the plane as a management cluster.
	ClusterctlInventory bool
}

// dockyardManagerArgs are the manager's flags of the options; DockyardArgs come last and win.
func (o Options) dockyardManagerArgs() []string {
	return append([]string{"--guard-engine-host=" + strconv.FormatBool(o.GuardEngineHost)}, o.DockyardArgs...)
}

func (o Options) withDefaults() Options {
	if os.Getenv("DOCKYARD_KEEP_WORKDIR") != "" {
		o.KeepWorkDir = true
	}
	if o.CacheDir == "" {
		o.CacheDir = os.Getenv("DOCKYARD_CACHE")
	}
	if o.CacheDir == "" {
		home, _ := os.UserHomeDir()
		o.CacheDir = filepath.Join(home, ".cache", "dockyard")
	}
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = DefaultKubernetesVersion
	}
	if o.EtcdVersion == "" {
		o.EtcdVersion = DefaultEtcdVersion
	}
	if o.ClusterAPIVersion == "" {
		o.ClusterAPIVersion = DefaultClusterAPIVersion
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	return o
}

// ManagementPlane is a running management cluster. Its methods may be called from several
// goroutines.
type ManagementPlane struct {
	opts        Options
	workDir     string
	ownsWorkDir bool
	binaries    Binaries
	kubeconfig  string
	restConfig  *rest.Config
	client      client.Client
	tlsClient   *http.Client // trusts the plane's CA, presents no certificate
	adminClient *http.Client // trusts the plane's CA, presents the admin certificate

	procs     []*process // in start order
	providers []*provider

	mu      sync.Mutex
	keep    bool
	stopped bool
}

// provider is a controller manager serving webhooks: Cluster API's three and Dockyard's.
type provider struct {
	proc        *process
	crdDirs     []string
	crdLabels   map[string]string
	webhookFile string
	webhookPort int
	healthPort  int
	diagPort    int
}

// Start builds what is missing and starts the management plane. When Start fails (or ctx ends
// before it returns), it stops everything it started and keeps the work directory for its logs.
// Once Start returned, ctx no longer matters: Stop ends the plane.
func Start(ctx context.Context, opts Options) (*ManagementPlane, error) {
	opts = opts.withDefaults()
	began := time.Now()
	if opts.RepoRoot == "" {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		opts.RepoRoot = root
	}
	bins, err := BuildBinaries(ctx, opts)
	if err != nil {
		return nil, err
	}
	if bins.DockyardManager == "" {
		if bins.DockyardManager, err = buildDockyard(ctx, opts.RepoRoot, opts.CacheDir, opts.Log); err != nil {
			return nil, err
		}
	}
	// A port picked for a process can still be taken by another program before the process
	// binds it (freePorts): the plane then starts again, on other ports, keeping the failed
	// attempt's work directory beside it for its logs.
	for attempt := 1; ; attempt++ {
		p, err := start(ctx, opts, bins, began)
		if err == nil || attempt == portAttempts || !errors.Is(err, errPortTaken) {
			return p, err
		}
		logf(opts.Log, "attempt %d of %d: %v", attempt, portAttempts, err)
		if opts.WorkDir != "" {
			failed := fmt.Sprintf("%s-attempt-%d", opts.WorkDir, attempt)
			_ = os.RemoveAll(failed)
			if err := os.Rename(opts.WorkDir, failed); err != nil {
				return nil, errors.Wrap(err, "keeping the failed attempt's work directory")
			}
		}
	}
}

// portAttempts is how many times Start starts the plane when a picked port was taken.
const portAttempts = 3

// start starts the plane once, with the binaries built.
func start(ctx context.Context, opts Options, bins Binaries, began time.Time) (_ *ManagementPlane, rerr error) {
	p := &ManagementPlane{opts: opts, binaries: bins, workDir: opts.WorkDir, keep: opts.KeepWorkDir}
	if p.workDir == "" {
		dir, err := os.MkdirTemp("", "dockyard-mgmt-")
		if err != nil {
			return nil, errors.Wrap(err, "creating the work directory")
		}
		p.workDir, p.ownsWorkDir = dir, true
	}
	p.kubeconfig = filepath.Join(p.workDir, "kubeconfig")
	defer func() {
		if rerr != nil {
			// Keep the logs: the error shows only the tail of one.
			p.KeepWorkDir()
			stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Stop(stopCtx); err != nil {
				logf(opts.Log, "stopping after a failed start: %v", err)
			}
		}
	}()
	for _, d := range []string{p.LogDir(), p.pkiDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, errors.Wrapf(err, "creating %s", d)
		}
	}

	pki, err := p.writePKI()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(4 + 3*4)
	if err != nil {
		return nil, err
	}
	next := func() int { port := ports[0]; ports = ports[1:]; return port }

	env := processEnv(p.kubeconfig)
	add := func(proc *process) *process {
		proc.env = env
		proc.logPath = filepath.Join(p.LogDir(), proc.name+".log")
		proc.args = append(proc.args, opts.ExtraArgs[proc.name]...)
		p.procs = append(p.procs, proc)
		return proc
	}

	// etcd and kube-apiserver.
	etcdPort, peerPort := next(), next()
	etcd := add(&process{
		name: Etcd, path: bins.Etcd, grace: 10 * time.Second,
		args: []string{
			"--name=dockyard-test",
			"--data-dir=" + filepath.Join(p.workDir, "etcd"),
			fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdPort),
			fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdPort),
			fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peerPort),
			fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peerPort),
			fmt.Sprintf("--initial-cluster=dockyard-test=http://127.0.0.1:%d", peerPort),
			"--unsafe-no-fsync=true", // a test's data does not need to survive a power cut
		},
		ready: func(ctx context.Context) error {
			return p.probe(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/health", etcdPort), `"health":"true"`)
		},
	})
	apiPort := next()
	apiServer := add(&process{
		name: KubeAPIServer, path: bins.KubeAPIServer, grace: 15 * time.Second,
		args: []string{
			fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", apiPort),
			"--cert-dir=" + p.pkiDir(),
			"--tls-cert-file=" + pki.apiServerCert,
			"--tls-private-key-file=" + pki.apiServerKey,
			"--client-ca-file=" + pki.caFile,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pki.saPublic,
			"--service-account-signing-key-file=" + pki.saPrivate,
			"--service-cluster-ip-range=10.0.0.0/24",
			"--authorization-mode=RBAC",
			"--endpoint-reconciler-type=none", // else it logs an error every 10s for 127.0.0.1
			"--allow-privileged=true",
			"--profiling=false",
		},
		ready: func(ctx context.Context) error {
			return p.probe(ctx, p.adminClient, fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPort), "")
		},
	})
	if err := p.writeKubeconfig(apiPort, pki); err != nil {
		return nil, err
	}

	kcmPort := next()
	kcm := add(&process{
		name: KubeControllerManager, path: bins.KubeControllerManager, grace: 10 * time.Second,
		args: []string{
			"--kubeconfig=" + p.kubeconfig,
			"--authentication-kubeconfig=" + p.kubeconfig,
			"--authorization-kubeconfig=" + p.kubeconfig,
			// The API server has no front proxy (request header) CA to look up: do not try.
			"--authentication-skip-lookup=true",
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", kcmPort),
			"--tls-cert-file=" + pki.servingCert,
			"--tls-private-key-file=" + pki.servingKey,
			"--cert-dir=" + p.pkiDir(),
			"--controllers=garbagecollector,namespace",
			"--leader-elect=false",
		},
		ready: func(ctx context.Context) error {
			return p.probe(ctx, p.tlsClient, fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort), "")
		},
	})

	capi := bins.ClusterAPIModuleDir
	newProvider := func(name, binary string, crdDirs []string, crdLabels map[string]string, webhookFile string, args ...string) *provider {
		pr := &provider{crdDirs: crdDirs, crdLabels: crdLabels, webhookFile: webhookFile,
			webhookPort: next(), healthPort: next(), diagPort: next()}
		// Cluster API's managers sometimes hang for their whole 30s shutdown grace period after
		// their ClusterCache tried to reach a workload cluster (cluster-api PR #13443 raised
		// the timeout in its own tests for this): nothing of theirs needs a clean exit here, so
		// they get 5s. Dockyard's manager gets more than its 30s, so a hang there shows.
		grace := 5 * time.Second
		if name == DockyardManager {
			grace = 40 * time.Second
		}
		pr.proc = add(&process{
			name: name, path: binary, grace: grace,
			args: append([]string{
				"--kubeconfig=" + p.kubeconfig,
				fmt.Sprintf("--webhook-port=%d", pr.webhookPort),
				"--webhook-cert-dir=" + pki.webhookCertDir,
				fmt.Sprintf("--health-addr=127.0.0.1:%d", pr.healthPort),
				"--insecure-diagnostics",
				fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", pr.diagPort),
			}, args...),
			ready: func(ctx context.Context) error {
				if err := p.probe(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", pr.healthPort), ""); err != nil {
					return err
				}
				return p.probeTLS(ctx, pr.webhookPort)
			},
		})
		p.providers = append(p.providers, pr)
		return pr
	}
	// The kubeadm providers' kustomize overlays add the contract labels their CRD bases lack;
	// core finds a provider's versions through them.
	kubeadmContract := map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"}
	newProvider(ClusterAPICore, bins.ClusterAPICore,
		[]string{filepath.Join(capi, "core", "config", "crd", "bases")},
		map[string]string{"cluster.x-k8s.io/provider": "cluster-api"},
		filepath.Join(capi, "core", "config", "webhook", "manifests.yaml"),
		"--feature-gates=ClusterTopology=true")
	// Ignition (the ignition flavor) is behind a feature gate of both kubeadm providers.
	newProvider(ClusterAPIKubeadmBootstrap, bins.ClusterAPIKubeadmBootstrap,
		[]string{filepath.Join(capi, "bootstrap", "kubeadm", "config", "crd", "bases")},
		with(kubeadmContract, "cluster.x-k8s.io/provider", "bootstrap-kubeadm"),
		filepath.Join(capi, "bootstrap", "kubeadm", "config", "webhook", "manifests.yaml"),
		"--feature-gates=KubeadmBootstrapFormatIgnition=true")
	newProvider(ClusterAPIKubeadmControlPlane, bins.ClusterAPIKubeadmControlPlane,
		[]string{filepath.Join(capi, "controlplane", "kubeadm", "config", "crd", "bases")},
		with(kubeadmContract, "cluster.x-k8s.io/provider", "control-plane-kubeadm"),
		filepath.Join(capi, "controlplane", "kubeadm", "config", "webhook", "manifests.yaml"),
		"--feature-gates=ClusterTopology=true,KubeadmBootstrapFormatIgnition=true")
	newProvider(DockyardManager, bins.DockyardManager,
		[]string{filepath.Join(opts.RepoRoot, "config", "crd", "bases")},
		map[string]string{"cluster.x-k8s.io/provider": "infrastructure-dockyard"},
		filepath.Join(opts.RepoRoot, "config", "webhook", "manifests.yaml"),
		opts.dockyardManagerArgs()...)
	// Start: etcd, then the API server; everything else needs it.
	for _, step := range []*process{etcd, apiServer} {
		if err := p.startAndWait(ctx, step); err != nil {
			return nil, err
		}
	}
	if err := p.connect(); err != nil {
		return nil, err
	}
	// The CRDs before kube-controller-manager: its garbage collector watches the kinds it
	// discovers at start, and discovers new ones only every 30s; an owner of a kind it does not
	// watch yet is collected that much later.
	if err := p.installProviders(ctx, pki.caPEM); err != nil {
		return nil, err
	}
	if opts.ClusterctlInventory {
		if err := p.InstallClusterctlInventory(ctx); err != nil {
			return nil, err
		}
	}
	if err := p.startProcess(kcm); err != nil {
		return nil, err
	}
	for _, pr := range p.providers {
		if err := p.startProcess(pr.proc); err != nil {
			return nil, err
		}
	}
	for _, proc := range p.procs[2:] {
		start := time.Now()
		if err := proc.waitReady(ctx, opts.ReadyTimeout); err != nil {
			return nil, err
		}
		logf(opts.Log, "%s ready (pid %d, waited %s)", proc.name, proc.pid(), time.Since(start).Round(time.Millisecond))
	}
	logf(opts.Log, "management plane ready in %s; kubeconfig %s, logs in %s", time.Since(began).Round(time.Millisecond), p.kubeconfig, p.LogDir())
	return p, nil
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for mk, mv := range m {
		out[mk] = mv
	}
	return out
}

// processEnv is the test binary's environment (DOCKER_HOST matters to Dockyard) with KUBECONFIG
// pointing at the plane.
func processEnv(kubeconfig string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return append(env, "KUBECONFIG="+kubeconfig)
}

func (p *ManagementPlane) startProcess(proc *process) error {
	if err := proc.start(); err != nil {
		return err
	}
	logf(p.opts.Log, "started %s (pid %d), log %s", proc.name, proc.pid(), proc.logPath)
	return nil
}

func (p *ManagementPlane) startAndWait(ctx context.Context, proc *process) error {
	start := time.Now()
	if err := p.startProcess(proc); err != nil {
		return err
	}
	if err := proc.waitReady(ctx, p.opts.ReadyTimeout); err != nil {
		return err
	}
	logf(p.opts.Log, "%s ready in %s", proc.name, time.Since(start).Round(time.Millisecond))
	return nil
}

// installProviders creates every provider's CRDs and webhook configurations.
func (p *ManagementPlane) installProviders(ctx context.Context, caBundle []byte) error {
	start := time.Now()
	var names []string
	for _, pr := range p.providers {
		for _, dir := range pr.crdDirs {
			crds, err := loadCRDs(dir, pr.crdLabels, pr.webhookPort, caBundle)
			if err != nil {
				return err
			}
			for _, crd := range crds {
				if err := createOrReplace(ctx, p.client, crd); err != nil {
					return errors.Wrapf(err, "installing CRD %s", crd.Name)
				}
				names = append(names, crd.Name)
			}
		}
		configs, err := loadWebhookConfigurations(pr.webhookFile, pr.proc.name+"-", pr.webhookPort, caBundle)
		if err != nil {
			return err
		}
		for _, cfg := range configs {
			if err := createOrReplace(ctx, p.client, cfg); err != nil {
				return errors.Wrapf(err, "installing webhook configuration %s", cfg.GetName())
			}
		}
	}
	if err := waitForCRDs(ctx, p.client, names, p.opts.ReadyTimeout); err != nil {
		return err
	}
	logf(p.opts.Log, "installed %d CRDs and the webhook configurations in %s", len(names), time.Since(start).Round(time.Millisecond))
	return nil
}

// pkiFiles are the files writePKI wrote.
type pkiFiles struct {
	caFile, apiServerCert, apiServerKey, servingCert, servingKey string
	saPrivate, saPublic                                          string
	webhookCertDir                                               string
	caPEM                                                        []byte
	admin                                                        keyPair
}

func (p *ManagementPlane) writePKI() (pkiFiles, error) {
	dir := p.pkiDir()
	ca, err := newCertificateAuthority()
	if err != nil {
		return pkiFiles{}, err
	}
	f := pkiFiles{caFile: filepath.Join(dir, "ca.crt"), caPEM: ca.certPEM}
	if err := os.WriteFile(f.caFile, ca.certPEM, 0o644); err != nil {
		return pkiFiles{}, errors.Wrap(err, "writing the CA")
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	apiServer, err := ca.servingCert("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		append(loopback, net.IPv4(10, 0, 0, 1)))
	if err != nil {
		return pkiFiles{}, err
	}
	if f.apiServerCert, f.apiServerKey, err = apiServer.write(dir, "apiserver"); err != nil {
		return pkiFiles{}, err
	}
	// One serving certificate for every other server on loopback: webhooks, controller manager.
	serving, err := ca.servingCert("localhost", []string{"localhost"}, loopback)
	if err != nil {
		return pkiFiles{}, err
	}
	if f.servingCert, f.servingKey, err = serving.write(dir, "serving"); err != nil {
		return pkiFiles{}, err
	}
	f.webhookCertDir = filepath.Join(dir, "webhook")
	if err := os.MkdirAll(f.webhookCertDir, 0o755); err != nil {
		return pkiFiles{}, err
	}
	if _, _, err := serving.write(f.webhookCertDir, "tls"); err != nil {
		return pkiFiles{}, err
	}
	if f.admin, err = ca.clientCert("dockyard-test-admin", "system:masters"); err != nil {
		return pkiFiles{}, err
	}
	if _, _, err := f.admin.write(dir, "admin"); err != nil {
		return pkiFiles{}, err
	}
	private, public, err := serviceAccountKey()
	if err != nil {
		return pkiFiles{}, err
	}
	f.saPrivate, f.saPublic = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(f.saPrivate, private, 0o600); err != nil {
		return pkiFiles{}, errors.Wrap(err, "writing the service account key")
	}
	if err := os.WriteFile(f.saPublic, public, 0o644); err != nil {
		return pkiFiles{}, errors.Wrap(err, "writing the service account key")
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.certPEM)
	adminCert, err := tls.X509KeyPair(f.admin.certPEM, f.admin.keyPEM)
	if err != nil {
		return pkiFiles{}, errors.Wrap(err, "loading the admin certificate")
	}
	p.tlsClient = httpClient(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	p.adminClient = httpClient(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{adminCert}})
	return f, nil
}

// writeKubeconfig writes the administrator's kubeconfig.
func (p *ManagementPlane) writeKubeconfig(apiPort int, f pkiFiles) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dockyard-test"] = &clientcmdapi.Cluster{
		Server:                   fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		CertificateAuthorityData: f.caPEM,
	}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: f.admin.certPEM, ClientKeyData: f.admin.keyPEM}
	cfg.Contexts["admin@dockyard-test"] = &clientcmdapi.Context{Cluster: "dockyard-test", AuthInfo: "admin"}
	cfg.CurrentContext = "admin@dockyard-test"
	return errors.Wrap(clientcmd.WriteToFile(*cfg, p.kubeconfig), "writing the kubeconfig")
}

func httpClient(cfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}
