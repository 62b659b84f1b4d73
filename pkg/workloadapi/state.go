package workloadapi

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cluster-api/util/certs"
)

// ClusterState is everything a simulated cluster holds, in a form that encodes (encoding/gob or
// JSON): what RestoreCluster makes the same cluster of again, in this process or another.
type ClusterState struct {
	KubernetesVersion string
	// CACert and the others are PEM: certificates, and PKCS #8 keys.
	CACert, CAKey, EtcdCACert, EtcdCAKey []byte
	Hosts                                []string

	// ResourceVersion is the Store's; Objects its objects, each with its resource.
	ResourceVersion uint64
	Objects         []StoredObject

	Etcd EtcdState
	// Stopped are the components a fault stopped (NODE/COMPONENT); Delays the nodes' network
	// delays.
	Stopped []string
	Delays  map[string]time.Duration
}

// StoredObject is an object of the Store with its resource.
type StoredObject struct {
	Group, Resource string
	Object          map[string]any
}

// EtcdState is a cluster's etcd: its IDs, revision and members in the order they were added.
type EtcdState struct {
	ClusterID, Leader uint64
	Revision          int64
	Members           []EtcdMemberState
}

// EtcdMemberState is one member.
type EtcdMemberState struct {
	ID   uint64
	Name string
	Down bool
}

// State returns what the cluster holds now.
func (c *Cluster) State() (*ClusterState, error) {
	st := &ClusterState{KubernetesVersion: c.Server.Version(), Hosts: c.opts.Hosts, Delays: map[string]time.Duration{}}
	var err error
	if st.CACert, st.CAKey, err = encodePair(c.opts.CACert, c.opts.CAKey); err != nil {
		return nil, err
	}
	if st.EtcdCACert, st.EtcdCAKey, err = encodePair(c.opts.EtcdCACert, c.opts.EtcdCAKey); err != nil {
		return nil, err
	}
	st.ResourceVersion, st.Objects = c.Store.state()
	st.Etcd = c.Etcd.state()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.stopped {
		st.Stopped = append(st.Stopped, k)
	}
	for k, d := range c.delays {
		st.Delays[k] = d
	}
	return st, nil
}

// RestoreCluster makes a cluster of a state State returned, not serving yet: its objects at
// their resourceVersions (a watch from an older version is told it expired, so clients list
// again), its etcd members with their IDs, its faults.
func RestoreCluster(st *ClusterState) (*Cluster, error) {
	opts := ClusterOptions{KubernetesVersion: st.KubernetesVersion, Hosts: st.Hosts}
	var err error
	if opts.CACert, opts.CAKey, err = decodePair(st.CACert, st.CAKey); err != nil {
		return nil, errors.Wrap(err, "the cluster's CA")
	}
	if opts.EtcdCACert, opts.EtcdCAKey, err = decodePair(st.EtcdCACert, st.EtcdCAKey); err != nil {
		return nil, errors.Wrap(err, "etcd's CA")
	}
	c, err := NewCluster(opts)
	if err != nil {
		return nil, err
	}
	c.Store.restore(st.ResourceVersion, st.Objects)
	c.Etcd.restore(st.Etcd)
	for _, k := range st.Stopped {
		c.stopped[k] = true
	}
	for k, d := range st.Delays {
		c.delays[k] = d
	}
	return c, nil
}

// state is the Store's version and a copy of its objects.
func (s *Store) state() (uint64, []StoredObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []StoredObject
	for gr, objs := range s.objects {
		for _, o := range objs {
			out = append(out, StoredObject{Group: gr.Group, Resource: gr.Resource, Object: o.DeepCopy().Object})
		}
	}
	return s.rv, out
}

// restore puts objects back at their versions, with the Store at version rv. The history is
// empty: a watch from before rv expires.
func (s *Store) restore(rv uint64, objects []StoredObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = rv
	for _, so := range objects {
		gr := schema.GroupResource{Group: so.Group, Resource: so.Resource}
		o := &unstructured.Unstructured{Object: so.Object}
		if s.objects[gr] == nil {
			s.objects[gr] = map[objectKey]*unstructured.Unstructured{}
		}
		s.objects[gr][objectKey{o.GetNamespace(), o.GetName()}] = o.DeepCopy()
	}
}

func (e *Etcd) state() EtcdState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := EtcdState{ClusterID: e.clusterID, Leader: e.leader, Revision: e.revision}
	for _, m := range e.members {
		st.Members = append(st.Members, EtcdMemberState{ID: m.id, Name: m.name, Down: m.down})
	}
	return st
}

func (e *Etcd) restore(st EtcdState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range st.Members {
		e.addMember(m.Name, m.ID)
		e.member(m.Name).down = m.Down
	}
	e.clusterID, e.leader, e.revision = st.ClusterID, st.Leader, st.Revision
}

func encodePair(cert *x509.Certificate, key crypto.Signer) (certPEM, keyPEM []byte, err error) {
	if cert == nil || key == nil {
		return nil, nil, errors.New("a CA without its certificate or key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, errors.Wrap(err, "encoding a CA's key")
	}
	return certs.EncodeCertPEM(cert), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func decodePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cert, err := certs.DecodeCertPEM(certPEM)
	if err != nil || cert == nil {
		return nil, nil, errors.New("no PEM certificate")
	}
	key, err := certs.DecodePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, errors.Wrap(err, "decoding a CA's key")
	}
	return cert, key, nil
}
