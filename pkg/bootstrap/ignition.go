package bootstrap

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	"github.com/pkg/errors"
)

// systemdUnitDir is where Ignition writes systemd units and their drop-ins.
const systemdUnitDir = "/etc/systemd/system"

// defaultDirMode is the mode of a directory whose Ignition config does not give one, as
// Container Linux Config (which CABPK's Ignition goes through) defaults it.
const defaultDirMode = 0o755

// parseIgnition translates an Ignition config of spec 2.0 to 2.3 (CABPK writes 2.3) into a
// plan that does what Ignition's files stage would, in its order (directories, shallowest
// first; files; links; systemd units), followed by what systemd would do at first boot but
// cannot in a node that is already up: daemon-reload, mask, enable or disable, and start the
// enabled units.
//
// The config is decoded with encoding/json into the flatcar v2_3 types, which also read 2.0
// to 2.2 configs (their JSON keys are a subset). It does not use v2_3.Parse: its validation
// reports quote a bad data URL in full (file contents, so secrets), its reports carry excerpts
// of the document, the data URL parser it uses leaks a goroutine on some malformed URLs, and a
// type error in a 2.3 config comes out as a misleading error from the spec 1 parser it falls
// back to. The checks that matter here are done below instead.
func parseIgnition(data []byte) (*Plan, error) {
	if err := checkIgnitionVersion(data); err != nil {
		return nil, err
	}
	var cfg igntypes.Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, describeJSONError(err)
	}
	b := &planBuilder{}

	if refs := cfg.Ignition.Config; len(refs.Append) > 0 || (refs.Replace != nil && refs.Replace.Source != "") {
		return nil, errors.New("ignition.config: appending or replacing the config with another one is not supported (Dockyard cannot fetch configs in a node container)")
	}
	// ignition.security (TLS certificate authorities) and ignition.timeouts only govern
	// fetching remote resources, which Dockyard refuses anyway, so they change nothing.

	if len(cfg.Passwd.Users) > 0 {
		b.ignore("Ignition passwd.users")
	}
	if len(cfg.Passwd.Groups) > 0 {
		b.ignore("Ignition passwd.groups")
	}
	if len(cfg.Networkd.Units) > 0 {
		b.ignore("Ignition networkd.units")
	}
	if len(cfg.Storage.Disks) > 0 {
		b.ignore("Ignition storage.disks")
	}
	if len(cfg.Storage.Raid) > 0 {
		b.ignore("Ignition storage.raid")
	}

	fs, err := ignitionFilesystems(cfg.Storage.Filesystems, b)
	if err != nil {
		return nil, err
	}
	if err := ignitionDirectories(cfg.Storage.Directories, fs, b); err != nil {
		return nil, err
	}
	if err := ignitionFiles(cfg.Storage.Files, fs, b); err != nil {
		return nil, err
	}
	if err := ignitionLinks(cfg.Storage.Links, fs, b); err != nil {
		return nil, err
	}
	if err := ignitionUnits(cfg.Systemd.Units, b); err != nil {
		return nil, err
	}
	return b.plan(), nil
}

var ignitionVersionPattern = regexp.MustCompile(`^([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// checkIgnitionVersion reads ignition.version and refuses every spec but 2.0.0 to 2.3.0.
func checkIgnitionVersion(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return errors.New("bootstrap data is empty")
	}
	if head := bytes.ToLower(trimmed[:min(len(trimmed), 16)]); bytes.HasPrefix(head, []byte("#cloud-config")) || bytes.HasPrefix(head, []byte("## template")) {
		return errors.New("bootstrap data is a cloud-config document, not an Ignition config (check the secret's format key)")
	}
	var top struct {
		Ignition *struct {
			Version *string `json:"version"`
		} `json:"ignition"`
		IgnitionVersion json.RawMessage `json:"ignitionVersion"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return describeJSONError(err)
	}
	if top.Ignition == nil || top.Ignition.Version == nil {
		if len(top.IgnitionVersion) > 0 {
			return errors.New("spec 1 (ignitionVersion) is not supported: Dockyard reads Ignition spec 2.0.0 to 2.3.0")
		}
		return errors.New("ignition.version is missing")
	}
	v := *top.Ignition.Version
	m := ignitionVersionPattern.FindStringSubmatch(v)
	if m == nil {
		return errors.Errorf("ignition.version %s is not a valid version", quoteForError(v))
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	patch, _ := strconv.Atoi(m[3])
	switch {
	case major >= 3:
		return errors.Errorf("spec %d.x is not supported (ignition.version %s): Dockyard reads Ignition spec 2.0.0 to 2.3.0, which Cluster API's kubeadm bootstrap provider writes", major, quoteForError(v))
	case major != 2 || minor > 3 || patch != 0 || m[4] != "":
		return errors.Errorf("spec version %s is not supported: Dockyard reads Ignition spec 2.0.0 to 2.3.0", quoteForError(v))
	}
	return nil
}

// describeJSONError turns a JSON decoding error into one that names the place, not the data.
func describeJSONError(err error) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return errors.Errorf("malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typeErr):
		// Field is the path of Go struct fields; drop the names of embedded structs
		// (FileEmbedded1, Node), which are not JSON keys.
		var keys []string
		for _, k := range strings.Split(typeErr.Field, ".") {
			if k != "" && !unicode.IsUpper(rune(k[0])) {
				keys = append(keys, k)
			}
		}
		field := strings.Join(keys, ".")
		if field == "" {
			field = "the config"
		}
		return errors.Errorf("%s: want %s, found a JSON %s", field, jsonTypeName(typeErr.Type), typeErr.Value)
	default:
		return errors.Wrap(err, "malformed JSON")
	}
}

func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	default:
		return "another type"
	}
}

// ignitionFS maps the filesystems files may name to where they are in the node: "root" is the
// node's root; a filesystem given by path is that path. A filesystem that Ignition would
// mount from a device cannot exist in a container: it is ignored, and so is what is on it.
type ignitionFS struct {
	prefix  map[string]string
	ignored map[string]bool
}

func ignitionFilesystems(list []igntypes.Filesystem, b *planBuilder) (*ignitionFS, error) {
	fs := &ignitionFS{prefix: map[string]string{"root": ""}, ignored: map[string]bool{}}
	for i, f := range list {
		where := fmt.Sprintf("storage.filesystems[%d] (%s)", i, quoteForError(f.Name))
		switch {
		case f.Name == "root":
			// Ignition's own name for the root filesystem, which is the node's root here.
			continue
		case f.Mount != nil && f.Path != nil:
			return nil, errors.Errorf("%s: has both mount and path", where)
		case f.Mount != nil:
			b.ignore(fmt.Sprintf("Ignition storage.filesystems[%d] (%s on %s)", i, strconv.Quote(f.Name), quoteForError(f.Mount.Device)))
			fs.ignored[f.Name] = true
		case f.Path != nil:
			p, err := absPath(*f.Path)
			if err != nil {
				return nil, errors.Wrapf(err, "%s: path", where)
			}
			fs.prefix[f.Name] = p
		default:
			return nil, errors.Errorf("%s: has neither mount nor path", where)
		}
	}
	return fs, nil
}

// locate returns where a node of storage.<kind>[i] is in the node container, or skip when it
// is on an ignored filesystem. A node without a filesystem is taken to be on "root" (Ignition
// would refuse it; Container Linux Config, which CABPK uses, always sets it).
func (fs *ignitionFS) locate(kind string, i int, n igntypes.Node, b *planBuilder) (where, p string, skip bool, err error) {
	where = fmt.Sprintf("storage.%s[%d] (%s)", kind, i, quoteForError(n.Path))
	p, err = absPath(n.Path)
	if err != nil {
		return where, "", false, errors.Wrap(err, where)
	}
	name := n.Filesystem
	if name == "" {
		name = "root"
	}
	if fs.ignored[name] {
		b.ignore(fmt.Sprintf("Ignition storage.%s[%d] (%s) on filesystem %s", kind, i, quoteForError(n.Path), strconv.Quote(name)))
		return where, "", true, nil
	}
	prefix, ok := fs.prefix[name]
	if !ok {
		return where, "", false, errors.Errorf("%s: filesystem %s is not defined in storage.filesystems", where, quoteForError(name))
	}
	if prefix != "" {
		p = path.Join(prefix, p)
	}
	return where, p, false, nil
}

