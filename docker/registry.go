package docker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	"golang.org/x/crypto/bcrypt"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// A local registry is a container of distribution's registry on the engine (`dockyard
// registry create`): its blobs on a volume of its own, its port published on the host, where
// `docker push localhost:<port>/app:dev` reaches it, and attached to the network of every
// cluster that uses it, where the nodes' containerd pulls "localhost:<port>/..." from it
// (registryHostsFile). Nodes never need the host's network.
//
// A registry belongs to the namespaces it was created for: only their clusters get it attached
// (ConnectRegistry). Its deletes are off unless it was created with them, and its tags are
// immutable unless it was created with mutable ones. It may require basic authentication: a
// user per namespace it serves, named after it, who may push only to repositories under
// "<namespace>/", and the host's (RegistryUser), who may push anywhere; every user may pull
// anything. Their passwords are made at each creation of its container and kept in it (never
// in its labels, command or environment); the nodes of a namespace's clusters send that
// namespace's as a header (registryHosts). Dockyard's registry image enforces the prefixes and
// the tags in a proxy in front of distribution (images/registryproxy), told by the container's
// environment (registryEnv). Changing any of that re-creates it: delete it keeping its data,
// then create it again.

const (
	// registryLabel holds the registry's name on its container, volume and network.
	registryLabel = "dockyard.x-k8s.io/registry"
	// registryHostLabel holds the address images name it by on the host: "localhost:<port>".
	registryHostLabel = "dockyard.x-k8s.io/registry-host"
	// registryNamespacesLabel holds the namespaces whose clusters may use the registry, sorted
	// and comma-separated, on its container, volume and network as they were created. The
	// container's is the one that counts.
	registryNamespacesLabel = "dockyard.x-k8s.io/registry-namespaces"
	// registryDeletesLabel is "true" on a registry that accepts deletes.
	registryDeletesLabel = "dockyard.x-k8s.io/registry-deletes"
	// registryAuthLabel is "htpasswd" on a registry that requires basic authentication.
	registryAuthLabel = "dockyard.x-k8s.io/registry-auth"
	// registryTagsLabel is "immutable" on a registry whose tags keep naming the manifest first
	// pushed under them, "mutable" on one created with MutableTags. A registry without it was
	// made before the proxy of Dockyard's registry image: its tags move, and with
	// authentication its one user (the host's) is every namespace's too.
	registryTagsLabel = "dockyard.x-k8s.io/registry-tags"
	// registryPort is the port the registry serves in its container.
	registryPort = 5000
	// DefaultRegistryName and DefaultRegistryHostPort are `dockyard registry create`'s.
	DefaultRegistryName     = "dockyard-registry"
	DefaultRegistryHostPort = 5001
	// RegistryUser is the host's user of a registry that requires authentication, which may push
	// anywhere. A namespace's user is named after the namespace; the "." keeps them apart.
	RegistryUser = "dockyard.host"
)

// What the proxy of Dockyard's registry image reads besides distribution's variables
// (images/registryproxy): the prefix of the repositories each user may push to, as
// "user=prefix,..." ("*": any), and whether a push may move a tag.
const (
	registryPushEnv        = "DOCKYARD_REGISTRY_PUSH"
	registryMutableTagsEnv = "DOCKYARD_REGISTRY_MUTABLE_TAGS"
)

// Where a registry that requires authentication keeps its users (htpasswd, bcrypt) and the
// credentials Dockyard gives the host and nodes ("user:password" lines, the host's first), in
// its container.
const (
	registryAuthDir        = "/etc/distribution/auth"
	registryHtpasswdFile   = registryAuthDir + "/htpasswd"
	registryCredentialFile = registryAuthDir + "/credential"
)

