package clusterctl

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// managerUser is the user Dockyard's manager acts as, installed in dockyard-system.
const managerUser = "system:serviceaccount:dockyard-system:dockyard-manager"

// verifyManagerRBAC checks, on a server clusterctl installed Dockyard on with the defaults, that
// the manager reads Secrets and labels ConfigMaps in every namespace (its default mode), that
// it may change a ConfigMap only by adding clusterctl move's label, and a Secret only by its
// mark of an infrastructure kubeconfig.
func verifyManagerRBAC(ctx context.Context, t *testing.T, kubeconfig string, c client.Client) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{}
	if err := c.Get(ctx, client.ObjectKey{Name: "dockyard-manager-secrets-rolebinding"}, binding); err != nil {
		t.Fatalf("the manager's Secrets and ConfigMaps binding: %v", err)
	}
	if binding.RoleRef.Name != "dockyard-manager-secrets-role" || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Name != "dockyard-manager" || binding.Subjects[0].Namespace != "dockyard-system" {
		t.Errorf("the Secrets binding %+v does not bind dockyard-manager-secrets-role to the manager", binding)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "haproxy", Namespace: ns.Name, Labels: map[string]string{"team": "a"}},
		Data: map[string]string{"value": "frontend x"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: managerUser}
	manager, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(mutate func(*corev1.ConfigMap)) error {
		current := &corev1.ConfigMap{}
		if err := manager.Get(ctx, client.ObjectKeyFromObject(cm), current); err != nil {
			return err
		}
		original := current.DeepCopy()
		mutate(current)
		return manager.Patch(ctx, current, client.MergeFrom(original))
	}
	// The policy may take a moment to be enforced after clusterctl created it.
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		err := patch(func(o *corev1.ConfigMap) { o.Data["value"] = "frontend evil" })
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("the manager could still change a ConfigMap's data a minute after init")
	}
	for what, mutate := range map[string]func(*corev1.ConfigMap){
		"its data":        func(o *corev1.ConfigMap) { o.Data["value"] = "frontend evil" },
		"another label":   func(o *corev1.ConfigMap) { o.Labels["team"] = "b" },
		"a label removed": func(o *corev1.ConfigMap) { delete(o.Labels, "team") },
		"an annotation":   func(o *corev1.ConfigMap) { o.Annotations = map[string]string{"x": "y"} },
		"its binary data": func(o *corev1.ConfigMap) { o.BinaryData = map[string][]byte{"x": []byte("y")} },
		"its owner": func(o *corev1.ConfigMap) {
			o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: ns.UID}}
		},
		"another finalize": func(o *corev1.ConfigMap) { o.Finalizers = []string{"example.com/keep"} },
	} {
		err := patch(mutate)
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "clusterctl") {
			t.Errorf("the manager changing a ConfigMap's %s: %v, want it refused by the admission policy", what, err)
		}
	}
	if err := patch(func(o *corev1.ConfigMap) { o.Labels["clusterctl.cluster.x-k8s.io/move"] = "" }); err != nil {
		t.Errorf("the manager labelling a ConfigMap for clusterctl move: %v", err)
	}
	// Others (an administrator here) are not bound by it.
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "frontend mine"
	if err := c.Update(ctx, cm); err != nil {
		t.Errorf("the policy held back another user: %v", err)
	}
	verifyManagerSecretChanges(ctx, t, c, manager, ns.Name)
}

