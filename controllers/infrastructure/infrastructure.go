// Package infrastructure decides where a cluster's nodes run, from its DockyardCluster, once
// per reconcile: on the manager's own engine, as Pods of a Kubernetes cluster that
// spec.infrastructure.kubernetes names (the management cluster itself, or the cluster of a
// kubeconfig Secret), or in the manager's memory (spec.infrastructure.inMemory). A reconciler hands it the DockyardCluster it holds and gets back the node
// layer of that one engine (a docker.Manager), which never asks again. Engines are built by the
// one picker (pkg/container/runtimes), with its deadlines; the manager and the dockyard command
// line resolve clusters the same way.
package infrastructure

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// The management cluster as the infrastructure of a cluster's nodes: its nodes size them and say
// where Pods are reached (the rest is in config/rbac/infrastructure_role.yaml, bound only in the
// namespaces the administrator allows).
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Options configure Engines.
type Options struct {
	// Secrets reads the kubeconfig Secrets DockyardClusters name (the manager's cache of those
	// Dockyard marked, SecretsCache); Uncached, when set, reads one it does not hold yet.
	Secrets  client.Reader
	Uncached client.Reader
	// Management reaches the management cluster, the infrastructure of a DockyardCluster whose
	// spec.infrastructure.kubernetes names no kubeconfig Secret; nil: no cluster may. Its API
	// server's CA also names it in the owners engines act for (owners.go).
	Management *rest.Config
	// ManagementID names the management cluster in those owners where Management has no CA or
	// is nil; empty: a hash of Management's address, or "unknown" without one.
	ManagementID string
	// Policy says which namespaces may run nodes on the management cluster; nil allows every
	// namespace (the command line, which acts with its user's own rights).
	Policy *policy.Policy
	// Events, when set, watches the engines resolved here for as long as a cluster uses them.
	Events *docker.EngineEvents
	// InMemory configures the engine of in-memory clusters: where their API servers listen,
	// the host their endpoints carry, where their state is kept (InMemoryStates) and who hears
	// of a sync that failed. Its GroupLabel is the node layer's cluster label, set here.
	InMemory runtimes.InMemory
	// Connect builds the engine of an infrastructure; nil is the one picker, runtimes.New
	// (tests give an engine of their own).
	Connect func(runtimes.Config) (runtimes.Runtime, error)
}

// Engines resolves DockyardClusters to the node layers of the engines their nodes run on: the
// host's, or one per infrastructure (a kubeconfig Secret and namespace, or a namespace of the
// management cluster), made when a cluster first needs it and made again when its kubeconfig
// Secret changes. An engine no cluster uses any more is forgotten and no longer watched.
type Engines struct {
	host *docker.Manager
	opts Options
	// managementID names the management cluster in owners (managementID), managementErr why it
	// cannot be named.
	managementID  string
	managementErr error

	mu sync.Mutex
	// engines are the infrastructures' engines by ID; users the ID each cluster last resolved
	// to ("" for the host).
	engines map[string]*engine
	users   map[clusterKey]string
}

// engine is the node layer of one infrastructure, made from one version of its credentials,
// and the engine's connection.
type engine struct {
	version string
	nodes   *docker.Manager
	rt      runtimes.Runtime
}

// clusterKey is a DockyardCluster's namespace and name.
type clusterKey struct{ namespace, name string }

// New returns the resolver of clusters whose nodes run on host unless they say otherwise.
func New(host *docker.Manager, opts Options) *Engines {
	id, err := managementID(opts.Management, opts.ManagementID)
	return &Engines{host: host, opts: opts, managementID: id, managementErr: err, engines: map[string]*engine{}, users: map[clusterKey]string{}}
}

// Host is the node layer of the manager's own engine.
func (e *Engines) Host() *docker.Manager { return e.host }