// RegistrySpec describes a local registry.
type RegistrySpec struct {
	Name, Image string
	// HostPort is published on ListenAddress (127.0.0.1 when empty).
	HostPort      int
	ListenAddress string
	// Namespaces are the namespaces whose clusters may use the registry; at least one.
	Namespaces []string
	// AllowDeletes lets clients delete manifests and blobs (off: pushes only add).
	AllowDeletes bool
	// Auth requires basic authentication of every client, each user with a random password new
	// at each creation of the container: the host's (RegistryUser, RegistryCredential) pushes
	// anywhere, each namespace's (named after it, sent by its clusters' nodes) only to
	// repositories under "<namespace>/"; all pull anything. Without it anyone who reaches the
	// registry pushes anywhere.
	Auth bool
	// MutableTags lets a push move an existing tag to another manifest. Off, a push of another
	// manifest under a tag that names one is refused (the same one again is not); a tag moves
	// only by deleting it first, where deletes are allowed.
	MutableTags bool
}

// Registry is a local registry on the engine.
type Registry struct {
	Name string
	c    *container.Container
}

// Host is the address images name the registry by: localhost:<host port>.
func (r *Registry) Host() string { return r.c.Labels[registryHostLabel] }

// Running reports whether the registry's container runs.
func (r *Registry) Running() bool { return r.c.Running }

// State is the engine's state word of the registry's container.
func (r *Registry) State() string { return r.c.State }

// Address is the registry's address on a network, "" when it is not attached to it.
func (r *Registry) Address(network string) string { return nodeAddress(r.c, network) }

// Namespaces are the namespaces whose clusters may use the registry, sorted; none for a
// registry created before registries had owners.
func (r *Registry) Namespaces() []string { return splitNamespaces(r.c.Labels[registryNamespacesLabel]) }

// Serves reports whether the clusters of a namespace may use the registry.
func (r *Registry) Serves(namespace string) bool {
	return namespace != "" && slices.Contains(r.Namespaces(), namespace)
}

// DeletesAllowed reports whether the registry accepts deletes of manifests and blobs.
func (r *Registry) DeletesAllowed() bool { return r.c.Labels[registryDeletesLabel] == "true" }

// AuthRequired reports whether the registry requires basic authentication.
func (r *Registry) AuthRequired() bool { return r.c.Labels[registryAuthLabel] == "htpasswd" }

// MutableTags reports whether a push may move a tag to another manifest: on a registry created
// with MutableTags, and on one made before Dockyard's registry kept its tags.
func (r *Registry) MutableTags() bool { return r.c.Labels[registryTagsLabel] != "immutable" }

// legacy reports whether the registry was made before the proxy of Dockyard's registry image:
// its tags move and its one user, when it requires authentication, is every namespace's.
func (r *Registry) legacy() bool {
	_, ok := r.c.Labels[registryTagsLabel]
	return !ok
}

// listenAddress is the host address its port is published on.
func (r *Registry) listenAddress() string {
	for _, p := range r.c.Ports {
		if p.ContainerPort == registryPort && p.HostIP != "" {
			return p.HostIP
		}
	}
	return "127.0.0.1"
}

// createCommand is the `dockyard registry create` that makes the registry as it is, serving
// namespaces instead.
func (r *Registry) createCommand(namespaces []string) string {
	cmd := "dockyard registry create --name " + r.Name
	if _, port, err := net.SplitHostPort(r.Host()); err == nil {
		cmd += " --port " + port
	}
	if a := r.listenAddress(); a != "127.0.0.1" {
		cmd += " --listen-address " + a
	}
	cmd += " --namespaces " + strings.Join(namespaces, ",")
	if r.DeletesAllowed() {
		cmd += " --allow-deletes"
	}
	if r.MutableTags() {
		cmd += " --mutable-tags"
	}
	if r.AuthRequired() {
		cmd += " --auth"
	}
	return cmd
}

// registryNotServedError says a local registry does not serve the clusters of a namespace.
type registryNotServedError struct {
	// Registry is the registry's name, Namespace the namespace it was asked for, Namespaces
	// those it serves.
	Registry, Namespace string
	Namespaces          []string
	// recreate is the command that makes it serve Namespace too.
	recreate string
}

