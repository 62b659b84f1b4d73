// Package nodecmd is the one home of the commands Dockyard runs in its node and load balancer
// containers, but the bootstrap runner's (pkg/nodeimage/runner states those): the node layer
// builds every argv here, and the in-memory engine's nodes (pkg/container/inmemory) recognise them here,
// so the two cannot drift apart.
package nodecmd

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CRIPlugin is containerd's CRI plugin, which kubelet talks to; containerd keeps running without
// it when it fails to load, so "containerd is active" alone does not mean pods can run.
const CRIPlugin = "io.containerd.grpc.v1.cri"

// namespace is containerd's namespace of Kubernetes' images and containers.
const namespace = "k8s.io"

// Check prints three lines: systemd's state ("running", "degraded", "starting", ...),
// containerd's unit state ("active", ...), and the CRI plugin's status ("ok" or "error"; empty
// while containerd does not answer). systemctl is-system-running exits non-zero unless
// running: read the lines, not the exit code.
func Check() []string {
	return []string{"sh", "-c", "systemctl is-system-running; systemctl is-active containerd; " +
		`ctr plugins ls 2>/dev/null | awk '$1 "." $2 == "` + CRIPlugin + `" {print $4}'`}
}

// CRIFailure prints containerd's journal line saying why its CRI plugin failed to load.
func CRIFailure() []string {
	return []string{"sh", "-c", "journalctl -u containerd --no-pager -o cat | grep -m1 'failed to load plugin " + CRIPlugin + "'"}
}

// RestartContainerd restarts containerd; systemd returns once it serves again (Type=notify).
func RestartContainerd() []string { return []string{"systemctl", "restart", "containerd"} }

// ImagesList lists the images of a name in containerd's Kubernetes namespace, with their labels.
func ImagesList(name string) []string {
	return []string{"ctr", "--namespace", namespace, "images", "list", "name==" + name}
}

// ImageImport imports an image archive (docker save's) from standard input.
func ImageImport() []string {
	return []string{"ctr", "--namespace", namespace, "images", "import", "-"}
}

// ImageLabel sets a label ("key=value") on an image.
func ImageLabel(name, label string) []string {
	return []string{"ctr", "--namespace", namespace, "images", "label", name, label}
}

// ParseImagesList returns the name an ImagesList command asks for.
func ParseImagesList(cmd []string) (name string, ok bool) {
	if len(cmd) != 6 || !slices.Equal(cmd[:5], ImagesList("")[:5]) {
		return "", false
	}
	return strings.CutPrefix(cmd[5], "name==")
}

// ParseImageLabel returns the image and label of an ImageLabel command.
func ParseImageLabel(cmd []string) (name, label string, ok bool) {
	if len(cmd) != 7 || !slices.Equal(cmd[:5], ImageLabel("", "")[:5]) {
		return "", "", false
	}
	return cmd[5], cmd[6], true
}

// HAProxyCheck has haproxy check a configuration file without loading it.
func HAProxyCheck(file string) []string { return []string{"haproxy", "-c", "-f", file} }

// ParseHAProxyCheck returns the file a HAProxyCheck command checks.
func ParseHAProxyCheck(cmd []string) (file string, ok bool) {
	if len(cmd) != 4 || !slices.Equal(cmd[:3], HAProxyCheck("")[:3]) {
		return "", false
	}
	return cmd[3], true
}

// Cat prints a file.
func Cat(file string) []string { return []string{"cat", file} }

// ParseCat returns the file a Cat command prints.
func ParseCat(cmd []string) (file string, ok bool) {
	if len(cmd) != 2 || cmd[0] != "cat" {
		return "", false
	}
	return cmd[1], true
}

// TarDir writes a tar archive of a directory, under its base name, to standard output; nothing
// when the directory does not exist.
func TarDir(dir string) []string {
	return []string{"sh", "-c", `[ -d "$1" ] || exit 0; cd "$(dirname "$1")" && tar -c "$(basename "$1")"`, "sh", dir}
}

// Script runs a shell script (an embedded file's content) with arguments; name is its $0.
func Script(name, body string, args ...string) []string {
	return append([]string{"sh", "-c", body, name}, args...)
}

// Log is a file of a node's logs and the command whose output it holds.
type Log struct {
	File string
	Cmd  []string
}