// prefixOf returns where a (defined, not ignored) filesystem is in the node.
func (fs *ignitionFS) prefixOf(name string) string {
	if name == "" {
		name = "root"
	}
	return fs.prefix[name]
}

// nodeOwner returns a node's owner and group, by id or name; empty means root.
func nodeOwner(u *igntypes.NodeUser, g *igntypes.NodeGroup) (owner, group string, err error) {
	pick := func(kind string, id *int, name string) (string, error) {
		switch {
		case id != nil && name != "":
			return "", errors.Errorf("%s: has both id and name", kind)
		case id != nil:
			if *id < 0 {
				return "", errors.Errorf("%s: id %d is negative", kind, *id)
			}
			return strconv.Itoa(*id), nil
		default:
			return name, checkAccountName(kind, name)
		}
	}
	if u != nil {
		if owner, err = pick("user", u.ID, u.Name); err != nil {
			return "", "", err
		}
	}
	if g != nil {
		if group, err = pick("group", g.ID, g.Name); err != nil {
			return "", "", err
		}
	}
	return owner, group, nil
}

// nodeMode checks a node's mode (0 to 07777) or returns the default.
func nodeMode(m *int, def int) (int, error) {
	if m == nil {
		return def, nil
	}
	if *m < 0 || *m > 0o7777 {
		return 0, errors.Errorf("mode %d is not a file mode (0 to 4095, that is 0 to 07777 octal)", *m)
	}
	return *m, nil
}

// chownCommand returns the shell command that gives p its owner and group, or "" when neither
// is set (a new node belongs to root). For a link, the link itself changes owner.
func chownCommand(owner, group, p string, link bool) string {
	if owner == "" && group == "" {
		return ""
	}
	spec := owner
	if group != "" {
		spec += ":" + group
	}
	cmd := []string{"chown"}
	if link {
		cmd = append(cmd, "-h")
	}
	return shellJoin(argv(cmd, spec, p))
}

func ignitionDirectories(list []igntypes.Directory, fs *ignitionFS, b *planBuilder) error {
	// Ignition creates directories shallowest first, keeping the config's order otherwise.
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	depth := func(p string) int {
		return strings.Count(path.Clean("/"+p), "/")
	}
	sort.SliceStable(order, func(a, c int) bool {
		return depth(list[order[a]].Path) < depth(list[order[c]].Path)
	})
	for _, i := range order {
		d := list[i]
		where, p, skip, err := fs.locate("directories", i, d.Node, b)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		mode, err := nodeMode(d.Mode, defaultDirMode)
		if err != nil {
			return errors.Wrap(err, where)
		}
		owner, group, err := nodeOwner(d.User, d.Group)
		if err != nil {
			return errors.Wrap(err, where)
		}
		script := shellJoin([]string{"mkdir", "-p", p}) + " && " + shellJoin([]string{"chmod", fmt.Sprintf("%04o", mode), p})
		if chown := chownCommand(owner, group, p, false); chown != "" {
			script += " && " + chown
		}
		if err := b.addCommand(&Command{Script: script}); err != nil {
			return err
		}
	}
	return nil
}

