package bootstrap

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pkg/errors"
)

const (
	// maxDataSize bounds the bootstrap data Parse accepts. A Kubernetes Secret holds at most
	// 1 MiB, so real data is far below it.
	maxDataSize = 16 << 20
	// maxPlanSize bounds what a plan may expand to (decoded and decompressed file contents,
	// commands, plus a fixed charge per step), so that gzip bombs and YAML aliases that repeat
	// a large node cannot make Parse exhaust memory.
	maxPlanSize = 64 << 20
	// stepCharge is what every step costs against maxPlanSize besides its text.
	stepCharge = 64
	// maxYAMLVisits bounds the YAML nodes Dockyard looks at, counting a node again each time an
	// alias or merge key brings it back, so that aliases cannot make parsing take forever.
	maxYAMLVisits = 1 << 22
)

// defaultFileMode is the mode of a file whose bootstrap data does not give one, as for
// cloud-init's write_files and Container Linux Config (which CABPK's Ignition goes through).
const defaultFileMode os.FileMode = 0o644

// Parse translates bootstrap data of the given format into a Plan for one node.
//
// An empty format is read as cloud-config: Cluster API's contract makes "format" optional in a
// bootstrap data secret and defaults it to cloud-config.
//
// Errors say what failed and where (for example
// "cloud-config: write_files[3] (/etc/kubernetes/pki/ca.key): decoding base64: ...") but never
// quote file contents, and neither they nor Plan.Ignored show a secret of the data
// (secrets.go), even when it sits where a name or a value was expected.
func Parse(format Format, data []byte, opts Options) (*Plan, error) {
	plan, err := parse(format, data, opts)
	if err != nil {
		return nil, &redactedError{msg: Redact(err.Error(), Secrets(data)...), cause: err}
	}
	secrets := Secrets(data)
	for i := range plan.Ignored {
		plan.Ignored[i] = Redact(plan.Ignored[i], secrets...)
	}
	return plan, nil
}

func parse(format Format, data []byte, opts Options) (*Plan, error) {
	if len(data) > maxDataSize {
		return nil, errors.Errorf("%s: bootstrap data is %d bytes, more than the %d bytes Dockyard accepts", formatName(format), len(data), maxDataSize)
	}
	switch format {
	case FormatCloudConfig, "":
		plan, err := parseCloudConfig(data, opts)
		if err != nil {
			return nil, errors.Wrap(err, "cloud-config")
		}
		return plan, nil
	case FormatIgnition:
		plan, err := parseIgnition(data)
		if err != nil {
			return nil, errors.Wrap(err, "ignition")
		}
		return plan, nil
	default:
		return nil, errors.Errorf("unknown bootstrap data format %s (want %q or %q)", quoteForError(string(format)), FormatCloudConfig, FormatIgnition)
	}
}

func formatName(format Format) string {
	if format == "" {
		return string(FormatCloudConfig)
	}
	return quoteForError(string(format))
}

// planBuilder collects the steps and ignored parts of a plan and enforces maxPlanSize.
type planBuilder struct {
	steps   []Step
	ignored map[string]struct{}
	size    int64
	visits  int
}

// visit counts n YAML nodes looked at against maxYAMLVisits.
func (b *planBuilder) visit(n int) error {
	b.visits += n
	if b.visits > maxYAMLVisits {
		return errors.New("YAML aliases or merge keys expand to too many nodes")
	}
	return nil
}

func (b *planBuilder) charge(n int) error {
	b.size += int64(n) + stepCharge
	if b.size > maxPlanSize {
		return errors.Errorf("bootstrap data expands to more than %d MiB", maxPlanSize>>20)
	}
	return nil
}

// remaining is how many more bytes the plan may hold, the most a decompression may produce.
func (b *planBuilder) remaining() int64 {
	return max(maxPlanSize-b.size, 0)
}

// chargeFile and chargeCommand charge a step before it is added (the cloud-config parser
// decodes everything before it orders the steps, and must stop early all the same).
func (b *planBuilder) chargeFile(f *File) error {
	return b.charge(len(f.Content) + len(f.Path))
}

