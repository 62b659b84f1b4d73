package container

import (
	"context"
	"io"
	"time"
)

// Timeouts bound how long one call to an engine may take, so a hung engine or node fails one
// reconcile with an error instead of holding a worker forever.
type Timeouts struct {
	// Call bounds the calls that only read or change the engine's records: create, start,
	// inspect, list, signal, remove, networks, volumes, logs, copies.
	Call time.Duration
	// Transfer bounds moving images: pulls, saves and loads, including reading the stream.
	Transfer time.Duration
}

// DefaultTimeouts are generous for two slow cores: an image of a gigabyte moves in a minute or
// two, commands in nodes finish in seconds.
var DefaultTimeouts = Timeouts{Call: time.Minute, Transfer: 15 * time.Minute}

// WithTimeouts returns rt with every call bounded by t. Events streams are not bounded: they end
// with their context or when the engine goes away. Neither are commands run in containers: how
// long one may take depends on what it is for, which only its caller knows, and Dockyard's one
// exec helper (docker/exec.go) gives each its deadline.
func WithTimeouts(rt Runtime, t Timeouts) Runtime {
	return &bounded{rt: rt, t: t}
}

type bounded struct {
	rt Runtime
	t  Timeouts
}

func (b *bounded) call(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(ctx)
}

// stream keeps a call's deadline until the stream it returned is closed.
func (b *bounded) stream(ctx context.Context, d time.Duration, f func(context.Context) (io.ReadCloser, error)) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	rc, err := f(ctx)
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
