package container

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/pkg/errors"
)

// Timeouts bound how long one call to an engine may take, so a hung engine or node fails one
// reconcile with an error instead of holding a worker forever.
type Timeouts struct {
	// Call bounds the calls that only read or change the engine's records: create, start,
	// inspect, list, signal, remove, networks, volumes, logs, copies.
	Call time.Duration
	// Transfer bounds moving images: pulls, saves and loads, including reading the stream.
	Transfer time.Duration
	// Quiet is how long an engine that did not answer in time is not asked again: its calls
	// fail at once, saying so, instead of each holding its caller for the whole deadline (a
	// team's infrastructure cluster that accepts connections and never answers would otherwise
	// take every worker of a controller in turn). Zero asks it every time.
	Quiet time.Duration
}

// DefaultTimeouts are generous for two slow cores: an image of a gigabyte moves in a minute or
// two, commands in nodes finish in seconds.
var DefaultTimeouts = Timeouts{Call: time.Minute, Transfer: 15 * time.Minute, Quiet: 15 * time.Second}

// WithTimeouts returns rt with every call bounded by t, its Balancer's included. Events streams
// are not bounded: they end with their context or when the engine goes away. Neither are
// commands run in containers: how long one may take depends on what it is for, which only its
// caller knows, and Dockyard's one runner of commands in nodes (docker/exec.go) gives each its
// deadline. A call that ran out of time says how long it waited, and the engine is then left
// alone for t.Quiet.
func WithTimeouts(rt Runtime, t Timeouts) Runtime {
	return &bounded{rt: rt, t: t}
}

type bounded struct {
	rt Runtime
	t  Timeouts

	// quietErr, when set, is why the engine is left alone (it did not answer in time) until
	// quietUntil; then one call (probing) asks it again while the others still fail at once,
	// and its answer decides: quiet again, or asked as usual.
	mu         sync.Mutex
	quietErr   error
	quietUntil time.Time
	probing    bool
}

func (b *bounded) call(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	probe, err := b.quiet()
	if err != nil {
		return err
	}
	bounded, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return b.answered(ctx, probe, timedOut(ctx, bounded, d, f(bounded)))
}

// quiet is the error of a call made while the engine is left alone; nil when it may be asked,
// probe true when this call is the one that asks it again.
func (b *bounded) quiet() (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.quietErr == nil:
		return false, nil
	case b.probing || time.Now().Before(b.quietUntil):
		return false, errors.Wrapf(b.quietErr, "not asked again before %s", b.quietUntil.Format(time.TimeOnly))
	}
	b.probing = true
	return true, nil
}

// answered leaves the engine alone for t.Quiet when err says it did not answer in time (the
// call's deadline, or its client's: a dial, a TLS handshake, a response that never came); a
// caller that gave up first says nothing of the engine. A probe's answer ends the quiet.
func (b *bounded) answered(caller context.Context, probe bool, err error) error {
	var timeout interface{ Timeout() bool }
	late := b.t.Quiet > 0 && err != nil && caller.Err() == nil &&
		(errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &timeout) && timeout.Timeout()))
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
		if !late {
			b.quietErr = nil
		}
	}
	if late {
		b.quietUntil, b.quietErr = time.Now().Add(b.t.Quiet), err
	}
	return err
}

// timedOut names the deadline in the error of a call that ran out of its own time (not its
// caller's).
func timedOut(caller, bounded context.Context, d time.Duration, err error) error {
	if err != nil && caller.Err() == nil && errors.Is(bounded.Err(), context.DeadlineExceeded) {
		return errors.Wrapf(err, "the container engine did not answer within %s", d)
	}
	return err
}

// stream keeps a call's deadline until the stream it returned is closed.
func (b *bounded) stream(ctx context.Context, d time.Duration, f func(context.Context) (io.ReadCloser, error)) (io.ReadCloser, error) {
	probe, err := b.quiet()
	if err != nil {
		return nil, err
	}
	bounded, cancel := context.WithTimeout(ctx, d)
	rc, err := f(bounded)
	err = b.answered(ctx, probe, timedOut(ctx, bounded, d, err))
	if err != nil {
		cancel()
		return nil, err
	}
	return &cancelOnClose{ReadCloser: rc, cancel: cancel}, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}

func (b *bounded) Info(ctx context.Context) (info EngineInfo, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { info, err = b.rt.Info(ctx); return err })
	return info, err
}

func (b *bounded) CreateContainer(ctx context.Context, spec ContainerSpec) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.CreateContainer(ctx, spec) })
}

func (b *bounded) StartContainer(ctx context.Context, name string) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.StartContainer(ctx, name) })
}

func (b *bounded) InspectContainer(ctx context.Context, name string) (c *Container, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { c, err = b.rt.InspectContainer(ctx, name); return err })
	return c, err
}

func (b *bounded) ListContainers(ctx context.Context, labels map[string]string) (cs []Container, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { cs, err = b.rt.ListContainers(ctx, labels); return err })
	return cs, err
}

func (b *bounded) SignalContainer(ctx context.Context, name, signal string) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.SignalContainer(ctx, name, signal) })
}

func (b *bounded) RemoveContainer(ctx context.Context, name string) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.RemoveContainer(ctx, name) })
}

