package workloadapi

import (
	"net"
	"sync"
)

// Listener is a net.Listener whose connections are handed to it instead of accepted from a
// socket: what the in-process servers of a simulated cluster serve on (its etcd members, and
// its API server behind a listener that chose the cluster, as the in-memory engine's fronts do).
type Listener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// NewListener returns a listener that says it listens on addr; nil: an in-process address.
func NewListener(addr net.Addr) *Listener {
	if addr == nil {
		addr = pipeAddr{}
	}
	return &Listener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Deliver hands a connection to the server accepting on the listener, waiting until it does;
// once the listener is closed it closes the connection and returns net.ErrClosed.
func (l *Listener) Deliver(conn net.Conn) error {
	select {
	case l.conns <- conn:
		return nil
	case <-l.closed:
		_ = conn.Close()
		return net.ErrClosed
	}
}

// Pipe returns the client end of a new in-process connection, whose server end it delivers.
func (l *Listener) Pipe() (net.Conn, error) {
	client, server := net.Pipe()
	if err := l.Deliver(server); err != nil {
		_ = client.Close()
		return nil, err
	}
	return client, nil
}

// Accept returns the next connection delivered.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops the listener; closing it again is not an error.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is the address the listener was given.
func (l *Listener) Addr() net.Addr { return l.addr }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "in-process" }
