package workloadapi

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"net"
	"slices"
	"sync"

	"github.com/pkg/errors"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"sigs.k8s.io/cluster-api/util/certs"
)

// etcdVersion is the version the simulated members report.
const etcdVersion = "3.6.4"

// Etcd is a simulated cluster's etcd: a member per control plane node, named after it as
// kubeadm names them, reached in-process (Dial) the way KubeadmControlPlane reaches a real
// member through port-forward to its Pod, over TLS with the cluster's etcd CA on both sides. A
// member answers what KubeadmControlPlane asks of etcd: MemberList, Status, Alarm, MoveLeader
// (on the leader) and MemberRemove. A member set down answers nothing, as a stopped etcd.
type Etcd struct {
	mu        sync.Mutex
	clusterID uint64
	members   []*etcdMember
	leader    uint64
	revision  int64
	tls       *tls.Config
}

type etcdMember struct {
	id       uint64
	name     string
	down     bool
	server   *grpc.Server
	listener *Listener
}

// NewEtcd returns a cluster's etcd with no member, serving with a certificate of its etcd CA.
func NewEtcd(caCert *x509.Certificate, caKey crypto.Signer) (*Etcd, error) {
	cfg := certs.Config{CommonName: "etcd", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	cfg.AltNames.DNSNames = []string{"localhost"}
	cfg.AltNames.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	tlsConfig, err := mutualTLS(cfg, caCert, caKey, "h2")
	if err != nil {
		return nil, err
	}
	return &Etcd{clusterID: randomID(), revision: 1, tls: tlsConfig}, nil
}

// AddMember adds the member of a control plane node (once); the first is the leader.
func (e *Etcd) AddMember(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addMember(name, randomID())
}

// addMember adds a member with its ID, once. Called with mu held.
func (e *Etcd) addMember(name string, id uint64) {
	if e.member(name) != nil {
		return
	}
	m := &etcdMember{id: id, name: name, listener: NewListener(nil)}
	m.server = grpc.NewServer(grpc.Creds(credentials.NewTLS(e.tls)))
	svc := &etcdService{etcd: e, id: m.id}
	etcdserverpb.RegisterMaintenanceServer(m.server, svc)
	etcdserverpb.RegisterClusterServer(m.server, svc)
	go func() { _ = m.server.Serve(m.listener) }()
	e.members = append(e.members, m)
	if e.leader == 0 {
		e.leader = m.id
	}
	e.revision++
}

// RemoveMember removes a node's member, as kubeadm reset or KubeadmControlPlane does.
func (e *Etcd) RemoveMember(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.member(name); m != nil {
		e.remove(m.id)
	}
}

// SetDown stops (true) or starts again (false) a member: a stopped member's connections and
// calls fail.
func (e *Etcd) SetDown(name string, down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.member(name); m != nil {
		m.down = down
		if down && e.leader == m.id {
			e.leader = 0
			for _, other := range e.members {
				if !other.down {
					e.leader = other.id
					break
				}
			}
		}
	}
}

// Members names the members, in the order they were added.
func (e *Etcd) Members() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var names []string
	for _, m := range e.members {
		names = append(names, m.name)
	}
	return names
}

// Dial connects to a member's client port, as port-forward to its Pod does.
func (e *Etcd) Dial(name string) (net.Conn, error) {
	e.mu.Lock()
	m := e.member(name)
	e.mu.Unlock()
	switch {
	case m == nil:
		return nil, errors.Errorf("etcd has no member %s", name)
	case m.down:
		return nil, errors.Errorf("etcd member %s is down", name)
	}
	return m.listener.Pipe()
}

// Close stops every member.
func (e *Etcd) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.members {
		m.server.Stop()
	}
	e.members = nil
}

