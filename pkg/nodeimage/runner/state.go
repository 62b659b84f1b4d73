package runner

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// Phase is what the state file says of a plan; empty before it started.
type Phase string

// Phases the runner writes.
const (
	PhaseRunning   Phase = "running"
	PhaseSucceeded Phase = "succeeded"
	PhaseFailed    Phase = "failed"
)

// State is the state file, written by lib.sh's __dockyard_state as key=value lines: phase,
// step, started (Unix seconds), exit, timeout (seconds) and, when the success sentinel was
// missing, missing. A plan killed by systemd (timeout) or by a restart of the node leaves the
// file at the step it reached, still running.
type State struct {
	Phase Phase
	// Step is the 1-based step running, failed or last run; 0 before the first.
	Step int
	// Started is when the plan started, in Unix seconds.
	Started int64
	// Exit is the exit code of the first failed step.
	Exit int
	// Timeout is the plan's timeout in seconds.
	Timeout int
	// Missing names the success sentinel that a plan finished without.
	Missing string
}

// Marshal renders the state file.
func (s State) Marshal() []byte {
	out := fmt.Sprintf("phase=%s\nstep=%d\nstarted=%d\nexit=%d\ntimeout=%d\n", s.Phase, s.Step, s.Started, s.Exit, s.Timeout)
	if s.Missing != "" {
		out += "missing=" + s.Missing + "\n"
	}
	return []byte(out)
}

// Status is what StatusCommand prints: the unit's activity, the state file, whether the lock
// exists and the node's clock (Unix seconds), as key=value lines.
type Status struct {
	State
	// Unit is systemctl is-active's answer for the unit ("active", "inactive", ...).
	Unit   string
	Locked bool
	Now    int64
}

// UnitActive reports whether the plan's unit is running.
func (s Status) UnitActive() bool { return s.Unit == "active" || s.Unit == "activating" }

// Marshal renders a Status as StatusCommand prints it.
func (s Status) Marshal() []byte {
	out := "unit=" + s.Unit + "\n"
	if s.Phase != "" {
		out += string(s.State.Marshal())
	}
	if s.Locked {
		out += "lock=1\n"
	}
	return []byte(out + "now=" + strconv.FormatInt(s.Now, 10) + "\n")
}

// ParseStatus reads StatusCommand's output; unknown lines are ignored.
func ParseStatus(out string) Status {
	var s Status
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		switch k {
		case "unit":
			s.Unit = v
		case "phase":
			s.Phase = Phase(v)
		case "step":
			s.Step = atoi(v)
		case "started":
			s.Started = int64(atoi(v))
		case "exit":
			s.Exit = atoi(v)
		case "timeout":
			s.Timeout = atoi(v)
		case "missing":
			s.Missing = v
		case "lock":
			s.Locked = v == "1"
		case "now":
			s.Now = int64(atoi(v))
		}
	}
	return s
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
