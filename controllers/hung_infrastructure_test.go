package controllers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/pkg/container/kubernetes"
)

// silentServer is an HTTPS server on loopback that takes every request and never answers it,
// until the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(done)
		srv.Close()
	})
	return srv.Listener.Addr().String()
}

// A team whose infrastructure cluster accepts connections and never answers holds no worker of
// any controller for good: another team's cluster and templates are reconciled as if it were not
// there, and the team's own cluster says, within the engine's deadline, that its infrastructure
// did not answer in time. Before, the Kubernetes engine had no deadline (and asked the server's
// version without a context), so each such object held a worker for good: the
// DockyardMachineTemplate controller (one worker then; here as many as its templates) sized no
// other team's template.
func TestEnvtestAnInfrastructureThatNeverAnswersHoldsNoOtherTeam(t *testing.T) {
	ctx := context.Background()
	server := silentServer(t)

	hung, hungDC := envCluster(ctx, t, "hung", false, func(s *infrav1.DockyardClusterSpec) {
		s.Infrastructure.Kubernetes = &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}
	})
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: infra, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: c, context: {cluster: infra, user: u, namespace: pods}}]
current-context: c
`, server)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hung.Namespace, Name: "infra"},
		Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(kubeconfig)}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// More templates on the silent infrastructure than the controller has workers.
	for i := range 12 {
		mt := machineTemplate(fmt.Sprintf("hung-%d", i), infrav1.NodeResources{})
		mt.Namespace, mt.Labels = hung.Namespace, map[string]string{clusterv1.ClusterNameLabel: hung.Name}
		if err := env.Client.Create(ctx, mt); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	other, otherDC := envCluster(ctx, t, "other", false)
	mt := machineTemplate("other", infrav1.NodeResources{})
	mt.Namespace, mt.Labels = other.Namespace, map[string]string{clusterv1.ClusterNameLabel: other.Name}
	if err := env.Client.Create(ctx, mt); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the other team's load balancer and template", func() error {
		dc := &infrav1.DockyardCluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(otherDC), dc); err != nil {
			return err
		}
		if !conditions.IsTrue(dc, infrav1.LoadBalancerAvailableCondition) {
			return errors.Errorf("LoadBalancerAvailable: %s", conditions.GetMessage(dc, infrav1.LoadBalancerAvailableCondition))
		}
		got := &infrav1.DockyardMachineTemplate{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mt), got); err != nil {
			return err
		}
		if len(got.Status.Capacity) == 0 {
			return errors.New("the template has no status.capacity")
		}
		return nil
	})
	t.Logf("the other team's cluster and template reconciled in %s", time.Since(start).Round(100*time.Millisecond))

	// A call to the silent server ends at the request's deadline, and the cluster's condition
	// says so.
	eventually(t, kubernetes.RequestTimeout+30*time.Second, "the silent infrastructure's cluster to say why it waits", func() error {
		dc := &infrav1.DockyardCluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hungDC), dc); err != nil {
			return err
		}
		msg := conditions.GetMessage(dc, infrav1.LoadBalancerAvailableCondition)
		if conditions.IsTrue(dc, infrav1.LoadBalancerAvailableCondition) || !strings.Contains(strings.ToLower(msg), "timeout") {
			return errors.Errorf("LoadBalancerAvailable %s: %q", conditions.GetReason(dc, infrav1.LoadBalancerAvailableCondition), msg)
		}
		return nil
	})
	t.Logf("the silent infrastructure's cluster said why in %s", time.Since(start).Round(100*time.Millisecond))
}

// answeringServer is an HTTPS server on loopback that answers every request 404.
func answeringServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// A kubeconfig Secret of any name, labelled or not, is read, and marked so that it stays while
// the cluster's nodes may run there. Before, the manager's cache held the data of Secrets named
// *-kubeconfig and labelled with a cluster name only: a Secret named infra read as missing, or
// as holding no kubeconfig.
func TestEnvtestAKubeconfigSecretOfAnyNameIsRead(t *testing.T) {
	ctx := context.Background()
	cluster, dc := envCluster(ctx, t, "anyname", false, func(s *infrav1.DockyardClusterSpec) {
		s.Infrastructure.Kubernetes = &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}
	})
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: infra, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: c, context: {cluster: infra, user: u, namespace: pods}}]
current-context: c
`, answeringServer(t))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: "infra"},
		Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(kubeconfig)}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the cluster to read the Secret and try its infrastructure", func() error {
		got := &infrav1.DockyardCluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dc), got); err != nil {
			return err
		}
		if got.Status.Engine != "secret/"+cluster.Namespace+"/infra/pods" {
			return errors.Errorf("status.engine %q; LoadBalancerAvailable %s: %s", got.Status.Engine,
				conditions.GetReason(got, infrav1.LoadBalancerAvailableCondition), conditions.GetMessage(got, infrav1.LoadBalancerAvailableCondition))
		}
		return nil
	})
	marked := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), marked); err != nil {
		t.Fatal(err)
	}
	if _, ok := marked.Labels[infrastructure.SecretLabel]; !ok || !slices.Contains(marked.Finalizers, infrastructure.SecretFinalizer) {
		t.Errorf("the Secret is not marked: labels %v, finalizers %v", marked.Labels, marked.Finalizers)
	}
	// Deleted with the cluster: the Secret waits for it, then goes.
	if err := env.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	// The server answers 404 to everything: what was made there is abandoned. A merge patch,
	// which the reconciler's own writes cannot make conflict.
	dcNow := &infrav1.DockyardCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dc), dcNow); err == nil {
		abandon := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+infrav1.AbandonAnnotation+`":""}}}`))
		if err := env.Client.Patch(ctx, dcNow, abandon); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, dcNow); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "the Secret to go with the last cluster naming it", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return errors.Errorf("the Secret is still there (%v)", err)
		}
		return nil
	})
}
