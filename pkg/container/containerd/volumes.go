package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/continuity/fs"
	securejoin "github.com/cyphar/filepath-securejoin"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
)

// Volumes are the runtime's own, directories under StateDir/volumes with their labels beside.
// As Docker does, a volume still empty when a container mounts it is filled with what the
// container's image has at the mount's target.

type volumeRecord struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

func (r *Runtime) volumeDir(name string) string {
	return filepath.Join(r.opts.StateDir, "volumes", name)
}

func (r *Runtime) volumeData(name string) string { return filepath.Join(r.volumeDir(name), "_data") }

func validVolumeName(name string) error {
	if !validName.MatchString(name) {
		return errors.Errorf("invalid volume name %q", name)
	}
	return nil
}

// CreateVolume creates a named volume; one that exists is left as it is, as Docker does.
func (r *Runtime) CreateVolume(ctx context.Context, spec container.VolumeSpec) error {
	if err := validVolumeName(spec.Name); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(r.volumeDir(spec.Name), "volume.json")); err == nil {
		return nil
	}
	if err := os.MkdirAll(r.volumeData(spec.Name), 0o755); err != nil {
		return errors.Wrapf(err, "creating volume %s", spec.Name)
	}
	b, err := json.Marshal(volumeRecord{Name: spec.Name, Labels: spec.Labels})
	if err != nil {
		return errors.Wrapf(err, "encoding volume %s", spec.Name)
	}
	return fileutil.WriteAtomic(filepath.Join(r.volumeDir(spec.Name), "volume.json"), b, 0o600)
}

// ListVolumes returns the volumes carrying the labels.
func (r *Runtime) ListVolumes(ctx context.Context, labels map[string]string) ([]container.Volume, error) {
	entries, err := os.ReadDir(filepath.Join(r.opts.StateDir, "volumes"))
	if err != nil && !os.IsNotExist(err) {
		return nil, errors.Wrap(err, "listing volumes")
	}
	out := []container.Volume{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(r.volumeDir(e.Name()), "volume.json"))
		if err != nil {
			continue
		}
		var v volumeRecord
		if json.Unmarshal(b, &v) != nil || !container.MatchLabels(v.Labels, labels) {
			continue
		}
		out = append(out, container.Volume{Name: v.Name, Labels: v.Labels})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveVolume removes a volume no container uses.
func (r *Runtime) RemoveVolume(ctx context.Context, name string) error {
	if validVolumeName(name) != nil {
		return nil
	}
	if _, err := os.Stat(r.volumeDir(name)); os.IsNotExist(err) {
		return nil
	}
	recs, err := r.listRecords()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		for _, m := range rec.Mounts {
			if m.Volume == name {
				return errors.Errorf("removing volume %s: volume is in use by container %s", name, rec.Name)
			}
		}
	}
	return errors.Wrapf(os.RemoveAll(r.volumeDir(name)), "removing volume %s", name)
}

// resolveMounts checks and records a container's mounts and renders them for the OCI spec. A
// bind whose source is missing is left out when optional and an error naming it otherwise; a
// named volume that does not exist is created (as Docker does); an anonymous volume lives in
// the container's directory and goes with it.
func (r *Runtime) resolveMounts(spec container.ContainerSpec, rec *record) ([]specs.Mount, error) {
	var out []specs.Mount
	for i, m := range spec.Mounts {
		hm := hostMount{Type: string(m.Type), Target: filepath.Clean(m.Target), ReadOnly: m.ReadOnly}
		switch m.Type {
		case container.MountBind:
			if _, err := os.Stat(m.Source); err != nil {
				if m.Optional && os.IsNotExist(err) {
					continue
				}
				return nil, errors.Errorf("container %s: bind source path does not exist: %s", spec.Name, m.Source)
			}
			hm.Host = m.Source
		case container.MountVolume:
			if m.Source == "" {
				hm.Host = filepath.Join(r.containerDir(spec.Name), "volumes", fmt.Sprint(i))
				if err := os.MkdirAll(hm.Host, 0o755); err != nil {
					return nil, errors.Wrapf(err, "container %s: anonymous volume", spec.Name)
				}
				break
			}
			if err := r.CreateVolume(context.Background(), container.VolumeSpec{Name: m.Source}); err != nil {
				return nil, errors.Wrapf(err, "container %s", spec.Name)
			}
			hm.Volume, hm.Host = m.Source, r.volumeData(m.Source)
		case container.MountTmpfs:
		default:
			return nil, errors.Errorf("container %s: unknown mount type %q", spec.Name, m.Type)
		}
		rec.Mounts = append(rec.Mounts, hm)
		out = append(out, ociMount(hm))
	}
	return out, nil
}