func (b *bounded) Exec(ctx context.Context, name string, opts ExecOptions) (int, error) {
	return b.rt.Exec(ctx, name, opts)
}

func (b *bounded) CopyToContainer(ctx context.Context, name, dir string, tarStream io.Reader) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.CopyToContainer(ctx, name, dir, tarStream) })
}

func (b *bounded) CopyFromContainer(ctx context.Context, name, path string) (io.ReadCloser, error) {
	return b.stream(ctx, b.t.Call, func(ctx context.Context) (io.ReadCloser, error) { return b.rt.CopyFromContainer(ctx, name, path) })
}

func (b *bounded) ContainerLogs(ctx context.Context, name string, tailLines int) (logs string, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { logs, err = b.rt.ContainerLogs(ctx, name, tailLines); return err })
	return logs, err
}

func (b *bounded) Events(ctx context.Context, labels map[string]string) (<-chan Event, <-chan error) {
	return b.rt.Events(ctx, labels)
}

func (b *bounded) CreateNetwork(ctx context.Context, spec NetworkSpec) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.CreateNetwork(ctx, spec) })
}

func (b *bounded) InspectNetwork(ctx context.Context, name string) (n *Network, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { n, err = b.rt.InspectNetwork(ctx, name); return err })
	return n, err
}

func (b *bounded) ListNetworks(ctx context.Context, labels map[string]string) (ns []Network, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { ns, err = b.rt.ListNetworks(ctx, labels); return err })
	return ns, err
}

func (b *bounded) RemoveNetwork(ctx context.Context, name string) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.RemoveNetwork(ctx, name) })
}

func (b *bounded) ConnectNetwork(ctx context.Context, network, name string) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.ConnectNetwork(ctx, network, name) })
}

func (b *bounded) DisconnectNetwork(ctx context.Context, network, name string) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.DisconnectNetwork(ctx, network, name) })
}

func (b *bounded) CreateVolume(ctx context.Context, spec VolumeSpec) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.CreateVolume(ctx, spec) })
}

func (b *bounded) ListVolumes(ctx context.Context, labels map[string]string) (vs []Volume, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { vs, err = b.rt.ListVolumes(ctx, labels); return err })
	return vs, err
}

func (b *bounded) RemoveVolume(ctx context.Context, name string) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.RemoveVolume(ctx, name) })
}

func (b *bounded) ImageExists(ctx context.Context, ref string) (ok bool, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { ok, err = b.rt.ImageExists(ctx, ref); return err })
	return ok, err
}

func (b *bounded) PullImage(ctx context.Context, ref string) error {
	return b.call(ctx, b.t.Transfer, func(ctx context.Context) error { return b.rt.PullImage(ctx, ref) })
}

func (b *bounded) SaveImages(ctx context.Context, refs []string) (io.ReadCloser, error) {
	return b.stream(ctx, b.t.Transfer, func(ctx context.Context) (io.ReadCloser, error) { return b.rt.SaveImages(ctx, refs) })
}

func (b *bounded) LoadImages(ctx context.Context, tarStream io.Reader) error {
	return b.call(ctx, b.t.Transfer, func(ctx context.Context) error { return b.rt.LoadImages(ctx, tarStream) })
}

func (b *bounded) InspectImage(ctx context.Context, ref string) (img *Image, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { img, err = b.rt.InspectImage(ctx, ref); return err })
	return img, err
}

func (b *bounded) RemoveImage(ctx context.Context, ref string) error {
	return b.call(ctx, b.t.Call, func(ctx context.Context) error { return b.rt.RemoveImage(ctx, ref) })
}

func (b *bounded) Zones(ctx context.Context) (zones []string, err error) {
	err = b.call(ctx, b.t.Call, func(ctx context.Context) error { zones, err = b.rt.Zones(ctx); return err })
	return zones, err
}

// Balancer is the engine's, with the same deadlines; nil when the engine has none.
func (b *bounded) Balancer() Balancer {
	inner := b.rt.Balancer()
	if inner == nil {
		return nil
	}
	return &boundedBalancer{b: b, inner: inner}
}

type boundedBalancer struct {
	b     *bounded
	inner Balancer
}

func (f *boundedBalancer) EnsureFront(ctx context.Context, spec FrontSpec) (fr *Front, err error) {
	err = f.b.call(ctx, f.b.t.Call, func(ctx context.Context) error { fr, err = f.inner.EnsureFront(ctx, spec); return err })
	return fr, err
}

func (f *boundedBalancer) InspectFront(ctx context.Context, name string) (fr *Front, err error) {
	err = f.b.call(ctx, f.b.t.Call, func(ctx context.Context) error { fr, err = f.inner.InspectFront(ctx, name); return err })
	return fr, err
}

func (f *boundedBalancer) RemoveFront(ctx context.Context, name string) error {
	return f.b.call(ctx, f.b.t.Call, func(ctx context.Context) error { return f.inner.RemoveFront(ctx, name) })
}

func (f *boundedBalancer) FrontHosts(ctx context.Context) (hosts []string, err error) {
	err = f.b.call(ctx, f.b.t.Call, func(ctx context.Context) error { hosts, err = f.inner.FrontHosts(ctx); return err })
	return hosts, err
}