// For returns the node layer of the engine a DockyardCluster's nodes run on: the host's when it
// names no infrastructure (or dc is nil: a cluster whose infrastructure is not a
// DockyardCluster). It reads at most the kubeconfig Secret the DockyardCluster names; a
// kubeconfig is parsed, and its engine made, once per version of that Secret. An error is a
// *policy.RefusedError when the policy refuses the infrastructure, and otherwise says what in
// spec.infrastructure cannot be used.
func (e *Engines) For(ctx context.Context, dc *infrav1.DockyardCluster) (*docker.Manager, error) {
	if dc == nil {
		return e.host, nil
	}
	key := clusterKey{dc.Namespace, dc.Name}
	t, err := e.resolve(ctx, dc)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if t == nil {
		e.use(key, "")
		return e.host, nil
	}
	if eng, ok := e.engines[t.id]; ok && eng.version == t.version {
		e.use(key, t.id)
		return eng.nodes, nil
	}
	connect := e.opts.Connect
	if connect == nil {
		connect = runtimes.New
	}
	rt, err := connect(t.config)
	if err != nil {
		return nil, errors.Wrapf(err, "connecting to the infrastructure of spec.infrastructure (%s)", t.config)
	}
	if old, ok := e.engines[t.id]; ok {
		// Its credentials changed: the engine of the version before is retired.
		e.retire(old)
	}
	eng := &engine{version: t.version, nodes: e.host.ForEngine(rt), rt: rt}
	e.engines[t.id] = eng
	if e.opts.Events != nil {
		e.opts.Events.Add(eng.nodes)
	}
	e.use(key, t.id)
	return eng.nodes, nil
}

// Close closes the engines made here, as the manager stops: the in-memory engine saves the
// clusters that changed since its last sync.
func (e *Engines) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for id, eng := range e.engines {
		if eng.rt != nil {
			errs = append(errs, eng.rt.Close())
		}
		delete(e.engines, id)
	}
	return kerrors.NewAggregate(errs)
}

// Where names the engine a DockyardCluster's nodes ran on when For last resolved it:
// infrav1.EngineHost, infrav1.EngineInMemory, or its infrastructure's ID; "" when For has not resolved it.
func (e *Engines) Where(dc *infrav1.DockyardCluster) string {
	if dc == nil {
		return infrav1.EngineHost
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := e.users[clusterKey{dc.Namespace, dc.Name}]
	switch {
	case !ok:
		return ""
	case id == "":
		return infrav1.EngineHost
	}
	return id
}

// Release forgets a deleted DockyardCluster: the engine it ran on is retired (no longer
// watched) when no other cluster uses it.
func (e *Engines) Release(dc *infrav1.DockyardCluster) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := clusterKey{dc.Namespace, dc.Name}
	id, ok := e.users[key]
	if !ok {
		return
	}
	delete(e.users, key)
	e.retireUnused(id)
}

// use records the infrastructure a cluster's nodes are on now, retiring the one they were on
// before when no other cluster is (a kubeconfig Secret that names another cluster now). Called
// with mu held.
func (e *Engines) use(key clusterKey, id string) {
	prev, ok := e.users[key]
	e.users[key] = id
	if ok && prev != id {
		e.retireUnused(prev)
	}
}

func (e *Engines) retireUnused(id string) {
	// The in-memory engine serves on the manager's address and keeps clusters' state for as
	// long as the manager runs: it is never made twice.
	if id == "" || id == infrav1.EngineInMemory {
		return
	}
	for _, used := range e.users {
		if used == id {
			return
		}
	}
	if eng, ok := e.engines[id]; ok {
		delete(e.engines, id)
		e.retire(eng)
	}
}

func (e *Engines) retire(eng *engine) {
	if e.opts.Events != nil {
		e.opts.Events.Remove(eng.nodes)
	}
}

// target is an infrastructure a cluster's nodes run on: its ID (the kubeconfig Secret and
// namespace, or the management cluster's namespace), the version of its credentials, and the
// engine to build.
type target struct {
	id, version string
	config      runtimes.Config
}

