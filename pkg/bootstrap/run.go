package bootstrap

import "time"

// Phase is where a plan's run in a node is.
type Phase string

// Phases of a plan's run. Succeeded, Failed, TimedOut and Interrupted are final: a plan runs
// once in a node, so kubeadm never runs twice there.
const (
	NotStarted  Phase = "NotStarted"
	Running     Phase = "Running"
	Succeeded   Phase = "Succeeded"
	Failed      Phase = "Failed"
	TimedOut    Phase = "TimedOut"
	Interrupted Phase = "Interrupted"
)

// Status is what became of a plan started in a node.
type Status struct {
	Phase Phase
	// Step is the 1-based index of the plan step running, failed or last run.
	Step int
	// StartedAt is when the plan started in the node.
	StartedAt time.Time
	// ExitCode of the failed step.
	ExitCode int
	// Output is the tail of the plan's output when it failed or timed out, with secrets
	// (bootstrap tokens, certificate keys, private keys) redacted.
	Output string
	// MissingSentinel names Cluster API's success sentinel when the plan finished without
	// writing it (kubeadm did not succeed although no command reported a failure first).
	MissingSentinel string
}