// Unwrap makes it a refusal of the policy (policy.IsRefused), like every refusal of what a
// namespace asks beyond its own.
func (e *registryNotServedError) Unwrap() error { return policy.Refusedf("%s", e.Error()) }

func (e *registryNotServedError) Error() string {
	serves := "serves the clusters of namespace"
	if len(e.Namespaces) > 1 {
		serves += "s"
	}
	serves += " " + strings.Join(e.Namespaces, ", ")
	if len(e.Namespaces) == 0 {
		serves = "serves no namespace (it was created before registries had owners)"
	}
	return fmt.Sprintf("local registry %s %s, not %s: to add %s, re-create it keeping its images: dockyard registry delete --name %s --keep-data && %s",
		e.Registry, serves, e.Namespace, e.Namespace, e.Registry, e.recreate)
}

// IsRegistryNotServed reports whether err says a registry does not serve a namespace.
func IsRegistryNotServed(err error) bool {
	var e *registryNotServedError
	return errors.As(err, &e)
}

// RegistryCredential is the user and password of a local registry that requires
// authentication. Printing it never prints the password.
type RegistryCredential struct {
	Username, Password string
}

func (c RegistryCredential) String() string   { return c.Username + ":<password>" }
func (c RegistryCredential) GoString() string { return c.String() }

// basic is the credential as an HTTP Authorization header's value.
func (c RegistryCredential) basic() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(c.Username+":"+c.Password))
}

func registryVolume(name string) string  { return name + "-data" }
func registryNetwork(name string) string { return name }

