package conformance

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// The commands the suite runs in containers. The subject's image must have them (a shell with
// cat, printenv, hostname and sleep); the fake engine interprets exactly these.
var (
	cmdCat      = []string{"cat"}
	cmdStreams  = []string{"sh", "-c", "echo out; echo err >&2; exit 3"}
	cmdHostname = []string{"hostname"}
	cmdSleep    = []string{"sleep", "30"}
)

func cmdPrintenv(key string) []string { return []string{"printenv", key} }

func cmdCatFile(path string) []string { return []string{"cat", path} }

// cpuWeight reads a running container's CPU weight from its own cgroup (the container has a
// private cgroup namespace), and says what it should be for the given shares: the shares on
// cgroup v1, runc's conversion to cpu.weight on cgroup v2.
func cpuWeight(ctx context.Context, t *testing.T, rt container.Runtime, name string, shares int64) (got, want string) {
	t.Helper()
	if code, out := execOut(ctx, t, rt, name, cmdCatFile("/sys/fs/cgroup/cpu/cpu.shares"), nil); code == 0 {
		return strings.TrimSpace(out), strconv.FormatInt(shares, 10)
	}
	code, out := execOut(ctx, t, rt, name, cmdCatFile("/sys/fs/cgroup/cpu.weight"), nil)
	if code != 0 {
		t.Errorf("neither /sys/fs/cgroup/cpu/cpu.shares nor /sys/fs/cgroup/cpu.weight can be read in the container: exit %d %q", code, out)
	}
	return strings.TrimSpace(out), strconv.FormatInt(1+((shares-2)*9999)/262142, 10)
}

// Run runs every behaviour of the suite as a subtest, one after the other, but those the
// subject declares not applicable (logged with their reason). The caller removes what carries
// s.Labels before and after (a failed behaviour may leave objects behind).
func Run(t *testing.T, s Subject) {
	t.Helper()
	behaviours := []struct {
		name string
		run  func(*testing.T, Subject)
	}{
		{"Info", Info},
		{"Lifecycle", Lifecycle},
		{"HostPorts", HostPorts},
		{"Exec", Exec},
		{"DNSSearch", DNSSearch},
		{"Copy", Copy},
		{"OptionalBinds", OptionalBinds},
		{"MissingObjects", MissingObjects},
		{"Volumes", Volumes},
		{"LabelSelectors", LabelSelectors},
		{"Networks", Networks},
		{"NetworkAttachments", NetworkAttachments},
		{"FixedAddresses", FixedAddresses},
		{"DualStack", DualStack},
		{"Events", Events},
		{"Images", Images},
		{"Capabilities", Capabilities},
	}
	for name := range s.NotApplicable {
		if !slices.ContainsFunc(behaviours, func(b struct {
			name string
			run  func(*testing.T, Subject)
		}) bool {
			return b.name == name
		}) {
			t.Errorf("the subject declares %q not applicable, which is no behaviour of the suite", name)
		}
	}
	for _, b := range behaviours {
		if why, ok := s.NotApplicable[b.name]; ok {
			t.Logf("%s does not apply to this engine: %s", b.name, why)
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Cleanup(func() { Sweep(context.Background(), t, s.Runtime, s.Labels) })
			b.run(t, s)
		})
	}
}

// Sweep removes the containers, then the networks and volumes, carrying the labels.
func Sweep(ctx context.Context, t testing.TB, rt container.Runtime, labels map[string]string) {
	t.Helper()
	cs, err := rt.ListContainers(ctx, labels)
	if err != nil {
		t.Errorf("listing containers to sweep: %v", err)
	}
	for _, c := range cs {
		if err := rt.RemoveContainer(ctx, c.Name); err != nil {
			t.Errorf("sweeping container %s: %v", c.Name, err)
		}
	}
	ns, err := rt.ListNetworks(ctx, labels)
	if err != nil {
		t.Errorf("listing networks to sweep: %v", err)
	}
	for _, n := range ns {
		if err := rt.RemoveNetwork(ctx, n.Name); err != nil {
			t.Errorf("sweeping network %s: %v", n.Name, err)
		}
	}
	vs, err := rt.ListVolumes(ctx, labels)
	if err != nil {
		t.Errorf("listing volumes to sweep: %v", err)
	}
	for _, v := range vs {
		if err := rt.RemoveVolume(ctx, v.Name); err != nil {
			t.Errorf("sweeping volume %s: %v", v.Name, err)
		}
	}
}

