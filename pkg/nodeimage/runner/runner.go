// Package runner is the bootstrap runner Dockyard puts in a node, and the one description of
// its protocol. The runner is shell, kept as files under scripts/ and embedded: run.sh runs a
// plan once as a transient systemd unit, lib.sh holds what run.sh and the step scripts share,
// upload.sh unpacks a plan and status.sh reports on it. The Go side says where they live
// (Protocol), how they are started, stopped and read (its commands), what a plan looks like
// (Archive, the plan commands and step markers) and what the state file says (State, Status).
//
// The node layer (package docker) starts and follows bootstraps with it; the simulator in
// the in-memory engine (pkg/container/inmemory, Nodes) plays the runner by the same names.
package runner

import (
	_ "embed" // the runner's scripts
	"path"
	"strconv"
	"time"
)

var (
	//go:embed scripts/run.sh
	runScript []byte
	//go:embed scripts/lib.sh
	libScript []byte
	//go:embed scripts/upload.sh
	uploadScript string
	//go:embed scripts/status.sh
	statusScript string
)

// Files and directories in the runner's directory.
const (
	// RunScript runs the plan; LibScript is sourced by it and by the step scripts.
	RunScript = "run.sh"
	LibScript = "lib.sh"
	// PlanFile lists the plan commands (CmdStart, CmdFile, CmdShell, CmdFinish), one per line.
	PlanFile = "plan"
	// FilesDir holds the content of file steps (FilesDir/<step>), StepsDir the step scripts.
	// Both are removed when the plan ends or its unit stops: they hold private keys.
	FilesDir = "files"
	StepsDir = "steps"
	// StateFile is the runner's state (State), LockDir exists once the plan started, and
	// OutputFile collects the output of every step.
	StateFile  = "state"
	LockDir    = "lock"
	OutputFile = "output.log"
)

// Plan commands: the lines of PlanFile, defined by run.sh.
const (
	// CmdStart <timeout seconds> starts the plan.
	CmdStart = "start"
	// CmdFile <step> <path> <mode> <owner> <group> <append 0|1> installs FilesDir/<step>.
	CmdFile = "run_file"
	// CmdShell <first step> <script> runs a step script: consecutive commands in one shell.
	CmdShell = "run_shell"
	// CmdFinish [<sentinel>] decides the outcome: with a sentinel, whether it exists.
	CmdFinish = "finish"
)

// Step markers: in a step script, each command stands between "StepMarker <step>" and
// "DoneMarker <step> $?" lines (defined in lib.sh).
const (
	StepMarker = "__dockyard_step"
	DoneMarker = "__dockyard_done"
)

// Protocol is where the runner lives in a node and the systemd unit it runs as.
type Protocol struct {
	// Dir is the runner's directory, on the node's /var volume so that the state and the
	// lock survive a restart of the node.
	Dir string
	// Unit is the name of the transient systemd unit.
	Unit string
}

// Default is the protocol of every Dockyard node.
func Default() Protocol {
	return Protocol{Dir: "/var/lib/dockyard/bootstrap", Unit: "dockyard-bootstrap"}
}

// Path is the path of a file in the runner's directory.
func (p Protocol) Path(name string) string { return path.Join(p.Dir, name) }

// UploadCommand unpacks an archive (Archive) read from stdin into Dir; it does nothing once a
// plan started there.
func (p Protocol) UploadCommand() []string {
	return []string{"sh", "-c", uploadScript, "upload", p.Dir}
}

// StartCommand starts the uploaded plan as the unit; systemd stops it after timeout. When the
// unit exists already, systemd-run fails saying so ("already exists").
func (p Protocol) StartCommand(timeout time.Duration) []string {
	return []string{"systemd-run", "--unit=" + p.Unit, "--description=Dockyard bootstrap",
		"--collect", "--property=RuntimeMaxSec=" + strconv.Itoa(Seconds(timeout)),
		"--property=ExecStopPost=/bin/rm -rf " + p.Path(FilesDir) + " " + p.Path(StepsDir),
		"--setenv=HOME=/root", "/bin/sh", p.Path(RunScript)}
}

// StatusCommand prints the runner's Status.
func (p Protocol) StatusCommand() []string {
	return []string{"sh", "-c", statusScript, "status", p.Dir, p.Unit}
}

// StopCommand stops a running plan; its unit's ExecStopPost removes the staged files.
func (p Protocol) StopCommand() []string {
	return []string{"systemctl", "stop", p.Unit}
}

// OutputCommand prints the last n bytes of the plan's output.
func (p Protocol) OutputCommand(n int) []string {
	return []string{"tail", "-c", strconv.Itoa(n), p.Path(OutputFile)}
}

// Seconds is a plan's timeout as the whole seconds the runner and systemd take (at least one).
func Seconds(timeout time.Duration) int {
	return max(int(timeout.Round(time.Second).Seconds()), 1)
}
