package controllers

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// Cluster API's v1beta2 conditions bubble an infrastructure object's Ready message into the
// Cluster's and Machine's conditions, and its e2e framework (like users reading `kubectl get`)
// expects a True condition to carry none: these tests walk every condition a provisioned
// object has.
func expectNoMessageOnTrueConditions(t *testing.T, obj conditions.Getter) {
	t.Helper()
	for _, c := range obj.GetConditions() {
		if c.Status == metav1.ConditionTrue && c.Message != "" {
			t.Errorf("%T condition %s is True with message %q; a True condition carries none", obj, c.Type, c.Message)
		}
	}
}

// expectCleanMessage checks a condition message is bounded and free of terminal escapes.
func expectCleanMessage(t *testing.T, what, msg string) {
	t.Helper()
	if strings.ContainsAny(msg, "\x1b\r\x00") {
		t.Errorf("%s message contains control characters: %q", what, msg)
	}
	if len(msg) > maxConditionMessage {
		t.Errorf("%s message is %d bytes, more than %d", what, len(msg), maxConditionMessage)
	}
	if n := strings.Count(msg, "\n") + 1; n > maxConditionLines {
		t.Errorf("%s message has %d lines, more than %d:\n%s", what, n, maxConditionLines, msg)
	}
}

func TestProvisionedObjectsCarryNoMessageOnTrueConditions(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.provisionMachine(cpName)
	expectNoMessageOnTrueConditions(t, f.getDockyardCluster())
	expectNoMessageOnTrueConditions(t, f.getMachine(cpName))
}

// A stopped node's console is systemd's coloured shutdown output: it belongs in the logs, not
// in the condition, which says what happened and what to do.
func TestStoppedNodeMessageIsShortAndFreeOfTerminalEscapes(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.provisionMachine(cpName)
	f.rt.WithContainer(cpNode, func(c *inmemory.Container) {
		for i := range 25 {
			c.Logs = append(c.Logs, fmt.Sprintf("[\x1b[0;32m  OK  \x1b[0m] Stopped \x1b[0;1;39munit %d\x1b[0m.\r", i))
		}
	})
	f.rt.StopContainer(cpNode, 137)
	f.reconcileMachine(cpName)
	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.ContainerProvisionedCondition, metav1.ConditionFalse, infrav1.ContainerStoppedReason, "exit code 137")
	msg := conditions.GetMessage(got, infrav1.ContainerProvisionedCondition)
	expectCleanMessage(t, "ContainerStopped", msg)
	if strings.Contains(msg, "Stopped unit") || strings.Contains(msg, "\n") {
		t.Errorf("ContainerStopped message carries the console output: %q", msg)
	}
}

// A failed bootstrap shows the end of its output (where kubeadm says why), bounded and
// without terminal escapes.
func TestBootstrapFailureMessageShowsABoundedCleanTail(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	var out strings.Builder
	for i := range 60 {
		fmt.Fprintf(&out, "\x1b[0;1;31m[preflight]\x1b[0m line %d of a long kubeadm output\r\n", i)
	}
	out.WriteString("error execution phase preflight: the real reason\n")
	f.sim.FailCommand, f.sim.FailOutput = "kubeadm init", out.String()
	f.provisionCluster()
	f.reconcileMachine(cpName)
	f.reconcileMachine(cpName)
	got := f.getMachine(cpName)
	expectCondition(t, got, infrav1.BootstrapSucceededCondition, metav1.ConditionFalse, infrav1.BootstrapFailedReason,
		"exited 1", "the real reason")
	msg := conditions.GetMessage(got, infrav1.BootstrapSucceededCondition)
	expectCleanMessage(t, "BootstrapFailed", msg)
	if !strings.HasPrefix(msg, "Bootstrap step 3/3") || !strings.Contains(msg, "line 59 of") || strings.Contains(msg, "line 40 of") {
		t.Errorf("want the failing step first and the end of the output:\n%s", msg)
	}
	// Ready is Cluster API's summary of the conditions: one more line per condition.
	if ready := conditions.GetMessage(got, "Ready"); strings.ContainsAny(ready, "\x1b\r") || strings.Count(ready, "\n") > maxConditionLines+2 {
		t.Errorf("Ready message:\n%s", ready)
	}
}

func TestConditionMessage(t *testing.T) {
	long := strings.Repeat("x", 3*maxConditionMessage)
	for _, tc := range []struct {
		name, in string
		check    func(string) bool
	}{
		{"plain text is kept", "Waiting for the node container", func(s string) bool { return s == "Waiting for the node container" }},
		{"colour codes go", "\x1b[0;1;39mbold\x1b[0m text", func(s string) bool { return s == "bold text" }},
		{"carriage returns and other controls go", "a\r\nb\x00c\x07", func(s string) bool { return s == "a\nbc" }},
		{"the start and the end of a long line are kept", "START" + long + "END", func(s string) bool {
			return len(s) <= maxConditionMessage && strings.HasPrefix(s, "START") && strings.HasSuffix(s, "END")
		}},
		{"the first line and the last lines are kept", "what failed\n" + strings.Repeat("line\n", 50) + "last", func(s string) bool {
			return strings.Count(s, "\n")+1 <= maxConditionLines && strings.HasPrefix(s, "what failed\n…\n") && strings.HasSuffix(s, "last")
		}},
		{"a long first line and a long tail both fit", long + "\n" + long + "END", func(s string) bool {
			return len(s) <= maxConditionMessage && strings.HasSuffix(s, "END") && strings.HasPrefix(s, "xxx")
		}},
		{"invalid UTF-8 is replaced", "bad \xff byte", func(s string) bool { return s == "bad \ufffd byte" }},
	} {
		if got := conditionMessage(tc.in); !tc.check(got) {
			t.Errorf("%s: conditionMessage(%q) = %q", tc.name, tc.in, got)
		}
	}
}
