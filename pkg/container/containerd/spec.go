package containerd

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// specOpts renders a container spec as OCI runtime spec options, after Docker's defaults:
// the image's configuration, then the spec's overrides, Docker's mounts (/etc files, cgroups),
// no "no new privileges", the daemon's resource limits, and the security and resources asked for.
func (r *Runtime) specOpts(ctx context.Context, spec container.ContainerSpec, rec *record, img client.Image, mounts []specs.Mount) ([]oci.SpecOpts, error) {
	args, err := processArgs(ctx, spec, img)
	if err != nil {
		return nil, err
	}
	opts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		// After the image's configuration: WithImageConfigArgs would keep the image's entrypoint.
		oci.WithProcessArgs(args...),
		oci.WithHostname(rec.Hostname),
		oci.WithEnv(spec.Env),
		withNoNewPrivileges(false),
		withInheritedRlimits,
		withMounts(append(r.defaultMounts(rec, spec.Security.Privileged), mounts...)),
	}
	if spec.Tty {
		opts = append(opts, oci.WithTTY)
	}
	if rec.NetNS != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: rec.NetNS}))
	} else {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace))
	}
	sec, err := securityOpts(spec.Security)
	if err != nil {
		return nil, errors.Wrapf(err, "container %s", spec.Name)
	}
	opts = append(opts, sec...)
	return append(opts, resourceOpts(spec.Resources)...), nil
}

// processArgs follows Docker: an entrypoint given replaces the image's entrypoint and command;
// a command given replaces only the image's command.
func processArgs(ctx context.Context, spec container.ContainerSpec, img client.Image) ([]string, error) {
	ic, err := img.Spec(ctx)
	if err != nil {
		return nil, errors.Wrapf(err, "reading the configuration of image %s", img.Name())
	}
	entrypoint, cmd := ic.Config.Entrypoint, ic.Config.Cmd
	if len(spec.Entrypoint) > 0 {
		entrypoint, cmd = spec.Entrypoint, nil
	}
	if len(spec.Cmd) > 0 {
		cmd = spec.Cmd
	}
	args := append(append([]string{}, entrypoint...), cmd...)
	if len(args) == 0 {
		return nil, errors.Errorf("container %s: no command: the image %s has none and the spec gives none", spec.Name, spec.Image)
	}
	return args, nil
}

func withNoNewPrivileges(on bool) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.NoNewPrivileges = on
		return nil
	}
}

// withInheritedRlimits drops containerd's default file limit (1024), so containers inherit the
// daemon's limits as Docker's do (hack/ensure-containerd.sh raises them before starting it).
func withInheritedRlimits(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	s.Process.Rlimits = nil
	return nil
}

// withMounts adds mounts, replacing any default mount at the same destination.
func withMounts(mounts []specs.Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		taken := map[string]bool{}
		for _, m := range mounts {
			taken[filepath.Clean(m.Destination)] = true
		}
		kept := s.Mounts[:0]
		for _, m := range s.Mounts {
			if !taken[filepath.Clean(m.Destination)] {
				kept = append(kept, m)
			}
		}
		s.Mounts = append(kept, mounts...)
		return nil
	}
}

// defaultMounts are the mounts Docker adds to every container beyond containerd's own (/proc,
// /dev, /dev/pts, /dev/shm, /dev/mqueue, /sys): the cgroup filesystem and the /etc files.
func (r *Runtime) defaultMounts(rec *record, privileged bool) []specs.Mount {
	cgroupMode := "ro"
	if privileged {
		cgroupMode = "rw"
	}
	dir := r.containerDir(rec.Name)
	bind := func(file, dst string) specs.Mount {
		return specs.Mount{Destination: dst, Type: "bind", Source: filepath.Join(dir, file), Options: []string{"rbind", "rprivate", "rw"}}
	}
	return []specs.Mount{
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", cgroupMode}},
		bind("hostname", "/etc/hostname"),
		bind("hosts", "/etc/hosts"),
		bind("resolv.conf", "/etc/resolv.conf"),
	}
}

// securityOpts maps the security spec as Docker does: privileged means every capability, every
// host device, writable /sys and cgroups and no confinement; otherwise capabilities are added
// and dropped ("ALL" allowed), device rules appended, and Unconfined lifts the masked and
// read-only paths (containerd applies no seccomp or AppArmor profile unless asked).
func securityOpts(sec container.SecuritySpec) ([]oci.SpecOpts, error) {
	var opts []oci.SpecOpts
	if sec.PrivateCgroupNamespace {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace}))
	}
	if sec.Privileged {
		return append(opts, oci.WithPrivileged, oci.WithHostDevices, oci.WithAllDevicesAllowed), nil
	}
	if sec.Unconfined {
		opts = append(opts, oci.WithMaskedPaths(nil), oci.WithReadonlyPaths(nil))
	}
	add, addAll := capNames(sec.CapAdd)
	drop, dropAll := capNames(sec.CapDrop)
	if dropAll {
		opts = append(opts, oci.WithCapabilities(nil))
	}
	if addAll {
		opts = append(opts, oci.WithAllCurrentCapabilities)
	}
	if len(add) > 0 {
		opts = append(opts, oci.WithAddedCapabilities(add))
	}
	if len(drop) > 0 {
		opts = append(opts, oci.WithDroppedCapabilities(drop))
	}
	rules, err := deviceRules(sec.DeviceCgroupRules)
	if err != nil {
		return nil, err
	}
	if len(rules) > 0 {
		opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			if s.Linux.Resources == nil {
				s.Linux.Resources = &specs.LinuxResources{}
			}
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, rules...)
			return nil
		})
	}
	return opts, nil
}

// capNames normalizes capability names to CAP_X and reports whether "ALL" was among them.
func capNames(in []string) ([]string, bool) {
	var out []string
	all := false
	for _, c := range in {
		c = strings.ToUpper(strings.TrimSpace(c))
		if c == "ALL" {
			all = true
			continue
		}
		if !strings.HasPrefix(c, "CAP_") {
			c = "CAP_" + c
		}
		out = append(out, c)
	}
	return out, all
}

// deviceRules parses Docker's device cgroup rules, "type major:minor access" with * wildcards.
func deviceRules(in []string) ([]specs.LinuxDeviceCgroup, error) {
	var out []specs.LinuxDeviceCgroup
	for _, rule := range in {
		f := strings.Fields(rule)
		if len(f) != 3 || !strings.Contains("abc", f[0]) || len(f[0]) != 1 {
			return nil, errors.Errorf("invalid device cgroup rule %q", rule)
		}
		majmin := strings.SplitN(f[1], ":", 2)
		if len(majmin) != 2 {
			return nil, errors.Errorf("invalid device cgroup rule %q", rule)
		}
		d := specs.LinuxDeviceCgroup{Allow: true, Type: f[0], Access: f[2]}
		for i, s := range majmin {
			if s == "*" {
				continue
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, errors.Errorf("invalid device cgroup rule %q", rule)
			}
			if i == 0 {
				d.Major = &n
			} else {
				d.Minor = &n
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// resourceOpts sets a CPU quota (over a 100ms period, as Docker does for --cpus), CPU shares
// and a memory limit.
func resourceOpts(res container.Resources) []oci.SpecOpts {
	var opts []oci.SpecOpts
	if res.NanoCPUs > 0 {
		const period = 100000
		opts = append(opts, oci.WithCPUCFS(res.NanoCPUs*period/1e9, period))
	}
	if res.CPUShares > 0 {
		opts = append(opts, oci.WithCPUShares(uint64(res.CPUShares)))
	}
	if res.MemoryBytes > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(res.MemoryBytes)))
	}
	return opts
}