// Info checks the engine describes itself: a name, a version, cgroup version 1 or 2, and its
// host: CPUs and memory above zero (what a node without limits gets, published for autoscaling
// from zero) and an architecture in Go's words.
func Info(t *testing.T, s Subject) {
	t.Helper()
	info, err := s.Runtime.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Name == "" || info.Version == "" {
		t.Errorf("engine info without name or version: %+v", info)
	}
	switch {
	case s.NoHostCgroups && info.CgroupVersion != "":
		t.Errorf("cgroup version %q of an engine that cannot see its hosts' cgroups", info.CgroupVersion)
	case !s.NoHostCgroups && info.CgroupVersion != "1" && info.CgroupVersion != "2":
		t.Errorf("cgroup version %q, want 1 or 2", info.CgroupVersion)
	}
	if info.CPUs <= 0 {
		t.Errorf("the engine reports %d CPUs of its host, want more than 0", info.CPUs)
	}
	if info.MemoryBytes <= 0 {
		t.Errorf("the engine reports %d bytes of memory of its host, want more than 0", info.MemoryBytes)
	}
	if info.Architecture == "" || info.Architecture != container.GoArch(info.Architecture) {
		t.Errorf("the engine reports architecture %q, want Go's name of it (amd64, arm64, ...)", info.Architecture)
	}
}

// create creates a long-running container of the subject's image from a spec that names the
// rest, failing the test on error.
func create(ctx context.Context, t *testing.T, s Subject, spec container.ContainerSpec) {
	t.Helper()
	spec.Image, spec.Entrypoint, spec.Cmd = s.Image, s.Entrypoint, s.Cmd
	if spec.Labels == nil {
		spec.Labels = s.Labels
	}
	if err := s.Runtime.CreateContainer(ctx, spec); err != nil {
		t.Fatalf("creating container %s: %v", spec.Name, err)
	}
}

// createVolume creates a labelled volume, so that it is swept (an engine creates a volume a
// container names on its own, without labels).
func createVolume(ctx context.Context, t *testing.T, s Subject, name string) {
	t.Helper()
	if err := s.Runtime.CreateVolume(ctx, container.VolumeSpec{Name: name, Labels: s.Labels}); err != nil {
		t.Fatal(err)
	}
}

func start(ctx context.Context, t *testing.T, rt container.Runtime, name string) {
	t.Helper()
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatalf("starting container %s: %v", name, err)
	}
}

func inspect(ctx context.Context, t *testing.T, rt container.Runtime, name string) *container.Container {
	t.Helper()
	c, err := rt.InspectContainer(ctx, name)
	if err != nil {
		t.Fatalf("inspecting container %s: %v", name, err)
	}
	return c
}

// execOut runs a command and returns its exit code and standard output; a failing call fails
// the test.
func execOut(ctx context.Context, t *testing.T, rt container.Runtime, name string, cmd []string, stdin io.Reader) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code, err := rt.Exec(ctx, name, container.ExecOptions{Cmd: cmd, Stdin: stdin, Stdout: &out, Stderr: io.Discard})
	if err != nil {
		t.Fatalf("exec %v in %s: %v", cmd, name, err)
	}
	return code, out.String()
}

// Lifecycle checks a container created with every option Dockyard uses: created but not
// running, then running with its hostname, environment, labels, image, address on its network
// and a published port on the host address asked for (the engine picking the port); a killed
// container is reported stopped and starts again; removal is idempotent and the container is
// gone.
func Lifecycle(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	network, name := s.Prefix+"-life-net", s.Prefix+"-life"
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: network, Labels: s.Labels}); err != nil {
		t.Fatal(err)
	}
	createVolume(ctx, t, s, name+"-var")
	labels := map[string]string{"conformance.dockyard.x-k8s.io/role": "lifecycle"}
	for k, v := range s.Labels {
		labels[k] = v
	}
	create(ctx, t, s, container.ContainerSpec{
		Name: name, Hostname: name + "-host", Env: []string{"CONFORMANCE=yes"}, Labels: labels,
		Network: network, NetworkAliases: []string{name + "-alias"},
		Ports: []container.PortMapping{{ContainerPort: 6443, Protocol: "tcp", HostIP: "127.0.0.1"}},
		Mounts: []container.Mount{
			{Type: container.MountVolume, Source: name + "-var", Target: "/var/conformance"},
			{Type: container.MountTmpfs, Target: "/run/conformance"},
			{Type: container.MountBind, Source: t.TempDir(), Target: "/mnt/host", ReadOnly: true},
		},
		StopSignal: "SIGTERM", RestartPolicy: "no",
		Security: container.SecuritySpec{
			CapAdd: []string{"NET_ADMIN"}, CapDrop: []string{"MKNOD"}, Unconfined: true, PrivateCgroupNamespace: true,
		},
		Resources: container.Resources{NanoCPUs: 500_000_000, MemoryBytes: 256 << 20, CPUShares: 512},
	})
	if c := inspect(ctx, t, rt, name); c.Running || c.State != "created" {
		t.Errorf("a created container is %q (running %v), want created", c.State, c.Running)
	}
	start(ctx, t, rt, name)

	c := inspect(ctx, t, rt, name)
	if !c.Running || c.State != "running" || c.StartedAt.IsZero() {
		t.Errorf("a started container: state %q running %v started %v", c.State, c.Running, c.StartedAt)
	}
	if c.Name != name || c.Hostname != name+"-host" || c.Image == "" || c.ID == "" {
		t.Errorf("inspect: name %q hostname %q image %q id %q", c.Name, c.Hostname, c.Image, c.ID)
	}
	if !container.MatchLabels(c.Labels, labels) {
		t.Errorf("labels %v, want %v", c.Labels, labels)
	}
	if c.Networks[network].IPv4 == "" {
		t.Errorf("no IPv4 address on %s: %v", network, c.Networks)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 6443 || c.Ports[0].HostIP != "127.0.0.1" || c.Ports[0].HostPort == 0 {
		t.Errorf("published ports %+v, want 6443 on 127.0.0.1 with a port the engine chose", c.Ports)
	}
	if code, out := execOut(ctx, t, rt, name, cmdPrintenv("CONFORMANCE"), nil); code != 0 || strings.TrimSpace(out) != "yes" {
		t.Errorf("printenv CONFORMANCE: exit %d output %q", code, out)
	}
	if code, out := execOut(ctx, t, rt, name, cmdHostname, nil); code != 0 || strings.TrimSpace(out) != name+"-host" {
		t.Errorf("hostname: exit %d output %q", code, out)
	}
	if got, want := cpuWeight(ctx, t, rt, name, 512); got != want {
		t.Errorf("CPU shares 512: the container's cgroup has %q, want %q", got, want)
	}

	if err := rt.SignalContainer(ctx, name, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	waitStopped(ctx, t, rt, name)
	if c := inspect(ctx, t, rt, name); c.State != "exited" {
		t.Errorf("a killed container is %q, want exited", c.State)
	}
	start(ctx, t, rt, name)
	if c := inspect(ctx, t, rt, name); !c.Running {
		t.Errorf("a container started again is %q", c.State)
	}

	for range 2 {
		if err := rt.RemoveContainer(ctx, name); err != nil {
			t.Fatalf("removing %s: %v", name, err)
		}
	}
	if _, err := rt.InspectContainer(ctx, name); !container.IsNotFound(err) {
		t.Errorf("inspecting a removed container: want ErrNotFound, got %v", err)
	}
}

// HostPorts checks fixed host ports: a container gets the host port it asks for, and a second
// one asking for the same port on the same address does not start (ErrPortInUse) but stays
// created, and starts once the port is free.
func HostPorts(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	network := s.Prefix + "-ports-net"
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: network, Labels: s.Labels}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	ports := []container.PortMapping{{ContainerPort: 8080, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: port}}
	first, second := s.Prefix+"-ports-1", s.Prefix+"-ports-2"
	for _, name := range []string{first, second} {
		create(ctx, t, s, container.ContainerSpec{Name: name, Hostname: name, Network: network, Ports: ports, RestartPolicy: "no"})
	}
	start(ctx, t, rt, first)
	if c := inspect(ctx, t, rt, first); len(c.Ports) != 1 || c.Ports[0].HostPort != port || c.Ports[0].HostIP != "127.0.0.1" {
		t.Errorf("published ports %+v, want 8080 on 127.0.0.1:%d", c.Ports, port)
	}
	err = rt.StartContainer(ctx, second)
	if !container.IsPortInUse(err) {
		t.Fatalf("starting a second container on host port %d: want ErrPortInUse, got %v", port, err)
	}
	if c := inspect(ctx, t, rt, second); c.Running {
		t.Errorf("the container refused its port is %q", c.State)
	}
	if err := rt.RemoveContainer(ctx, first); err != nil {
		t.Fatal(err)
	}
	start(ctx, t, rt, second)
	if c := inspect(ctx, t, rt, second); !c.Running || len(c.Ports) != 1 || c.Ports[0].HostPort != port {
		t.Errorf("once the port is free: state %q ports %+v", c.State, c.Ports)
	}
}