func ignitionFiles(list []igntypes.File, fs *ignitionFS, b *planBuilder) error {
	for i, f := range list {
		where, p, skip, err := fs.locate("files", i, f.Node, b)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		if f.Append && f.Overwrite != nil && *f.Overwrite {
			return errors.Errorf("%s: has both append and overwrite", where)
		}
		mode, err := nodeMode(f.Mode, int(defaultFileMode))
		if err != nil {
			return errors.Wrap(err, where)
		}
		owner, group, err := nodeOwner(f.User, f.Group)
		if err != nil {
			return errors.Wrap(err, where)
		}
		content, err := fileContents(f.Contents, b.remaining())
		if err != nil {
			return errors.Wrap(err, where)
		}
		if err := b.addFile(&File{
			Path:    p,
			Content: content,
			Mode:    unixMode(uint64(mode)),
			Owner:   owner,
			Group:   group,
			Append:  f.Append,
		}); err != nil {
			return err
		}
	}
	return nil
}

func ignitionLinks(list []igntypes.Link, fs *ignitionFS, b *planBuilder) error {
	for i, l := range list {
		where, p, skip, err := fs.locate("links", i, l.Node, b)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		target := l.Target
		switch {
		case target == "":
			return errors.Errorf("%s: target is missing", where)
		case strings.IndexByte(target, 0) >= 0:
			return errors.Errorf("%s: target contains a NUL byte", where)
		}
		owner, group, err := nodeOwner(l.User, l.Group)
		if err != nil {
			return errors.Wrap(err, where)
		}
		ln := []string{"ln", "-sfn"}
		if l.Hard {
			// A hard link's target is a path on the same filesystem.
			ln = []string{"ln", "-fn"}
			if prefix := fs.prefixOf(l.Filesystem); prefix != "" {
				target = path.Join(prefix, target)
			}
		}
		script := shellJoin(argv(ln, target, p))
		if dir := path.Dir(p); dir != "/" {
			script = shellJoin([]string{"mkdir", "-p", dir}) + " && " + script
		}
		// Ignition sets a symbolic link's owner, not a hard link's (it is the target's).
		if !l.Hard {
			if chown := chownCommand(owner, group, p, true); chown != "" {
				script += " && " + chown
			}
		}
		if err := b.addCommand(&Command{Script: script}); err != nil {
			return err
		}
	}
	return nil
}

var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// fileContents returns a file's content from its (data URL) source, decompressed and checked
// against its verification hash as Ignition would.
// The content may be at most limit bytes.
func fileContents(c igntypes.FileContents, limit int64) ([]byte, error) {
	var data []byte
	if c.Source != "" {
		scheme, _, ok := strings.Cut(c.Source, ":")
		if !ok || !urlScheme.MatchString(scheme) {
			return nil, errors.New("contents.source is not a URL")
		}
		switch scheme = strings.ToLower(scheme); scheme {
		case "data":
			var err error
			if data, err = decodeDataURL(c.Source); err != nil {
				return nil, errors.Wrap(err, "contents.source")
			}
		case "http", "https", "s3", "tftp", "oem", "gs":
			return nil, errors.Errorf("contents.source is a remote %s URL: Dockyard cannot fetch remote content in a node container; inline it as a data URL", scheme)
		default:
			return nil, errors.Errorf("contents.source has the unsupported URL scheme %s", quoteForError(scheme))
		}
	}
	switch c.Compression {
	case "":
	case "gzip":
		var err error
		if data, err = gunzip(data, limit); err != nil {
			return nil, errors.Wrap(err, "contents")
		}
	default:
		return nil, errors.Errorf("contents.compression %s is not supported (only gzip)", quoteForError(c.Compression))
	}
	if h := c.Verification.Hash; h != nil {
		function, sum, ok := strings.Cut(*h, "-")
		if !ok || function != "sha512" {
			return nil, errors.New("contents.verification.hash: want sha512-<hex digest>")
		}
		want, err := hex.DecodeString(sum)
		if err != nil || len(want) != sha512.Size {
			return nil, errors.New("contents.verification.hash: malformed sha512 digest")
		}
		if got := sha512.Sum512(data); !bytes.Equal(got[:], want) {
			return nil, errors.New("contents do not match contents.verification.hash")
		}
	}
	return data, nil
}

