#!/usr/bin/env bash
# Measures `make quickstart` or CI (`bash .ci/run`) as they run on a fresh machine, COLD_RUNS
# times one after another, and prints every run's wall time and their median.
#
#   hack/cold.sh quickstart     # COLD_RUNS=3 by default
#   hack/cold.sh ci             # COLD_RUNS=1 by default
#
# Each run starts from a new clone of HEAD and takes away what makes a machine warm, touching
# only what the project's scripts made:
#   - Go's module and build caches, Dockyard's cache, ~/.dockyard and ~/.kube: the run gets new,
#     empty ones (HOME, GOPATH, GOMODCACHE, GOCACHE and DOCKYARD_CACHE under $COLD_DIR), so the
#     machine's own caches are neither read nor changed;
#   - the images Dockyard built (label dev.dockyard.built-by=dockyard-build) are removed from
#     Docker, Podman and Dockyard's containerd;
#   - unless COLD_ENGINES=keep: the engines hack/ensure-*.sh started are stopped by the PIDs
#     they recorded, and the Debian packages those scripts and the image builder install are
#     purged with what they pulled in, and apt's downloaded packages removed, so the run installs
#     them again. A Docker that hack/ensure-docker.sh did not start is never stopped: the script
#     refuses instead.
# COLD_CACHES=keep measures on a machine that is already fresh: the run uses the machine's own
# caches (it refuses unless they are all empty or absent) and leaves them filled, so what follows
# on that machine starts warm. One run only: a second would not be cold.
# It refuses to start while a container runs on Docker or Podman, or while CI, a quick start, a
# suite or an image build runs in any checkout: it would break them.
# Logs and each run's summary stay in $COLD_DIR (default ~/.cache/dockyard-cold); the clone and
# the emptied caches of a run are removed after it.
set -euo pipefail
export LC_ALL=C

mode=${1:-}
case "$mode" in
quickstart) runs=${COLD_RUNS:-3} cmd=(make quickstart) ;;
ci) runs=${COLD_RUNS:-1} cmd=(bash .ci/run) ;;
*)
	echo "usage: hack/cold.sh quickstart|ci" >&2
	exit 2
	;;
esac
repo=$(cd "$(dirname "$0")/.." && pwd)
rev=$(git -C "$repo" rev-parse --short HEAD)
real_cache=${DOCKYARD_CACHE:-$HOME/.cache/dockyard}
cold_dir=${COLD_DIR:-$HOME/.cache/dockyard-cold}
engines=${COLD_ENGINES:-uninstall}
caches=${COLD_CACHES:-empty}
mkdir -p "$cold_dir"
report="$cold_dir/$mode-$rev-$(date -u +%Y%m%dT%H%M%SZ).md"
# shellcheck source=hack/lib/pidfile.sh
. "$repo/hack/lib/pidfile.sh"

say() { echo "$*" | tee -a "$report"; }
fmt() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

# Packages hack/ensure-docker.sh, ensure-podman.sh, ensure-containerd.sh and the image builder
# (debootstrap) install when missing.
packages=(docker.io containerd runc podman containernetworking-plugins debootstrap)

# refuse_if_busy stops the script before it touches anything while the engines or the project
# are in use: it stops engines and removes images, which would break a run of CI, a quick start
# or a suite in any checkout.
refuse_if_busy() {
	local running procs
	running=$({
		docker ps -q 2>/dev/null || true
		podman ps -q 2>/dev/null || true
	} | wc -l)
	if [ "$running" -gt 0 ]; then
		echo "cold: $running containers are running on the engines; stop them first (make quickstart-delete, dockyard delete cluster)" >&2
		exit 1
	fi
	procs=$(pgrep -fa -- '\.ci/run|hack/run-targets\.sh|hack/conformance\.sh|go test|ginkgo|dockyard-build|make (quickstart|test|images|bench|density)' || true)
	if [ -n "$procs" ]; then
		printf 'cold: the project is running; wait for it to end:\n%s\n' "$procs" >&2
		exit 1
	fi
}

remove_images() {
	local ids
	if docker info >/dev/null 2>&1; then
		ids=$(docker images -q --filter label=dev.dockyard.built-by=dockyard-build | sort -u)
		[ -z "$ids" ] || docker rmi -f $ids >/dev/null
	fi
	if command -v podman >/dev/null 2>&1; then
		ids=$(podman images -q --filter label=dev.dockyard.built-by=dockyard-build 2>/dev/null | sort -u)
		[ -z "$ids" ] || podman rmi -f $ids >/dev/null || true
	fi
}