func (b *planBuilder) chargeCommand(c *Command) error {
	n := len(c.Script)
	for _, a := range c.Args {
		n += len(a) + 1
	}
	return b.charge(n)
}

func (b *planBuilder) addFile(f *File) error {
	if err := b.chargeFile(f); err != nil {
		return err
	}
	b.steps = append(b.steps, Step{File: f})
	return nil
}

func (b *planBuilder) addCommand(c *Command) error {
	if err := b.chargeCommand(c); err != nil {
		return err
	}
	b.steps = append(b.steps, Step{Command: c})
	return nil
}

// run adds a command given as an argument vector.
func (b *planBuilder) run(args ...string) error {
	return b.addCommand(&Command{Args: args})
}

func (b *planBuilder) ignore(what string) {
	if b.ignored == nil {
		b.ignored = map[string]struct{}{}
	}
	b.ignored[what] = struct{}{}
}

func (b *planBuilder) plan() *Plan {
	p := &Plan{Steps: b.steps}
	for what := range b.ignored {
		p.Ignored = append(p.Ignored, what)
	}
	sort.Strings(p.Ignored)
	return p
}

// absPath checks that p is an absolute path and returns it cleaned.
func absPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("path is empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", errors.New("path contains a NUL byte")
	case !strings.HasPrefix(p, "/"):
		return "", errors.New("path is not absolute")
	}
	p = path.Clean(p)
	if p == "/" {
		return "", errors.New("path is the root directory")
	}
	return p, nil
}

// unixMode converts Unix permission bits (0 to 07777) to an os.FileMode, whose setuid,
// setgid and sticky bits are not the Unix ones.
func unixMode(m uint64) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// checkAccountName checks a user or group name (or numeric id) the node will pass to chown.
func checkAccountName(kind, name string) error {
	if len(name) > 256 {
		return errors.Errorf("%s name is longer than 256 bytes", kind)
	}
	for _, r := range name {
		if r == ':' || r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) {
			return errors.Errorf("%s name %s contains a character a %s name cannot have", kind, quoteForError(name), kind)
		}
	}
	return nil
}

// decodeBase64 decodes standard base64, ignoring ASCII whitespace (line breaks of wrapped
// data) and accepting missing padding. Its errors never quote the data.
func decodeBase64(s string) ([]byte, error) {
	compact := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r', '\v', '\f':
			return -1
		}
		return r
	}, s)
	compact = strings.TrimRight(compact, "=")
	out, err := base64.RawStdEncoding.DecodeString(compact)
	if err != nil {
		var corrupt base64.CorruptInputError
		if errors.As(err, &corrupt) {
			return nil, errors.Errorf("decoding base64: illegal data at input byte %d (not counting whitespace)", int64(corrupt))
		}
		return nil, errors.New("decoding base64: malformed data")
	}
	return out, nil
}

// gunzip decompresses gzip data (all members of a multi-member stream), refusing to produce
// more than limit bytes, what is left of the plan's maximum size.
func gunzip(data []byte, limit int64) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, errors.Wrap(describeGzipError(err), "decompressing gzip")
	}
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, errors.Wrap(describeGzipError(err), "decompressing gzip")
	}
	if int64(len(out)) > limit {
		return nil, errors.Errorf("decompressing gzip: bootstrap data expands to more than %d MiB", maxPlanSize>>20)
	}
	return out, nil
}

func describeGzipError(err error) error {
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("data is truncated")
	default:
		// The errors of compress/gzip and compress/flate name offsets, never data.
		return err
	}
}

// quoteForError renders a value taken from bootstrap data (a path, a key, a unit name) for an
// error message: as it is when it is short and plain, otherwise quoted and cut short.
func quoteForError(s string) string {
	const max = 128
	plain := s != "" && len(s) <= max
	for _, r := range s {
		if r == utf8.RuneError || r == '"' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

// argv builds a command's argument vector, putting "--" before the operands when one of them
// starts with "-" (a systemd unit named "-.mount", a relative link target "-x").
func argv(command []string, operands ...string) []string {
	args := append([]string{}, command...)
	for _, o := range operands {
		if strings.HasPrefix(o, "-") {
			args = append(args, "--")
			break
		}
	}
	return append(args, operands...)
}