// decodeDataURL decodes an RFC 2397 data URL, "data:[<media type>][;base64],<data>". The
// media type is not needed. Errors never quote the data.
func decodeDataURL(s string) ([]byte, error) {
	const prefix = "data:"
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return nil, errors.New("not a data URL")
	}
	header, encoded, ok := strings.Cut(s[len(prefix):], ",")
	if !ok {
		return nil, errors.New("data URL has no comma before its data")
	}
	params := strings.Split(header, ";")
	isBase64 := len(params) > 1 && strings.EqualFold(strings.TrimSpace(params[len(params)-1]), "base64")
	data, err := percentDecode(encoded)
	if err != nil {
		return nil, errors.Wrap(err, "data URL")
	}
	if isBase64 {
		if data, err = decodeBase64(string(data)); err != nil {
			return nil, errors.Wrap(err, "data URL")
		}
	}
	return data, nil
}

// percentDecode decodes the %XX escapes of a URL's data; "+" stays "+".
func percentDecode(s string) ([]byte, error) {
	if strings.IndexByte(s, '%') < 0 {
		return []byte(s), nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return nil, errors.Errorf("invalid percent-encoding at byte %d of the data", i)
		}
		out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
		i += 2
	}
	return out, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	default:
		return c - '0'
	}
}

// systemdUnitTypes are the unit name extensions Ignition 2.x accepts.
var systemdUnitTypes = map[string]bool{
	".service": true, ".socket": true, ".device": true, ".mount": true, ".automount": true, ".swap": true,
	".target": true, ".path": true, ".timer": true, ".snapshot": true, ".slice": true, ".scope": true,
}

// checkUnitFileName checks a unit or drop-in name that becomes a file name.
func checkUnitFileName(name string) error {
	switch {
	case name == "":
		return errors.New("name is missing")
	case len(name) > 255:
		return errors.New("name is longer than 255 bytes")
	case strings.ContainsAny(name, "/\x00"):
		return errors.New("name contains a slash or a NUL byte")
	}
	for _, r := range name {
		if r < ' ' || r == 0x7f {
			return errors.New("name contains a control character")
		}
	}
	return nil
}

// deviceMount returns the device a .mount or .swap unit mounts when it is a /dev node, which
// a node container does not have (CABPK writes such units for KubeadmConfig's mounts).
func deviceMount(u igntypes.Unit) string {
	if ext := path.Ext(u.Name); ext != ".mount" && ext != ".swap" {
		return ""
	}
	for _, line := range strings.Split(u.Contents, "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && strings.TrimSpace(key) == "What" {
			if v := strings.TrimSpace(value); strings.HasPrefix(v, "/dev/") {
				return v
			}
		}
	}
	return ""
}

// ignitionUnits writes the units and drop-ins, then has systemd pick them up, mask, enable or
// disable them, and start the enabled ones. Ignition enables units with a systemd preset,
// which does nothing for a unit that does not exist; a unit without contents names one the
// node image may or may not have (CABPK's ntpd.service), so its commands only run when systemd
// knows the unit.
func ignitionUnits(units []igntypes.Unit, b *planBuilder) error {
	actions, err := writeUnits(units, b)
	if err != nil {
		return err
	}
	if len(actions) == 0 {
		return nil
	}
	return runUnitActions(actions, b)
}

// unitAction is what the plan has systemd do with one unit.
type unitAction struct {
	name                         string
	known                        bool // written by this plan
	mask, enable, disable, start bool
}