// verifyManagerSecretChanges checks that the manager may add and remove its mark of an
// infrastructure kubeconfig on a Secret (the label and finalizer
// dockyard.x-k8s.io/infrastructure-kubeconfig) and change nothing else of it, and may make,
// write and delete the records of in-memory clusters and no other Secret.
func verifyManagerSecretChanges(ctx context.Context, t *testing.T, c, manager client.Client, namespace string) {
	t.Helper()
	const mark = "dockyard.x-k8s.io/infrastructure-kubeconfig"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "infra", Namespace: namespace, Labels: map[string]string{"team": "a"}},
		Data: map[string][]byte{"value": []byte("kubeconfig")}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	patch := func(mutate func(*corev1.Secret)) error {
		current := &corev1.Secret{}
		if err := manager.Get(ctx, client.ObjectKeyFromObject(secret), current); err != nil {
			return err
		}
		original := current.DeepCopy()
		mutate(current)
		return manager.Patch(ctx, current, client.MergeFrom(original))
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		return patch(func(o *corev1.Secret) { o.Data["value"] = []byte("evil") }) != nil, nil
	})
	if err != nil {
		t.Fatalf("the manager could still change a Secret's data a minute after init")
	}
	for what, mutate := range map[string]func(*corev1.Secret){
		"its data":          func(o *corev1.Secret) { o.Data["value"] = []byte("evil") },
		"another key":       func(o *corev1.Secret) { o.Data["token"] = []byte("evil") },
		"another label":     func(o *corev1.Secret) { o.Labels["team"] = "b" },
		"a label removed":   func(o *corev1.Secret) { delete(o.Labels, "team") },
		"an annotation":     func(o *corev1.Secret) { o.Annotations = map[string]string{"x": "y"} },
		"another finalizer": func(o *corev1.Secret) { o.Finalizers = []string{"example.com/keep"} },
		"its owner": func(o *corev1.Secret) {
			o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: namespace, UID: "x"}}
		},
	} {
		err := patch(mutate)
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), mark) {
			t.Errorf("the manager changing a Secret's %s: %v, want it refused by the admission policy", what, err)
		}
	}
	marked := func(o *corev1.Secret) {
		o.Labels[mark] = ""
		o.Finalizers = append(o.Finalizers, mark)
	}
	if err := patch(marked); err != nil {
		t.Errorf("the manager marking an infrastructure kubeconfig Secret: %v", err)
	}
	if err := patch(func(o *corev1.Secret) { o.Finalizers = nil }); err != nil {
		t.Errorf("the manager letting an infrastructure kubeconfig Secret go: %v", err)
	}

	// The records of in-memory clusters, and no other Secret, the manager makes, writes and
	// deletes.
	const refusal = "only the Secrets that keep its in-memory clusters"
	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "made", Namespace: namespace}, Data: map[string][]byte{"x": []byte("y")}}
	if err := manager.Create(ctx, opaque); err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("the manager making an Opaque Secret: %v, want it refused by the admission policy", err)
	}
	if err := manager.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret.Name, Namespace: namespace}}); err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("the manager deleting a Secret of the user's: %v, want it refused by the admission policy", err)
	}
	record := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mem-in-memory-state", Namespace: namespace},
		Type: "dockyard.x-k8s.io/in-memory-state", Data: map[string][]byte{"state": []byte("one")}}
	if err := manager.Create(ctx, record); err != nil {
		t.Fatalf("the manager making an in-memory cluster's record: %v", err)
	}
	written := record.DeepCopy()
	written.Data["state"] = []byte("two")
	if err := manager.Patch(ctx, written, client.MergeFrom(record)); err != nil {
		t.Errorf("the manager writing an in-memory cluster's record: %v", err)
	}
	if err := manager.Delete(ctx, record); err != nil {
		t.Errorf("the manager deleting an in-memory cluster's record: %v", err)
	}
}

// With DOCKYARD_SECRETS_BINDING=RoleBinding and DOCKYARD_WATCH_NAMESPACE, the manager installed
// in one namespace (clusterctl init --target-namespace) watches only it, and reads Secrets and
// ConfigMaps only there: no cluster-wide binding of them is left.
func TestComponentsOfAManagerForOneNamespace(t *testing.T) {
	repo := requireRepository(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vars := map[string]string{"DOCKYARD_SECRETS_BINDING": "RoleBinding", "DOCKYARD_WATCH_NAMESPACE": "team-a"}
	for k, v := range initVariables {
		vars[k] = v
	}
	rendered, _ := repo.run(ctx, t, run{args: []string{"generate", "provider", "--infrastructure", "dockyard:" + repo.dockyardVersion,
		"--target-namespace", "team-a", "--config", repo.config}, env: vars})
	var binding *unstructured.Unstructured
	for _, o := range decode(t, []byte(rendered)) {
		switch {
		case o.GetName() == "dockyard-manager-secrets-rolebinding":
			binding = o.DeepCopy()
		case o.GetKind() == "ClusterRole" && o.GetName() == "dockyard-manager-role":
			role := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
				t.Fatal(err)
			}
			for _, r := range role.Rules {
				for _, res := range r.Resources {
					if res == "secrets" || res == "configmaps" {
						t.Errorf("the cluster-wide manager role grants %v on %s", r.Verbs, res)
					}
				}
			}
		case o.GetKind() == "Deployment":
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
				t.Fatal(err)
			}
			if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--namespace=team-a") {
				t.Errorf("the manager does not watch team-a only: %v", args)
			}
		}
	}
	if binding == nil {
		t.Fatalf("no Secrets binding in the rendered components:\n%s", rendered)
	}
	if binding.GetKind() != "RoleBinding" || binding.GetNamespace() != "team-a" {
		t.Errorf("the Secrets binding is a %s in %q, want a RoleBinding in team-a", binding.GetKind(), binding.GetNamespace())
	}
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["namespace"] != "team-a" {
		t.Errorf("the Secrets binding's subjects %v, want the manager in team-a", subjects)
	}
}
