package docker

import (
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// AllowedContainer checks a container spec the node layer did not render this time, one an
// engine makes again by itself (a Kubernetes engine, from the spec an ended Pod kept, which
// whoever may edit the Pod may have changed), as AddNode checks a node: its image against the
// policy, each bind mount's host path (but a node's own read-only, optional /lib/modules),
// each published port's host address and port, and privilege, refused where the manager never
// runs nodes privileged (--node-privileged=never). A refusal is a *policy.RefusedError; without
// a policy, only privilege is checked.
func (m *Manager) AllowedContainer(spec container.ContainerSpec) error {
	if spec.Security.Privileged && m.privilege == PrivilegeNever {
		return policy.Refusedf("container %s asks to run privileged, which the manager never allows nodes (--node-privileged=%s)", spec.Name, PrivilegeNever)
	}
	if m.policy == nil {
		return nil
	}
	if err := m.policy.CheckImage(spec.Image); err != nil {
		return errors.Wrapf(err, "container %s", spec.Name)
	}
	for _, mt := range spec.Mounts {
		if mt.Type != container.MountBind || kernelModules(mt) {
			continue
		}
		if err := m.policy.CheckHostPath(mt.Source); err != nil {
			return errors.Wrapf(err, "container %s", spec.Name)
		}
	}
	for _, p := range spec.Ports {
		if err := m.policy.CheckPort(p.HostIP, p.HostPort); err != nil {
			return errors.Wrapf(err, "port %d of container %s", p.ContainerPort, spec.Name)
		}
	}
	return nil
}

// kernelModules reports whether a mount is the one every node has: the host's kernel modules,
// read-only, left out where the host has none.
func kernelModules(mt container.Mount) bool {
	return mt.Source == "/lib/modules" && mt.Target == "/lib/modules" && mt.ReadOnly && mt.Optional
}
