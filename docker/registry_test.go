package docker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pkg/errors"
	"golang.org/x/crypto/bcrypt"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

func registryManager(t *testing.T) (*Manager, *inmemory.Runtime) {
	t.Helper()
	rt := inmemory.New("registry", "node")
	return NewManager(rt, ManagerOptions{}), rt
}

// A registry belongs to the namespaces it was created for, recorded on its container, volume
// and network; it is attached to the network of a cluster of those only.
func TestARegistryServesItsNamespacesOnly(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	r, err := m.CreateRegistry(ctx, RegistrySpec{Name: "shared", Image: "registry", HostPort: 5001, Namespaces: []string{"team-b", " team-a", "team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Namespaces(); !slices.Equal(got, []string{"team-a", "team-b"}) {
		t.Errorf("namespaces %v, want [team-a team-b]", got)
	}
	if !r.Serves("team-a") || !r.Serves("team-b") || r.Serves("team-c") || r.Serves("") {
		t.Errorf("serves team-a %v, team-b %v, team-c %v, no namespace %v", r.Serves("team-a"), r.Serves("team-b"), r.Serves("team-c"), r.Serves(""))
	}
	volumes, _ := rt.ListVolumes(ctx, map[string]string{registryNamespacesLabel: "team-a,team-b"})
	networks, _ := rt.ListNetworks(ctx, map[string]string{registryNamespacesLabel: "team-a,team-b"})
	if len(volumes) != 1 || volumes[0].Name != "shared-data" || len(networks) != 1 || networks[0].Name != "shared" {
		t.Errorf("volumes %+v and networks %+v labelled with the owners, want shared-data and shared", volumes, networks)
	}
	if err := m.CheckRegistryNamespace(ctx, "shared", "team-a"); err != nil {
		t.Errorf("checking team-a: %v", err)
	}

	// team-c's cluster is refused before anything is attached.
	key := ClusterKey{Namespace: "team-c", Name: "dev"}
	network := DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	got, err := m.ConnectRegistry(ctx, "shared", network, "team-c")
	if got != nil || !IsRegistryNotServed(err) {
		t.Fatalf("connecting team-c's cluster: %+v, %v; want a RegistryNotServedError", got, err)
	}
	for _, frag := range []string{"shared", "team-a, team-b", "not team-c", "dockyard registry delete --name shared --keep-data",
		"dockyard registry create --name shared --port 5001 --namespaces team-a,team-b,team-c"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("refusal %q does not say %q", err, frag)
		}
	}
	if rt.CallCount("ConnectNetwork") != 0 {
		t.Error("a registry was attached to the network of a namespace it does not serve")
	}
	if err := m.CheckRegistryNamespace(ctx, "shared", "team-c"); !IsRegistryNotServed(err) || !IsRegistryNotServed(errors.Wrap(err, "wrapped")) {
		t.Errorf("checking team-c: %v", err)
	}

	// team-a's is attached; a registry that does not exist is no error.
	key = ClusterKey{Namespace: "team-a", Name: "dev"}
	network = DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	if got, err := m.ConnectRegistry(ctx, "shared", network, "team-a"); err != nil || got == nil || got.Address(network) == "" {
		t.Errorf("connecting team-a's cluster: %+v, %v", got, err)
	}
	if got, err := m.ConnectRegistry(ctx, "missing", network, "team-a"); got != nil || err != nil {
		t.Errorf("connecting a registry that does not exist: %+v, %v", got, err)
	}
	if err := m.CheckRegistryNamespace(ctx, "missing", "team-a"); err != nil {
		t.Errorf("checking a registry that does not exist: %v", err)
	}
}

// A registry created before registries had owners serves no namespace, and says how to give it
// one.
func TestARegistryWithoutOwnersServesNoNamespace(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	labels := map[string]string{registryLabel: "old", registryHostLabel: "localhost:5002"}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: "old", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	if err := rt.CreateContainer(ctx, container.ContainerSpec{Name: "old", Image: "registry", Labels: labels, Network: "old"}); err != nil {
		t.Fatal(err)
	}
	r, err := m.FindRegistry(ctx, "old")
	if err != nil || r == nil || len(r.Namespaces()) != 0 || r.Serves("default") {
		t.Fatalf("registry %+v (%v) serves %v", r, err, r.Namespaces())
	}
	_, err = m.ConnectRegistry(ctx, "old", "dockyard-dev-default", "default")
	if !IsRegistryNotServed(err) || !strings.Contains(err.Error(), "serves no namespace") ||
		!strings.Contains(err.Error(), "dockyard registry create --name old --port 5002 --namespaces default") {
		t.Errorf("connecting a registry without owners: %v", err)
	}
}

// Namespaces are checked before anything is made.
func TestARegistryNeedsValidNamespaces(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	for _, namespaces := range [][]string{nil, {""}, {"Team-A"}, {"team-a", "team_b"}} {
		_, err := m.CreateRegistry(ctx, RegistrySpec{Name: "shared", Image: "registry", HostPort: 5001, Namespaces: namespaces})
		if err == nil || !strings.Contains(err.Error(), "--namespaces") {
			t.Errorf("namespaces %q: %v, want an error naming --namespaces", namespaces, err)
		}
	}
	if len(rt.ContainerNames())+len(rt.VolumeNames())+len(rt.NetworkNames()) != 0 {
		t.Errorf("refused registries left containers %v, volumes %v, networks %v", rt.ContainerNames(), rt.VolumeNames(), rt.NetworkNames())
	}
}

// Creating a registry that exists returns it when nothing changes, and refuses to change its
// owners, deletes or authentication in place.
func TestCreatingAnExistingRegistryChangesNothing(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	spec := RegistrySpec{Name: "shared", Image: "registry", HostPort: 5001, Namespaces: []string{"team-a"}}
	if _, err := m.CreateRegistry(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if r, err := m.CreateRegistry(ctx, spec); err != nil || r == nil || rt.CallCount("CreateContainer") != 1 {
		t.Errorf("creating it again: %+v, %v, %d containers created", r, err, rt.CallCount("CreateContainer"))
	}
	for what, change := range map[string]func(*RegistrySpec){
		"namespaces":    func(s *RegistrySpec) { s.Namespaces = []string{"team-a", "team-b"} },
		"allow deletes": func(s *RegistrySpec) { s.AllowDeletes = true },
		"auth":          func(s *RegistrySpec) { s.Auth = true },
		"mutable tags":  func(s *RegistrySpec) { s.MutableTags = true },
	} {
		changed := spec
		change(&changed)
		_, err := m.CreateRegistry(ctx, changed)
		if err == nil || !strings.Contains(err.Error(), "serving namespaces team-a, deletes off") ||
			!strings.Contains(err.Error(), "dockyard registry delete --name shared --keep-data") {
			t.Errorf("changing %s: %v", what, err)
		}
	}
	if r, _ := m.FindRegistry(ctx, "shared"); r == nil || !slices.Equal(r.Namespaces(), []string{"team-a"}) || r.DeletesAllowed() || r.AuthRequired() ||
		rt.CallCount("CreateContainer") != 1 {
		t.Errorf("after refused changes the registry is %+v", r)
	}
}

// Deletes are off unless asked for, by distribution's environment.
func TestRegistryDeletesAreOffUnlessAllowed(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	for _, allow := range []bool{false, true} {
		name := fmt.Sprintf("deletes-%v", allow)
		r, err := m.CreateRegistry(ctx, RegistrySpec{Name: name, Image: "registry", HostPort: 5001, Namespaces: []string{"default"}, AllowDeletes: allow})
		if err != nil {
			t.Fatal(err)
		}
		if r.DeletesAllowed() != allow {
			t.Errorf("%s: deletes allowed %v", name, r.DeletesAllowed())
		}
		rt.WithContainer(name, func(c *inmemory.Container) {
			if got := slices.Contains(c.Spec.Env, "REGISTRY_STORAGE_DELETE_ENABLED=true"); got != allow {
				t.Errorf("%s: environment %v", name, c.Spec.Env)
			}
		})
		if _, err := m.DeleteRegistry(ctx, name, false); err != nil {
			t.Fatal(err)
		}
	}
}

// A registry with authentication gets a user per namespace it serves and the host's, each with
// a random password, written (hashed for distribution, and as they are for Dockyard) into its
// container before it starts; none is in a label or the environment, which tells the registry's
// proxy each user's push prefix. The host gets its own credential.
func TestARegistryWithAuthHasAUserPerNamespace(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	var filesAtStart []string
	rt.OnStart = func(c *inmemory.Container) {
		if c.Spec.Name == "private" {
			for f := range c.Files {
				filesAtStart = append(filesAtStart, f)
			}
		}
	}
	r, err := m.CreateRegistry(ctx, RegistrySpec{Name: "private", Image: "registry", HostPort: 5001, Namespaces: []string{"team-b", "team-a"}, Auth: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.AuthRequired() || r.MutableTags() {
		t.Errorf("authentication required %v, mutable tags %v", r.AuthRequired(), r.MutableTags())
	}
	if !slices.Contains(filesAtStart, registryHtpasswdFile) {
		t.Errorf("files in the registry when it started: %v, want %s (distribution makes up a password and logs it otherwise)", filesAtStart, registryHtpasswdFile)
	}
	host, err := m.RegistryCredential(ctx, "private")
	if err != nil || host == nil || host.Username != RegistryUser || len(host.Password) < 32 {
		t.Fatalf("the host's credential %v, %v", host, err)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", host, host, host, host); strings.Contains(s, host.Password) {
		t.Errorf("printing the credential prints its password: %s", s)
	}
	creds := map[string]*RegistryCredential{RegistryUser: host}
	for _, ns := range []string{"team-a", "team-b"} {
		if creds[ns], err = m.namespaceCredential(ctx, r, ns); err != nil || creds[ns] == nil || creds[ns].Username != ns || len(creds[ns].Password) < 32 {
			t.Fatalf("%s's credential %v, %v", ns, creds[ns], err)
		}
	}
	if creds["team-a"].Password == creds["team-b"].Password || creds["team-a"].Password == host.Password {
		t.Error("two users share a password")
	}
	if _, err := m.namespaceCredential(ctx, r, "team-c"); !IsRegistryNotServed(err) {
		t.Errorf("a credential for a namespace the registry does not serve: %v", err)
	}
	rt.WithContainer("private", func(c *inmemory.Container) {
		hashes := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(c.Files[registryHtpasswdFile])), "\n") {
			user, hash, _ := strings.Cut(line, ":")
			hashes[user] = hash
		}
		for user, cred := range creds {
			if bcrypt.CompareHashAndPassword([]byte(hashes[user]), []byte(cred.Password)) != nil {
				t.Errorf("htpasswd does not hold %s's credential", user)
			}
		}
		if len(hashes) != 3 {
			t.Errorf("htpasswd has users %v, want the host's, team-a's and team-b's", slices.Sorted(maps.Keys(hashes)))
		}
		for _, want := range []string{"REGISTRY_AUTH=htpasswd", "REGISTRY_AUTH_HTPASSWD_PATH=" + registryHtpasswdFile,
			registryPushEnv + "=" + RegistryUser + "=*,team-a=team-a/,team-b=team-b/"} {
			if !slices.Contains(c.Spec.Env, want) {
				t.Errorf("environment %v lacks %s", c.Spec.Env, want)
			}
		}
		if slices.Contains(c.Spec.Env, registryMutableTagsEnv+"=true") {
			t.Errorf("environment %v lets tags move", c.Spec.Env)
		}
		for _, cred := range creds {
			for k, v := range c.Spec.Labels {
				if strings.Contains(k+v, cred.Password) {
					t.Errorf("label %s=%s holds a password", k, v)
				}
			}
			for _, e := range append(slices.Clone(c.Spec.Env), append(c.Spec.Cmd, c.Spec.Entrypoint...)...) {
				if strings.Contains(e, cred.Password) {
					t.Errorf("%q holds a password", e)
				}
			}
		}
	})
}

// A node gets the credential of its own namespace in its hosts.toml, never another's nor the
// host's: root in a node of team-a cannot push as team-b.
func TestANodeGetsItsNamespacesCredentialOnly(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	if _, err := m.CreateRegistry(ctx, RegistrySpec{Name: "private", Image: "registry", HostPort: 5001, Namespaces: []string{"team-a", "team-b"}, Auth: true}); err != nil {
		t.Fatal(err)
	}
	host, err := m.RegistryCredential(ctx, "private")
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{}
	creds := map[string]*RegistryCredential{}
	for _, ns := range []string{"team-a", "team-b"} {
		key := ClusterKey{Namespace: ns, Name: "dev"}
		network := DefaultNetworkName(key)
		if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
			t.Fatal(err)
		}
		node, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "dev-md-1", Image: "node", Role: RoleWorker, Network: network})
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.ConnectRegistry(ctx, "private", network, ns)
		if err != nil {
			t.Fatal(err)
		}
		if err := node.UseRegistry(ctx, r, network); err != nil {
			t.Fatal(err)
		}
		if creds[ns], err = m.namespaceCredential(ctx, r, ns); err != nil {
			t.Fatal(err)
		}
		rt.WithContainer(node.Name, func(c *inmemory.Container) { hosts[ns] = string(c.Files[registryHostsFile("localhost:5001")]) })
		server := fmt.Sprintf("http://%s:5000", r.Address(network))
		if want := fmt.Sprintf("[host.%q.header]\n  Authorization = %q\n", server, creds[ns].basic()); !strings.Contains(hosts[ns], want) {
			t.Errorf("%s's node's hosts.toml does not send %s's credential:\n%s", ns, ns, hosts[ns])
		}
	}
	for ns, file := range hosts {
		for user, cred := range map[string]*RegistryCredential{"team-a": creds["team-a"], "team-b": creds["team-b"], RegistryUser: host} {
			if user != ns && (strings.Contains(file, cred.basic()) || strings.Contains(file, cred.Password)) {
				t.Errorf("%s's node's hosts.toml holds %s's credential", ns, user)
			}
		}
	}
}