stop_engines() {
	local pid name file
	for name in dockerd:dockerd/pid podman:podman/pid containerd:containerd/pid; do
		file="$real_cache/${name#*:}"
		if pid=$(pid_of "$file" "${name%%:*}"); then
			echo "cold: stopping ${name%%:*} (pid $pid, started by hack/ensure-${name%%:*}.sh)"
			kill "$pid"
			for _ in $(seq 1 60); do
				pid_of "$file" "${name%%:*}" >/dev/null || break
				sleep 1
			done
		fi
	done
	if docker info >/dev/null 2>&1; then
		echo "cold: a Docker engine that hack/ensure-docker.sh did not start still answers; refusing to uninstall it (COLD_ENGINES=keep measures without)" >&2
		exit 1
	fi
	# Dockyard's containerd keeps its images in its own root.
	rm -rf /var/lib/dockyard-containerd
	export DEBIAN_FRONTEND=noninteractive
	# What the packages pulled in goes with them (--autoremove), unless the machine already had
	# packages apt would autoremove: those were not the project's, so only the list is purged.
	local autoremove=--autoremove
	if apt-get -s autoremove 2>/dev/null | grep -q '^Remv'; then
		echo "cold: apt would autoremove packages the project did not install; purging only ${packages[*]}"
		autoremove=
	fi
	local installed=()
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' && installed+=("$p")
	done
	if [ "${#installed[@]}" -gt 0 ]; then
		echo "cold: purging ${installed[*]}"
		apt-get -o DPkg::Lock::Timeout=600 purge -y -qq $autoremove "${installed[@]}" >/dev/null
	fi
	apt-get clean
}

# refuse_unless_fresh stops COLD_CACHES=keep on a machine whose caches hold anything: its run
# would not be cold.
refuse_unless_fresh() {
	local d
	if [ "$runs" != 1 ]; then
		echo "cold: COLD_CACHES=keep measures one run (COLD_RUNS=$runs): a second would start warm" >&2
		exit 2
	fi
	for d in "$real_cache" "$(go env GOMODCACHE)" "$(go env GOCACHE)" "$HOME/.dockyard" "$HOME/.kube"; do
		if [ -n "$(ls -A "$d" 2>/dev/null)" ]; then
			echo "cold: COLD_CACHES=keep needs a fresh machine, and $d is not empty" >&2
			exit 1
		fi
	done
}

# in_run runs a command in the run's clone (WORK/src) with the run's caches: new, empty ones
# under WORK/home, or with COLD_CACHES=keep the machine's own.
in_run() {
	local work=$1
	shift
	(
		cd "$work/src"
		if [ "$caches" = empty ]; then
			export HOME="$work/home" GOPATH="$work/home/go" GOMODCACHE="$work/home/go/pkg/mod" GOCACHE="$work/home/.cache/go-build"
			export DOCKYARD_CACHE="$work/home/.cache/dockyard"
		fi
		"$@"
	)
}

case "$caches" in
keep) refuse_unless_fresh ;;
empty) ;;
*)
	echo "cold: COLD_CACHES is empty (the default) or keep, not $caches" >&2
	exit 2
	;;
esac
refuse_if_busy
say "# Cold $mode: ${cmd[*]}, $runs runs, $rev ($(date -u +%FT%TZ), $(nproc) cores, engines: $engines)"
say ""
times=()
for run in $(seq 1 "$runs"); do
	work="$cold_dir/run-$run"
	[ "$run" = 1 ] || refuse_if_busy
	rm -rf "$work"
	mkdir -p "$work/home"
	git clone -q "$repo" "$work/src"
	remove_images
	[ "$engines" = keep ] || stop_engines
	log="${report%.md}-run$run.log"
	echo "cold: run $run of $runs (log: $log)"
	start=$(date +%s)
	status=0
	in_run "$work" "${cmd[@]}" >"$log" 2>&1 || status=$?
	took=$(($(date +%s) - start))
	times+=("$took")
	say "- run $run: $(fmt "$took")$([ "$status" = 0 ] || echo " (FAILED, exit $status: $log)")"
	if [ "$mode" = quickstart ]; then
		in_run "$work" make quickstart-delete >>"$log" 2>&1 || true
	fi
	# The engines the run started are the project's: the machine's cache records their PIDs, as
	# if hack/ensure-*.sh had started them there, before the run's cache goes.
	for d in dockerd podman containerd; do
		if [ -f "$work/home/.cache/dockyard/$d/pid" ]; then
			mkdir -p "$real_cache/$d"
			cp "$work/home/.cache/dockyard/$d/pid" "$real_cache/$d/pid"
		fi
	done
	# Go's module cache is read-only on disk.
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
	[ "$status" = 0 ] || exit "$status"
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }')
say ""
say "Median of $runs: $(fmt "$median")"
echo "written to $report"
