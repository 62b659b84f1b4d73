package bootstrap

import (
	"regexp"
	"sort"
	"strings"
)

// Bootstrap data carries secrets: kubeadm bootstrap tokens, certificate keys, and the private
// keys of the cluster's CAs. What Dockyard says about bootstrap data and about the commands it
// ran (errors, conditions, events, logs) never shows them: Parse redacts its errors and ignored
// keys with the secrets of the data it read, and Redact hides anything shaped like one in
// command output.

var (
	tokenPattern          = regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`)
	certificateKeyPattern = regexp.MustCompile(`(?i)(certificate-?key[ =:"']*)([0-9a-f]{64})`)
	privateKeyPattern     = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----(.*?)(-----END [A-Z ]*PRIVATE KEY-----|$)`)
)

// minSecretLine is the shortest line of a private key's body that is redacted on its own;
// shorter ones (the last line of a key) would hide ordinary words.
const minSecretLine = 16

// Secrets returns the secrets found in bootstrap data, longest first.
func Secrets(data []byte) []string {
	s := string(data)
	var found []string
	for _, token := range tokenPattern.FindAllString(s, -1) {
		// The part after the dot is the token's secret; it is also hidden alone.
		found = append(found, token, token[strings.Index(token, ".")+1:])
	}
	for _, m := range certificateKeyPattern.FindAllStringSubmatch(s, -1) {
		found = append(found, m[2])
	}
	for _, m := range privateKeyPattern.FindAllStringSubmatch(s, -1) {
		for _, line := range strings.Fields(m[1]) {
			if len(line) >= minSecretLine {
				found = append(found, line)
			}
		}
	}
	sort.Slice(found, func(i, j int) bool { return len(found[i]) > len(found[j]) })
	return found
}

// Redact hides the given secrets in s, and anything shaped like a bootstrap token, a
// certificate key or a private key.
func Redact(s string, secrets ...string) string {
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, "<redacted>")
	}
	s = privateKeyPattern.ReplaceAllString(s, "<redacted private key>")
	s = tokenPattern.ReplaceAllString(s, "<redacted bootstrap token>")
	return certificateKeyPattern.ReplaceAllString(s, "${1}<redacted certificate key>")
}

// redactedError is an error whose message is redacted; the cause stays reachable for code.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }
