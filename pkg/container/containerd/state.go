package containerd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
)

// record is what the runtime keeps of a container beside containerd's own record: what
// containerd has no field for (networks, published ports, mounts, start and exit times).
type record struct {
	Name        string                  `json:"name"`
	Image       string                  `json:"image"`
	Hostname    string                  `json:"hostname"`
	Network     string                  `json:"network,omitempty"`
	Aliases     []string                `json:"aliases,omitempty"`
	IPv4Address string                  `json:"ipv4Address,omitempty"`
	Ports       []container.PortMapping `json:"ports,omitempty"`
	// Mounts are the container's binds, volumes and tmpfs with their host paths.
	Mounts        []hostMount `json:"mounts,omitempty"`
	StopSignal    string      `json:"stopSignal,omitempty"`
	RestartPolicy string      `json:"restartPolicy,omitempty"`
	// NetNS is the path of the container's network namespace, which outlives its tasks.
	NetNS string `json:"netns,omitempty"`
	// Attachments are the container's interfaces, in the order they were added.
	Attachments []attachment `json:"attachments,omitempty"`
	StartedAt   time.Time    `json:"startedAt,omitzero"`
	FinishedAt  time.Time    `json:"finishedAt,omitzero"`
	ExitCode    int          `json:"exitCode"`
}

// hostMount is a mount of the container with its source on the host: the bind's source, the
// volume's data directory (Volume names it; anonymous volumes have none), empty for a tmpfs.
type hostMount struct {
	Type     string `json:"type"`
	Volume   string `json:"volume,omitempty"`
	Host     string `json:"host,omitempty"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// attachment is an interface of a container on one network, with the CNI configuration it was
// added with (deleting it needs the same).
type attachment struct {
	Network string          `json:"network"`
	IfName  string          `json:"ifName"`
	IPv4    string          `json:"ipv4,omitempty"`
	IPv6    string          `json:"ipv6,omitempty"`
	Config  json.RawMessage `json:"config"`
	Primary bool            `json:"primary,omitempty"`
}

func (a *record) attachment(network string) *attachment {
	for i := range a.Attachments {
		if a.Attachments[i].Network == network {
			return &a.Attachments[i]
		}
	}
	return nil
}

func (r *Runtime) containerDir(name string) string {
	return filepath.Join(r.opts.StateDir, "containers", name)
}

func (r *Runtime) logPath(name string) string {
	return filepath.Join(r.containerDir(name), "output.log")
}

// loadRecord reads a container's record; ErrNotFound when there is none.
func (r *Runtime) loadRecord(name string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(r.containerDir(name), "record.json"))
	if err != nil {
		return nil, wrap(err, "reading the record of container %s", name)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, errors.Wrapf(err, "decoding the record of container %s", name)
	}
	return &rec, nil
}

// saveRecord replaces a container's record atomically.
func (r *Runtime) saveRecord(rec *record) error {
	dir := r.containerDir(rec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errors.Wrapf(err, "creating %s", dir)
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "encoding the record of container %s", rec.Name)
	}
	return fileutil.WriteAtomic(filepath.Join(dir, "record.json"), b, 0o600)
}

// listRecords reads every container record (those of removed containers are gone).
func (r *Runtime) listRecords() ([]*record, error) {
	entries, err := os.ReadDir(filepath.Join(r.opts.StateDir, "containers"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrap(err, "listing container records")
	}
	var out []*record
	for _, e := range entries {
		rec, err := r.loadRecord(e.Name())
		if err != nil {
			continue // being created or removed
		}
		out = append(out, rec)
	}
	return out, nil
}