// member finds a member by name. Called with mu held.
func (e *Etcd) member(name string) *etcdMember {
	for _, m := range e.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// remove removes a member by ID; false when there is none. Called with mu held.
func (e *Etcd) remove(id uint64) bool {
	i := slices.IndexFunc(e.members, func(m *etcdMember) bool { return m.id == id })
	if i < 0 {
		return false
	}
	m := e.members[i]
	e.members = slices.Delete(e.members, i, i+1)
	go m.server.Stop()
	if e.leader == id {
		e.leader = 0
		if len(e.members) > 0 {
			e.leader = e.members[0].id
		}
	}
	e.revision++
	return true
}

// etcdService answers for one member.
type etcdService struct {
	etcdserverpb.UnimplementedMaintenanceServer
	etcdserverpb.UnimplementedClusterServer
	etcd *Etcd
	id   uint64
}

// header is the response header of the member; an error when the member is down or gone.
// Called with the etcd's mu held.
func (s *etcdService) header() (*etcdserverpb.ResponseHeader, error) {
	m := slices.IndexFunc(s.etcd.members, func(m *etcdMember) bool { return m.id == s.id && !m.down })
	if m < 0 {
		return nil, rpctypes.ErrGRPCStopped
	}
	return &etcdserverpb.ResponseHeader{ClusterId: s.etcd.clusterID, MemberId: s.id, Revision: s.etcd.revision, RaftTerm: 2}, nil
}

func (s *etcdService) Status(context.Context, *etcdserverpb.StatusRequest) (*etcdserverpb.StatusResponse, error) {
	s.etcd.mu.Lock()
	defer s.etcd.mu.Unlock()
	h, err := s.header()
	if err != nil {
		return nil, err
	}
	idx := uint64(s.etcd.revision) //nolint:gosec // the revision only grows from 1
	return &etcdserverpb.StatusResponse{Header: h, Version: etcdVersion, DbSize: 1 << 20, DbSizeInUse: 1 << 20, Leader: s.etcd.leader,
		RaftIndex: idx, RaftAppliedIndex: idx, RaftTerm: 2}, nil
}

func (s *etcdService) Alarm(_ context.Context, req *etcdserverpb.AlarmRequest) (*etcdserverpb.AlarmResponse, error) {
	s.etcd.mu.Lock()
	defer s.etcd.mu.Unlock()
	h, err := s.header()
	if err != nil {
		return nil, err
	}
	if req.Action != etcdserverpb.AlarmRequest_GET {
		return nil, rpctypes.ErrGRPCPermissionNotGiven
	}
	return &etcdserverpb.AlarmResponse{Header: h}, nil
}

func (s *etcdService) MoveLeader(_ context.Context, req *etcdserverpb.MoveLeaderRequest) (*etcdserverpb.MoveLeaderResponse, error) {
	s.etcd.mu.Lock()
	defer s.etcd.mu.Unlock()
	h, err := s.header()
	if err != nil {
		return nil, err
	}
	if s.etcd.leader != s.id {
		return nil, rpctypes.ErrGRPCNotLeader
	}
	if !slices.ContainsFunc(s.etcd.members, func(m *etcdMember) bool { return m.id == req.TargetID && !m.down }) {
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	s.etcd.leader = req.TargetID
	return &etcdserverpb.MoveLeaderResponse{Header: h}, nil
}

func (s *etcdService) MemberList(context.Context, *etcdserverpb.MemberListRequest) (*etcdserverpb.MemberListResponse, error) {
	s.etcd.mu.Lock()
	defer s.etcd.mu.Unlock()
	h, err := s.header()
	if err != nil {
		return nil, err
	}
	return &etcdserverpb.MemberListResponse{Header: h, Members: s.etcd.list()}, nil
}

func (s *etcdService) MemberRemove(_ context.Context, req *etcdserverpb.MemberRemoveRequest) (*etcdserverpb.MemberRemoveResponse, error) {
	s.etcd.mu.Lock()
	defer s.etcd.mu.Unlock()
	h, err := s.header()
	if err != nil {
		return nil, err
	}
	if !s.etcd.remove(req.ID) {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	return &etcdserverpb.MemberRemoveResponse{Header: h, Members: s.etcd.list()}, nil
}

// list is the members as etcd lists them. Called with mu held.
func (e *Etcd) list() []*etcdserverpb.Member {
	var out []*etcdserverpb.Member
	for _, m := range e.members {
		out = append(out, &etcdserverpb.Member{ID: m.id, Name: m.name,
			PeerURLs: []string{"https://" + m.name + ":2380"}, ClientURLs: []string{"https://" + m.name + ":2379"}})
	}
	return out
}

func randomID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}