// Exec checks commands in a running container: stdin streamed to the command and closed at
// EOF, exact exit codes, standard output and error kept apart, or both in one writer when the
// caller gives the same one, and a call that ends with its context.
func Exec(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	name := s.Prefix + "-exec"
	create(ctx, t, s, container.ContainerSpec{Name: name})
	start(ctx, t, rt, name)

	input := strings.Repeat("a line that is fed through stdin\n", 4096) // 135 KiB
	if code, out := execOut(ctx, t, rt, name, cmdCat, strings.NewReader(input)); code != 0 || out != input {
		t.Errorf("cat of %d bytes of stdin: exit %d, %d bytes back", len(input), code, len(out))
	}

	var stdout, stderr bytes.Buffer
	code, err := rt.Exec(ctx, name, container.ExecOptions{Cmd: cmdStreams, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 3, %q, %q", code, stdout.String(), stderr.String(), "out\n", "err\n")
	}

	// A command that fails without reading its stdin (ctr import on a full disk) is reported by
	// its exit code and stderr, at once: not as a broken stream after the write times out.
	unread, cancelUnread := context.WithTimeout(ctx, 30*time.Second)
	defer cancelUnread()
	stdout.Reset()
	stderr.Reset()
	code, err = rt.Exec(unread, name, container.ExecOptions{
		Cmd: cmdStreams, Stdin: bytes.NewReader(make([]byte, 32<<20)), Stdout: &stdout, Stderr: &stderr,
	})
	if wholeStderr := stderr.String() == "err\n" || s.CutsUnreadStdinOutput; err != nil || code != 3 || !wholeStderr {
		t.Errorf("a command exiting 3 without reading 32 MiB of stdin: exit %d, stderr %q, error %v; want 3, %q, none", code, stderr.String(), err, "err\n")
	}

	var both bytes.Buffer
	if _, err := rt.Exec(ctx, name, container.ExecOptions{Cmd: cmdStreams, Stdout: &both, Stderr: &both}); err != nil {
		t.Fatal(err)
	}
	if got := both.String(); !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") || len(got) != 8 {
		t.Errorf("one writer for both streams got %q, want both lines", got)
	}

	deadline, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	began := time.Now()
	if _, err := rt.Exec(deadline, name, container.ExecOptions{Cmd: cmdSleep}); err == nil {
		t.Error("a command outliving its context's deadline returned no error")
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("a call with a 2s deadline returned after %s", took)
	}
}