// writeUnits checks the units, writes their contents and drop-ins, and returns what systemd is
// to do with each; a unit that mounts a device is ignored.
func writeUnits(units []igntypes.Unit, b *planBuilder) ([]*unitAction, error) {
	// A unit may appear more than once (CABPK appends the KubeadmConfig's additional config to
	// its own); its actions are merged and done once, in the order of its first appearance.
	var actions []*unitAction
	byName := map[string]*unitAction{}
	masked := map[string]bool{}
	for _, u := range units {
		masked[u.Name] = masked[u.Name] || u.Mask
	}
	for i, u := range units {
		where := fmt.Sprintf("systemd.units[%d] (%s)", i, quoteForError(u.Name))
		if err := checkUnitFileName(u.Name); err != nil {
			return nil, errors.Wrap(err, where)
		}
		if !systemdUnitTypes[path.Ext(u.Name)] {
			return nil, errors.Errorf("%s: %s is not a systemd unit type Ignition accepts", where, quoteForError(path.Ext(u.Name)))
		}
		if dev := deviceMount(u); dev != "" {
			b.ignore(fmt.Sprintf("Ignition systemd unit %s (mounts %s)", strconv.Quote(u.Name), quoteForError(dev)))
			continue
		}
		if err := writeDropins(where, u, b); err != nil {
			return nil, err
		}
		a := byName[u.Name]
		if a == nil {
			a = &unitAction{name: u.Name}
			byName[u.Name] = a
			actions = append(actions, a)
		}
		// Masking makes the unit a link to /dev/null, which systemctl refuses to do over a unit
		// file, and Ignition does over the contents it wrote; so a masked unit's contents are
		// not written.
		if u.Contents != "" && !masked[u.Name] {
			if err := b.addFile(&File{
				Path:    path.Join(systemdUnitDir, u.Name),
				Content: []byte(u.Contents),
				Mode:    defaultFileMode,
			}); err != nil {
				return nil, err
			}
			a.known = true
		}
		a.mask = masked[u.Name]
		a.enable = a.enable || u.Enable || (u.Enabled != nil && *u.Enabled)
		a.disable = a.disable || (u.Enabled != nil && !*u.Enabled)
	}
	settleUnitActions(actions)
	return actions, nil
}

// writeDropins checks the names of a unit's drop-ins and writes the ones with contents.
func writeDropins(where string, u igntypes.Unit, b *planBuilder) error {
	for j, d := range u.Dropins {
		if err := checkUnitFileName(d.Name); err != nil {
			return errors.Wrapf(err, "%s: dropins[%d]", where, j)
		}
		if path.Ext(d.Name) != ".conf" {
			return errors.Errorf("%s: dropins[%d] (%s): a drop-in name must end in .conf", where, j, quoteForError(d.Name))
		}
		if d.Contents == "" {
			continue
		}
		if err := b.addFile(&File{
			Path:    path.Join(systemdUnitDir, u.Name+".d", d.Name),
			Content: []byte(d.Contents),
			Mode:    defaultFileMode,
		}); err != nil {
			return err
		}
	}
	return nil
}

// settleUnitActions neither enables nor disables a masked unit, does not disable an enabled
// one, and starts the enabled ones.
func settleUnitActions(actions []*unitAction) {
	for _, a := range actions {
		if a.mask {
			a.enable, a.disable = false, false
		}
		a.disable = a.disable && !a.enable
		a.start = a.enable
	}
}

// runUnitActions has systemd pick the units up, then masks, enables or disables, and starts
// them, each step over every unit before the next.
func runUnitActions(actions []*unitAction, b *planBuilder) error {
	if err := b.run("systemctl", "daemon-reload"); err != nil {
		return err
	}
	for _, a := range actions {
		if a.mask {
			if err := b.run(argv([]string{"systemctl", "mask"}, a.name)...); err != nil {
				return err
			}
		}
	}
	for _, a := range actions {
		var err error
		switch {
		case a.enable:
			err = unitCommand(b, "enable", a)
		case a.disable:
			err = unitCommand(b, "disable", a)
		}
		if err != nil {
			return err
		}
	}
	for _, a := range actions {
		if a.start {
			if err := unitCommand(b, "start", a); err != nil {
				return err
			}
		}
	}
	return nil
}

// unitCommand runs a systemctl verb on a unit; on one this plan did not write, only when
// systemd knows it.
func unitCommand(b *planBuilder, verb string, a *unitAction) error {
	if a.known {
		return b.run(argv([]string{"systemctl", verb}, a.name)...)
	}
	q := ShellQuote(a.name)
	return b.addCommand(&Command{Script: fmt.Sprintf("if systemctl cat -- %s >/dev/null 2>&1; then systemctl %s -- %s; fi", q, verb, q)})
}
