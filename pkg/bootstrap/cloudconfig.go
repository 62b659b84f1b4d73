package bootstrap

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	"go.yaml.in/yaml/v3"
)

// parseCloudConfig translates a cloud-config document (optionally a "## template: jinja" one,
// as CABPK writes) into a plan that does what cloud-init would do with it, in cloud-init's
// order: bootcmd, write_files without defer, write_files with defer (written in the final
// stage, after users and packages), runcmd (run by scripts-user, after those).
func parseCloudConfig(data []byte, opts Options) (*Plan, error) {
	text := string(data)
	isJinja, body, err := splitTemplateHeader(text)
	if err != nil {
		return nil, err
	}
	if isJinja {
		// cloud-init renders the whole document, file contents included, before it reads the
		// YAML; so does Dockyard.
		if text, err = renderJinja(body, opts.Hostname, 2); err != nil {
			return nil, err
		}
		// Keep the header's line, so that YAML line numbers are those of the data.
		text = "\n" + text
	}
	if err := checkCloudConfigHeader(text); err != nil {
		return nil, err
	}

	root, err := decodeYAML(text)
	if err != nil {
		return nil, err
	}
	b := &planBuilder{}
	if isNull(root) {
		return b.plan(), nil
	}
	pairs, err := mappingPairs(root, b)
	if err != nil {
		return nil, errors.Wrap(err, "top level")
	}

	var bootcmd, runcmd []*Command
	var files, deferred []*File
	for _, p := range pairs {
		switch p.key {
		case "bootcmd":
			if bootcmd, err = parseCloudCommands(p.key, p.value, b); err != nil {
				return nil, err
			}
		case "runcmd":
			if runcmd, err = parseCloudCommands(p.key, p.value, b); err != nil {
				return nil, err
			}
		case "write_files":
			if files, deferred, err = parseWriteFiles(p.value, b); err != nil {
				return nil, err
			}
		case "merge_how", "merge_type":
			// These only say how cloud-init merges several cloud-config parts into one;
			// bootstrap data is a single part, so they change nothing.
		default:
			b.ignore(fmt.Sprintf("cloud-config module %s", strconv.Quote(p.key)))
		}
	}

	// Every step was charged against the plan's size as it was read.
	for _, c := range bootcmd {
		b.steps = append(b.steps, Step{Command: c})
	}
	for _, f := range append(files, deferred...) {
		b.steps = append(b.steps, Step{File: f})
	}
	for _, c := range runcmd {
		b.steps = append(b.steps, Step{Command: c})
	}
	return b.plan(), nil
}

// checkCloudConfigHeader checks that the (rendered) document is a cloud-config: cloud-init
// recognises user data by its first line, ignoring case and leading whitespace.
func checkCloudConfigHeader(text string) error {
	text = strings.TrimLeft(text, " \t\r\n")
	head := strings.ToLower(text[:min(len(text), 32)])
	switch {
	case strings.HasPrefix(head, "#cloud-config-archive"), strings.HasPrefix(head, "#cloud-config-jsonp"):
		first, _, _ := strings.Cut(head, "\n")
		return errors.Errorf("%s user data is not supported, only #cloud-config", quoteForError(strings.TrimSpace(first)))
	case strings.HasPrefix(head, "#cloud-config"):
		return nil
	default:
		return errors.New(`bootstrap data does not start with "#cloud-config" (after an optional "## template: jinja" line)`)
	}
}

// parseCloudCommands reads bootcmd or runcmd. cloud-init turns the list into one shell script:
// a string entry is a line of shell, a list entry is an argument vector.
func parseCloudCommands(key string, n *yaml.Node, b *planBuilder) ([]*Command, error) {
	n = resolve(n)
	if isNull(n) {
		return nil, nil
	}
	switch n.Kind {
	case yaml.ScalarNode:
		// cloud-init takes a single string as the whole script.
		if strings.TrimSpace(n.Value) == "" {
			return nil, nil
		}
		c := &Command{Script: n.Value}
		return []*Command{c}, b.chargeCommand(c)
	case yaml.SequenceNode:
	default:
		return nil, errors.Errorf("%s: want a list of commands, found %s", key, kindName(n))
	}
	var cmds []*Command
	for i, entry := range n.Content {
		entry = resolve(entry)
		where := fmt.Sprintf("%s[%d]", key, i)
		if entry != nil {
			if err := b.visit(1 + len(entry.Content)); err != nil {
				return nil, errors.Wrap(err, where)
			}
		}
		switch {
		case isNull(entry):
			return nil, errors.Errorf("%s: command is null", where)
		case entry.Kind == yaml.ScalarNode:
			if strings.TrimSpace(entry.Value) == "" {
				continue
			}
			c := &Command{Script: entry.Value}
			if err := b.chargeCommand(c); err != nil {
				return nil, err
			}
			cmds = append(cmds, c)
		case entry.Kind == yaml.SequenceNode:
			args := make([]string, 0, len(entry.Content))
			for j, a := range entry.Content {
				if isNull(a) {
					return nil, errors.Errorf("%s[%d]: argument is null", where, j)
				}
				s, ok := scalarString(a)
				if !ok {
					return nil, errors.Errorf("%s[%d]: want a string argument, found %s", where, j, kindName(a))
				}
				args = append(args, s)
			}
			if len(args) == 0 {
				continue
			}
			c := &Command{Args: args}
			if err := b.chargeCommand(c); err != nil {
				return nil, err
			}
			cmds = append(cmds, c)
		default:
			return nil, errors.Errorf("%s: want a string or a list of arguments, found %s", where, kindName(entry))
		}
	}
	return cmds, nil
}

