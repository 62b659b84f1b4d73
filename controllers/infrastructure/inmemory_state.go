package infrastructure

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

const (
	// InMemoryStateType is the type of the Secrets that keep in-memory clusters: the only
	// Secrets the manager may make, change or delete (config/rbac/secret_policy.yaml).
	InMemoryStateType corev1.SecretType = "dockyard.x-k8s.io/in-memory-state"
	// inMemoryStateLabel marks them, for listing.
	inMemoryStateLabel = "dockyard.x-k8s.io/in-memory-state"
	// inMemoryStateKey holds the engine's record in them.
	inMemoryStateKey = "state"
	// inMemoryStateSuffix ends their names: <cluster>-in-memory-state.
	inMemoryStateSuffix = "-in-memory-state"
)

// InMemoryStates keeps each in-memory cluster in a Secret of its namespace,
// <cluster>-in-memory-state, owned by its DockyardCluster: the garbage collector removes it with
// the cluster, and clusterctl move carries it to the management cluster the cluster moves to,
// whose manager takes it in. It is the in-memory engine's StateStore (runtimes.InMemory.State);
// a group is a Cluster's "namespace/name" (the node layer's cluster label).
type InMemoryStates struct {
	// Client writes the Secrets; Reader reads them (the manager's cache holds only the Secrets
	// it marked) and the DockyardClusters.
	Client client.Client
	Reader client.Reader
	// Namespace limits them to the namespace the manager reconciles; empty: every namespace.
	Namespace string
	// Policy, when set, says which namespaces may run clusters in memory; nil: every one.
	Policy *policy.Policy
}

// secretKey is where a group's record is.
func secretKey(group string) (client.ObjectKey, error) {
	namespace, name, ok := strings.Cut(group, "/")
	if !ok || namespace == "" || name == "" {
		return client.ObjectKey{}, errors.Errorf("in-memory cluster %q is not namespace/name", group)
	}
	return client.ObjectKey{Namespace: namespace, Name: name + inMemoryStateSuffix}, nil
}

// Save writes a cluster's record: most often its data only, in one call, the record's type
// tested in the same patch (a Secret of another type under its name is never written over).
// The first time, or anew (a cluster made again under the name of one that ended, whose record
// may still be there), the record is owned by the cluster's current DockyardCluster. Nothing
// is written, and saved is false, while the Cluster or its DockyardCluster is missing or being
// deleted.
func (s *InMemoryStates) Save(ctx context.Context, group string, state []byte, anew bool) (saved bool, err error) {
	key, err := secretKey(group)
	if err != nil {
		return false, err
	}
	if !anew {
		err = s.patch(ctx, key, state, nil)
		if !apierrors.IsNotFound(err) {
			return err == nil, errors.Wrapf(err, "saving in-memory cluster %s", group)
		}
	}
	clusterName := strings.TrimSuffix(key.Name, inMemoryStateSuffix)
	owner, err := s.owner(ctx, key.Namespace, clusterName)
	if owner == nil || err != nil {
		return false, err
	}
	owners := []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "DockyardCluster", Name: owner.Name, UID: owner.UID}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: owners,
			Labels: map[string]string{inMemoryStateLabel: "", clusterv1.ClusterNameLabel: clusterName}},
		Type: InMemoryStateType,
		Data: map[string][]byte{inMemoryStateKey: state},
	}
	err = s.Client.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		// A record of the name is there: this cluster's from before, or one that ended.
		err = s.patch(ctx, key, state, owners)
	}
	return err == nil, errors.Wrapf(err, "saving in-memory cluster %s", group)
}

// patch replaces a record's data, and its owners when given, testing its type in the same JSON
// patch.
func (s *InMemoryStates) patch(ctx context.Context, key client.ObjectKey, state []byte, owners []metav1.OwnerReference) error {
	ops := []map[string]any{
		{"op": "test", "path": "/type", "value": string(InMemoryStateType)},
		{"op": "add", "path": "/data/" + inMemoryStateKey, "value": state},
	}
	if owners != nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/ownerReferences", "value": owners})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	return s.Client.Patch(ctx, secret, client.RawPatch(types.JSONPatchType, body))
}

// owner is the DockyardCluster of a Cluster, read, not cached; nil while either is missing or
// being deleted.
func (s *InMemoryStates) owner(ctx context.Context, namespace, clusterName string) (*infrav1.DockyardCluster, error) {
	cluster := &clusterv1.Cluster{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName}, cluster); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, errors.Wrapf(err, "reading Cluster %s/%s", namespace, clusterName)
	}
	ref := cluster.Spec.InfrastructureRef
	if !cluster.DeletionTimestamp.IsZero() || ref.Kind != "DockyardCluster" || ref.Name == "" {
		return nil, nil
	}
	dc := &infrav1.DockyardCluster{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, dc); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, errors.Wrapf(err, "reading DockyardCluster %s/%s", namespace, ref.Name)
	}
	if !dc.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return dc, nil
}

// Load reads a cluster's record; nil when it has none, or none the manager may take in: a
// record is taken in only for a DockyardCluster of an in-memory cluster that owns it, in a
// namespace the policy lets run clusters in memory (a Secret a team writes itself serves
// nothing).
func (s *InMemoryStates) Load(ctx context.Context, group string) ([]byte, error) {
	key, err := secretKey(group)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := s.Reader.Get(ctx, key, secret); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, errors.Wrapf(err, "reading the record of in-memory cluster %s", group)
	}
	if secret.Type != InMemoryStateType {
		return nil, nil
	}
	if s.Policy != nil && s.Policy.CheckInMemory(key.Namespace) != nil {
		return nil, nil
	}
	owner, err := s.owner(ctx, key.Namespace, strings.TrimSuffix(key.Name, inMemoryStateSuffix))
	if owner == nil || err != nil || owner.Spec.Infrastructure.InMemory == nil ||
		!slices.ContainsFunc(secret.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.UID }) {
		return nil, err
	}
	return secret.Data[inMemoryStateKey], nil
}

// Groups names the clusters that have a record, from the Secrets' metadata.
func (s *InMemoryStates) Groups(ctx context.Context) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	opts := []client.ListOption{client.HasLabels{inMemoryStateLabel}}
	if s.Namespace != "" {
		opts = append(opts, client.InNamespace(s.Namespace))
	}
	if err := s.Reader.List(ctx, list, opts...); err != nil {
		return nil, errors.Wrap(err, "listing the records of in-memory clusters")
	}
	groups := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		if name, ok := strings.CutSuffix(m.Name, inMemoryStateSuffix); ok && name != "" {
			groups = append(groups, m.Namespace+"/"+name)
		}
	}
	return groups, nil
}

// Delete removes a cluster's record; one that is not there is not an error.
func (s *InMemoryStates) Delete(ctx context.Context, group string) error {
	key, err := secretKey(group)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{}
	if err := s.Reader.Get(ctx, key, secret); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return errors.Wrapf(err, "reading the record of in-memory cluster %s", group)
	}
	if secret.Type != InMemoryStateType {
		return nil // not a record: never the manager's to delete
	}
	// That Secret and no other made since under its name.
	err = s.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return errors.Wrapf(err, "deleting the record of in-memory cluster %s", group)
}