// DNSSearch: a container's /etc/resolv.conf searches the domains its spec names, and none when
// the spec names an empty list.
func DNSSearch(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	search := func(name string, list []string) []string {
		create(ctx, t, s, container.ContainerSpec{Name: name, DNSSearch: &list})
		start(ctx, t, rt, name)
		code, out := execOut(ctx, t, rt, name, cmdCatFile("/etc/resolv.conf"), nil)
		if code != 0 {
			t.Fatalf("cat /etc/resolv.conf in %s: exit %d: %s", name, code, out)
		}
		var got []string
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) > 0 && (f[0] == "search" || f[0] == "domain") {
				got = append(got, f[1:]...)
			}
		}
		return got
	}
	if got := search(s.Prefix+"-dns-search", []string{"a.example", "b.example"}); !slices.Equal(got, []string{"a.example", "b.example"}) {
		t.Errorf("search list %q, want a.example b.example", got)
	}
	if got := search(s.Prefix+"-dns-nosearch", []string{}); len(got) != 0 {
		t.Errorf("search list %q, want none", got)
	}
}

// tarOf is a tar stream of files (name → content).
func tarOf(t *testing.T, files map[string]string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// readCopied reads one file back with CopyFromContainer: a tar stream whose entry is the file.
func readCopied(ctx context.Context, t *testing.T, rt container.Runtime, name, path string) string {
	t.Helper()
	rc, err := rt.CopyFromContainer(ctx, name, path)
	if err != nil {
		t.Fatalf("copying %s from %s: %v", path, name, err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("reading the tar stream of %s from %s: %v", path, name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}

// Copy checks CopyToContainer and CopyFromContainer: files land in a created (never started)
// container, into its image's tree and into a volume it mounts, and a running container's
// commands see them; copying a file out returns it; a missing path is ErrNotFound.
func Copy(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	name := s.Prefix + "-copy"
	createVolume(ctx, t, s, name+"-vol")
	create(ctx, t, s, container.ContainerSpec{Name: name, Mounts: []container.Mount{
		{Type: container.MountVolume, Source: name + "-vol", Target: "/var/lib/conformance"},
	}})
	if err := rt.CopyToContainer(ctx, name, "/etc", tarOf(t, map[string]string{"before-start": "copied before start\n"})); err != nil {
		t.Fatalf("copying into a created container: %v", err)
	}
	if err := rt.CopyToContainer(ctx, name, "/var/lib/conformance", tarOf(t, map[string]string{"in-volume": "in a volume\n"})); err != nil {
		t.Fatalf("copying into a created container's volume: %v", err)
	}
	start(ctx, t, rt, name)
	if err := rt.CopyToContainer(ctx, name, "/etc", tarOf(t, map[string]string{"after-start": "copied while running\n"})); err != nil {
		t.Fatalf("copying into a running container: %v", err)
	}
	for path, want := range map[string]string{
		"/etc/before-start": "copied before start\n", "/var/lib/conformance/in-volume": "in a volume\n", "/etc/after-start": "copied while running\n",
	} {
		if code, out := execOut(ctx, t, rt, name, cmdCatFile(path), nil); code != 0 || out != want {
			t.Errorf("cat %s in the container: exit %d, %q; want %q", path, code, out, want)
		}
		if got := readCopied(ctx, t, rt, name, path); got != want {
			t.Errorf("copying %s out: %q, want %q", path, got, want)
		}
	}
	if _, err := rt.CopyFromContainer(ctx, name, "/etc/not-there"); !container.IsNotFound(err) {
		t.Errorf("copying a missing path out: want ErrNotFound, got %v", err)
	}
}

// OptionalBinds checks bind mounts whose source is missing on the engine's host: an optional
// one is left out and the container runs; a required one keeps the container from running.
func OptionalBinds(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	missing := t.TempDir() + "/not-there"
	optional, required := s.Prefix+"-bind-opt", s.Prefix+"-bind-req"
	create(ctx, t, s, container.ContainerSpec{Name: optional, Mounts: []container.Mount{
		{Type: container.MountBind, Source: missing, Target: "/mnt/optional", ReadOnly: true, Optional: true},
	}})
	start(ctx, t, rt, optional)
	if c := inspect(ctx, t, rt, optional); !c.Running {
		t.Errorf("a container with a missing optional bind is %q", c.State)
	}

	spec := container.ContainerSpec{Name: required, Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Cmd, Labels: s.Labels,
		Mounts: []container.Mount{{Type: container.MountBind, Source: missing, Target: "/mnt/required", ReadOnly: true}}}
	err := rt.CreateContainer(ctx, spec)
	if err == nil {
		err = rt.StartContainer(ctx, required)
	}
	if err == nil {
		t.Fatalf("a container whose required bind source %s is missing started", missing)
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("the error does not name the missing source %s: %v", missing, err)
	}
	if _, statErr := rt.InspectContainer(ctx, required); statErr == nil {
		if c := inspect(ctx, t, rt, required); c.Running {
			t.Error("the container with a missing required bind runs")
		}
	}
}

// MissingObjects checks that what names a missing container, network or image is ErrNotFound,
// and that removing a missing object is not an error.
func MissingObjects(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	name, network, image := s.Prefix+"-missing", s.Prefix+"-missing-net", "localhost/dockyard/conformance-missing:none"
	for what, err := range map[string]error{
		"InspectContainer": func() error { _, err := rt.InspectContainer(ctx, name); return err }(),
		"StartContainer":   rt.StartContainer(ctx, name),
		"SignalContainer":  rt.SignalContainer(ctx, name, "SIGHUP"),
		"Exec":             func() error { _, err := rt.Exec(ctx, name, container.ExecOptions{Cmd: cmdHostname}); return err }(),
		"CopyToContainer":  rt.CopyToContainer(ctx, name, "/", tarOf(t, map[string]string{"f": "x"})),
		"CopyFromContainer": func() error {
			rc, err := rt.CopyFromContainer(ctx, name, "/etc/hostname")
			if rc != nil {
				_ = rc.Close()
			}
			return err
		}(),
		"ContainerLogs":  func() error { _, err := rt.ContainerLogs(ctx, name, 10); return err }(),
		"InspectNetwork": func() error { _, err := rt.InspectNetwork(ctx, network); return err }(),
		"InspectImage":   func() error { _, err := rt.InspectImage(ctx, image); return err }(),
	} {
		if !container.IsNotFound(err) {
			t.Errorf("%s of a missing object: want ErrNotFound, got %v", what, err)
		}
	}
	if ok, err := rt.ImageExists(ctx, image); ok || err != nil {
		t.Errorf("ImageExists of a missing image: %v, %v", ok, err)
	}
	spec := container.ContainerSpec{Name: name, Image: image, Labels: s.Labels}
	if err := rt.CreateContainer(ctx, spec); !s.PullsWhereRun && !container.IsNotFound(err) {
		t.Errorf("creating a container of a missing image: want ErrNotFound, got %v", err)
	}
	if s.PullsWhereRun {
		if err := rt.RemoveContainer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	// Docker checks the network when the container starts, Podman when it is created.
	spec.Image, spec.Network = s.Image, network
	err := rt.CreateContainer(ctx, spec)
	if err == nil {
		err = rt.StartContainer(ctx, name)
	}
	if !container.IsNotFound(err) {
		t.Errorf("a container on a missing network: want ErrNotFound when it is created or started, got %v", err)
	}
	for what, err := range map[string]error{
		"RemoveContainer": rt.RemoveContainer(ctx, name),
		"RemoveNetwork":   rt.RemoveNetwork(ctx, network),
		"RemoveVolume":    rt.RemoveVolume(ctx, name),
		"RemoveImage":     rt.RemoveImage(ctx, image),
	} {
		if err != nil {
			t.Errorf("%s of a missing object: %v", what, err)
		}
	}
}

// Volumes checks named volumes: labels kept, a volume in use by a container cannot be
// removed, removal is idempotent.
func Volumes(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	vol, name := s.Prefix+"-vol", s.Prefix+"-vol-user"
	if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: vol, Labels: s.Labels}); err != nil {
		t.Fatal(err)
	}
	vs, err := rt.ListVolumes(ctx, s.Labels)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(vs, func(v container.Volume) bool { return v.Name == vol }); i < 0 || !container.MatchLabels(vs[i].Labels, s.Labels) {
		t.Errorf("volumes with the labels %v: %+v, want %s with them", s.Labels, vs, vol)
	}
	create(ctx, t, s, container.ContainerSpec{Name: name, Mounts: []container.Mount{{Type: container.MountVolume, Source: vol, Target: "/data"}}})
	if err := rt.RemoveVolume(ctx, vol); err == nil {
		t.Error("a volume a container mounts was removed")
	}
	if err := rt.RemoveContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := rt.RemoveVolume(ctx, vol); err != nil {
			t.Fatalf("removing %s: %v", vol, err)
		}
	}
	vs, err = rt.ListVolumes(ctx, s.Labels)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(vs, func(v container.Volume) bool { return v.Name == vol }) {
		t.Errorf("volume %s is still listed after its removal", vol)
	}
}

// LabelSelectors checks that lists match every label of a selector (not any one of them) and
// that an empty value matches any value of its key, for containers, networks and volumes.
func LabelSelectors(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	const key, other = "conformance.dockyard.x-k8s.io/member", "conformance.dockyard.x-k8s.io/other"
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range s.Labels {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	objects := map[string]map[string]string{
		s.Prefix + "-sel-a": with(map[string]string{key: "a"}),
		s.Prefix + "-sel-b": with(map[string]string{key: "b", other: "x"}),
		s.Prefix + "-sel-c": with(nil),
	}
	for n, labels := range objects {
		create(ctx, t, s, container.ContainerSpec{Name: n, Labels: labels})
		if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: n, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: n, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		selector map[string]string
		want     []string
	}{
		{with(map[string]string{key: "a"}), []string{s.Prefix + "-sel-a"}},
		{with(map[string]string{key: ""}), []string{s.Prefix + "-sel-a", s.Prefix + "-sel-b"}},
		{with(map[string]string{key: "b", other: "x"}), []string{s.Prefix + "-sel-b"}},
		{with(map[string]string{key: "a", other: "x"}), nil},
		{with(nil), []string{s.Prefix + "-sel-a", s.Prefix + "-sel-b", s.Prefix + "-sel-c"}},
	} {
		cs, err := rt.ListContainers(ctx, c.selector)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := rt.ListNetworks(ctx, c.selector)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := rt.ListVolumes(ctx, c.selector)
		if err != nil {
			t.Fatal(err)
		}
		for kind, got := range map[string][]string{
			"containers": namesOf(cs, func(c container.Container) string { return c.Name }),
			"networks":   namesOf(ns, func(n container.Network) string { return n.Name }),
			"volumes":    namesOf(vs, func(v container.Volume) string { return v.Name }),
		} {
			if !slices.Equal(got, c.want) {
				t.Errorf("%s matching %v: %v, want %v", kind, c.selector, got, c.want)
			}
		}
	}
}

func namesOf[T any](items []T, name func(T) string) []string {
	var out []string
	for _, it := range items {
		out = append(out, name(it))
	}
	slices.Sort(out)
	return out
}

// Networks checks bridge networks: created with labels, inspected with a subnet, a gateway and
// the bridge's interface on the host, listed by label, removed idempotently, then ErrNotFound.
func Networks(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	name := s.Prefix + "-network"
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: name, Labels: s.Labels}); err != nil {
		t.Fatal(err)
	}
	n, err := rt.InspectNetwork(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != name || n.ID == "" || len(n.Subnets) == 0 || len(n.Gateways) == 0 || n.Interface == "" || !container.MatchLabels(n.Labels, s.Labels) {
		t.Errorf("inspected network: %+v", n)
	}
	ns, err := rt.ListNetworks(ctx, s.Labels)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ns, func(x container.Network) bool { return x.Name == name && x.Interface == n.Interface }) {
		t.Errorf("networks with the labels %v: %+v, want %s with its interface %s", s.Labels, ns, name, n.Interface)
	}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: name, Labels: s.Labels}); err == nil {
		t.Error("a second network of the same name was created")
	}
	for range 2 {
		if err := rt.RemoveNetwork(ctx, name); err != nil {
			t.Fatalf("removing %s: %v", name, err)
		}
	}
	if _, err := rt.InspectNetwork(ctx, name); !container.IsNotFound(err) {
		t.Errorf("inspecting a removed network: want ErrNotFound, got %v", err)
	}
}

