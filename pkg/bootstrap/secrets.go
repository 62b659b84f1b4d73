package bootstrap

import (
	"encoding/base64"
	"regexp"
	"sort"
	"strings"
)

// Bootstrap data carries secrets: kubeadm bootstrap tokens, certificate keys, and the private
// keys of the cluster's CAs. What Dockyard says about bootstrap data and about the commands it
// ran (errors, conditions, events, logs) never shows them: Parse redacts its errors and ignored
// keys with the secrets of the data it read, and Redact hides anything shaped like one in
// command output and in the files a log collection writes.

// Redact runs over whole journals (tens of MiB): shapes without a literal to search for
// (tokens, certificate keys, base64 runs) are found by scanning, not by regexp, whose search
// for them is a hundred times slower.
var (
	privateKeyPattern = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----(.*?)(-----END [A-Z ]*PRIVATE KEY-----|$)`)
	// A JSON web token, as service account tokens are: three base64url parts, the first two
	// JSON objects ("eyJ" is how base64 of `{"` begins).
	jwtPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)
)

// minSecretLine is the shortest line of a private key's body that is redacted on its own;
// shorter ones (the last line of a key) would hide ordinary words.
const minSecretLine = 16

// Secrets returns the secrets found in bootstrap data, longest first.
func Secrets(data []byte) []string {
	s := string(data)
	var found []string
	for _, sp := range tokenSpans(s) {
		token := s[sp.start:sp.end]
		// The part after the dot is the token's secret; it is also hidden alone.
		found = append(found, token, token[strings.Index(token, ".")+1:])
	}
	for _, sp := range certificateKeySpans(s) {
		found = append(found, s[sp.start:sp.end])
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

// Redact hides the given secrets in s, and anything shaped like one: a bootstrap token, a
// certificate key (after its name, or alone on the line after it, as kubeadm init
// --upload-certs prints it), a PEM private key, base64 holding a PEM block (a kubeconfig's key
// data, a Secret's data; certificates included, the whole run of base64 hidden), and a JSON
// web token (a service account's).
func Redact(s string, secrets ...string) string {
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, "<redacted>")
	}
	s = privateKeyPattern.ReplaceAllString(s, "<redacted private key>")
	s = replaceSpans(s, base64PEMSpans(s), "<redacted base64 PEM>")
	s = jwtPattern.ReplaceAllString(s, "<redacted token>")
	s = replaceSpans(s, tokenSpans(s), "<redacted bootstrap token>")
	return replaceSpans(s, certificateKeySpans(s), "<redacted certificate key>")
}

// span is [start, end) of a secret in a string.
type span struct{ start, end int }