// journal prints a unit's journal (every unit's when unit is empty).
func journal(unit string) []string {
	cmd := []string{"journalctl", "--no-pager", "--output=short-precise"}
	if unit != "" {
		cmd = append(cmd, "--unit="+unit+".service")
	}
	return cmd
}

// NodeLogs are the files of a node's logs: its journal, kubelet's, containerd's and the
// bootstrap unit's, the bootstrap's output and state files, kubelet's version, containerd's
// containers, tasks and images, and the processes.
func NodeLogs(bootstrapUnit, bootstrapOutput, bootstrapState string) []Log {
	return []Log{
		{"journal.log", journal("")},
		{"kubelet.log", journal("kubelet")},
		{"containerd.log", journal("containerd")},
		{"bootstrap-unit.log", journal(bootstrapUnit)},
		{"bootstrap-output.log", Cat(bootstrapOutput)},
		{"bootstrap-state", Cat(bootstrapState)},
		{"kubelet-version.txt", []string{"kubelet", "--version"}},
		{"containers.txt", []string{"sh", "-c", "ctr --namespace " + namespace + " containers list; echo; ctr --namespace " + namespace + " tasks list"}},
		{"images.txt", []string{"ctr", "--namespace", namespace, "images", "list"}},
		{"processes.txt", []string{"ps", "-eo", "pid,ppid,rss,etime,args"}},
	}
}

// Services a fault can stop in a node: kubelet's unit, and the control plane's static Pods.
const (
	Kubelet               = "kubelet"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Etcd                  = "etcd"
)

// Services are the names StopService and StartService take.
var Services = []string{Kubelet, KubeAPIServer, KubeControllerManager, KubeScheduler, Etcd}

// manifests is where kubeadm writes the static Pods' manifests; stoppedManifests where a
// stopped one is set aside, which kubelet does not read.
const (
	manifests        = "/etc/kubernetes/manifests"
	stoppedManifests = "/etc/kubernetes/stopped-manifests"
)

// StopService stops a service of a node: kubelet's unit (its Node then stops posting status),
// or a static Pod, whose manifest is set aside so kubelet stops it. Stopping a stopped service,
// or a static Pod the node does not run, succeeds.
func StopService(service string) []string {
	if service == Kubelet {
		return []string{"systemctl", "stop", Kubelet}
	}
	return moveManifest(service, manifests, stoppedManifests)
}

// StartService starts a service StopService stopped; starting a running one succeeds.
func StartService(service string) []string {
	if service == Kubelet {
		return []string{"systemctl", "start", Kubelet}
	}
	return moveManifest(service, stoppedManifests, manifests)
}

func moveManifest(service, from, to string) []string {
	return Script("move-manifest", `[ -f "$2/$1.yaml" ] || exit 0; mkdir -p "$3" && mv "$2/$1.yaml" "$3/$1.yaml"`, service, from, to)
}

// ParseService returns the service a StopService or StartService command names, and whether it
// starts it.
func ParseService(cmd []string) (service string, start, ok bool) {
	for _, s := range Services {
		switch {
		case slices.Equal(cmd, StopService(s)):
			return s, false, true
		case slices.Equal(cmd, StartService(s)):
			return s, true, true
		}
	}
	return "", false, false
}

// SetNetworkDelay delays every packet the node sends by d (tc's netem on eth0, which needs the
// host kernel's sch_netem), or takes the delay away when d is zero; setting it again replaces it.
func SetNetworkDelay(d time.Duration) []string {
	if d <= 0 {
		return Script("network-delay", `tc qdisc del dev eth0 root 2>/dev/null; exit 0`)
	}
	return Script("network-delay", `tc qdisc replace dev eth0 root netem delay "$1"`, fmt.Sprintf("%dms", d.Milliseconds()))
}

// ParseNetworkDelay returns the delay a SetNetworkDelay command sets (zero: none).
func ParseNetworkDelay(cmd []string) (d time.Duration, ok bool) {
	if slices.Equal(cmd, SetNetworkDelay(0)) {
		return 0, true
	}
	if len(cmd) != 5 || !slices.Equal(cmd[:4], SetNetworkDelay(time.Millisecond)[:4]) {
		return 0, false
	}
	ms, err := strconv.Atoi(strings.TrimSuffix(cmd[4], "ms"))
	if err != nil || !strings.HasSuffix(cmd[4], "ms") {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