func ociMount(m hostMount) specs.Mount {
	mode := "rw"
	if m.ReadOnly {
		mode = "ro"
	}
	if m.Type == string(container.MountTmpfs) {
		// Docker's options for a tmpfs the container spec asks for.
		return specs.Mount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: []string{"noexec", "nosuid", "nodev", "rprivate", mode}}
	}
	return specs.Mount{Destination: m.Target, Type: "bind", Source: m.Host, Options: []string{"rbind", "rprivate", mode}}
}

// fillVolumes copies the image's content at each volume's target into the volumes still empty.
func (r *Runtime) fillVolumes(ctx context.Context, name string, rec *record) error {
	var empty []hostMount
	for _, m := range rec.Mounts {
		if m.Type == string(container.MountVolume) && isEmptyDir(m.Host) {
			empty = append(empty, m)
		}
	}
	if len(empty) == 0 {
		return nil
	}
	return r.withRootfs(ctx, name, func(root string) error {
		for _, m := range empty {
			src, err := securejoin.SecureJoin(root, m.Target)
			if err != nil {
				return errors.Wrapf(err, "container %s: %s", name, m.Target)
			}
			if st, err := os.Stat(src); err != nil || !st.IsDir() {
				continue
			}
			if err := fs.CopyDir(m.Host, src); err != nil {
				return errors.Wrapf(err, "container %s: filling the volume at %s from the image", name, m.Target)
			}
		}
		return nil
	})
}

func isEmptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return errors.Is(err, io.EOF)
}

// withRootfs mounts a container's root filesystem snapshot on a temporary directory for f.
func (r *Runtime) withRootfs(ctx context.Context, name string, f func(root string) error) error {
	mounts, err := r.client.SnapshotService(Snapshotter).Mounts(ns(ctx), name)
	if err != nil {
		return wrap(err, "container %s: root filesystem", name)
	}
	dir, err := os.MkdirTemp(r.opts.RunDir, "rootfs-")
	if err != nil {
		return errors.Wrap(err, "creating a mount point")
	}
	defer os.Remove(dir)
	if err := mount.All(mounts, dir); err != nil {
		return errors.Wrapf(err, "container %s: mounting the root filesystem", name)
	}
	defer func() { _ = mount.UnmountAll(dir, 0) }()
	return f(dir)
}

// hostPath maps a path in a stopped container to the host: into the bind or volume mounted
// over it (the deepest), else into the mounted root filesystem. Tmpfs mounts hold nothing
// while the container is stopped; their paths map to the root filesystem under them.
func hostPath(rec *record, root, p string) (string, error) {
	p = filepath.Clean("/" + p)
	best := -1
	for i, m := range rec.Mounts {
		if m.Host == "" || (p != m.Target && !strings.HasPrefix(p, strings.TrimSuffix(m.Target, "/")+"/")) {
			continue
		}
		if best < 0 || len(m.Target) > len(rec.Mounts[best].Target) {
			best = i
		}
	}
	if best < 0 {
		return securejoin.SecureJoin(root, p)
	}
	rel := strings.TrimPrefix(p, rec.Mounts[best].Target)
	return securejoin.SecureJoin(rec.Mounts[best].Host, rel)
}
