package controllers

import (
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// Condition messages follow Cluster API's v1beta2 conventions, which its summaries and its
// end-to-end framework rely on: Cluster API copies the messages of an infrastructure object's
// conditions into the Cluster's and Machine's (a Cluster is Available only with an empty
// message), so a True condition carries none, and a message that does say something is short,
// plain text, and about one thing. Output of commands (a failed bootstrap) keeps its end, where
// the reason is.
const (
	// maxConditionMessage bounds a message in bytes.
	maxConditionMessage = 1024
	// maxConditionLines bounds a message in lines.
	maxConditionLines = 12
)

// ansiEscape matches terminal escape sequences: CSI (colours, cursor moves) and OSC ones.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-_]`)

// setCondition sets a condition of a Dockyard object the way every reconciler does: a True
// condition without a message, any other with its message made plain and bounded.
func setCondition(obj conditions.Setter, condType string, status metav1.ConditionStatus, reason, message string) {
	if status == metav1.ConditionTrue {
		message = ""
	}
	conditions.Set(obj, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: conditionMessage(message)})
}

// conditionMessage makes text fit a condition: terminal escapes and control characters other
// than newlines and tabs dropped, invalid UTF-8 replaced, at most maxConditionLines lines and
// maxConditionMessage bytes. What is cut is the middle: the first line says what happened, the
// end of command output says why.
func conditionMessage(s string) string {
	s = strings.ToValidUTF8(s, "\ufffd")
	s = ansiEscape.ReplaceAllString(s, "")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || (r >= 0x20 && r != 0x7f && (r < 0x80 || r >= 0xa0)) {
			return r
		}
		return -1
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= maxConditionMessage && strings.Count(s, "\n") < maxConditionLines {
		return s
	}
	const cut = "…"
	first, rest, multiline := strings.Cut(s, "\n")
	if !multiline {
		// One long line: its start and its end.
		return strings.TrimSuffix(head(s, maxConditionMessage/2), cut) + tail(s, maxConditionMessage/2)
	}
	first = head(first, maxConditionMessage/4)
	lines := strings.Split(rest, "\n")
	if keep := maxConditionLines - 2; len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	return first + "\n" + cut + "\n" + tail(strings.Join(lines, "\n"), maxConditionMessage-len(first)-2*len("\n")-len(cut))
}

// head returns at most n bytes of the start of s, on a rune boundary, marked when cut.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n - len("…")
	for end > 0 && !isRuneStart(s[end]) {
		end--
	}
	return s[:end] + "…"
}

// tail returns at most n bytes of the end of s, on a rune boundary, marked when cut.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - (n - len("…"))
	for start < len(s) && !isRuneStart(s[start]) {
		start++
	}
	return "…" + s[start:]
}

func isRuneStart(b byte) bool { return b&0xc0 != 0x80 }

// infrastructureReason is the reason of a cluster whose engine cannot be resolved: the policy
// refused its infrastructure, or it cannot be used.
func infrastructureReason(err error) string {
	if policy.IsRefused(err) {
		return infrav1.NotAllowedReason
	}
	return infrav1.InfrastructureUnavailableReason
}
