package bootstrap

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// addTestdata seeds a fuzz target with the testdata files matching pattern.
func addTestdata(f *testing.F, pattern string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no testdata matches %s: %v", pattern, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "node-1")
	}
}

// The secrets bootstrap data carries, as the fuzz targets' oracle sees them (written apart from
// secrets.go on purpose): bootstrap tokens, kubeadm certificate keys, lines of private keys.
var (
	oracleToken          = regexp.MustCompile(`[a-z0-9]{6}\.[a-z0-9]{16}`)
	oracleCertificateKey = regexp.MustCompile(`(?i)certificate-?key[ =:"']*([0-9a-f]{64})`)
	oraclePrivateKey     = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----(.*?)-----END [A-Z ]*PRIVATE KEY-----`)
)

// secretsIn returns the secrets in bootstrap data (private keys line by line, long enough not
// to be found by chance).
func secretsIn(data []byte) []string {
	var out []string
	out = append(out, oracleToken.FindAllString(string(data), -1)...)
	for _, m := range oracleCertificateKey.FindAllStringSubmatch(string(data), -1) {
		out = append(out, m[1])
	}
	for _, m := range oraclePrivateKey.FindAllStringSubmatch(string(data), -1) {
		for _, line := range strings.Fields(m[1]) {
			if len(line) >= 16 {
				out = append(out, line)
			}
		}
	}
	return out
}

// fuzzParse is the property both targets check: Parse never panics, fails without a plan or
// succeeds with a well-formed one, gives the same answer twice, and what it says about the
// data (its error, the ignored keys; both end up in conditions and events) never holds a
// secret of the data.
func fuzzParse(t *testing.T, format Format, data []byte, hostname string) {
	opts := Options{Hostname: hostname}
	p, err := Parse(format, data, opts)
	secrets := secretsIn(data)
	if err != nil {
		if p != nil {
			t.Fatalf("Parse returned a plan and the error %v", err)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("the error shows the secret %q: %v", s, err)
			}
		}
		return
	}
	for _, s := range secrets {
		for _, ignored := range p.Ignored {
			if strings.Contains(ignored, s) {
				t.Fatalf("the ignored keys show the secret %q: %v", s, p.Ignored)
			}
		}
	}
	checkPlan(t, p)
	again, err := Parse(format, data, opts)
	if err != nil {
		t.Fatalf("second Parse failed: %v", err)
	}
	if !reflect.DeepEqual(again, p) {
		t.Fatalf("Parse is not deterministic:\n%s", diffPlan(again, p.Steps, p.Ignored))
	}
}

func FuzzParseCloudConfig(f *testing.F) {
	addTestdata(f, "*.yaml")
	for _, seed := range []string{
		"#cloud-config\nwrite_files:\n- path: /etc/a\n  encoding: gz+b64\n  content: H4sIAAAAAAAA/0rLz+cCAAAA//8DAGdQ9k8EAAAA\n  permissions: 0640\n  owner: a:b\n  append: yes\n  defer: true\n",
		"## template: jinja\n#cloud-config\nruncmd:\n- [echo, '{{ v1.local_hostname }}']\n- echo {{- ds.meta_data.hostname -}} x\n",
		"#cloud-config\nx: &x {path: /etc/x, content: !!binary aGVsbG8=}\nwrite_files: [*x, {<<: *x, path: /etc/y}]\nbootcmd: [[a, b], c]\n",
		"#cloud-config\nwrite_files:\n- path: /etc/k\n  encoding: b64\n  content: 'not base64!'\n",
		"#cloud-config\nusers: [{name: a}]\nntp: {}\nruncmd: 'echo a'\n",
	} {
		f.Add([]byte(seed), "node-1")
	}
	f.Fuzz(func(t *testing.T, data []byte, hostname string) {
		fuzzParse(t, FormatCloudConfig, data, hostname)
	})
}

func FuzzParseIgnition(f *testing.F) {
	addTestdata(f, "*.json")
	for _, seed := range []string{
		`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a","mode":420,"user":{"id":0},"group":{"name":"g"},"append":true,"contents":{"source":"data:;base64,aGVsbG8=","verification":{"hash":"sha512-00"}}}]}}`,
		`{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a","contents":{"compression":"gzip","source":"data:,%1f%8b"}}],"filesystems":[{"name":"oem","path":"/oem"}],"directories":[{"filesystem":"oem","path":"/a/b","mode":493}],"links":[{"filesystem":"root","path":"/l","target":"/t","hard":true}]}}`,
		`{"ignition":{"version":"2.3.0"},"systemd":{"units":[{"name":"a.service","enabled":true,"mask":false,"contents":"[Unit]\n","dropins":[{"name":"b.conf","contents":"x"}]},{"name":"m.mount","contents":"What=/dev/sda"}]},"passwd":{"users":[{"name":"core"}]}}`,
		`{"ignition":{"version":"3.4.0"}}`,
		`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"path":"/x","contents":{"source":"https://example.com/x"}}]}}`,
	} {
		f.Add([]byte(seed), "")
	}
	f.Fuzz(func(t *testing.T, data []byte, hostname string) {
		fuzzParse(t, FormatIgnition, data, hostname)
	})
}
