package docker

import (
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// A container an engine makes again by itself (a Kubernetes engine, from what an ended Pod
// kept) is checked like a node before it is made: a node's spec as the node layer renders it
// passes, with its own read-only /lib/modules; a spec edited to mount another host path, run
// another image, publish a port on another address, or run privileged where the manager never
// does, is refused.
func TestAContainerAnEngineMakesAgainIsCheckedLikeANode(t *testing.T) {
	m := NewManager(inmemory.New(), ManagerOptions{Policy: testPolicy(t)})
	node := NodeSpec{Cluster: ClusterKey{Namespace: "team-a", Name: "dev"}, Machine: "md-0", Image: "node:v1.34.0", Role: RoleWorker,
		Network: "dev", Ports: []Port{{ContainerPort: 80}}}
	spec := node.containerSpec(true)
	if err := m.AllowedContainer(spec); err != nil {
		t.Fatalf("a node's own spec: %v", err)
	}
	for what, edit := range map[string]func(*container.ContainerSpec){
		"a host path": func(s *container.ContainerSpec) {
			s.Mounts = append(s.Mounts, container.Mount{Type: container.MountBind, Source: "/etc", Target: "/host/etc"})
		},
		"an optional host path": func(s *container.ContainerSpec) {
			s.Mounts = append(s.Mounts, container.Mount{Type: container.MountBind, Source: "/etc", Target: "/lib/modules", ReadOnly: true, Optional: true})
		},
		"another image":   func(s *container.ContainerSpec) { s.Image = "evil/node:v1" },
		"another address": func(s *container.ContainerSpec) { s.Ports[0].HostIP = "0.0.0.0" },
	} {
		edited := node.containerSpec(true)
		edit(&edited)
		if err := m.AllowedContainer(edited); !policy.IsRefused(err) {
			t.Errorf("a spec edited to ask for %s: %v, want a refusal", what, err)
		}
	}
	never := NewManager(inmemory.New(), ManagerOptions{Policy: testPolicy(t), Privilege: PrivilegeNever})
	if err := never.AllowedContainer(spec); !policy.IsRefused(err) || !strings.Contains(err.Error(), "--node-privileged") {
		t.Errorf("a privileged spec where the manager never runs nodes privileged: %v", err)
	}
	if err := never.AllowedContainer(node.containerSpec(false)); err != nil {
		t.Errorf("an unprivileged node's spec: %v", err)
	}
	if err := NewManager(inmemory.New(), ManagerOptions{}).AllowedContainer(edited(spec)); err != nil {
		t.Errorf("without a policy: %v", err)
	}
}

func edited(s container.ContainerSpec) container.ContainerSpec {
	s.Mounts = append(s.Mounts, container.Mount{Type: container.MountBind, Source: "/etc", Target: "/host/etc"})
	return s
}