func replaceSpans(s string, spans []span, with string) string {
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(with)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// tokenSpans finds kubeadm bootstrap tokens: [a-z0-9]{6}.[a-z0-9]{16}, a word of its own.
func tokenSpans(s string) []span {
	var spans []span
	for i := 0; i < len(s); {
		dot := strings.IndexByte(s[i:], '.')
		if dot < 0 {
			break
		}
		dot += i
		i = dot + 1
		start, end := dot-6, dot+17
		if start < 0 || end > len(s) || !all(s[start:dot], isTokenChar) || !all(s[dot+1:end], isTokenChar) ||
			(start > 0 && isWordChar(s[start-1])) || (end < len(s) && isWordChar(s[end])) {
			continue
		}
		spans = append(spans, span{start, end})
		i = end
	}
	return spans
}

// certificateKeySpans finds kubeadm certificate keys (64 hexadecimal digits, a word of their
// own) that follow their name and separators on the same line (--certificate-key KEY,
// certificateKey: "KEY"), or stand on the line after a line ending with the name (kubeadm's
// "Using certificate key:\nKEY", the next line prefixed by the journal's fields).
func certificateKeySpans(s string) []span {
	var spans []span
	for i := 0; i < len(s); {
		if !isHex(s[i]) || (i > 0 && isWordChar(s[i-1])) {
			i++
			continue
		}
		end := i
		for end < len(s) && isHex(s[end]) {
			end++
		}
		start := i
		i = end
		if end-start != 64 || (end < len(s) && isWordChar(s[end])) {
			continue
		}
		lineStart := strings.LastIndexByte(s[:start], '\n') + 1
		named := endsWithCertificateKeyName(s[lineStart:start])
		if !named && lineStart > 0 {
			previous := s[strings.LastIndexByte(s[:lineStart-1], '\n')+1 : lineStart-1]
			named = endsWithCertificateKeyName(strings.TrimRight(previous, "\r"))
		}
		if named {
			spans = append(spans, span{start, end})
		}
	}
	return spans
}

// endsWithCertificateKeyName tells whether s ends with "certificate key" (any case, written
// as one word, with a dash, an underscore or a space) and separators.
func endsWithCertificateKeyName(s string) bool {
	s = strings.ToLower(strings.TrimRight(s, " \t=:\"'"))
	for _, name := range []string{"certificatekey", "certificate-key", "certificate_key", "certificate key"} {
		if strings.HasSuffix(s, name) {
			return true
		}
	}
	return false
}

// pemMarkers are what "-----BEGIN " looks like once base64-encoded, at each of the three
// offsets it may have in the encoded data, and once encoded twice (a kubeconfig, whose keys
// are base64, stored base64-encoded in a Secret).
var pemMarkers = func() []string {
	marks := base64Marks("-----BEGIN ")
	for _, once := range marks[:3] {
		marks = append(marks, base64Marks(once)...)
	}
	return marks
}()

// base64Marks returns the characters of base64(prefix + s) that depend on s alone, for a
// prefix of 0, 1 and 2 bytes: what any base64 holding s contains.
func base64Marks(s string) []string {
	marks := make([]string, 0, 3)
	for offset := range 3 {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", offset) + s))
		// Character i carries bits [6i, 6i+6) of the input, s bits [8*offset, 8*(offset+len(s))).
		first := (8*offset + 5) / 6
		last := (8*(offset+len(s)))/6 - 1
		marks = append(marks, enc[first:last+1])
	}
	return marks
}

// base64PEMSpans finds runs of base64 holding a PEM block, with the lines that continue a run
// that ends its line (base64(1) wraps its output every 76 characters): whole lines of base64,
// the last one padded. A line that continues one may carry the same prefix as the run's first
// line but for its digits (a journal's time and PID, a container log's time and stream): only
// its base64 is hidden.
func base64PEMSpans(s string) []span {
	var spans []span
	for i := 0; i < len(s); {
		at := -1
		for _, m := range pemMarkers {
			if j := strings.Index(s[i:], m); j >= 0 && (at < 0 || j < at) {
				at = j
			}
		}
		if at < 0 {
			break
		}
		start, end := i+at, i+at
		for start > i && isBase64(s[start-1]) {
			start--
		}
		end = base64End(s, end)
		spans = append(spans, span{start, end})
		prefix := withoutDigits(s[strings.LastIndexByte(s[:start], '\n')+1 : start])
		// A wrapped run's lines are as wide as its first (64 or 76 characters: whole groups of
		// four) but its last, which is narrower and ends it.
		width, last := end-start, false
		for !last && width >= 60 && width%4 == 0 {
			next := end
			if strings.HasPrefix(s[next:], "\r\n") {
				next += 2
			} else if strings.HasPrefix(s[next:], "\n") {
				next++
			} else {
				break
			}
			from := next + len(prefix)
			if prefix != "" {
				// The prefix, digits aside, then base64: where the line's digits end the
				// prefix is found by walking it with them.
				from = afterPrefix(s, next, prefix)
				if from < 0 {
					break
				}
			}
			lineEnd := base64End(s, from)
			if lineEnd == from || lineEnd-from > width || (lineEnd < len(s) && s[lineEnd] != '\n' && s[lineEnd] != '\r') {
				break
			}
			spans = append(spans, span{from, lineEnd})
			end, last = lineEnd, lineEnd-from < width
		}
		i = end
	}
	return spans
}

// withoutDigits is s without its ASCII digits.
func withoutDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if '0' <= r && r <= '9' {
			return -1
		}
		return r
	}, s)
}

// afterPrefix returns where s[i:] continues after a prefix (a line's, digits removed) with any
// digits among its characters; -1 when the line does not start so. Digits that begin what
// follows the prefix belong to it only where the prefix ends in a separator.
func afterPrefix(s string, i int, prefix string) int {
	p := 0
	for i < len(s) && s[i] != '\n' {
		switch {
		case p < len(prefix) && s[i] == prefix[p]:
			p++
		case '0' <= s[i] && s[i] <= '9' && p < len(prefix):
		default:
			if p == len(prefix) {
				return i
			}
			return -1
		}
		i++
		if p == len(prefix) {
			return i
		}
	}
	return -1
}

// base64End is the end of the base64 characters and padding at s[i:].
func base64End(s string, i int) int {
	for i < len(s) && isBase64(s[i]) {
		i++
	}
	for pad := 0; pad < 2 && i < len(s) && s[i] == '='; pad++ {
		i++
	}
	return i
}

func all(s string, ok func(byte) bool) bool {
	for i := range len(s) {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
func isWordChar(c byte) bool  { return isTokenChar(c) || 'A' <= c && c <= 'Z' || c == '_' }
func isBase64(c byte) bool    { return isWordChar(c) && c != '_' || c == '+' || c == '/' }

// redactedError is an error whose message is redacted; the cause stays reachable for code.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }
