package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

// Kubeconfig is the path of the administrator's kubeconfig (user in system:masters).
func (p *ManagementPlane) Kubeconfig() string { return p.kubeconfig }

// RESTConfig connects to the API server as the administrator.
func (p *ManagementPlane) RESTConfig() *rest.Config { return rest.CopyConfig(p.restConfig) }

// Client is a direct (uncached) client with Kubernetes', Cluster API's and Dockyard's kinds.
func (p *ManagementPlane) Client() client.Client { return p.client }

// WorkDir holds everything the plane wrote.
func (p *ManagementPlane) WorkDir() string { return p.workDir }

// LogDir holds one <process name>.log per process.
func (p *ManagementPlane) LogDir() string { return filepath.Join(p.workDir, "logs") }

// LogPath is the log file of a process (Etcd, ClusterAPICore, DockyardManager...).
func (p *ManagementPlane) LogPath(name string) string {
	return filepath.Join(p.LogDir(), name+".log")
}

// Binaries are the commands the plane runs, and clusterctl.
func (p *ManagementPlane) Binaries() Binaries { return p.binaries }

// PID returns the process ID of a running process of the plane, 0 when it is not running.
func (p *ManagementPlane) PID(name string) int {
	if proc := p.process(name); proc != nil && proc.running() {
		return proc.pid()
	}
	return 0
}

// ResidentMemory returns the resident memory (VmRSS) of a running process of the plane in bytes,
// 0 when it is not running or unknown.
func (p *ManagementPlane) ResidentMemory(name string) int64 {
	if proc := p.process(name); proc != nil {
		return proc.rss()
	}
	return 0
}

// KeepWorkDir makes Stop leave the work directory (logs, kubeconfig, etcd data) in place, e.g.
// when a test failed.
func (p *ManagementPlane) KeepWorkDir() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keep = true
}

func (p *ManagementPlane) pkiDir() string { return filepath.Join(p.workDir, "pki") }

func (p *ManagementPlane) process(name string) *process {
	for _, proc := range p.procs {
		if proc.name == name {
			return proc
		}
	}
	return nil
}

// connect builds the client from the kubeconfig.
func (p *ManagementPlane) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		return errors.Wrap(err, "reading the kubeconfig")
	}
	cfg.QPS, cfg.Burst = 100, 200
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return errors.Wrap(err, "creating the client")
	}
	p.restConfig, p.client = cfg, c
	return nil
}

// CheckHealth probes every process again: running, and serving its health endpoint and
// webhook port.
func (p *ManagementPlane) CheckHealth(ctx context.Context) error {
	var errs []error
	for _, proc := range p.procs {
		if !proc.running() {
			errs = append(errs, errors.Errorf("%s %s; last lines of its log:\n%s", proc.name, proc.state(), indent(tailFile(proc.logPath, 20))))
			continue
		}
		probeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := proc.ready(probeCtx)
		cancel()
		if err != nil {
			errs = append(errs, errors.Wrapf(err, "%s (pid %d)", proc.name, proc.pid()))
		}
	}
	return kerrors.NewAggregate(errs)
}

// StopDockyard stops Dockyard's manager gracefully (SIGTERM, SIGKILL after 40s) and waits for
// it to exit. The rest of the plane keeps running; Dockyard's webhooks fail meanwhile, as they
// would in a real cluster.
func (p *ManagementPlane) StopDockyard(ctx context.Context) error {
	proc := p.process(DockyardManager)
	pid := proc.pid()
	if err := proc.stop(ctx); err != nil {
		return err
	}
	logf(p.opts.Log, "stopped %s (pid %d): %s", proc.name, pid, proc.state())
	return nil
}

// KillDockyard kills Dockyard's manager with SIGKILL, as a crash would, and waits for it to exit.
func (p *ManagementPlane) KillDockyard() error {
	proc := p.process(DockyardManager)
	pid := proc.pid()
	if err := proc.kill(); err != nil {
		return err
	}
	logf(p.opts.Log, "killed %s (pid %d)", proc.name, pid)
	return nil
}

// StartDockyard starts Dockyard's manager again, with the same flags and ports, and waits until
// it is ready. Its log continues in the same file after a marker line.
func (p *ManagementPlane) StartDockyard(ctx context.Context) error {
	return p.startAndWait(ctx, p.process(DockyardManager))
}

// RestartDockyard stops Dockyard's manager gracefully and starts it again.
func (p *ManagementPlane) RestartDockyard(ctx context.Context) error {
	if err := p.StopDockyard(ctx); err != nil {
		return err
	}
	return p.StartDockyard(ctx)
}

// Stop stops every process Start started, in reverse order, by PID, and waits for each to
// exit; then removes the work directory unless it was given in Options or kept (KeepWorkDir).
// Calling Stop again does nothing.
func (p *ManagementPlane) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	keep := p.keep
	p.mu.Unlock()

	var errs []error
	// Controllers first, so none sees the API server vanish mid-reconcile; they stop in parallel.
	var controllers, core []*process
	for _, proc := range p.procs {
		if proc.name == Etcd || proc.name == KubeAPIServer {
			core = append(core, proc)
		} else {
			controllers = append(controllers, proc)
		}
	}
	stopAll := func(procs []*process) {
		results := make(chan error, len(procs))
		for _, proc := range procs {
			go func() {
				begin, pid := time.Now(), proc.pid()
				err := proc.stop(ctx)
				if pid != 0 {
					logf(p.opts.Log, "stopped %s (pid %d) in %s: %s", proc.name, pid, time.Since(begin).Round(time.Millisecond), proc.state())
				}
				results <- err
			}()
		}
		for range procs {
			if err := <-results; err != nil {
				errs = append(errs, err)
			}
		}
	}
	stopAll(controllers)
	for i := len(core) - 1; i >= 0; i-- {
		stopAll(core[i : i+1])
	}
	if p.ownsWorkDir && !keep {
		if err := os.RemoveAll(p.workDir); err != nil {
			errs = append(errs, errors.Wrap(err, "removing the work directory"))
		}
	} else {
		logf(p.opts.Log, "kept the management plane's work directory %s", p.workDir)
	}
	return kerrors.NewAggregate(errs)
}

// probe GETs a URL and expects 200, and the body to contain want when set.
func (p *ManagementPlane) probe(ctx context.Context, c *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return errors.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	if want != "" && !strings.Contains(string(body), want) {
		return errors.Errorf("GET %s: %q does not contain %q", url, body, want)
	}
	return nil
}

// probeTLS checks that a webhook server answers TLS on loopback with a certificate of the
// plane's CA.
func (p *ManagementPlane) probeTLS(ctx context.Context, port int) error {
	transport := p.tlsClient.Transport.(*http.Transport)
	d := &tls.Dialer{Config: transport.TLSClientConfig.Clone()}
	conn, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return errors.Wrapf(err, "webhook server on 127.0.0.1:%d", port)
	}
	return conn.Close()
}

// freePorts returns n distinct ports free on every interface (webhook servers cannot be bound
// to loopback only), picked at random below the kernel's ephemeral range: every outgoing
// connection takes its local port from that range, and one did take a picked port before its
// process bound it. Another plane starting at the same time may still pick the same port; the
// process then fails with "address already in use" (errPortTaken) and Start starts again.
func freePorts(n int) ([]int, error) {
	lo, hi := pickRange()
	seen := map[int]bool{}
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, errors.Errorf("finding %d free ports between %d and %d: only %d found", n, lo, hi, len(ports))
		}
		port := lo + rand.IntN(hi-lo+1) //nolint:gosec // a port, not a secret
		if seen[port] {
			continue
		}
		seen[port] = true
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue // in use
		}
		listeners = append(listeners, l) // held until all are picked
		ports = append(ports, port)
	}
	return ports, nil
}

// pickRange is where freePorts picks: from 10000 to just below the kernel's ephemeral range
// (32768 to 60999 by default), or above it when it starts too low.
func pickRange() (lo, hi int) {
	lo, hi = 10000, 32767
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	var eLo, eHi int
	if _, err := fmt.Sscan(string(raw), &eLo, &eHi); err != nil {
		return lo, hi
	}
	switch {
	case eLo-1 >= lo+1000:
		return lo, eLo - 1
	case eHi+1 <= 65535-1000:
		return eHi + 1, 65535
	}
	return lo, hi
}
