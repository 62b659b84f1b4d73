// Package podman implements container.Runtime on a Podman engine (4.x, rootful), through the
// engine's API socket; it never runs the podman CLI.
//
// # Route
//
// Podman serves two REST APIs on one socket: a Docker-compatible one and its own (libpod).
// This package embeds dockerengine.Runtime on the compatible API (the moby Go SDK the project
// already uses), so the code Dockyard runs against Docker runs against Podman too, and it
// replaces, method by method, what the compatible API gets wrong, calling libpod's endpoints
// (/v4.0.0/libpod/...) with plain net/http. Podman's own Go bindings were not used: they pull
// in cgo (gpgme, btrfs, devmapper) and most of Podman's tree, to build a client of a handful
// of endpoints. The libpod JSON this package sends is a small mirror of libpod's
// SpecGenerator (create.go); the 4.0.0 path prefix is served by every Podman 4.x.
//
// # Differences from Docker, each handled here
//
//   - Bind-mount sources: the compatible create makes a missing bind source as an empty
//     directory on the engine's host, so a required mount never fails and an Optional one is
//     never left out. Containers are created through libpod's create, which fails on a
//     missing source ("statfs <path>: no such file or directory"); an Optional mount named
//     there is dropped and the create retried (the engine checks on its own host, which may
//     not be the caller's).
//   - Missing image or network on create: libpod answers HTTP 500 ("image not known", "network
//     not found"); both are wrapped in container.ErrNotFound as Docker's 404 is.
//   - Removal: the compatible removal waits the container's stop timeout (10s) before it
//     kills a running container; libpod's removal is called with force and timeout 0.
//   - Events: the compatible stream calls a removal "remove" (Docker: "destroy"; "died" is
//     already translated to "die" there, and is translated here too should an older Podman
//     pass it through); Podman reports no network events at all. Network removals are
//     synthesized: RemoveNetwork publishes to this Runtime's streams (held for a second, so
//     the engine's container events recorded before it come out first), and each stream
//     lists the networks every 5s to notice removals made elsewhere. A network created and
//     removed by someone else between two polls is not reported. No engine-side filters are
//     used; types, actions and labels are matched here, and a repeated death is dropped.
//   - Label filters: Podman's volume list matches volumes carrying ANY of the given labels
//     (Dockyard once removed another machine's volume over this). Every list (containers,
//     networks, volumes) is checked again here against all the labels.
//   - Image names: Podman keeps qualified names (localhost/...) as given, but names an image
//     loaded from a docker-save archive tagged with a short name localhost/<name> (found on
//     this engine: "dockyard-test-short:x" became localhost/dockyard-test-short:x), where
//     Docker says docker.io/library/<name>. ImageExists, InspectImage and RemoveImage try a
//     docker.io name as given, in full, short and under localhost/.
//   - The default network: the compatible API takes "bridge" on create (and inspects the
//     network "bridge") but reports a container's endpoint on it under Podman's name,
//     "podman". InspectContainer and ListContainers report it under both names, so callers
//     that look a node's address up by "bridge" find it.
//   - Stop signal: libpod takes a number; names such as SIGRTMIN+3 are converted.
//   - Pids limit: rootful Podman's default pids limit (2048) is lifted (Docker sets none).
//   - Ulimits: rootful Podman gives containers nofile 1048576 and nproc 4194304; where the
//     host's hard limits are lower (and the engine lacks CAP_SYS_RESOURCE) every start fails
//     with "error setting rlimit type 6/7". The fix is in containers.conf ([containers]
//     default_ulimits with the host's hard limits, nproc at most kernel.pid_max, soft equal
//     to hard because Podman 4.3's API swaps soft and hard); hack/ensure-podman.sh writes
//     it, and StartContainer's error names it.
//   - OCI runtime: crun refuses hybrid cgroups with a controller on cgroup v2 ("cgroups in
//     hybrid mode not supported"), and Podman prefers crun when both are installed;
//     hack/ensure-podman.sh sets [engine] runtime = "runc" on such hosts, and
//     StartContainer's error names it.
//   - Restart policies are kept by Podman's conmon while the engine runs; after a host
//     reboot Podman restarts "always" containers only through its podman-restart systemd
//     unit, which a host without systemd does not run.
//   - Known upstream bug, not worked around: netavark 1.4 (Debian bookworm) drops a network's
//     isolation rule when the last container of an isolated network stops.
//
// Info, inspect, list, exec (stdin, exit codes, stdout and stderr apart), copy into running
// and created containers, logs, signals, networks with subnet, gateway and range, fixed
// addresses, port publishing with engine-chosen ports, connect/disconnect, volumes and
// image save/load/remove behave as Docker's through the compatible API (the conformance
// suite runs against a real engine in podman_test.go).
//
// # Rootless
//
// Not supported or tested: this package was built on a cgroup v1 host, where rootless
// Podman cannot limit resources or delegate cgroups to a node's systemd. A rootless setup
// would need cgroup v2 with systemd delegating the cpu, memory and pids controllers to the
// user (Delegate= in user@.service), the user's socket (unix://$XDG_RUNTIME_DIR/podman/
// podman.sock, passed to New), slirp4netns or pasta for port publishing, and no
// Privileged-only features the user namespace forbids (devices, some sysctls); fixed
// addresses need the rootless netavark namespace. Node containers running systemd and
// kubelet rootless, as kind does, need all of these.
package podman