// parseWriteFiles reads write_files into the files written before runcmd and the deferred ones.
func parseWriteFiles(n *yaml.Node, b *planBuilder) (files, deferred []*File, err error) {
	n = resolve(n)
	if isNull(n) {
		return nil, nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, nil, errors.Errorf("write_files: want a list of files, found %s", kindName(n))
	}
	for i, entry := range n.Content {
		f, isDeferred, err := parseWriteFile(i, entry, b)
		if err != nil {
			return nil, nil, err
		}
		if isDeferred {
			deferred = append(deferred, f)
		} else {
			files = append(files, f)
		}
	}
	return files, deferred, nil
}

func parseWriteFile(i int, n *yaml.Node, b *planBuilder) (f *File, isDeferred bool, err error) {
	where := fmt.Sprintf("write_files[%d]", i)
	pairs, err := mappingPairs(n, b)
	if err != nil {
		return nil, false, errors.Wrap(err, where)
	}
	fields := map[string]*yaml.Node{}
	for _, p := range pairs {
		fields[p.key] = p.value
	}

	pathNode, ok := fields["path"]
	if !ok || isNull(pathNode) {
		return nil, false, errors.Errorf("%s: path is missing", where)
	}
	rawPath, ok := scalarString(pathNode)
	if !ok {
		return nil, false, errors.Errorf("%s: path: want a string, found %s", where, kindName(pathNode))
	}
	where = fmt.Sprintf("%s (%s)", where, quoteForError(rawPath))
	p, err := absPath(rawPath)
	if err != nil {
		return nil, false, errors.Wrap(err, where)
	}
	f = &File{Path: p, Mode: defaultFileMode, Owner: "root", Group: "root"}

	for _, pair := range pairs {
		v := pair.value
		switch pair.key {
		case "path", "content", "encoding":
			// path is read above, content below with its encoding.
		case "owner":
			if f.Owner, f.Group, err = parseCloudOwner(v); err != nil {
				return nil, false, errors.Wrapf(err, "%s: owner", where)
			}
		case "permissions":
			if f.Mode, err = parsePermissions(v); err != nil {
				return nil, false, errors.Wrapf(err, "%s: permissions", where)
			}
		case "append":
			if f.Append, err = parseCloudBool(v); err != nil {
				return nil, false, errors.Wrapf(err, "%s: append", where)
			}
		case "defer":
			if isDeferred, err = parseCloudBool(v); err != nil {
				return nil, false, errors.Wrapf(err, "%s: defer", where)
			}
		case "source":
			if !isNull(v) {
				return nil, false, errors.Errorf("%s: source: fetching file content from a URL is not supported in a node container; give the content inline", where)
			}
		default:
			b.ignore(fmt.Sprintf("cloud-config write_files[%d] (%s) key %s", i, quoteForError(rawPath), strconv.Quote(pair.key)))
		}
	}

	if f.Content, err = decodeCloudContent(fields["content"], fields["encoding"], b.remaining()); err != nil {
		return nil, false, errors.Wrap(err, where)
	}
	return f, isDeferred, b.chargeFile(f)
}

// decodeCloudContent returns a write_files entry's content, decoded as its encoding says.
// The result may be at most limit bytes.
func decodeCloudContent(content, encoding *yaml.Node, limit int64) ([]byte, error) {
	steps, err := parseEncoding(encoding)
	if err != nil {
		return nil, err
	}
	var data []byte
	switch c := resolve(content); {
	case isNull(c):
		// No content (or "content:" with nothing) is an empty file.
	case c.Kind != yaml.ScalarNode:
		return nil, errors.Errorf("content: want a string, found %s", kindName(c))
	case c.ShortTag() == "!!binary":
		if data, err = decodeBase64(c.Value); err != nil {
			return nil, errors.Wrap(err, "content: !!binary")
		}
	case c.ShortTag() == "!!str":
		data = []byte(c.Value)
	default:
		// cloud-init fails to write such a value too (it only writes strings and bytes).
		return nil, errors.Errorf("content: want a string, found %s (quote it)", kindName(c))
	}
	for _, step := range steps {
		switch step {
		case "base64":
			if data, err = decodeBase64(string(data)); err != nil {
				return nil, err
			}
		case "gzip":
			if data, err = gunzip(data, limit); err != nil {
				return nil, err
			}
		}
	}
	return data, nil
}