// normalizeNamespaces checks namespace names and returns them sorted, without duplicates.
func normalizeNamespaces(namespaces []string) ([]string, error) {
	var out []string
	for _, ns := range namespaces {
		ns = strings.TrimSpace(ns)
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return nil, errors.Errorf("--namespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
		}
		out = append(out, ns)
	}
	if len(out) == 0 {
		return nil, errors.New("--namespaces: a registry serves the clusters of at least one namespace")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func splitNamespaces(label string) []string {
	if label == "" {
		return nil
	}
	return strings.Split(label, ",")
}

// registryLabels are the labels of a registry's container.
func registryLabels(spec RegistrySpec, host string, namespaces []string) map[string]string {
	labels := map[string]string{
		registryLabel:           spec.Name,
		registryHostLabel:       host,
		registryNamespacesLabel: strings.Join(namespaces, ","),
	}
	if spec.AllowDeletes {
		labels[registryDeletesLabel] = "true"
	}
	if spec.Auth {
		labels[registryAuthLabel] = "htpasswd"
	}
	labels[registryTagsLabel] = "immutable"
	if spec.MutableTags {
		labels[registryTagsLabel] = "mutable"
	}
	return labels
}

// sameSettings reports whether an existing registry is what labels describe. One made before
// Dockyard's registry kept its tags is a registry of mutable tags.
func (r *Registry) sameSettings(labels map[string]string) bool {
	for _, k := range []string{registryNamespacesLabel, registryDeletesLabel, registryAuthLabel} {
		if r.c.Labels[k] != labels[k] {
			return false
		}
	}
	return r.MutableTags() == (labels[registryTagsLabel] == "mutable")
}

// settings describes the registry for a person.
func (r *Registry) settings() string {
	s := "serving namespaces " + strings.Join(r.Namespaces(), ",")
	if len(r.Namespaces()) == 0 {
		s = "serving no namespace"
	}
	if r.DeletesAllowed() {
		s += ", deletes allowed"
	} else {
		s += ", deletes off"
	}
	if r.MutableTags() {
		s += ", tags mutable"
	} else {
		s += ", tags immutable"
	}
	switch {
	case r.AuthRequired() && r.legacy():
		s += ", authentication required (one user for the host and every namespace)"
	case r.AuthRequired():
		s += ", authentication required (a user per namespace)"
	}
	if r.legacy() {
		s += " (made by an earlier Dockyard)"
	}
	return s
}

// CreateRegistry creates and starts a local registry, or returns the one of that name when it
// has the same host port, namespaces, deletes, tags and authentication (starting it if it is
// stopped). A registry to change is refused: delete it keeping its data, and create it again.
// Its data volume is kept across restarts and re-creations; a volume or network of its names
// that is not its own is refused.
func (m *Manager) CreateRegistry(ctx context.Context, spec RegistrySpec) (*Registry, error) {
	if spec.Name == "" || spec.Image == "" || spec.HostPort <= 0 {
		return nil, errors.New("a registry needs a name, an image and a host port")
	}
	namespaces, err := normalizeNamespaces(spec.Namespaces)
	if err != nil {
		return nil, err
	}
	host := "localhost:" + strconv.Itoa(spec.HostPort)
	labels := registryLabels(spec, host, namespaces)
	if r, err := m.FindRegistry(ctx, spec.Name); err != nil || r != nil {
		return m.keepRegistry(ctx, r, err, spec, host, labels)
	}
	if c, err := m.runtime.InspectContainer(ctx, spec.Name); err == nil {
		return nil, errors.Errorf("a container named %s exists already and is not a registry Dockyard made: choose another name", c.Name)
	} else if !container.IsNotFound(err) {
		return nil, err
	}
	if err := m.registryStorage(ctx, spec, host, labels); err != nil {
		return nil, err
	}
	if err := m.startRegistry(ctx, spec, namespaces, labels); err != nil {
		return nil, err
	}
	return m.FindRegistry(ctx, spec.Name)
}

// keepRegistry returns the registry of that name as it is, started, when it has the settings
// asked for, and refuses to change one that has others.
func (m *Manager) keepRegistry(ctx context.Context, r *Registry, err error, spec RegistrySpec, host string, labels map[string]string) (*Registry, error) {
	if r != nil && r.Host() != host {
		return nil, errors.Errorf("registry %s exists already, serving %s: delete it first to publish it on another port", spec.Name, r.Host())
	}
	if r != nil && !r.sameSettings(labels) {
		want := &Registry{Name: spec.Name, c: &container.Container{Labels: labels}}
		return nil, errors.Errorf("registry %s exists already, %s; asked for %s: to change that, re-create it keeping its images: dockyard registry delete --name %s --keep-data, then create it again",
			spec.Name, r.settings(), want.settings(), spec.Name)
	}
	if r != nil && !r.Running() {
		if err := m.runtime.StartContainer(ctx, r.Name); err != nil {
			return nil, errors.Wrapf(err, "starting registry %s", r.Name)
		}
		return m.FindRegistry(ctx, spec.Name)
	}
	return r, err
}

// registryStorage makes a new registry's image, network and volume ready: its own network (an
// engine publishes ports of containers on networks of its own) and its data volume, unless one
// kept by `registry delete --keep-data` is there; a network or volume of its names that is not
// its own is refused.
func (m *Manager) registryStorage(ctx context.Context, spec RegistrySpec, host string, labels map[string]string) error {
	volume, err := m.findVolume(ctx, registryVolume(spec.Name))
	if err != nil {
		return err
	}
	if volume != nil && volume.Labels[registryLabel] != spec.Name {
		return errors.Errorf("a volume named %s exists already and is not registry %s's: choose another name", volume.Name, spec.Name)
	}
	if err := m.ensureImage(ctx, spec.Image); err != nil {
		return err
	}
	// Its volume and network record who it was made for; its settings are its container's.
	owners := map[string]string{registryLabel: spec.Name, registryHostLabel: host, registryNamespacesLabel: labels[registryNamespacesLabel]}
	if n, err := m.runtime.InspectNetwork(ctx, registryNetwork(spec.Name)); container.IsNotFound(err) {
		if err := m.runtime.CreateNetwork(ctx, container.NetworkSpec{Name: registryNetwork(spec.Name), Labels: owners}); err != nil {
			return errors.Wrapf(err, "creating the network of registry %s", spec.Name)
		}
	} else if err != nil {
		return err
	} else if n.Labels[registryLabel] != spec.Name {
		return errors.Errorf("a network named %s exists already and is not registry %s's: choose another name", n.Name, spec.Name)
	}
	// A volume kept by `registry delete --keep-data` keeps the labels it was created with.
	if volume == nil {
		if err := m.runtime.CreateVolume(ctx, container.VolumeSpec{Name: registryVolume(spec.Name), Labels: owners}); err != nil {
			return errors.Wrapf(err, "creating the volume of registry %s", spec.Name)
		}
	}
	return nil
}

// registryEnv is the environment of a registry's container, which holds no secret.
// Distribution's configuration (images/registry/config.yml) has deletes off, and its variables
// turn them and authentication on; the proxy in front of it (images/registryproxy) checks the
// users, and reads each one's push prefix and whether tags move from Dockyard's. Another image
// runs distribution alone: it authenticates the users, but every one of them pushes anywhere
// and tags move.
func registryEnv(spec RegistrySpec, namespaces []string) []string {
	var env []string
	if spec.AllowDeletes {
		env = append(env, "REGISTRY_STORAGE_DELETE_ENABLED=true")
	}
	if spec.MutableTags {
		env = append(env, registryMutableTagsEnv+"=true")
	}
	if spec.Auth {
		push := []string{RegistryUser + "=*"}
		for _, ns := range namespaces {
			push = append(push, ns+"="+ns+"/")
		}
		env = append(env, "REGISTRY_AUTH=htpasswd", "REGISTRY_AUTH_HTPASSWD_REALM="+spec.Name, "REGISTRY_AUTH_HTPASSWD_PATH="+registryHtpasswdFile,
			registryPushEnv+"="+strings.Join(push, ","))
	}
	return env
}

// startRegistry creates and starts a registry's container serving namespaces, with their users
// when it requires authentication; one that does not start is removed.
func (m *Manager) startRegistry(ctx context.Context, spec RegistrySpec, namespaces []string, labels map[string]string) error {
	err := m.runtime.CreateContainer(ctx, container.ContainerSpec{
		Name: spec.Name, Hostname: spec.Name, Image: spec.Image, Labels: labels, Network: registryNetwork(spec.Name), Env: registryEnv(spec, namespaces),
		Mounts:        []container.Mount{{Type: container.MountVolume, Source: registryVolume(spec.Name), Target: "/var/lib/registry"}},
		Ports:         []container.PortMapping{{ContainerPort: registryPort, Protocol: "tcp", HostIP: orDefault(spec.ListenAddress, "127.0.0.1"), HostPort: spec.HostPort}},
		RestartPolicy: "unless-stopped",
	})
	if err != nil {
		return errors.Wrapf(err, "creating registry %s", spec.Name)
	}
	// The users are there before the container starts: Dockyard's proxy reads them once, at
	// its start, and distribution alone (another image) would make one up and log its password.
	if spec.Auth {
		if err := m.writeRegistryAuth(ctx, spec.Name, namespaces); err != nil {
			_ = m.runtime.RemoveContainer(ctx, spec.Name)
			return err
		}
	}
	if err := m.runtime.StartContainer(ctx, spec.Name); err != nil {
		_ = m.runtime.RemoveContainer(ctx, spec.Name)
		if container.IsPortInUse(err) {
			return errors.Wrapf(err, "host port %d is taken: choose another with --port", spec.HostPort)
		}
		return errors.Wrapf(err, "starting registry %s", spec.Name)
	}
	return nil
}

// writeRegistryAuth makes a registry's users, the host's (RegistryUser) and one per namespace
// named after it, each with a random password, and copies their credentials (the host's first)
// and their htpasswd file (bcrypt) into the registry's container.
func (m *Manager) writeRegistryAuth(ctx context.Context, name string, namespaces []string) error {
	var htpasswd, credentials strings.Builder
	for _, user := range slices.Concat([]string{RegistryUser}, namespaces) {
		secret := make([]byte, 24)
		if _, err := rand.Read(secret); err != nil {
			return errors.Wrap(err, "making the registry's passwords")
		}
		password := base64.RawURLEncoding.EncodeToString(secret)
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
		if err != nil {
			return errors.Wrap(err, "hashing the registry's passwords")
		}
		htpasswd.WriteString(user + ":" + string(hash) + "\n")
		credentials.WriteString(user + ":" + password + "\n")
	}
	dir := path.Base(registryAuthDir)
	entries := []archiveEntry{
		{name: dir, dir: true, mode: 0o700},
		{name: dir + "/" + path.Base(registryHtpasswdFile), content: htpasswd.String(), mode: 0o600},
		{name: dir + "/" + path.Base(registryCredentialFile), content: credentials.String(), mode: 0o600},
	}
	return errors.Wrapf(m.writeArchive(ctx, name, path.Dir(registryAuthDir), entries), "writing the users of registry %s", name)
}

// RegistryCredential returns the host's user and password of a local registry that requires
// authentication, which may push anywhere, read from its container through the engine; nil when
// it requires none.
func (m *Manager) RegistryCredential(ctx context.Context, name string) (*RegistryCredential, error) {
	r, err := m.FindRegistry(ctx, name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errors.Wrapf(container.ErrNotFound, "local registry %s", name)
	}
	creds, err := m.registryCredentials(ctx, r)
	if err != nil || creds == nil {
		return nil, err
	}
	return &creds[0], nil
}

// namespaceCredential returns the credential the nodes of a namespace's clusters send to a
// registry that requires authentication (nil when it requires none): the namespace's user's, or
// on a registry made before per-namespace users, the one user's. A registry that does not serve
// the namespace is refused.
func (m *Manager) namespaceCredential(ctx context.Context, r *Registry, namespace string) (*RegistryCredential, error) {
	if err := r.checkServes(namespace); err != nil {
		return nil, err
	}
	creds, err := m.registryCredentials(ctx, r)
	if err != nil || creds == nil {
		return nil, err
	}
	for _, c := range creds {
		if c.Username == namespace {
			return &c, nil
		}
	}
	if r.legacy() {
		return &creds[0], nil
	}
	return nil, errors.Errorf("registry %s has no user for namespace %s: re-create it keeping its images: dockyard registry delete --name %s --keep-data && %s",
		r.Name, namespace, r.Name, r.createCommand(r.Namespaces()))
}

// registryCredentials are the credentials a registry that requires authentication keeps in its
// container, the host's first; none when it requires none.
func (m *Manager) registryCredentials(ctx context.Context, r *Registry) ([]RegistryCredential, error) {
	if !r.AuthRequired() {
		return nil, nil
	}
	content, err := m.readFile(ctx, r.Name, registryCredentialFile)
	if err != nil {
		return nil, errors.Wrapf(err, "reading the credentials of registry %s", r.Name)
	}
	var creds []RegistryCredential
	for line := range strings.SplitSeq(strings.TrimSpace(string(content)), "\n") {
		user, password, ok := strings.Cut(line, ":")
		if !ok || user == "" || password == "" {
			return nil, errors.Errorf("the credentials of registry %s (%s in its container) are not user:password lines: re-create the registry", r.Name, registryCredentialFile)
		}
		creds = append(creds, RegistryCredential{Username: user, Password: password})
	}
	return creds, nil
}

// FindRegistry returns the local registry of that name, or nil.
func (m *Manager) FindRegistry(ctx context.Context, name string) (*Registry, error) {
	c, err := m.runtime.InspectContainer(ctx, name)
	if container.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrapf(err, "finding registry %s", name)
	}
	if c.Labels[registryLabel] != name {
		return nil, nil
	}
	return &Registry{Name: name, c: c}, nil
}

// findVolume returns the volume of that name, or nil.
func (m *Manager) findVolume(ctx context.Context, name string) (*container.Volume, error) {
	volumes, err := m.runtime.ListVolumes(ctx, nil)
	if err != nil {
		return nil, errors.Wrap(err, "listing the volumes")
	}
	for _, v := range volumes {
		if v.Name == name {
			return &v, nil
		}
	}
	return nil, nil
}

// DeleteRegistry removes a local registry's container, its network and, unless keepData, its
// volume: only those labelled as this registry's. A registry that does not exist is not an
// error. left names what carries one of those names but is not the registry's, and stays.
func (m *Manager) DeleteRegistry(ctx context.Context, name string, keepData bool) (left []string, err error) {
	var errs []error
	if r, err := m.FindRegistry(ctx, name); err != nil {
		return nil, err
	} else if r != nil {
		errs = append(errs, m.runtime.RemoveContainer(ctx, name))
	} else if _, err := m.runtime.InspectContainer(ctx, name); err == nil {
		left = append(left, "container "+name+" (not a registry Dockyard made)")
	}
	if n, err := m.runtime.InspectNetwork(ctx, registryNetwork(name)); err == nil {
		if n.Labels[registryLabel] == name {
			errs = append(errs, m.runtime.RemoveNetwork(ctx, n.Name))
		} else {
			left = append(left, "network "+n.Name+" (not registry "+name+"'s)")
		}
	} else if !container.IsNotFound(err) {
		errs = append(errs, err)
	}
	if !keepData {
		if v, err := m.findVolume(ctx, registryVolume(name)); err != nil {
			errs = append(errs, err)
		} else if v != nil && v.Labels[registryLabel] == name {
			errs = append(errs, m.runtime.RemoveVolume(ctx, v.Name))
		} else if v != nil {
			left = append(left, "volume "+v.Name+" (not registry "+name+"'s)")
		}
	}
	return left, kerrors.NewAggregate(errs)
}

// CheckRegistryNamespace tells whether the clusters of a namespace may use the local registry
// of that name: a *registryNotServedError when it exists and does not serve the namespace, nil
// when it serves it or does not exist (a cluster naming it waits for it).
func (m *Manager) CheckRegistryNamespace(ctx context.Context, name, namespace string) error {
	r, err := m.FindRegistry(ctx, name)
	if err != nil || r == nil {
		return err
	}
	return r.checkServes(namespace)
}

func (r *Registry) checkServes(namespace string) error {
	if r.Serves(namespace) {
		return nil
	}
	served := r.Namespaces()
	return &registryNotServedError{Registry: r.Name, Namespace: namespace, Namespaces: served,
		recreate: r.createCommand(slices.Concat(served, []string{namespace}))}
}

// ConnectRegistry attaches a local registry to the network of a cluster of namespace (once) and
// returns it as it is now; nil when there is no registry of that name. A registry that does
// not serve the namespace is refused with a *registryNotServedError, attaching nothing.
func (m *Manager) ConnectRegistry(ctx context.Context, name, network, namespace string) (*Registry, error) {
	r, err := m.FindRegistry(ctx, name)
	if err != nil || r == nil {
		return nil, err
	}
	if err := r.checkServes(namespace); err != nil {
		return nil, err
	}
	if _, ok := r.c.Networks[network]; ok {
		return r, nil
	}
	if err := m.runtime.ConnectNetwork(ctx, network, name); err != nil {
		return nil, errors.Wrapf(err, "attaching registry %s to network %s", name, network)
	}
	return m.FindRegistry(ctx, name)
}

// disconnectRegistries detaches every local registry from a network about to be removed.
func (m *Manager) disconnectRegistries(ctx context.Context, network string) error {
	registries, err := m.runtime.ListContainers(ctx, map[string]string{registryLabel: ""})
	if err != nil {
		return errors.Wrap(err, "listing the local registries")
	}
	var errs []error
	for _, r := range registries {
		if _, ok := r.Networks[network]; ok {
			errs = append(errs, m.runtime.DisconnectNetwork(ctx, network, r.Name))
		}
	}
	return kerrors.NewAggregate(errs)
}

// containerdHostsDir is containerd's config_path in Dockyard's and kind's node images, where it
// reads how to reach each registry host (<host>/hosts.toml) at every pull.
const containerdHostsDir = "/etc/containerd/certs.d"

func registryHostsFile(host string) string { return containerdHostsDir + "/" + host + "/hosts.toml" }

// registryHosts is a node's hosts.toml for a registry host served at address; cred, when the
// registry requires authentication, is sent with every request (a header containerd 1.6 and
// later add to each request to the host).
func registryHosts(host, address string, cred *RegistryCredential) string {
	server := "http://" + net.JoinHostPort(address, strconv.Itoa(registryPort))
	hosts := fmt.Sprintf("# Written by Dockyard: %s is the local registry, on the cluster's network.\nserver = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", host, server, server)
	if cred != nil {
		hosts += fmt.Sprintf("\n[host.%q.header]\n  Authorization = %q\n", server, cred.basic())
	}
	return hosts
}

// UseRegistry points the node's containerd at a local registry on the network: images named
// <registry host>/... are pulled from its address there, with the credential of the node's
// namespace when it requires authentication (in a file only root reads), which pushes only to
// that namespace's repositories. A registry that does not serve the node's namespace is
// refused, like ConnectRegistry refuses it. It changes nothing when the node has that
// configuration already; containerd reads it at each pull, no restart needed.
func (n *Node) UseRegistry(ctx context.Context, r *Registry, network string) error {
	address := r.Address(network)
	if address == "" {
		return errors.Errorf("registry %s is not attached to network %s", r.Name, network)
	}
	cred, err := n.m.namespaceCredential(ctx, r, n.Cluster.Namespace)
	if err != nil {
		return err
	}
	mode := int64(0o644)
	if cred != nil {
		mode = 0o600
	}
	file, want := registryHostsFile(r.Host()), registryHosts(r.Host(), address, cred)
	if got, err := n.m.readFile(ctx, n.Name, file); err == nil && string(got) == want {
		return nil
	}
	// Through the engine's archive API, into /etc/containerd, which every node image has.
	rel := strings.TrimPrefix(file, "/etc/containerd/")
	entries := []archiveEntry{
		{name: path.Dir(path.Dir(rel)), dir: true}, {name: path.Dir(rel), dir: true},
		{name: rel, content: want, mode: mode},
	}
	return errors.Wrapf(n.m.writeArchive(ctx, n.Name, "/etc/containerd", entries), "configuring registry %s in node %s", r.Host(), n.Name)
}

// Registries names the local registries on the engine: those with a container, a network or a
// data volume of theirs left, sorted.
func (m *Manager) Registries(ctx context.Context) ([]string, error) {
	any := map[string]string{registryLabel: ""}
	names := map[string]bool{}
	cs, err := m.runtime.ListContainers(ctx, any)
	if err != nil {
		return nil, errors.Wrap(err, "listing the local registries")
	}
	for _, c := range cs {
		names[c.Labels[registryLabel]] = true
	}
	ns, err := m.runtime.ListNetworks(ctx, any)
	if err != nil {
		return nil, errors.Wrap(err, "listing the local registries' networks")
	}
	for _, n := range ns {
		names[n.Labels[registryLabel]] = true
	}
	vs, err := m.runtime.ListVolumes(ctx, any)
	if err != nil {
		return nil, errors.Wrap(err, "listing the local registries' volumes")
	}
	for _, v := range vs {
		names[v.Labels[registryLabel]] = true
	}
	delete(names, "")
	return slices.Sorted(maps.Keys(names)), nil
}
