// Package containerd implements container.Runtime on a containerd daemon alone, with no Docker
// in the path: the containerd Go client (v2, which speaks to 1.6 daemons and later) in the
// namespace "dockyard", and CNI plugins (Debian's containernetworking-plugins) for networks.
// hack/ensure-containerd.sh installs both and starts Dockyard's own daemon on
// /run/dockyard-containerd/containerd.sock, apart from any containerd a Docker engine runs.
//
// # How each part maps onto containerd and CNI
//
// Containers are containerd containers named by the container's name, with the spec's labels
// as their labels, an overlayfs snapshot of the image as root filesystem and an OCI spec built
// with containerd's oci options, after Docker's defaults: the image's environment, working
// directory and user; entrypoint and command replaced as Docker does (an entrypoint given drops
// the image's command); no "no new privileges"; resource limits inherited from the daemon
// (containerd's default spec would cap open files at 1024); Docker's default capabilities and
// masked paths; /sys read-only; a cgroup filesystem on /sys/fs/cgroup (read-only unless
// privileged); /etc/hostname, /etc/hosts and /etc/resolv.conf bind-mounted from files the
// runtime writes. Privileged means every capability the daemon holds, every host device and
// device access, writable /sys and cgroups, nothing masked; otherwise CapAdd/CapDrop (with
// "ALL"), device cgroup rules, Unconfined (no masked or read-only paths; containerd applies no
// seccomp or AppArmor profile unless asked) and a private cgroup namespace apply. NanoCPUs
// become a CFS quota over a 100ms period, MemoryBytes a memory limit.
//
// What containerd has no field for is kept in a record per container under StateDir
// (containers/<name>/): hostname, networks and addresses, published ports, mounts with their
// host paths, stop signal, restart policy, start time. States: a container without a task is
// "created" until first started and "exited" after; a task that is running is "running", one
// whose process ended is "exited" with its exit status (128+signal when killed), kept until the
// container starts again or is removed. StartContainer deletes a stopped task and creates a new
// one, so restarts keep the network namespace and with it the addresses.
//
// Output goes to StateDir/containers/<name>/output.log, written on the daemon's side so it is
// kept while no client runs: a file:// log URI without a terminal; with a terminal (Tty),
// containerd 1.6's shim can only hand the console to a logging binary, so /bin/sh on the
// daemon's host is that binary and appends to the file. ContainerLogs tails the file.
//
// Exec runs a task exec process with the container's process spec and the command's arguments,
// environment and numeric user ("root" too; user names are not resolved); stdin is streamed
// through a FIFO and closed with CloseIO at EOF; stdout and stderr are copied to the writers
// (serialized, as callers may pass one writer for both). When ctx ends the process is killed.
//
// Copies reach a running container through /proc/<pid>/root, its own view of its mounts
// (volumes, binds, tmpfs), with paths resolved inside that root (filepath-securejoin). A
// container that does not run has its snapshot mounted for the copy, its volumes and binds
// mapped to their host directories.
//
// Networks are the runtime's own (containerd has none): a record under StateDir/networks and a
// CNI configuration list rendered per attachment: bridge (isGateway, ipMasq, hairpin; the
// default route only on the primary network), host-local addresses whose allocations live
// under the network's directory (the IPRange as allocation range, or a one-address range for a
// fixed IPv4Address, which host-local then refuses to give twice), portmap for published ports
// (a host port of 0 is picked from the free ports when the container is created and reported
// by InspectContainer), and the firewall plugin, which accepts the containers' traffic in the
// FORWARD chain whatever its policy (Docker sets DROP) and, with its same-bridge ingress
// policy, drops traffic from one of the runtime's bridges to another: networks are isolated as
// Docker's are (RemoveNetwork deletes the bridge's isolation rules, which the plugin leaves
// behind). A network without a subnet gets a free
// /24 of 10.210.0.0/16, away from Docker's pools, meeting no host address, route or other
// network. Each container has a network namespace of its own (bind-mounted under RunDir, its
// loopback interface up) from creation to removal; its primary interface (eth0) is added when it first starts, so a fixed
// address in use makes the start fail, as with Docker. ConnectNetwork adds ethN at once
// (running or not), DisconnectNetwork deletes it. RemoveNetwork refuses while containers are
// attached, deletes the bridge and the allocations, and publishes "network destroy".
//
// There is no DNS server: each container's /etc/hosts names every container it shares a
// network with (name, hostname, and aliases on the primary network), rewritten in place when
// attachments change. Names resolve through /etc/hosts instead of Docker's 127.0.0.11.
//
// Volumes are directories under StateDir/volumes with their labels beside; a volume still empty
// when a container is created is filled with the image's content at the mount's target, as
// Docker does (Dockyard's nodes mount /var so). A named volume a container names but nobody
// created is created without labels; anonymous volumes live in the container's directory and
// go with it. A volume in use cannot be removed.
//
// Events come from containerd's event service: /tasks/start is "start", /tasks/exit of a
// task's main process "die", /containers/delete "destroy"; a deleted container's labels are
// remembered from when the stream started or saw the container created. RemoveNetwork
// publishes the topic /dockyard/network/destroy on the same service, so every subscriber of the
// daemon sees network removals, whichever process removed the network.
//
// Images: LoadImages imports docker-save or OCI archives (names as given; docker.io short names
// normalized as Docker does) and unpacks them into overlayfs; SaveImages exports the OCI layout
// with Docker's manifest.json; an image's ID is its configuration's digest; RemoveImage removes
// a name (or every name of an ID) and refuses when a container was created from it and no
// other name keeps it; PullImage uses containerd's client-side resolver and returns its error.
// Info reports "containerd", the daemon's version, the host's cgroup version and "cgroupfs",
// and the host's CPUs (runtime.NumCPU), memory (/proc/meminfo) and architecture (GOARCH): the
// daemon runs on the manager's host.
//
// # Differences from Docker
//
//   - RestartPolicy is recorded but not enforced: a stopped container is started again only by
//     Dockyard (its controllers restart nodes they find stopped). containerd's restart monitor
//     would restart tasks, but it knows nothing of network namespaces lost with a host reboot.
//   - StopSignal is recorded; the interface has no stop call (RemoveContainer kills).
//   - Host ports left at 0 are chosen at creation and kept across restarts, not at each start.
//   - An exited container keeps its addresses until removed (Docker gives them back on stop).
//   - Network "" or "none" gives the container a namespace with only loopback (no default
//     bridge network exists); "host" shares the host's. IPv6 networks are refused.
//   - Name resolution is /etc/hosts, not an embedded DNS server (see above).
//   - After a host reboot the network namespaces under RunDir are gone: StartContainer gives
//     the container a new one with the same networks and fixed address (its spec is updated);
//     the old interfaces' addresses and rules are released through a stand-in interface.
//
// Changes to networks and containers' attachments are serialized by a mutex and an flock on
// StateDir/lock, so the processes sharing StateDir (the manager, tools, test binaries) never
// pick one subnet twice or interleave a container's attachments.
package containerd
