// Command gentemplates writes the clusterctl flavors in templates/ from templates/src/,
// inlining the CNI installer (images/cni/install-cni.sh) where a source has a line
// "#@install-cni", at that line's indentation: the flavors and the management cluster
// (cmd/tools/mgmt) run the same script. A source with "#@bootstrap-format" lines is written twice:
// as itself, the lines dropped (CABPK's default, cloud-config), and as its ignition flavor
// (cluster-template.yaml gives cluster-template-ignition.yaml), each line replaced by
// "format: ignition" at its indentation, so the two flavors cannot drift apart; only the
// source's own markers count, not those of what it includes. A line "#@include <source>"
// inlines the shared part of another source: its documents after its opening comments, up to
// its "#@end-shared" line (so the machinepool flavor shares the cluster and control plane of
// cluster-template.yaml). A source with "#@ipv6-primary <yaml>" lines is also written as the IP
// family flavors (ipFamilies): its pod and service CIDR lines replaced by the family's, and
// each such line replaced by its YAML where IPv6 is the primary family (kubeadm and the
// kubelet then pick the node's IPv6 address), dropped elsewhere. A line "#@inline <file>"
// is replaced by templates/src/inline/<file> at its indentation: YAML that flavors with
// different shapes (the default flavor's KubeadmControlPlane, the ClusterClass's template)
// share. Run by `make templates`.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
)

const scriptPath = "images/cni/install-cni.sh"

// marker is a line holding only "#@install-cni"; its indentation is the script's.
var marker = regexp.MustCompile(`(?m)^([ \t]*)#@install-cni\n`)

// formatMarker is a line holding only "#@bootstrap-format", where the ignition flavor sets the
// kubeadm bootstrap provider's format.
var formatMarker = regexp.MustCompile(`(?m)^([ \t]*)#@bootstrap-format\n`)

// ignitionHeader opens the ignition flavor, whose source describes the default flavor.
const ignitionHeader = `# The ignition flavor: the flavor below with the kubeadm bootstrap provider writing Ignition
# (format: ignition) instead of cloud-config. Cluster API's kubeadm providers need the feature
# gate: EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION=true at clusterctl init.
`

// includeMarker is a line "#@include <file of templates/src>".
var includeMarker = regexp.MustCompile(`(?m)^#@include ([A-Za-z0-9._-]+\.yaml)\n`)

// inlineMarker is a line "#@inline <file of templates/src/inline>".
var inlineMarker = regexp.MustCompile(`(?m)^([ \t]*)#@inline ([A-Za-z0-9._-]+)\n`)

// endShared ends the part of a source that other sources include.
var endShared = regexp.MustCompile(`(?m)^#@end-shared\n`)

// primaryMarker is a line "#@ipv6-primary <yaml>": the YAML, at the line's indentation, in the
// flavors whose primary family is IPv6.
var primaryMarker = regexp.MustCompile(`(?m)^([ \t]*)#@ipv6-primary (.+)\n`)

// The pod and service CIDR lines of a source with IP family flavors, each once.
const (
	podCIDRLine     = "- ${DOCKYARD_POD_CIDR:=10.244.0.0/16}"
	serviceCIDRLine = "- ${DOCKYARD_SERVICE_CIDR:=10.96.0.0/12}"
	podCIDRv6       = "- ${DOCKYARD_POD_CIDR_IPV6:=fd00:100:96::/48}"
	serviceCIDRv6   = "- ${DOCKYARD_SERVICE_CIDR_IPV6:=fd00:100:64::/108}"
)

// ipFamilies are the IP family flavors: the suffix of their file, what their header says,
// their CIDR lines (primary family first) and whether IPv6 is primary.
var ipFamilies = []struct {
	suffix, header string
	pods, services []string
	ipv6Primary    bool
}{
	{"ipv6", "IPv6 only: pods and services are IPv6 (the nodes' network is dual-stack, so a management\n# cluster on IPv4 still reaches the endpoint, which stays IPv4)",
		[]string{podCIDRv6}, []string{serviceCIDRv6}, true},
	{"dual-stack", "dual-stack, IPv4 primary: pods and services of both families",
		[]string{podCIDRLine, podCIDRv6}, []string{serviceCIDRLine, serviceCIDRv6}, false},
	{"dual-stack-ipv6-primary", "dual-stack, IPv6 primary: pods and services of both families, nodes\n# advertising their IPv6 address",
		[]string{podCIDRv6, podCIDRLine}, []string{serviceCIDRv6, serviceCIDRLine}, true},
}

func main() {
	if err := run("templates/src", "templates", scriptPath); err != nil {
		fmt.Fprintf(os.Stderr, "gentemplates: %v\n", err)
		os.Exit(1)
	}
}

