package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// Owners. Several management namespaces (teams) may name one namespace of an infrastructure
// cluster; an engine acts for one of them, its owner ("<management cluster>/<namespace>"):
//
//   - Everything the engine makes carries its owner twice: ownerAnnotation holds it as it is,
//     ownerLabel a form Kubernetes allows as a label value (ownerValue), for selections. An
//     object is the owner's only when both say so (mine); every read takes only those, and an
//     object of the same name that is not the owner's is neither adopted, nor found, nor removed.
//   - The namespace is claimed by the first owner that makes anything there: a ConfigMap
//     (claimName) names it, and any creation of another owner is refused (a policy refusal).
//     The claim is read again before every creation, never remembered: a claim released (the
//     ConfigMap deleted) can be taken by the next owner.
//   - Objects an engine without owners made (an earlier release: Dockyard's labels, no owner)
//     are the first claimant's: those there when the claim is made are marked as its own then
//     (or, when that was interrupted, by the holder's next read that finds one made before the
//     claim). Objects labelled so after the claim are nobody's. A read that finds such objects
//     in a namespace nobody holds claims it, so an upgraded manager keeps its clusters before it
//     makes anything.
const (
	ownerLabel      = "dockyard.x-k8s.io/owner"
	ownerAnnotation = "dockyard.x-k8s.io/owner"
	// DefaultOwner is whom an engine made without WithOwner acts for.
	DefaultOwner = "unknown"
	// MaxOwnerLength bounds an owner.
	MaxOwnerLength = 64
	// claimName is the ConfigMap claiming the namespace; its data names the holder
	// (claimOwnerKey).
	claimName     = "dockyard-claim"
	claimOwnerKey = "owner"
	// namespaceField is where a DockyardCluster names the namespace.
	namespaceField = "spec.infrastructure.kubernetes.namespace"
)

// WithOwner makes the engine act for owner, at most MaxOwnerLength characters (the manager:
// "<management cluster ID>/<DockyardCluster namespace>"); without it, for DefaultOwner.
func WithOwner(owner string) Option {
	return func(r *Runtime) {
		if owner != "" {
			r.owner = owner
		}
	}
}

// WithSpecCheck gives the engine its owner's check of a container spec, which a spec an ended
// Pod kept must pass before the Pod is made again from it (StartContainer); a spec it refuses
// leaves the Pod as it is. Without it, a kept spec is made again as it is.
func WithSpecCheck(check func(container.ContainerSpec) error) Option {
	return func(r *Runtime) { r.check = check }
}

// Owner is whom the engine acts for.
func (r *Runtime) Owner() string { return r.owner }

// ownerValue is the label value of an owner: a hash of it (an owner has a "/", which label
// values may not).
func ownerValue(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "o-" + hex.EncodeToString(sum[:20])
}

// own marks the labels and annotations of an object the engine makes as its owner's.
func (r *Runtime) own(labels, annotations map[string]string) {
	labels[ownerLabel] = ownerValue(r.owner)
	annotations[ownerAnnotation] = r.owner
}

// mine reports whether an object is the engine's: Dockyard's, and its owner's in both the
// label and the annotation.
func (r *Runtime) mine(o metav1.Object) bool {
	l := o.GetLabels()
	return l[managedLabel] == managedBy && l[ownerLabel] == ownerValue(r.owner) && o.GetAnnotations()[ownerAnnotation] == r.owner
}

// earlier reports whether an object looks like one an engine without owners made: Dockyard's
// label, and no owner.
func earlier(o metav1.Object) bool {
	_, labelled := o.GetLabels()[ownerLabel]
	_, annotated := o.GetAnnotations()[ownerAnnotation]
	return o.GetLabels()[managedLabel] == managedBy && !labelled && !annotated
}

// notTheOwners says that a name the engine would give an object is taken by one not its
// owner's.
func (r *Runtime) notTheOwners(kind, name string) error {
	return errors.Errorf("%s %s exists in namespace %s and is not Dockyard's for %s", kind, name, r.namespace, r.owner)
}

