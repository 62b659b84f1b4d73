package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
	"github.com/pkg/errors"
	"golang.org/x/sys/unix"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Defaults of New's endpoint and Options.
const (
	DefaultEndpoint  = "/run/dockyard-containerd/containerd.sock"
	DefaultStateDir  = "/var/lib/dockyard-containerd/dockyard"
	DefaultCNIBinDir = "/usr/lib/cni"
	DefaultRunDir    = "/run/dockyard-containerd/dockyard"
	// Namespace is the containerd namespace holding everything Dockyard creates.
	Namespace = "dockyard"
	// Snapshotter unpacks images and holds containers' root filesystems.
	Snapshotter = "overlayfs"
	runcRuntime = "io.containerd.runc.v2"
)

// Options configure a Runtime. Zero values take the defaults above.
type Options struct {
	// StateDir holds what containerd does not know of: networks, volumes, container logs and
	// the runtime's per-container records. It must be on a real filesystem that survives
	// reboots of the engine.
	StateDir string
	// RunDir holds network namespaces and exec FIFOs; it may be a tmpfs.
	RunDir string
	// CNIBinDir holds the CNI plugins (bridge, host-local, portmap, firewall, loopback).
	CNIBinDir string
}

// Runtime is a container.Runtime backed by a containerd daemon and CNI plugins.
type Runtime struct {
	client *client.Client
	opts   Options
	cni    *libcni.CNIConfig
	// mu and lockFile serialize changes to the runtime's own records (containers' networks,
	// networks and their address pools): mu within this process, an exclusive flock on
	// lockFile between the processes sharing StateDir (the manager, tools, test binaries).
	mu       sync.Mutex
	lockFile *os.File
}

var _ container.Runtime = &Runtime{}

// New connects to the containerd daemon at endpoint (a unix socket path; empty means
// DefaultEndpoint) and prepares the runtime's directories.
func New(endpoint string, opts Options) (*Runtime, error) {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	endpoint = strings.TrimPrefix(endpoint, "unix://")
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.RunDir == "" {
		opts.RunDir = DefaultRunDir
	}
	if opts.CNIBinDir == "" {
		opts.CNIBinDir = DefaultCNIBinDir
	}
	for _, d := range []string{opts.StateDir, opts.RunDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, errors.Wrapf(err, "creating %s", d)
		}
	}
	lockFile, err := os.OpenFile(filepath.Join(opts.StateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, errors.Wrap(err, "opening the runtime's lock file")
	}
	c, err := client.New(endpoint, client.WithDefaultNamespace(Namespace))
	if err != nil {
		lockFile.Close()
		return nil, errors.Wrapf(err, "connecting to containerd at %s", endpoint)
	}
	r := &Runtime{
		client:   c,
		lockFile: lockFile,
		opts:     opts,
		cni:      libcni.NewCNIConfigWithCacheDir([]string{opts.CNIBinDir}, filepath.Join(opts.StateDir, "cni-cache"), nil),
	}
	return r, nil
}

// Close releases the client's connection.
func (r *Runtime) Close() error {
	r.lockFile.Close()
	return r.client.Close()
}

// lock takes the runtime's lock over its records and returns the function releasing it.
func (r *Runtime) lock() func() {
	r.mu.Lock()
	// flock only fails on a bad descriptor; the process-wide mutex still holds then.
	_ = unix.Flock(int(r.lockFile.Fd()), unix.LOCK_EX)
	return func() {
		_ = unix.Flock(int(r.lockFile.Fd()), unix.LOCK_UN)
		r.mu.Unlock()
	}
}

// ns puts the runtime's namespace on a context.
func ns(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, Namespace)
}

// wrap adds context to an engine error and marks "not found" errors with container.ErrNotFound.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	if cerrdefs.IsNotFound(err) || errors.Is(err, os.ErrNotExist) {
		return errors.Wrapf(container.ErrNotFound, "%s: %v", msg, err)
	}
	return errors.Wrap(err, msg)
}

// notFound is container.ErrNotFound naming what is missing.
func notFound(format string, args ...any) error {
	return errors.Wrapf(container.ErrNotFound, format, args...)
}

// Info describes the engine.
func (r *Runtime) Info(ctx context.Context) (container.EngineInfo, error) {
	v, err := r.client.Version(ns(ctx))
	if err != nil {
		return container.EngineInfo{}, wrap(err, "reading containerd's version")
	}
	memTotal, err := hostMemory()
	if err != nil {
		return container.EngineInfo{}, err
	}
	return container.EngineInfo{
		Name:            "containerd",
		Version:         v.Version,
		CgroupVersion:   cgroupVersion(),
		CgroupDriver:    "cgroupfs",
		OperatingSystem: operatingSystem(),
		CPUs:            goruntime.NumCPU(),
		MemoryBytes:     memTotal,
		Architecture:    goruntime.GOARCH,
	}, nil
}

// hostMemory reads MemTotal from the host's /proc/meminfo (containerd runs on the same host):
// the number a node's kubelet reads too.
func hostMemory() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, errors.Wrap(err, "reading the host's memory")
	}
	return parseMemTotal(string(b))
}

// parseMemTotal returns the bytes of the MemTotal line of /proc/meminfo ("MemTotal: 8048128 kB").
func parseMemTotal(meminfo string) (int64, error) {
	for _, l := range strings.Split(meminfo, "\n") {
		v, ok := strings.CutPrefix(l, "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, errors.Errorf("unexpected MemTotal line %q in /proc/meminfo", l)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 {
			return 0, errors.Errorf("unexpected MemTotal line %q in /proc/meminfo", l)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("no MemTotal line in /proc/meminfo")
}

// cgroupVersion reads the host's cgroup layout (containerd runs on the same host).
func cgroupVersion() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "2"
	}
	return "1"
}

func operatingSystem() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "linux"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "linux"
}

// Zones is none: the engine's containers run on one host.
func (r *Runtime) Zones(context.Context) ([]string, error) { return nil, nil }

// Balancer is nil: the engine does not balance traffic over its containers itself.
func (r *Runtime) Balancer() container.Balancer { return nil }
