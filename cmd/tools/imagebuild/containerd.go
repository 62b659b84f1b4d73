package imagebuild

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// ContainerdOptions are the settings Dockyard changes in `containerd config default`.
type ContainerdOptions struct {
	// SandboxImage is the pause image kubeadm lists, so containerd never pulls its own default.
	SandboxImage string
	// SystemdCgroup makes runc use the systemd cgroup driver, the driver kubeadm configures
	// kubelet with unless told otherwise. Both must agree.
	SystemdCgroup bool
	// CNIBinDir and CNIConfDir are where containerd looks for CNI plugins and configuration.
	CNIBinDir  string
	CNIConfDir string
	// RegistryConfigPath is the directory of per-registry hosts.toml files (mirrors), for
	// users who do have a registry.
	RegistryConfigPath string
}

const criPlugin = `plugins."io.containerd.grpc.v1.cri"`

// RenderContainerdConfig returns containerd's default configuration (the output of
// `containerd config default`, configuration version 2 as in containerd 1.6 and 1.7) with
// Dockyard's settings: CRI enabled, the sandbox image, the cgroup driver, the CNI directories,
// and restrict_oom_score_adj — without CAP_SYS_RESOURCE a container may not lower its OOM
// score, and every pod sandbox would fail to start.
func RenderContainerdConfig(defaults string, o ContainerdOptions) (string, error) {
	if o.SandboxImage == "" {
		return "", errors.New("containerd configuration: no sandbox image")
	}
	if v, ok := lookupTOML(defaults, "", "version"); !ok || v != "2" {
		return "", errors.Errorf("containerd configuration: expected version = 2 (containerd 1.x), got %q", v)
	}
	settings := []struct{ section, key, value string }{
		{"", "disabled_plugins", "[]"},
		{criPlugin, "sandbox_image", strconv.Quote(o.SandboxImage)},
		{criPlugin, "restrict_oom_score_adj", "true"},
		{criPlugin + ".containerd.runtimes.runc.options", "SystemdCgroup", strconv.FormatBool(o.SystemdCgroup)},
		{criPlugin + ".cni", "bin_dir", strconv.Quote(o.CNIBinDir)},
		{criPlugin + ".cni", "conf_dir", strconv.Quote(o.CNIConfDir)},
		{criPlugin + ".registry", "config_path", strconv.Quote(o.RegistryConfigPath)},
	}
	config := defaults
	for _, s := range settings {
		var err error
		if config, err = SetTOMLValue(config, s.section, s.key, s.value); err != nil {
			return "", errors.Wrap(err, "containerd configuration")
		}
	}
	header := "# containerd configuration of a Dockyard node: `containerd config default` with the\n" +
		"# settings of cmd/tools/imagebuild.RenderContainerdConfig.\n\n"
	return header + config, nil
}

var tomlHeader = regexp.MustCompile(`^\s*\[\[?\s*(.*?)\s*\]\]?\s*(#.*)?$`)

// SetTOMLValue sets key = value in the table section of a TOML document; section "" is the root
// table (the keys before the first header). value is TOML already (a quoted string, a number,
// true, []). An existing single-line assignment is replaced in place, keeping its indentation;
// a missing key is added right below the table's header. The table itself must exist, so a
// change of the document's layout is an error rather than a silently ignored setting.
func SetTOMLValue(doc, section, key, value string) (string, error) {
	lines := strings.Split(doc, "\n")
	current, found := "", section == ""
	headerLine, headerIndent := -1, ""
	for i, line := range lines {
		if m := tomlHeader.FindStringSubmatch(line); m != nil && !isAssignment(line) {
			if current == section && found {
				break // leaving the table without finding the key
			}
			current = m[1]
			if current == section {
				found = true
				headerLine = i
				headerIndent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			}
			continue
		}
		if current != section {
			continue
		}
		if k, rest, ok := splitAssignment(line); ok && k == key {
			if strings.HasPrefix(strings.TrimSpace(rest), "[") && !strings.Contains(rest, "]") {
				return "", errors.Errorf("[%s] %s: multi-line values are not supported", section, key)
			}
			indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			lines[i] = indent + key + " = " + value
			return strings.Join(lines, "\n"), nil
		}
	}
	if !found {
		return "", errors.Errorf("table [%s] not found", section)
	}
	insert := headerIndent + "  " + key + " = " + value
	if section == "" {
		lines = append([]string{key + " = " + value}, lines...)
	} else {
		lines = append(lines[:headerLine+1], append([]string{insert}, lines[headerLine+1:]...)...)
	}
	return strings.Join(lines, "\n"), nil
}

// lookupTOML returns the raw value of key in a table.
func lookupTOML(doc, section, key string) (string, bool) {
	current := ""
	for _, line := range strings.Split(doc, "\n") {
		if m := tomlHeader.FindStringSubmatch(line); m != nil && !isAssignment(line) {
			current = m[1]
			continue
		}
		if current != section {
			continue
		}
		if k, rest, ok := splitAssignment(line); ok && k == key {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// splitAssignment splits `key = value` (bare or quoted key).
func splitAssignment(line string) (key, value string, ok bool) {
	t := strings.TrimSpace(line)
	if t == "" || strings.HasPrefix(t, "#") {
		return "", "", false
	}
	var k string
	if strings.HasPrefix(t, `"`) {
		end := strings.Index(t[1:], `"`)
		if end < 0 {
			return "", "", false
		}
		k, t = t[1:end+1], t[end+2:]
	} else {
		i := strings.IndexAny(t, " \t=")
		if i < 0 {
			return "", "", false
		}
		k, t = t[:i], t[i:]
	}
	t = strings.TrimLeft(t, " \t")
	if !strings.HasPrefix(t, "=") {
		return "", "", false
	}
	return k, t[1:], true
}

func isAssignment(line string) bool {
	_, _, ok := splitAssignment(line)
	return ok
}

var containerdVersion = regexp.MustCompile(`\b(\d+)\.(\d+)\.\d+`)

// ContainerdVersion extracts the version (1.6.20) from `containerd --version` output such as
// "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3".
func ContainerdVersion(versionOutput string) (string, error) {
	fields := strings.Fields(versionOutput)
	for _, f := range fields[min(2, len(fields)):] {
		f = strings.TrimPrefix(f, "v")
		if m := containerdVersion.FindString(f); m != "" && strings.HasPrefix(f, m) {
			return m, nil
		}
	}
	return "", errors.Errorf("no version in %q", strings.TrimSpace(versionOutput))
}

// SupportsImagePinning reports whether containerd's CRI plugin honours the
// io.cri-containerd.pinned=pinned image label (containerd 1.7 and later), which keeps kubelet's
// image garbage collection away from preloaded images.
func SupportsImagePinning(version string) bool {
	m := containerdVersion.FindStringSubmatch(version)
	if m == nil {
		return false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major > 1 || (major == 1 && minor >= 7)
}
