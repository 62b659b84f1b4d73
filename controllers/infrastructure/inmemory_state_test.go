package infrastructure

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/policy"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

// An in-memory cluster's record is a Secret of its namespace, of the records' own type, owned
// by its DockyardCluster (so the garbage collector and clusterctl move follow the cluster), named
// after its Cluster, whose DockyardCluster may be named otherwise (a ClusterClass's): saved,
// read, listed and deleted; nothing is saved for a cluster that is gone, and a Secret of another
// type under a record's name is neither written over nor deleted.
func TestInMemoryStatesAreSecretsOfTheirClusters(t *testing.T) {
	ctx := context.Background()
	// A ClusterClass's Cluster: its DockyardCluster has a name of its own.
	cluster := func(name, dc string) *clusterv1.Cluster {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardCluster", Name: dc}}}
	}
	inMemory := infrav1.DockyardClusterSpec{Infrastructure: infrav1.InfrastructureSpec{InMemory: &infrav1.InMemoryInfrastructure{}}}
	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mem-x7k2p", UID: "dc-uid",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "mem"}}, Spec: inMemory}
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other" + inMemoryStateSuffix}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("kept")}}
	otherDC := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other", UID: "other-uid"}}
	c := fakeclient.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(cluster("mem", "mem-x7k2p"), dc, cluster("other", "other"), otherDC, theirs, cluster("no-infra", "missing")).Build()
	s := &InMemoryStates{Client: c, Reader: c}

	for _, state := range []string{"one", "two"} {
		if saved, err := s.Save(ctx, "team-a/mem", []byte(state), state == "one"); err != nil || !saved {
			t.Fatalf("saving %q: saved %v, %v", state, saved, err)
		}
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "mem-in-memory-state"}, secret); err != nil {
		t.Fatal(err)
	}
	owners := secret.OwnerReferences
	if secret.Type != InMemoryStateType || len(owners) != 1 || owners[0].Kind != "DockyardCluster" || owners[0].UID != "dc-uid" ||
		secret.Labels[clusterv1.ClusterNameLabel] != "mem" {
		t.Errorf("the record: type %s, owners %+v, labels %v", secret.Type, owners, secret.Labels)
	}
	if got, err := s.Load(ctx, "team-a/mem"); err != nil || string(got) != "two" {
		t.Errorf("Load = %q, %v; want the last save", got, err)
	}

	// The cluster made again under its name before its old record went: saved anew, the
	// record is the new DockyardCluster's (the old one's garbage collection leaves it alone).
	if err := c.Delete(ctx, dc); err != nil {
		t.Fatal(err)
	}
	again := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mem-x7k2p", UID: "dc-uid-2"}, Spec: inMemory}
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if saved, err := s.Save(ctx, "team-a/mem", []byte("three"), true); err != nil || !saved {
		t.Fatalf("saving anew: saved %v, %v", saved, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil || len(secret.OwnerReferences) != 1 ||
		secret.OwnerReferences[0].UID != "dc-uid-2" || string(secret.Data["state"]) != "three" {
		t.Errorf("the record saved anew: owners %+v, data %q, %v", secret.OwnerReferences, secret.Data["state"], err)
	}
	if groups, err := s.Groups(ctx); err != nil || !slices.Equal(groups, []string{"team-a/mem"}) {
		t.Errorf("Groups = %v, %v", groups, err)
	}

	for _, gone := range []string{"team-a/gone", "team-a/no-infra"} {
		if saved, err := s.Save(ctx, gone, []byte("x"), false); err != nil || saved {
			t.Errorf("saving %s, whose Cluster or DockyardCluster is gone: saved %v, %v", gone, saved, err)
		}
		if got, _ := s.Load(ctx, gone); got != nil {
			t.Errorf("a record was made for %s: %q", gone, got)
		}
	}
	if saved, err := s.Save(ctx, "team-a/other", []byte("x"), true); err == nil || saved {
		t.Error("a Secret of another type was written over")
	}
	if err := s.Delete(ctx, "team-a/other"); err != nil {
		t.Fatal(err)
	}
	kept := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), kept); err != nil || string(kept.Data["password"]) != "kept" || kept.Data["state"] != nil {
		t.Errorf("a Secret of another type under a record's name: %v, %v", kept.Data, err)
	}

	if got, err := s.Load(ctx, "team-a/mem"); err != nil || string(got) != "three" {
		t.Errorf("Load after the save anew = %q, %v", got, err)
	}

	// Taken in only for its owner, an in-memory cluster, where the policy allows clusters in
	// memory: a record a team writes for a cluster that is none of those serves nothing.
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "real" + inMemoryStateSuffix}, Type: InMemoryStateType,
		Data: map[string][]byte{"state": []byte("forged")}}
	onHost := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "real", UID: "real-uid"}}
	for _, o := range []client.Object{forged, cluster("real", "real"), onHost} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Load(ctx, "team-a/real"); err != nil || got != nil {
		t.Errorf("a record its cluster does not own was taken in: %q, %v", got, err)
	}
	forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "DockyardCluster", Name: "real", UID: "real-uid"}}
	if err := c.Update(ctx, forged); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, "team-a/real"); err != nil || got != nil {
		t.Errorf("a record of a cluster on the host's engine was taken in: %q, %v", got, err)
	}
	refusing, err := policy.New(policy.Config{InMemoryNamespaces: []string{"team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := (&InMemoryStates{Client: c, Reader: c, Policy: refusing}).Load(ctx, "team-a/mem"); err != nil || got != nil {
		t.Errorf("a record in a namespace the policy keeps out of memory was taken in: %q, %v", got, err)
	}

	if err := s.Delete(ctx, "team-a/mem"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the record after Delete: %v", err)
	}
	if err := s.Delete(ctx, "team-a/mem"); err != nil {
		t.Errorf("deleting a record that is gone: %v", err)
	}
	if _, err := s.Load(ctx, "no-namespace"); err == nil {
		t.Error("a group that is not namespace/name was taken")
	}
}
