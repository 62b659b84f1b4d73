package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterApply is one run of applyCluster: what was there before it, and what it created.
type clusterApply struct {
	c   client.Client
	ref clusterRef
	// madeNamespace is set when the run created the cluster's namespace.
	madeNamespace bool
	// existed holds the objects (objectID) that were there before the run, as the dry run saw.
	existed map[string]bool
	// created are the objects the run created, in the order it created them.
	created []*unstructured.Unstructured
}

// ensureNamespace creates a namespace unless it exists, and reports whether it created it.
func ensureNamespace(ctx context.Context, c client.Client, namespace string) (bool, error) {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, errors.Wrapf(err, "creating namespace %s", namespace)
}

// objectID names an object among the cluster's: its kind, namespace and name.
func objectID(obj *unstructured.Unstructured) string {
	return obj.GroupVersionKind().GroupKind().String() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// secretObject is the cluster's infrastructure Secret as an object to delete.
func secretObject(ref clusterRef) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	u.SetNamespace(ref.Namespace)
	u.SetName(infrastructureSecret(ref.Name))
	return u
}

// dryRun has the API server check every object as applying it would, in the same order, and
// notes which exist already. Nothing is stored, so no object finds those before it: none needs
// them. Dockyard's webhooks read no other object; Cluster API's Cluster webhook admits a Cluster
// whose ClusterClass does not exist yet, with a warning, leaving the check of the topology's
// variables to the real apply (a refusal there is undone like any other). Only the namespace
// must exist, which applyCluster creates first.
func (a *clusterApply) dryRun(ctx context.Context, objs []*unstructured.Unstructured, infraKubeconfig []byte) error {
	if infraKubeconfig != nil {
		if _, err := applyInfrastructureSecret(ctx, a.c, a.ref, infraKubeconfig, true); err != nil {
			return &objectError{kind: "Secret", name: infrastructureSecret(a.ref.Name), err: err}
		}
	}
	for _, obj := range objs {
		if err := a.lookUp(ctx, obj); err != nil {
			return err
		}
		if err := applyObject(ctx, a.c, obj, client.DryRunAll); err != nil {
			return &objectError{kind: obj.GetKind(), name: obj.GetName(), err: err}
		}
	}
	return nil
}

// lookUp notes whether an object exists already.
func (a *clusterApply) lookUp(ctx context.Context, obj *unstructured.Unstructured) error {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	err := a.c.Get(ctx, client.ObjectKeyFromObject(obj), got)
	if err != nil && !apierrors.IsNotFound(err) {
		return errors.Wrapf(err, "reading %s %s", obj.GetKind(), obj.GetName())
	}
	a.existed[objectID(obj)] = err == nil
	return nil
}

// apply applies the objects for real, noting those it creates.
func (a *clusterApply) apply(ctx context.Context, objs []*unstructured.Unstructured, infraKubeconfig []byte) error {
	if infraKubeconfig != nil {
		created, err := applyInfrastructureSecret(ctx, a.c, a.ref, infraKubeconfig, false)
		if created {
			a.created = append(a.created, secretObject(a.ref))
		}
		if err != nil {
			return err
		}
	}
	for _, obj := range objs {
		if err := applyObject(ctx, a.c, obj); err != nil {
			return &objectError{kind: obj.GetKind(), name: obj.GetName(), err: err}
		}
		if !a.existed[objectID(obj)] {
			a.created = append(a.created, obj)
		}
	}
	if infraKubeconfig != nil {
		return ownInfrastructureSecret(ctx, a.c, a.ref)
	}
	return nil
}

// refused is the error of a cluster whose dry run failed: nothing of it was created, and the
// namespace the run made is removed.
func (a *clusterApply) refused(ctx context.Context, err error) error {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	var obj *objectError
	if errors.As(err, &obj) && isRefusal(obj.err) {
		err = errors.Errorf("the management cluster refuses %s %s of cluster %s, so nothing of the cluster was created: %s",
			obj.kind, obj.name, a.ref, refusalReason(obj.err))
	} else {
		err = errors.Wrapf(err, "checking the objects of cluster %s before creating them; nothing of it was created", a.ref)
	}
	if a.madeNamespace {
		if derr := client.IgnoreNotFound(a.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.ref.Namespace}})); derr != nil {
			return errors.Errorf("%v; namespace %s, which this run made for it, is left: %v", err, a.ref.Namespace, derr)
		}
	}
	return err
}