// A registry made before registries had a user per namespace and immutable tags (one user, no
// tags label) keeps working: its nodes send its one credential, it says its tags move, and
// creating it again with its settings (mutable tags) keeps it.
func TestARegistryMadeBeforeUsersPerNamespaceKeepsWorking(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	labels := map[string]string{registryLabel: "old", registryHostLabel: "localhost:5001", registryNamespacesLabel: "team-a,team-b", registryAuthLabel: "htpasswd"}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: "old", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	if err := rt.CreateContainer(ctx, container.ContainerSpec{Name: "old", Image: "registry", Labels: labels, Network: "old"}); err != nil {
		t.Fatal(err)
	}
	rt.WithContainer("old", func(c *inmemory.Container) { c.Files[registryCredentialFile] = []byte("dockyard:old-password\n") })
	r, err := m.FindRegistry(ctx, "old")
	if err != nil || !r.MutableTags() || !strings.Contains(r.settings(), "one user for the host and every namespace") {
		t.Fatalf("registry %v (%v): mutable tags %v, settings %s", r, err, r.MutableTags(), r.settings())
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if cred, err := m.namespaceCredential(ctx, r, ns); err != nil || cred == nil || cred.Username != "dockyard" || cred.Password != "old-password" {
			t.Errorf("%s's credential on the old registry: %v, %v", ns, cred, err)
		}
	}
	spec := RegistrySpec{Name: "old", Image: "registry", HostPort: 5001, Namespaces: []string{"team-a", "team-b"}, Auth: true, MutableTags: true}
	if got, err := m.CreateRegistry(ctx, spec); err != nil || got == nil || rt.CallCount("CreateContainer") != 1 {
		t.Errorf("creating the old registry again with its settings: %v, %v", got, err)
	}
	spec.MutableTags = false
	if _, err := m.CreateRegistry(ctx, spec); err == nil || !strings.Contains(err.Error(), "tags mutable") || !strings.Contains(err.Error(), "--keep-data") {
		t.Errorf("asking the old registry for immutable tags: %v", err)
	}
}