func run(srcDir, outDir, script string) error {
	content, err := os.ReadFile(script)
	if err != nil {
		return err
	}
	if strings.Contains(string(content), "$") {
		// clusterctl substitutes $VAR and ${VAR} everywhere in a template.
		return errors.Errorf("%s contains '$', which clusterctl would substitute", script)
	}
	for _, delim := range []string{"{{", "{%", "{#"} {
		if strings.Contains(string(content), delim) {
			// CABPK's cloud-config is a jinja template ("## template: jinja").
			return errors.Errorf("%s contains %q, which a jinja template would interpret", script, delim)
		}
	}
	sources, err := filepath.Glob(filepath.Join(srcDir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, src := range sources {
		in, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		from := []string{filepath.ToSlash(src)}
		included, err := includeShared(srcDir, string(in), &from)
		if err != nil {
			return errors.Wrap(err, src)
		}
		if included, err = inline(srcDir, included, &from); err != nil {
			return errors.Wrap(err, src)
		}
		out := marker.ReplaceAllStringFunc(included, func(m string) string {
			return indent(string(content), marker.FindStringSubmatch(m)[1])
		})
		if out != included {
			from = append(from, filepath.ToSlash(script))
		}
		header := fmt.Sprintf("# Generated by `make templates` from %s; do not edit.\n", strings.Join(from, " and "))
		name := filepath.Base(src)
		plain := formatMarker.ReplaceAllString(out, "")
		if err := writeFile(filepath.Join(outDir, name), header+primaryMarker.ReplaceAllString(plain, "")); err != nil {
			return err
		}
		if primaryMarker.MatchString(string(in)) {
			if err := writeFamilies(outDir, name, header, plain); err != nil {
				return errors.Wrap(err, src)
			}
		}
		if formatMarker.MatchString(string(in)) {
			ignition := primaryMarker.ReplaceAllString(formatMarker.ReplaceAllString(out, "${1}format: ignition\n"), "")
			name = strings.TrimSuffix(name, ".yaml") + "-ignition.yaml"
			if err := writeFile(filepath.Join(outDir, name), header+ignitionHeader+ignition); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFile writes a template unless it already holds text, by a rename (fileutil): a suite
// reading the templates while another make target regenerates them (make test-all runs suites
// at once) never reads a half-written one.
func writeFile(path, text string) error {
	return fileutil.WriteIfChanged(path, []byte(text), 0o644)
}

// writeFamilies writes the IP family flavors of a flavor (name) from its text with the
// "#@ipv6-primary" lines still in.
func writeFamilies(outDir, name, header, text string) error {
	for _, f := range ipFamilies {
		out, err := replaceLine(text, podCIDRLine, f.pods)
		if err != nil {
			return err
		}
		if out, err = replaceLine(out, serviceCIDRLine, f.services); err != nil {
			return err
		}
		if f.ipv6Primary {
			out = primaryMarker.ReplaceAllString(out, "${1}${2}\n")
		} else {
			out = primaryMarker.ReplaceAllString(out, "")
		}
		file := strings.TrimSuffix(name, ".yaml") + "-" + f.suffix + ".yaml"
		intro := "# The " + f.suffix + " flavor, " + f.header + ". Otherwise the flavor below.\n"
		if err := writeFile(filepath.Join(outDir, file), header+intro+out); err != nil {
			return err
		}
	}
	return nil
}

// replaceLine replaces the one line whose text (after its indentation) is old with the lines
// given, at its indentation.
func replaceLine(text, old string, lines []string) (string, error) {
	re := regexp.MustCompile(`(?m)^([ \t]*)` + regexp.QuoteMeta(old) + `\n`)
	if n := len(re.FindAllStringIndex(text, -1)); n != 1 {
		return "", errors.Errorf("want the line %q once, found it %d times", old, n)
	}
	return re.ReplaceAllStringFunc(text, func(m string) string {
		return indent(strings.Join(lines, "\n"), re.FindStringSubmatch(m)[1])
	}), nil
}

// includeShared replaces each "#@include" line of a source with the shared part of the source it
// names (recorded in from) and drops "#@end-shared" lines.
func includeShared(srcDir, text string, from *[]string) (string, error) {
	var errs []error
	out := includeMarker.ReplaceAllStringFunc(text, func(m string) string {
		name := includeMarker.FindStringSubmatch(m)[1]
		path := filepath.Join(srcDir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			return m
		}
		end := endShared.FindStringIndex(string(data))
		if end == nil {
			errs = append(errs, errors.Errorf("%s has no #@end-shared line to include up to", path))
			return m
		}
		shared := string(data[:end[0]])
		// Its opening comments describe it, not the including flavor.
		for strings.HasPrefix(shared, "#") {
			_, shared, _ = strings.Cut(shared, "\n")
		}
		*from = append(*from, filepath.ToSlash(path))
		return shared
	})
	if len(errs) > 0 {
		return "", errs[0]
	}
	return endShared.ReplaceAllString(out, ""), nil
}

// inline replaces each "#@inline" line with the file it names (recorded in from, once) at the
// line's indentation.
func inline(srcDir, text string, from *[]string) (string, error) {
	var errs []error
	out := inlineMarker.ReplaceAllStringFunc(text, func(m string) string {
		sub := inlineMarker.FindStringSubmatch(m)
		path := filepath.Join(srcDir, "inline", sub[2])
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			return m
		}
		if !slices.Contains(*from, filepath.ToSlash(path)) {
			*from = append(*from, filepath.ToSlash(path))
		}
		return indent(string(data), sub[1])
	})
	if len(errs) > 0 {
		return "", errs[0]
	}
	return out, nil
}

func indent(text, prefix string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line != "" {
			b.WriteString(prefix)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