// owned reads one object with get: ErrNotFound when it does not exist or is not the owner's.
// One of an earlier release is first adopted where the owner may (adoptEarlier).
func (r *Runtime) owned(ctx context.Context, kind, name string, get func() (metav1.Object, error)) (metav1.Object, error) {
	o, err := get()
	if err == nil && earlier(o) {
		if err := r.adoptEarlier(ctx, []metav1.Object{o}); err != nil {
			return nil, err
		}
		o, err = get()
	}
	if err != nil {
		return nil, notFound(err, "reading %s %s", kind, name)
	}
	if !r.mine(o) {
		return nil, errors.Wrapf(container.ErrNotFound, "%s %s is not Dockyard's for %s", kind, name, r.owner)
	}
	return o, nil
}

// ownedList lists objects with list and keeps the owner's; when it finds objects of an earlier
// release, it adopts them where the owner may (adoptEarlier) and lists again.
func (r *Runtime) ownedList(ctx context.Context, list func() ([]metav1.Object, error)) ([]metav1.Object, error) {
	objs, err := list()
	if err == nil && slices.ContainsFunc(objs, earlier) {
		if err := r.adoptEarlier(ctx, objs); err != nil {
			return nil, err
		}
		objs, err = list()
	}
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(objs, func(o metav1.Object) bool { return !r.mine(o) }), nil
}

// sameObject is the precondition of a deletion of o: that object, not another made since under
// its name.
func sameObject(o metav1.Object) *metav1.Preconditions {
	if o.GetUID() == "" {
		return nil
	}
	return metav1.NewUIDPreconditions(string(o.GetUID()))
}