// Tags are immutable unless the registry is created with mutable ones: recorded in a label,
// told to the registry's proxy, and a change of it re-creates the registry.
func TestRegistryTagsAreImmutableUnlessMutable(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	for _, mutable := range []bool{false, true} {
		name := fmt.Sprintf("tags-%v", mutable)
		spec := RegistrySpec{Name: name, Image: "registry", HostPort: 5001, Namespaces: []string{"default"}, MutableTags: mutable}
		r, err := m.CreateRegistry(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.MutableTags() != mutable {
			t.Errorf("%s: mutable tags %v", name, r.MutableTags())
		}
		rt.WithContainer(name, func(c *inmemory.Container) {
			if got := slices.Contains(c.Spec.Env, registryMutableTagsEnv+"=true"); got != mutable {
				t.Errorf("%s: environment %v", name, c.Spec.Env)
			}
		})
		if got := strings.Contains(r.createCommand(r.Namespaces()), "--mutable-tags"); got != mutable {
			t.Errorf("%s: the command that makes it again is %s", name, r.createCommand(r.Namespaces()))
		}
		spec.MutableTags = !mutable
		if _, err := m.CreateRegistry(ctx, spec); err == nil || !strings.Contains(err.Error(), "--keep-data") {
			t.Errorf("%s: changing its tags in place: %v", name, err)
		}
		if _, err := m.DeleteRegistry(ctx, name, false); err != nil {
			t.Fatal(err)
		}
	}
}

// Deleting a registry removes its container, network and volume, and only the volume and
// network labelled as its own: a volume or network of the same name that someone else made
// stays, and is said.
func TestDeletingARegistryLeavesWhatIsNotItsOwn(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	if _, err := m.CreateRegistry(ctx, RegistrySpec{Name: "mine", Image: "registry", HostPort: 5001, Namespaces: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if left, err := m.DeleteRegistry(ctx, "mine", false); err != nil || len(left) != 0 {
		t.Fatalf("deleting a registry: left %v, %v", left, err)
	}
	if len(rt.ContainerNames())+len(rt.VolumeNames())+len(rt.NetworkNames()) != 0 {
		t.Fatalf("a deleted registry left containers %v, volumes %v, networks %v", rt.ContainerNames(), rt.VolumeNames(), rt.NetworkNames())
	}

	// Another's volume and network, named as registry "shared"'s would be.
	if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: "shared-data", Labels: map[string]string{"team": "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	left, err := m.DeleteRegistry(ctx, "shared", false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rt.VolumeNames(), "shared-data") {
		t.Error("registry delete removed a volume that is not the registry's")
	}
	if !slices.Contains(rt.NetworkNames(), "shared") {
		t.Error("registry delete removed a network that is not the registry's")
	}
	if len(left) != 2 || !strings.HasPrefix(left[0], "network shared ") || !strings.HasPrefix(left[1], "volume shared-data ") {
		t.Errorf("left %q, want the network and the volume", left)
	}
}

// A registry never mounts a volume, nor joins a network, of its names that is not its own.
func TestARegistryRefusesAnothersVolumeOrNetwork(t *testing.T) {
	ctx := context.Background()
	m, rt := registryManager(t)
	if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: "shared-data", Labels: map[string]string{"team": "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"shared", "other"} {
		_, err := m.CreateRegistry(ctx, RegistrySpec{Name: name, Image: "registry", HostPort: 5001, Namespaces: []string{"default"}})
		if err == nil || !strings.Contains(err.Error(), "is not registry "+name+"'s") {
			t.Errorf("registry %s on another's volume or network: %v", name, err)
		}
	}
	if len(rt.ContainerNames()) != 0 {
		t.Errorf("refused registries left containers %v", rt.ContainerNames())
	}

	// A volume kept by delete --keep-data is the registry's again.
	if _, err := m.CreateRegistry(ctx, RegistrySpec{Name: "kept", Image: "registry", HostPort: 5001, Namespaces: []string{"team-a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DeleteRegistry(ctx, "kept", true); err != nil {
		t.Fatal(err)
	}
	if r, err := m.CreateRegistry(ctx, RegistrySpec{Name: "kept", Image: "registry", HostPort: 5001, Namespaces: []string{"team-b"}}); err != nil || !r.Serves("team-b") || r.Serves("team-a") {
		t.Errorf("re-creating a registry on its kept volume: %+v, %v", r, err)
	}
}

// A registry that does not serve a namespace is a refusal of the policy, as the webhook and the
// controllers recognize it.
func TestRegistryNotServedIsARefusal(t *testing.T) {
	err := error(&registryNotServedError{Registry: "r", Namespace: "b", Namespaces: []string{"a"}})
	if !policy.IsRefused(err) || !IsRegistryNotServed(err) {
		t.Errorf("%v: IsRefused %v, IsRegistryNotServed %v", err, policy.IsRefused(err), IsRegistryNotServed(err))
	}
}
