package inmemory

import (
	"encoding/gob"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

func init() {
	// The kinds of values that travel as interface values: what the node simulation keeps in
	// Container.Data, and the insides of the workload cluster's unstructured objects.
	gob.Register(map[string]string{})
	gob.Register([]string{})
	gob.Register(map[string]any{})
	gob.Register([]any{})
}

// GroupState is what the engine holds of one group: the containers, networks and volumes
// whose label (the engine's group label) has one value.
type GroupState struct {
	Containers []ContainerState
	Networks   []NetworkState
	Volumes    []container.Volume
}

// ContainerState is a container as the engine holds it.
type ContainerState struct {
	Spec  container.ContainerSpec
	State container.Container
	Files map[string][]byte
	Logs  []string
	Data  map[string]any
}

// NetworkState is a network and where its address ranges are.
type NetworkState struct {
	Network container.Network
	IPv4    *PoolState
	IPv6    *PoolState
}

// PoolState is the address range of a network's family and the last address it gave out.
type PoolState struct {
	Subnet, Range, Gateway, Last string
}

// groupState copies what carries label=value.
func (r *Runtime) groupState(label, value string) GroupState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var st GroupState
	for _, c := range r.labelled(map[string]string{label: value}) {
		data := make(map[string]any, len(c.Data))
		for k, v := range c.Data {
			if m, ok := v.(map[string]string); ok {
				v = maps.Clone(m)
			}
			data[k] = v
		}
		st.Containers = append(st.Containers, ContainerState{Spec: c.Spec, State: copyState(c.State), Files: maps.Clone(c.Files), Logs: slices.Clone(c.Logs), Data: data})
	}
	for _, name := range r.networksByLabel.names(label, value) {
		st.Networks = append(st.Networks, NetworkState{Network: *r.networks[name], IPv4: r.pools[name].state(), IPv6: r.pools6[name].state()})
	}
	for _, name := range r.volumesByLabel.names(label, value) {
		st.Volumes = append(st.Volumes, *r.volumes[name])
	}
	return st
}

// restoreGroup puts a group back; it fails, changing nothing, when a name is taken.
func (r *Runtime) restoreGroup(st GroupState) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range st.Networks {
		if _, ok := r.networks[n.Network.Name]; ok {
			return errors.Errorf("network %s exists already", n.Network.Name)
		}
	}
	for _, c := range st.Containers {
		if _, ok := r.containers[c.Spec.Name]; ok {
			return errors.Errorf("container %s exists already", c.Spec.Name)
		}
	}
	for _, n := range st.Networks {
		network := n.Network
		r.networks[network.Name] = &network
		r.networksByLabel.add(network.Name, network.Labels)
		var err error
		if r.pools[network.Name], err = n.IPv4.pool(); err != nil {
			return errors.Wrapf(err, "network %s", network.Name)
		}
		if n.IPv6 != nil {
			if r.pools6[network.Name], err = n.IPv6.pool(); err != nil {
				return errors.Wrapf(err, "network %s", network.Name)
			}
		}
	}
	for _, v := range st.Volumes {
		volume := v
		r.volumes[v.Name] = &volume
		r.volumesByLabel.add(v.Name, v.Labels)
	}
	for _, cs := range st.Containers {
		c := &Container{Spec: cs.Spec, State: cs.State, Files: cs.Files, Logs: cs.Logs, Data: cs.Data}
		if c.Files == nil {
			c.Files = map[string][]byte{}
		}
		if c.Data == nil {
			c.Data = map[string]any{}
		}
		if c.State.Networks == nil {
			c.State.Networks = map[string]container.Endpoint{}
		}
		r.containers[c.Spec.Name] = c
		if _, ok := r.images[c.Spec.Image]; !ok {
			r.images[c.Spec.Image] = nil
		}
		r.reindex(c)
	}
	return nil
}

// labelValues are the values of a label on the containers, networks and volumes, read from
// the index: no container is copied.
func (r *Runtime) labelValues(label string) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	values := map[string]bool{}
	prefix := "label:" + label + "="
	for key, names := range r.index {
		if v, ok := strings.CutPrefix(key, prefix); ok && v != "" && len(names) > 0 {
			values[v] = true
		}
	}
	for _, n := range r.networks {
		if v := n.Labels[label]; v != "" {
			values[v] = true
		}
	}
	for _, v := range r.volumes {
		if l := v.Labels[label]; l != "" {
			values[l] = true
		}
	}
	return values
}

// forgetGroup drops what carries label=value, as if it never was (no event, no hook), and
// names the containers it dropped.
func (r *Runtime) forgetGroup(label, value string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, c := range r.labelled(map[string]string{label: value}) {
		r.unindex(c)
		delete(r.containers, c.Spec.Name)
		names = append(names, c.Spec.Name)
	}
	for _, name := range r.networksByLabel.names(label, value) {
		r.networksByLabel.remove(name, r.networks[name].Labels)
		delete(r.networks, name)
		delete(r.pools, name)
		delete(r.pools6, name)
	}
	for _, name := range r.volumesByLabel.names(label, value) {
		r.volumesByLabel.remove(name, r.volumes[name].Labels)
		delete(r.volumes, name)
	}
	return names
}

func (p *pool) state() *PoolState {
	if p == nil {
		return nil
	}
	st := &PoolState{Subnet: p.subnet.String(), Range: p.range_.String(), Gateway: p.gateway}
	if p.last.IsValid() {
		st.Last = p.last.String()
	}
	return st
}

func (st *PoolState) pool() (*pool, error) {
	if st == nil {
		return nil, errors.New("no address range")
	}
	p := &pool{gateway: st.Gateway}
	var err error
	if p.subnet, err = netip.ParsePrefix(st.Subnet); err != nil {
		return nil, err
	}
	if p.range_, err = netip.ParsePrefix(st.Range); err != nil {
		return nil, err
	}
	if st.Last != "" {
		if p.last, err = netip.ParseAddr(st.Last); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// labelIndex files names by each of their labels ("key=value"), so that what carries a label
// is found without going through everything.
type labelIndex map[string]map[string]bool

func (x labelIndex) add(name string, labels map[string]string) {
	for k, v := range labels {
		key := k + "=" + v
		if x[key] == nil {
			x[key] = map[string]bool{}
		}
		x[key][name] = true
	}
}

func (x labelIndex) remove(name string, labels map[string]string) {
	for k, v := range labels {
		key := k + "=" + v
		delete(x[key], name)
		if len(x[key]) == 0 {
			delete(x, key)
		}
	}
}

// names are the names filed under label=value, sorted.
func (x labelIndex) names(label, value string) []string {
	return slices.Sorted(maps.Keys(x[label+"="+value]))
}