// undo removes what the run created after applying for real failed, newest first, and says so
// in the error it returns.
func (a *clusterApply) undo(ctx context.Context, err error) error {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	var obj *objectError
	if errors.As(err, &obj) {
		err = errors.Errorf("applying %s %s of cluster %s: %s", obj.kind, obj.name, a.ref, refusalReason(obj.err))
	}
	if len(a.created) == 0 && !a.madeNamespace {
		return errors.Errorf("%v; this run had created nothing", err)
	}
	var left []string
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for i := len(a.created) - 1; i >= 0; i-- {
		o := a.created[i]
		if derr := client.IgnoreNotFound(a.c.Delete(ctx, o.DeepCopy(), background)); derr != nil {
			left = append(left, fmt.Sprintf("%s %s: %v", o.GetKind(), o.GetName(), derr))
		}
	}
	var what []string
	if len(a.created) > 0 {
		what = append(what, fmt.Sprintf("%d objects", len(a.created)))
	}
	if a.madeNamespace {
		if derr := client.IgnoreNotFound(a.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.ref.Namespace}}, background)); derr != nil {
			left = append(left, fmt.Sprintf("namespace %s: %v", a.ref.Namespace, derr))
		}
		what = append(what, "namespace "+a.ref.Namespace)
	}
	if len(left) > 0 {
		return errors.Errorf("%v; removing the %s this run had created failed for %s: dockyard delete cluster %s removes the cluster",
			err, strings.Join(what, " and "), strings.Join(left, "; "), a.ref)
	}
	return errors.Errorf("%v; the %s this run had created are removed", err, strings.Join(what, " and "))
}

// cleanupContext is the context of removing what a run created: the command's, going on when
// that one was cancelled (the run interrupted), for a minute at most.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// applyObject creates or updates an object (server-side apply), so creating a cluster again
// changes nothing.
func applyObject(ctx context.Context, c client.Client, obj *unstructured.Unstructured, opts ...client.ApplyOption) error {
	opts = append([]client.ApplyOption{client.FieldOwner("dockyard"), client.ForceOwnership}, opts...)
	// Right after clusterctl init the webhooks' Service may not route yet: retry a while, but
	// not what the API server refuses.
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lastErr = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), opts...)
		return lastErr == nil || isRefusal(lastErr), nil
	})
	if lastErr != nil {
		return lastErr
	}
	return err
}

// isRefusal reports whether the API server refused a request for what it asks (validation, an
// admission webhook's denial, authorization), which asking again does not change.
func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

// objectError is the failure of one object of a cluster.
type objectError struct {
	kind, name string
	err        error
}

func (e *objectError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.kind, e.name, e.err)
}

func (e *objectError) Unwrap() error { return e.err }

var (
	// webhookDenied and objectInvalid are what the API server puts before a refusal's reasons.
	webhookDenied = regexp.MustCompile(`^admission webhook "[^"]*" denied the request: `)
	objectInvalid = regexp.MustCompile(`^[A-Za-z0-9.]+ "[^"]*" is invalid: `)
)

// refusalReason is what the API server says is wrong, each field with its reason, without what
// it puts around them (the webhook's and the object's names).
func refusalReason(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err.Error()
	}
	s := status.Status()
	if s.Details != nil {
		var causes []string
		for _, c := range s.Details.Causes {
			if c.Field != "" {
				causes = append(causes, c.Field+": "+c.Message)
			}
		}
		if len(causes) > 0 {
			return strings.Join(causes, "; ")
		}
	}
	return objectInvalid.ReplaceAllString(webhookDenied.ReplaceAllString(s.Message, ""), "")
}
