package bootstrap

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pkg/errors"
)

// jinjaHeader matches the first line of a cloud-init template, "## template: jinja", the way
// cloud-init does (case-insensitive, any spacing); the group is the template type.
var jinjaHeader = regexp.MustCompile(`(?i)^##\s*template:(.*)$`)

// hostnameVariables are the instance metadata variables that hold the instance's hostname in
// cloud-init's Jinja templates. CABPK and the infrastructure providers' templates use them to
// name the node, e.g. "name: '{{ ds.meta_data.local_hostname }}'" in nodeRegistration.
var hostnameVariables = map[string]bool{
	"ds.meta_data.hostname":       true,
	"ds.meta_data.local_hostname": true,
	"v1.hostname":                 true,
	"v1.local_hostname":           true,
	"local_hostname":              true,
}

// validHostname matches an RFC 1123 hostname (labels of letters, digits and inner hyphens).
// It is substituted into YAML text, so nothing else may pass.
var validHostname = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$`)

// renderJinja renders the body of a "## template: jinja" cloud-config (the text after the
// header line) the way cloud-init's Jinja renderer would for the few constructs Dockyard
// supports: {{ <hostname variable> }}, with Jinja's "-" whitespace control. Any other
// expression, statement ({% %}) or comment ({# #}) is an error that names it: Dockyard has no
// instance metadata to evaluate it against and must not guess.
//
// Like Jinja2 with its defaults (which cloud-init keeps), the output has its line breaks
// normalised to "\n" and loses one trailing line break.
//
// firstLine is the line number of the body's first line in the bootstrap data, for errors.
func renderJinja(body, hostname string, firstLine int) (string, error) {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	body = strings.ReplaceAll(body, "\r", "\n")
	body = strings.TrimSuffix(body, "\n")

	out := make([]byte, 0, len(body))
	line := firstLine // of pos
	pos := 0          // in body
	for {
		start := indexJinjaStart(body[pos:])
		if start < 0 {
			out = append(out, body[pos:]...)
			return string(out), nil
		}
		start += pos
		out = append(out, body[pos:start]...)
		line += strings.Count(body[pos:start], "\n")
		tag := body[start : start+2]
		closing := "}}"
		switch tag {
		case "{%":
			closing = "%}"
		case "{#":
			closing = "#}"
		}
		end := strings.Index(body[start+2:], closing)
		if end < 0 {
			return "", errors.Errorf("line %d: jinja %s is not closed by %q", line, quoteJinja(body[start:]), closing)
		}
		end += start + 2 // index of closing in body
		whole := body[start : end+2]
		if tag != "{{" {
			kind := "statement"
			if tag == "{#" {
				kind = "comment"
			}
			return "", errors.Errorf("line %d: jinja %s %s is not supported: Dockyard only substitutes the instance hostname variables (%s)",
				line, kind, quoteJinja(whole), hostnameVariableList())
		}
		inner := body[start+2 : end]
		trimBefore := strings.HasPrefix(inner, "-")
		if trimBefore {
			inner = inner[1:]
		}
		trimAfter := strings.HasSuffix(inner, "-")
		if trimAfter {
			inner = inner[:len(inner)-1]
		}
		expr := strings.TrimSpace(inner)
		if !hostnameVariables[expr] {
			return "", errors.Errorf("line %d: jinja expression %s is not supported: Dockyard only substitutes the instance hostname variables (%s)",
				line, quoteJinja(whole), hostnameVariableList())
		}
		if hostname == "" {
			return "", errors.Errorf("line %d: jinja expression %s needs the node's hostname, and none was given", line, quoteJinja(whole))
		}
		if len(hostname) > 253 || !validHostname.MatchString(hostname) {
			return "", errors.Errorf("line %d: jinja expression %s: hostname %s is not a valid hostname", line, quoteJinja(whole), quoteForError(hostname))
		}
		if trimBefore {
			out = bytes.TrimRight(out, jinjaSpace)
		}
		out = append(out, hostname...)
		line += strings.Count(whole, "\n")
		pos = end + 2
		if trimAfter {
			next := pos + len(body[pos:]) - len(strings.TrimLeft(body[pos:], jinjaSpace))
			line += strings.Count(body[pos:next], "\n")
			pos = next
		}
	}
}

// jinjaSpace is the whitespace Jinja's "-" whitespace control removes.
const jinjaSpace = " \t\n\r\v\f"

// indexJinjaStart returns the index of the first "{{", "{%" or "{#" in s, or -1.
func indexJinjaStart(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// quoteJinja quotes a Jinja construct for an error, cut short: it comes from the bootstrap
// data, possibly from a file's content.
func quoteJinja(s string) string {
	const max = 80
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

func hostnameVariableList() string {
	return "ds.meta_data.hostname, ds.meta_data.local_hostname, v1.hostname, v1.local_hostname, local_hostname"
}

// splitTemplateHeader splits bootstrap data into its first line and the rest. It reports
// whether the first line is a "## template:" header and returns an error for a template type
// other than jinja.
func splitTemplateHeader(data string) (isJinja bool, body string, err error) {
	first, rest, _ := strings.Cut(data, "\n")
	m := jinjaHeader.FindStringSubmatch(strings.TrimSuffix(first, "\r"))
	if m == nil {
		return false, data, nil
	}
	if kind := strings.ToLower(strings.TrimSpace(m[1])); kind != "jinja" {
		return false, "", errors.New("line 1: template type " + quoteForError(strings.TrimSpace(m[1])) + " is not supported (only jinja)")
	}
	return true, rest, nil
}