// parseEncoding maps a write_files encoding to its decoding steps, as cloud-init's
// canonicalize_extraction does. Unlike cloud-init, which writes the content undecoded with a
// warning, an unknown encoding is an error: writing base64 text into a key file is worse.
func parseEncoding(n *yaml.Node) ([]string, error) {
	if isNull(n) {
		return nil, nil
	}
	s, ok := scalarString(n)
	if !ok {
		return nil, errors.Errorf("encoding: want a string, found %s", kindName(n))
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "plain", "text/plain":
		return nil, nil
	case "b64", "base64":
		return []string{"base64"}, nil
	case "gz", "gzip":
		return []string{"gzip"}, nil
	case "gz+b64", "gz+base64", "gzip+b64", "gzip+base64":
		return []string{"base64", "gzip"}, nil
	default:
		return nil, errors.Errorf("encoding %s is not supported (want b64, gzip or gzip+b64)", quoteForError(s))
	}
}

// parseCloudOwner reads a write_files owner, "user:group" or "user", as cloud-init's
// extract_usergroup does: each part is trimmed, and an empty part, "-1" or "none" leaves that
// part unchanged (root for a new file). An empty Owner or Group means root.
func parseCloudOwner(n *yaml.Node) (owner, group string, err error) {
	if isNull(n) {
		return "", "", nil
	}
	s, ok := scalarString(n)
	if !ok {
		return "", "", errors.Errorf("want \"user:group\", found %s", kindName(n))
	}
	u, g, _ := strings.Cut(s, ":")
	normal := func(v string) string {
		v = strings.TrimSpace(v)
		if v == "-1" || strings.EqualFold(v, "none") {
			return ""
		}
		return v
	}
	owner, group = normal(u), normal(g)
	if err := checkAccountName("user", owner); err != nil {
		return "", "", err
	}
	if err := checkAccountName("group", group); err != nil {
		return "", "", err
	}
	return owner, group, nil
}

var (
	// yaml11Octal etc. are the integer forms of YAML 1.1, which cloud-init's PyYAML reads
	// (YAML 1.2 parsers read "0640" as decimal 640).
	yaml11Octal   = regexp.MustCompile(`^0[0-7_]+$`)
	yaml11Decimal = regexp.MustCompile(`^(0|[1-9][0-9_]*)$`)
	yaml11Hex     = regexp.MustCompile(`^0x[0-9a-fA-F_]+$`)
	yaml11Binary  = regexp.MustCompile(`^0b[01_]+$`)
	octalString   = regexp.MustCompile(`^(0[oO])?[0-7]+$`)
)

// parsePermissions reads write_files permissions the way cloud-init's decode_perms does: a
// string is octal ('0640', '640' and '0o640' all mean rw-r-----), and an unquoted YAML 1.1
// integer is taken as its value, so 0640 is octal (leading zero) but 420 is decimal (0644).
// Unlike cloud-init, which falls back to 0644 with a warning, a value it cannot read is an error.
func parsePermissions(n *yaml.Node) (os.FileMode, error) {
	n = resolve(n)
	if isNull(n) {
		return defaultFileMode, nil
	}
	if n.Kind != yaml.ScalarNode {
		return 0, errors.Errorf("want an octal string like '0640', found %s", kindName(n))
	}
	text := strings.TrimSpace(n.Value)
	var value uint64
	var err error
	switch {
	case isQuoted(n):
		if !octalString.MatchString(text) {
			return 0, errors.Errorf("%s is not an octal mode like '0640'", quoteForError(n.Value))
		}
		value, err = strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(text, "0o"), "0O"), 8, 64)
	case yaml11Octal.MatchString(text):
		value, err = strconv.ParseUint(strings.ReplaceAll(text, "_", ""), 8, 64)
	case yaml11Decimal.MatchString(text):
		value, err = strconv.ParseUint(strings.ReplaceAll(text, "_", ""), 10, 64)
	case yaml11Hex.MatchString(text):
		value, err = strconv.ParseUint(strings.ReplaceAll(text[2:], "_", ""), 16, 64)
	case yaml11Binary.MatchString(text):
		value, err = strconv.ParseUint(strings.ReplaceAll(text[2:], "_", ""), 2, 64)
	case octalString.MatchString(text):
		// 0o640 is a string to YAML 1.1, which cloud-init reads as octal.
		value, err = strconv.ParseUint(text[2:], 8, 64)
	default:
		return 0, errors.Errorf("%s is not an octal mode like '0640'", quoteForError(n.Value))
	}
	if err != nil || value > 0o7777 {
		return 0, errors.Errorf("%s is not a file mode (0 to 07777)", quoteForError(n.Value))
	}
	return unixMode(value), nil
}

// parseCloudBool reads a write_files flag the way cloud-init's get_cfg_option_bool does
// (true, yes, on and 1 in any case are true), except that a value that is not a boolean at all
// is an error instead of false.
func parseCloudBool(n *yaml.Node) (bool, error) {
	n = resolve(n)
	if isNull(n) {
		return false, nil
	}
	if n.Kind != yaml.ScalarNode {
		return false, errors.Errorf("want true or false, found %s", kindName(n))
	}
	switch strings.ToLower(strings.TrimSpace(n.Value)) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0", "":
		return false, nil
	default:
		return false, errors.Errorf("want true or false, found %s", quoteForError(n.Value))
	}
}
