// Package envtest runs a real kube-apiserver and etcd (controller-runtime's envtest) with
// Cluster API's and Dockyard's CRDs installed and Dockyard's webhooks served, for the webhook
// and controller test suites. The binaries come from KUBEBUILDER_ASSETS, which `make test`
// builds from the Go module proxy.
package envtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/dockyard-dev/dockyard/pkg/scheme"
	"github.com/dockyard-dev/dockyard/test/reporoot"
)

// Options configure an Environment.
type Options struct {
	// Setup registers controllers and webhooks with the manager before it starts.
	Setup func(ctx context.Context, mgr ctrl.Manager) error
	// ManagerClusterRoles, when set, are files each holding a ClusterRole (those of
	// config/rbac), bound cluster-wide as the default components bind them: the manager then
	// runs as ManagerUser with only those permissions instead of as an administrator, so a
	// permission missing from config/ fails the tests the way it would fail the manager's pod.
	ManagerClusterRoles []string
	// ManagerQPS and ManagerBurst, when set, limit the manager's client as cmd/manager's
	// --kube-api-qps and --kube-api-burst do; unset, it has envtest's (QPS 1000, burst 2000).
	ManagerQPS   float32
	ManagerBurst int
	// ManagerOptions, when set, changes the manager's options before it is made (cmd/manager's
	// cache and client options, for instance).
	ManagerOptions func(*ctrl.Options)
}

// ManagerUser is who the manager runs as under Options.ManagerClusterRoles: the ServiceAccount
// config/ installs it with.
const ManagerUser = "system:serviceaccount:dockyard-system:dockyard-manager"

// Environment is a running API server with a started manager.
type Environment struct {
	env *envtest.Environment
	// Manager is started.
	Manager ctrl.Manager
	// Client is an administrator's client: it reads through the manager's cache, or straight
	// from the API server when the manager runs with ManagerClusterRoles' permissions only.
	Client client.Client
	// Config connects to the API server as an administrator.
	Config *rest.Config
	cancel context.CancelFunc
	done   chan error
}

// RepoRoot is the root of the Dockyard repository the test runs in (reporoot.Find). Outside one
// it panics: a test helper, with nothing to fall back to.
func RepoRoot() string {
	root, err := reporoot.Find()
	if err != nil {
		panic(err)
	}
	return root
}

// ClusterAPIModuleDir returns the directory of the sigs.k8s.io/cluster-api module in the module
// cache, the version go.mod requires.
func ClusterAPIModuleDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api")
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", errors.Wrap(err, "locating the sigs.k8s.io/cluster-api module (go list -m)")
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("sigs.k8s.io/cluster-api is not in the module cache: run go mod download")
	}
	return dir, nil
}

// CRDDirectories returns Dockyard's and Cluster API's CRD directories.
func CRDDirectories() ([]string, error) {
	capi, err := ClusterAPIModuleDir()
	if err != nil {
		return nil, err
	}
	return []string{
		filepath.Join(RepoRoot(), "config", "crd", "bases"),
		filepath.Join(capi, "core", "config", "crd", "bases"),
		filepath.Join(capi, "bootstrap", "kubeadm", "config", "crd", "bases"),
		filepath.Join(capi, "controlplane", "kubeadm", "config", "crd", "bases"),
	}, nil
}

// Start starts etcd, kube-apiserver and a manager serving Dockyard's webhooks.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, " +
			"which builds kube-apiserver and etcd from the Go module proxy, or point it at a directory holding both")
	}
	crdDirs, err := CRDDirectories()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		Scheme:                scheme.New(),
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(RepoRoot(), "config", "webhook")},
		},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, errors.Wrap(err, "starting kube-apiserver and etcd")
	}

	mgrConfig, testClient := cfg, client.Client(nil)
	if len(opts.ManagerClusterRoles) > 0 {
		if mgrConfig, err = restrictedConfig(ctx, cfg, opts.ManagerClusterRoles); err != nil {
			_ = env.Stop()
			return nil, err
		}
		if testClient, err = client.New(cfg, client.Options{Scheme: env.Scheme}); err != nil {
			_ = env.Stop()
			return nil, errors.Wrap(err, "creating the tests' client")
		}
	}

	if opts.ManagerQPS > 0 {
		mgrConfig = rest.CopyConfig(mgrConfig)
		mgrConfig.QPS, mgrConfig.Burst = opts.ManagerQPS, opts.ManagerBurst
	}
	wh := env.WebhookInstallOptions
	mgrOptions := ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
		}),
	}
	if opts.ManagerOptions != nil {
		opts.ManagerOptions(&mgrOptions)
	}
	mgr, err := ctrl.NewManager(mgrConfig, mgrOptions)
	if err != nil {
		_ = env.Stop()
		return nil, errors.Wrap(err, "creating manager")
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	if opts.Setup != nil {
		if err := opts.Setup(mgrCtx, mgr); err != nil {
			cancel()
			_ = env.Stop()
			return nil, errors.Wrap(err, "setting up controllers and webhooks")
		}
	}
	if testClient == nil {
		testClient = mgr.GetClient()
	}
	e := &Environment{env: env, Manager: mgr, Client: testClient, Config: cfg, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- mgr.Start(mgrCtx) }()

	if err := waitForWebhookServer(ctx, wh.LocalServingHost, wh.LocalServingPort); err != nil {
		_ = e.Stop()
		return nil, err
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		_ = e.Stop()
		return nil, errors.New("manager cache did not sync")
	}
	return e, nil
}

// restrictedConfig binds the ClusterRoles in files to ManagerUser and returns a configuration
// that impersonates that user (with a ServiceAccount's groups).
func restrictedConfig(ctx context.Context, admin *rest.Config, files []string) (*rest.Config, error) {
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return nil, errors.Wrap(err, "creating an administrator's client")
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, errors.Wrap(err, "reading the manager's ClusterRole")
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict(raw, role); err != nil {
			return nil, errors.Wrapf(err, "decoding the ClusterRole in %s", file)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: ManagerUser}},
		}
		for _, o := range []client.Object{role, binding} {
			if err := c.Create(ctx, o); err != nil {
				return nil, errors.Wrapf(err, "creating %T %s", o, o.GetName())
			}
		}
	}
	restricted := rest.CopyConfig(admin)
	restricted.Impersonate = rest.ImpersonationConfig{
		UserName: ManagerUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:dockyard-system", "system:authenticated"},
	}
	return restricted, nil
}

func waitForWebhookServer(ctx context.Context, host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // local test server
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return errors.Wrapf(err, "webhook server on %s did not start", addr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the manager, kube-apiserver and etcd.
func (e *Environment) Stop() error {
	e.cancel()
	if err := <-e.done; err != nil {
		fmt.Fprintf(os.Stderr, "manager stopped with an error: %v\n", err)
	}
	return e.env.Stop()
}

// CreateNamespace creates a namespace with a generated name for one test.
func (e *Environment) CreateNamespace(ctx context.Context, prefix string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return nil, errors.Wrap(err, "creating namespace")
	}
	return ns, nil
}