// objects are pointers to a list's items.
func objects[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

// typed turns objects back into what they are.
func typed[PT metav1.Object](objs []metav1.Object) []PT {
	out := make([]PT, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(PT); ok {
			out = append(out, t)
		}
	}
	return out
}

// claimState is what the namespace's claim says.
type claimState struct {
	exists  bool
	holder  string
	created metav1.Time
	uid     types.UID
}

// claim makes sure the engine's owner holds the namespace before the engine makes anything
// there: it claims a namespace nobody holds (and takes the objects of an earlier release there),
// and refuses, naming the holder, one another owner holds. The claim is made first and read
// when it exists, so what the cluster answers to the engine's first creation (a namespace not
// found, a right missing) is what the error says.
func (r *Runtime) claim(ctx context.Context) error {
	for range 2 {
		made, err := r.makeClaim(ctx)
		if err == nil {
			return r.takeEarlier(ctx, made.CreationTimestamp)
		}
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		c, err := r.readClaim(ctx)
		switch {
		case err != nil:
			return err
		case !c.exists:
			continue // released meanwhile: claim it again
		case c.holder != r.owner:
			return r.refusal(c.holder)
		}
		return nil
	}
	return errors.Errorf("claiming namespace %s for %s: its ConfigMap %s was deleted as it was made", r.namespace, r.owner, claimName)
}

// adoptEarlier is what a read does when it finds objects of an earlier release (among seen):
// claim the namespace when nobody holds it, taking every such object there; take those seen
// that were made before the owner's claim (an engine stopped as it claimed the namespace); leave
// them to another owner's claim.
func (r *Runtime) adoptEarlier(ctx context.Context, seen []metav1.Object) error {
	c, err := r.readClaim(ctx)
	switch {
	case err != nil:
		return err
	case !c.exists:
		made, err := r.makeClaim(ctx)
		if apierrors.IsAlreadyExists(err) {
			return nil // another engine was first
		}
		if err != nil {
			return err
		}
		return r.takeEarlier(ctx, made.CreationTimestamp)
	case c.holder == r.owner:
		for _, o := range seen {
			if t := o.GetCreationTimestamp(); earlier(o) && t.Before(&c.created) {
				if err := r.adopt(ctx, o); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// refusal refuses the engine's owner a namespace another holds.
func (r *Runtime) refusal(holder string) error {
	if holder == "" {
		holder = "an owner it does not name"
	}
	return policy.Refusedf("namespace %s of the infrastructure cluster is Dockyard's for %s (ConfigMap %s), not for %s: "+
		"each management namespace needs an infrastructure namespace of its own (%s, or the kubeconfig context's namespace)",
		r.namespace, holder, claimName, r.owner, namespaceField)
}

// readClaim reads the namespace's claim.
func (r *Runtime) readClaim(ctx context.Context) (claimState, error) {
	cm, err := r.client.CoreV1().ConfigMaps(r.namespace).Get(ctx, claimName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return claimState{}, nil
	case err != nil:
		return claimState{}, r.claimError(err, "get")
	}
	return claimState{exists: true, holder: cm.Data[claimOwnerKey], created: cm.CreationTimestamp, uid: cm.UID}, nil
}

// claimError says what claiming the namespace needs when the credentials lack it.
func (r *Runtime) claimError(err error, verb string) error {
	if apierrors.IsForbidden(err) {
		return errors.Wrapf(err, "claiming namespace %s for %s: the infrastructure cluster's credentials may not %s configmaps in namespace %s "+
			"(Dockyard needs configmaps create, get and delete there)", r.namespace, r.owner, verb, r.namespace)
	}
	return errors.Wrapf(err, "claiming namespace %s for %s (%s ConfigMap %s)", r.namespace, r.owner, verb, claimName)
}

// makeClaim claims the namespace for the owner. AlreadyExists, unwrapped, when it is claimed.
// The claim is never changed (a management cluster's admission policy lets the manager change
// no ConfigMap): it names its holder until it is deleted.
func (r *Runtime) makeClaim(ctx context.Context) (*corev1.ConfigMap, error) {
	labels, annotations := map[string]string{managedLabel: managedBy, kindLabel: "claim"}, map[string]string{}
	r.own(labels, annotations)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: claimName, Namespace: r.namespace, Labels: labels, Annotations: annotations},
		Data:       map[string]string{claimOwnerKey: r.owner},
	}
	made, err := r.client.CoreV1().ConfigMaps(r.namespace).Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil, err
	case err != nil:
		return nil, r.claimError(err, "create")
	}
	return made, nil
}

// releaseClaim deletes the owner's claim when nothing of the owner's is left in the namespace
// (called after a network or volume, the last of a cluster's objects, is removed), so that a
// namespace an owner no longer uses is neither left holding a ConfigMap nor kept from another.
// An object the owner makes meanwhile claims the namespace again as it is made.
func (r *Runtime) releaseClaim(ctx context.Context) error {
	c, err := r.readClaim(ctx)
	if err != nil || !c.exists || c.holder != r.owner {
		return err
	}
	left, err := r.anythingLeft(ctx)
	if err != nil || left != "" {
		return err
	}
	err = r.client.CoreV1().ConfigMaps(r.namespace).Delete(ctx, claimName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return r.claimError(err, "delete")
	}
	return nil
}

// anythingLeft names an object of the owner's in the namespace, the claim aside; "" when none.
func (r *Runtime) anythingLeft(ctx context.Context) (string, error) {
	opts := metav1.ListOptions{LabelSelector: ownerLabel + "=" + ownerValue(r.owner), Limit: 2}
	core, net := r.client.CoreV1(), r.client.NetworkingV1()
	pods, err := core.Pods(r.namespace).List(ctx, opts)
	if err == nil && len(pods.Items) > 0 {
		return "Pod " + pods.Items[0].Name, nil
	}
	if err != nil {
		return "", errors.Wrap(err, "listing the owner's Pods")
	}
	svcs, err := core.Services(r.namespace).List(ctx, opts)
	if err == nil && len(svcs.Items) > 0 {
		return "Service " + svcs.Items[0].Name, nil
	}
	if err != nil {
		return "", errors.Wrap(err, "listing the owner's Services")
	}
	nps, err := net.NetworkPolicies(r.namespace).List(ctx, opts)
	if err == nil && len(nps.Items) > 0 {
		return "NetworkPolicy " + nps.Items[0].Name, nil
	}
	if err != nil {
		return "", errors.Wrap(err, "listing the owner's NetworkPolicies")
	}
	cms, err := core.ConfigMaps(r.namespace).List(ctx, opts)
	if err != nil {
		return "", errors.Wrap(err, "listing the owner's ConfigMaps")
	}
	for _, cm := range cms.Items {
		if cm.Name != claimName {
			return "ConfigMap " + cm.Name, nil
		}
	}
	return "", nil
}

// takeEarlier marks the objects of an earlier release made by the time of the owner's claim
// (claimed) as the owner's.
func (r *Runtime) takeEarlier(ctx context.Context, claimed metav1.Time) error {
	found, err := r.earlierObjects(ctx)
	if err != nil {
		return err
	}
	for _, o := range found {
		if o.GetCreationTimestamp().After(claimed.Time) {
			continue
		}
		if err := r.adopt(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// earlierObjects are the objects of an earlier release in the namespace.
func (r *Runtime) earlierObjects(ctx context.Context) ([]metav1.Object, error) {
	opts := metav1.ListOptions{LabelSelector: managedLabel + "=" + managedBy + ",!" + ownerLabel}
	core := r.client.CoreV1()
	pods, err := core.Pods(r.namespace).List(ctx, opts)
	if err != nil {
		return nil, errors.Wrap(err, "listing the Pods of an earlier release")
	}
	svcs, err := core.Services(r.namespace).List(ctx, opts)
	if err != nil {
		return nil, errors.Wrap(err, "listing the Services of an earlier release")
	}
	cms, err := core.ConfigMaps(r.namespace).List(ctx, opts)
	if err != nil {
		return nil, errors.Wrap(err, "listing the ConfigMaps of an earlier release")
	}
	nps, err := r.client.NetworkingV1().NetworkPolicies(r.namespace).List(ctx, opts)
	if err != nil {
		return nil, errors.Wrap(err, "listing the NetworkPolicies of an earlier release")
	}
	found := slices.Concat(objects(pods.Items), objects(svcs.Items), objects(cms.Items), objects(nps.Items))
	return slices.DeleteFunc(found, func(o metav1.Object) bool { return !earlier(o) }), nil
}

// adopt marks an object of an earlier release as the owner's, only while it is that object (its
// UID) and still nobody's. A ConfigMap (a volume's record, without data that matters) is made
// again with the owner, since a management cluster's admission policy lets the manager change
// no ConfigMap; the others are patched.
func (r *Runtime) adopt(ctx context.Context, o metav1.Object) error {
	core := r.client.CoreV1()
	var err error
	switch o.(type) {
	case *corev1.Pod:
		err = adoptOne(ctx, core.Pods(r.namespace), o, r.owner)
	case *corev1.Service:
		err = adoptOne(ctx, core.Services(r.namespace), o, r.owner)
	case *networkingv1.NetworkPolicy:
		err = adoptOne(ctx, r.client.NetworkingV1().NetworkPolicies(r.namespace), o, r.owner)
	case *corev1.ConfigMap:
		err = r.remakeConfigMap(ctx, o.GetName(), o.GetUID())
	}
	return errors.Wrapf(err, "taking %s of an earlier release for %s", o.GetName(), r.owner)
}

// remakeConfigMap makes a ConfigMap of an earlier release again, the same but for its owner.
func (r *Runtime) remakeConfigMap(ctx context.Context, name string, uid types.UID) error {
	cms := r.client.CoreV1().ConfigMaps(r.namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil || cm.UID != uid || !earlier(cm) {
		return unlessGone(err)
	}
	err = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: sameObject(cm)})
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil // not that object any more
		}
		return unlessGone(err)
	}
	again := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.namespace, Labels: cm.Labels, Annotations: cm.Annotations},
		Data:       cm.Data, BinaryData: cm.BinaryData,
	}
	if again.Labels == nil {
		again.Labels = map[string]string{}
	}
	if again.Annotations == nil {
		again.Annotations = map[string]string{}
	}
	r.own(again.Labels, again.Annotations)
	_, err = cms.Create(ctx, again, metav1.CreateOptions{})
	return err
}

// unlessGone is err, but nil when the object is not found (gone: nothing left to do).
func unlessGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// getPatcher is a client of one kind of object in the namespace.
type getPatcher[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// adoptOne marks an object of an earlier release as owner's, if it is still that object (its
// UID) and still nobody's; the patch fails (and is tried again) when it changed meanwhile.
func adoptOne[T metav1.Object](ctx context.Context, c getPatcher[T], seen metav1.Object, owner string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := c.Get(ctx, seen.GetName(), metav1.GetOptions{})
		if err != nil {
			return unlessGone(err)
		}
		if o.GetUID() != seen.GetUID() || !earlier(o) {
			return nil
		}
		meta := map[string]any{
			"uid":         o.GetUID(),
			"labels":      map[string]string{ownerLabel: ownerValue(owner)},
			"annotations": map[string]string{ownerAnnotation: owner},
		}
		if v := o.GetResourceVersion(); v != "" {
			meta["resourceVersion"] = v
		}
		patch, _ := json.Marshal(map[string]any{"metadata": meta})
		_, err = c.Patch(ctx, seen.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
		return unlessGone(err)
	})
}