// Images checks images go in and out as docker-save tar streams: an image loaded keeps its
// name, configuration digest (its ID) and labels; saving and loading again changes nothing; an
// image a container uses cannot be removed, an unused one can, and removing it again is not an
// error.
func Images(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	ref := "localhost/dockyard/conformance:" + strings.ToLower(strings.ReplaceAll(s.Prefix, "/", "-"))
	img, err := testImage(s.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	wantID, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := tarball.Write(tag, img, &archive); err != nil {
		t.Fatal(err)
	}
	if err := rt.LoadImages(ctx, &archive); err != nil {
		t.Fatalf("loading a docker-save archive: %v", err)
	}
	t.Cleanup(func() { _ = rt.RemoveImage(context.Background(), ref) })
	requireImage(ctx, t, rt, ref, wantID.String(), map[string]string{"conformance.dockyard.x-k8s.io/prefix": s.Prefix})

	saved, err := rt.SaveImages(ctx, []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(saved)
	_ = saved.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.LoadImages(ctx, bytes.NewReader(b)); err != nil {
		t.Fatalf("loading what SaveImages returned: %v", err)
	}
	requireImage(ctx, t, rt, ref, wantID.String(), nil)

	user := s.Prefix + "-image-user"
	if err := rt.CreateContainer(ctx, container.ContainerSpec{Name: user, Image: ref, Entrypoint: []string{"/conformance"}, Labels: s.Labels}); err != nil {
		t.Fatalf("creating a container of the loaded image: %v", err)
	}
	if err := rt.RemoveImage(ctx, ref); err == nil {
		t.Error("an image a container uses was removed")
	}
	if err := rt.RemoveContainer(ctx, user); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := rt.RemoveImage(ctx, ref); err != nil {
			t.Fatalf("removing %s: %v", ref, err)
		}
	}
	if ok, err := rt.ImageExists(ctx, ref); ok || err != nil {
		t.Errorf("a removed image exists: %v, %v", ok, err)
	}
}

func requireImage(ctx context.Context, t *testing.T, rt container.Runtime, ref, id string, labels map[string]string) {
	t.Helper()
	if ok, err := rt.ImageExists(ctx, ref); !ok || err != nil {
		t.Fatalf("image %s exists: %v, %v", ref, ok, err)
	}
	got, err := rt.InspectImage(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id {
		t.Errorf("image %s has ID %s, want its configuration digest %s", ref, got.ID, id)
	}
	if !container.MatchLabels(got.Labels, labels) {
		t.Errorf("image %s has labels %v, want %v", ref, got.Labels, labels)
	}
}

// testImage is a small image of one layer holding one file, labelled with the prefix.
func testImage(prefix string) (v1.Image, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	content := []byte("conformance " + prefix + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: "conformance.txt", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Labels = map[string]string{"conformance.dockyard.x-k8s.io/prefix": prefix}
	return mutate.ConfigFile(img, cfg)
}