// resolve reads where a DockyardCluster's nodes run; nil for the host's engine. An engine of an
// infrastructure cluster acts for the owner of the DockyardCluster's namespace (owners.go), and
// makes a container again by itself only when the node layer's policy allows its spec
// (docker.Manager.AllowedContainer).
func (e *Engines) resolve(ctx context.Context, dc *infrav1.DockyardCluster) (*target, error) {
	t, err := e.where(ctx, dc)
	if t == nil || err != nil || t.config.Kubernetes == nil {
		return t, err
	}
	if e.managementErr != nil {
		return nil, e.managementErr
	}
	t.config.Kubernetes.Owner = ownerOf(e.managementID, dc.Namespace)
	if e.host != nil {
		t.config.Kubernetes.SpecCheck = e.host.AllowedContainer
	}
	return t, nil
}

// where reads the infrastructure a DockyardCluster's nodes run on; nil for the host's engine.
func (e *Engines) where(ctx context.Context, dc *infrav1.DockyardCluster) (*target, error) {
	if dc.Spec.Infrastructure.InMemory != nil {
		return e.inMemory(dc)
	}
	k := dc.Spec.Infrastructure.Kubernetes
	if k == nil {
		if e.opts.Policy != nil {
			if err := e.opts.Policy.CheckHostEngine(dc.Namespace); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	if k.KubeconfigSecret == "" {
		return e.management(dc)
	}
	if e.opts.Secrets == nil {
		return nil, errors.Errorf("spec.infrastructure.kubernetes.kubeconfigSecret %s: no Secret can be read here", k.KubeconfigSecret)
	}
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: dc.Namespace, Name: k.KubeconfigSecret}
	err := e.opts.Secrets.Get(ctx, key, &secret)
	if apierrors.IsNotFound(err) && e.opts.Uncached != nil {
		// Not marked yet: the cache holds only the Secrets Dockyard marked (MarkSecret).
		err = e.opts.Uncached.Get(ctx, key, &secret)
	}
	if apierrors.IsNotFound(err) {
		return nil, errors.Errorf("Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret) does not exist in namespace %s", k.KubeconfigSecret, dc.Namespace)
	}
	if err != nil {
		return nil, errors.Wrapf(err, "reading spec.infrastructure.kubernetes.kubeconfigSecret %s", k.KubeconfigSecret)
	}
	return secretTarget(dc, &secret, e.opts.Policy)
}

// inMemory is the manager's memory as a cluster's infrastructure, where the policy allows it:
// one engine for every in-memory cluster.
func (e *Engines) inMemory(dc *infrav1.DockyardCluster) (*target, error) {
	if e.opts.Policy != nil {
		if err := e.opts.Policy.CheckInMemory(dc.Namespace); err != nil {
			return nil, err
		}
	}
	cfg := e.opts.InMemory
	for label := range (docker.ClusterKey{}).ClusterLabels() {
		cfg.GroupLabel = label // a cluster's state is what carries the node layer's cluster label
	}
	return &target{id: infrav1.EngineInMemory, config: runtimes.Config{InMemory: &cfg}}, nil
}

// management is the management cluster as a cluster's infrastructure, in the cluster's own
// namespace, where the policy allows it.
func (e *Engines) management(dc *infrav1.DockyardCluster) (*target, error) {
	if e.opts.Policy != nil {
		if err := e.opts.Policy.CheckManagementInfrastructure(dc.Namespace); err != nil {
			return nil, err
		}
	}
	if ns := dc.Spec.Infrastructure.Kubernetes.Namespace; ns != "" && ns != dc.Namespace {
		return nil, policy.Refusedf("spec.infrastructure.kubernetes.namespace %s: on the management cluster, a cluster's nodes run in its own namespace %s", ns, dc.Namespace)
	}
	if e.opts.Management == nil {
		return nil, errors.New("spec.infrastructure.kubernetes names no kubeconfigSecret, and the management cluster cannot be reached here")
	}
	return &target{
		id:     "management/" + dc.Namespace,
		config: runtimes.Config{Kubernetes: &runtimes.KubernetesCluster{REST: e.opts.Management, Namespace: dc.Namespace}},
	}, nil
}

// secretTarget is the infrastructure cluster of a kubeconfig Secret. The management cluster
// reaches it from outside its network (it is another cluster, or as good as one: nothing says
// the management cluster routes to its Service range), so its fronts are load balancers.
func secretTarget(dc *infrav1.DockyardCluster, secret *corev1.Secret, p *policy.Policy) (*target, error) {
	k := dc.Spec.Infrastructure.Kubernetes
	b, ok := secret.Data[infrav1.InfrastructureKubeconfigKey]
	switch {
	case !ok:
		keys := slices.Sorted(maps.Keys(secret.Data))
		return nil, errors.Errorf("Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret) has no key %q holding the kubeconfig (its keys: %s)",
			k.KubeconfigSecret, infrav1.InfrastructureKubeconfigKey, orNone(strings.Join(keys, ", ")))
	case len(b) == 0:
		return nil, errors.Errorf("Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret): its key %q is empty; it holds the infrastructure cluster's kubeconfig",
			k.KubeconfigSecret, infrav1.InfrastructureKubeconfigKey)
	}
	loaded, err := clientcmd.Load(b)
	if err != nil {
		return nil, errors.Wrapf(err, "reading the kubeconfig of Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret)", k.KubeconfigSecret)
	}
	if err := SelfContainedKubeconfig(loaded); err != nil {
		return nil, policy.Refusedf("the kubeconfig of Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret) %v", k.KubeconfigSecret, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*loaded, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, errors.Wrapf(err, "the kubeconfig of Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret)", k.KubeconfigSecret)
	}
	if p != nil {
		if err := p.CheckInfrastructureServer(dc.Namespace, cfg.Host); err != nil {
			return nil, policy.Refusedf("Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret): %v", k.KubeconfigSecret, err)
		}
	}
	ns := k.Namespace
	if current, ok := loaded.Contexts[loaded.CurrentContext]; ns == "" && ok {
		ns = current.Namespace
	}
	if ns == "" {
		ns = dc.Namespace
	}
	return &target{
		id: fmt.Sprintf("secret/%s/%s/%s", dc.Namespace, k.KubeconfigSecret, ns), version: secret.ResourceVersion,
		config: runtimes.Config{Kubernetes: &runtimes.KubernetesCluster{REST: cfg, Namespace: ns, External: true}},
	}, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// SelfContainedKubeconfig refuses what in a kubeconfig a team writes would act in the manager's
// pod instead of naming the infrastructure cluster: files (token, certificates, keys), which
// would be the manager's own (its service account token among them), commands (exec plugins)
// and auth provider plugins, and proxies. Inline data, tokens and passwords are the team's own.
func SelfContainedKubeconfig(cfg *clientcmdapi.Config) error {
	for name, c := range cfg.Clusters {
		switch {
		case c.CertificateAuthority != "":
			return errors.Errorf("names a file (cluster %s certificate-authority); give certificate-authority-data", name)
		case c.ProxyURL != "":
			return errors.Errorf("names a proxy (cluster %s proxy-url), which the manager does not go through", name)
		}
	}
	for name, a := range cfg.AuthInfos {
		switch {
		case a.TokenFile != "", a.ClientCertificate != "", a.ClientKey != "":
			return errors.Errorf("names a file (user %s token-file, client-certificate or client-key); give the token or the certificate's data", name)
		case a.Exec != nil:
			return errors.Errorf("runs a command (user %s exec), which the manager does not", name)
		case a.AuthProvider != nil:
			return errors.Errorf("uses an auth provider plugin (user %s), which the manager does not", name)
		}
	}
	return nil
}
