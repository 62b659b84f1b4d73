package bootstrap

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestParseSamples runs over the bootstrap data captured from a real CABPK v1.14.2.
func TestParseSamples(t *testing.T) {
	cert := "-----BEGIN CERTIFICATE-----\n<REDACTED CERTIFICATE>\n-----END CERTIFICATE-----\n"
	key := "-----BEGIN RSA PRIVATE KEY-----\n<REDACTED RSA PRIVATE KEY>\n-----END RSA PRIVATE KEY-----\n"
	tests := []struct {
		file  string
		steps []Step
	}{{
		file: "kubeadm-bootstrap-init.cloud-config.yaml",
		steps: []Step{
			rootFile("/etc/kubernetes/pki/ca.crt", 0o640, cert),
			rootFile("/etc/kubernetes/pki/ca.key", 0o600, key),
			rootFile("/etc/kubernetes/pki/etcd/ca.crt", 0o640, cert),
			rootFile("/etc/kubernetes/pki/etcd/ca.key", 0o600, key),
			rootFile("/etc/kubernetes/pki/front-proxy-ca.crt", 0o640, cert),
			rootFile("/etc/kubernetes/pki/front-proxy-ca.key", 0o600, key),
			rootFile("/etc/kubernetes/pki/sa.pub", 0o640, "-----BEGIN PUBLIC KEY-----\n<REDACTED PUBLIC KEY>\n-----END PUBLIC KEY-----\n"),
			rootFile("/etc/kubernetes/pki/sa.key", 0o600, key),
			rootFile("/run/kubeadm/kubeadm.yaml", 0o640, `---
apiServer:
  certSANs:
  - localhost
  - 127.0.0.1
apiVersion: kubeadm.k8s.io/v1beta4
clusterName: c1
controlPlaneEndpoint: 10.0.0.10:6443
controllerManager: {}
dns: {}
etcd: {}
featureGates:
  ControlPlaneKubeletLocalMode: true
kind: ClusterConfiguration
kubernetesVersion: v1.34.4
networking:
  podSubnet: 192.168.0.0/16
  serviceSubnet: 10.128.0.0/12
proxy: {}
scheduler: {}

---
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint: {}
nodeRegistration:
  kubeletExtraArgs:
  - name: cgroup-driver
    value: cgroupfs
  taints: null
`),
			rootFile("/run/cluster-api/placeholder", 0o640, placeholderContent),
			script("kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"),
		},
	}, {
		file: "kubeadm-bootstrap-join.cloud-config.yaml",
		steps: []Step{
			rootFile("/run/kubeadm/kubeadm-join-config.yaml", 0o640, `---
apiVersion: kubeadm.k8s.io/v1beta4
discovery:
  bootstrapToken:
    apiServerEndpoint: 127.0.0.1:7443
    caCertHashes:
    - sha256:<REDACTED>
    token: <REDACTED>.<REDACTED>
kind: JoinConfiguration
nodeRegistration:
  kubeletExtraArgs:
  - name: cgroup-driver
    value: cgroupfs
  taints:
  - effect: NoSchedule
    key: node.cluster.x-k8s.io/uninitialized
`),
			rootFile("/run/cluster-api/placeholder", 0o640, placeholderContent),
			script("kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			// The samples have no Jinja expressions: any hostname, or none, gives the same plan.
			for _, opts := range []Options{{}, {Hostname: "c1-control-plane-x7k2p"}} {
				p := mustParse(t, FormatCloudConfig, string(data), opts)
				if d := diffPlan(p, tt.steps, nil); d != "" {
					t.Errorf("plan (-want +got):\n%s", d)
				}
			}
			// An empty format means cloud-config.
			p := mustParse(t, "", string(data), Options{})
			if d := diffPlan(p, tt.steps, nil); d != "" {
				t.Errorf("empty format: plan (-want +got):\n%s", d)
			}
		})
	}
}

func gzipBytes(t testing.TB, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCloudConfigEncodings(t *testing.T) {
	const secret = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBsecret\n-----END EC PRIVATE KEY-----\n"
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	gz := gzipBytes(t, secret)
	gzb64 := base64.StdEncoding.EncodeToString(gz)
	// Wrapped base64, as tools write it, with and without padding.
	wrapped := b64[:20] + "\n    " + b64[20:]
	unpadded := strings.TrimRight(b64, "=")
	gzBinary := base64.StdEncoding.EncodeToString(gz)

	tests := []struct {
		name, entry string
	}{
		{"no encoding", "content: |\n    -----BEGIN EC PRIVATE KEY-----\n    MHcCAQEEIBsecret\n    -----END EC PRIVATE KEY-----\n"},
		{"plain", "encoding: plain\n  content: \"-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEEIBsecret\\n-----END EC PRIVATE KEY-----\\n\""},
		{"text/plain", "encoding: text/plain\n  content: \"-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEEIBsecret\\n-----END EC PRIVATE KEY-----\\n\""},
		{"b64", "encoding: b64\n  content: " + b64},
		{"base64", "encoding: base64\n  content: " + b64},
		{"BASE64 with spaces", "encoding: ' BASE64 '\n  content: " + b64},
		{"base64 wrapped block", "encoding: base64\n  content: |\n    " + wrapped + "\n"},
		{"base64 without padding", "encoding: base64\n  content: " + unpadded},
		{"gz as binary", "encoding: gz\n  content: !!binary " + gzBinary},
		{"gzip as binary", "encoding: gzip\n  content: !!binary |\n    " + gzBinary},
		{"gz+b64", "encoding: gz+b64\n  content: " + gzb64},
		{"gz+base64", "encoding: gz+base64\n  content: " + gzb64},
		{"gzip+b64", "encoding: gzip+b64\n  content: " + gzb64},
		{"gzip+base64", "encoding: gzip+base64\n  content: " + gzb64},
		{"GZIP+BASE64", "encoding: GZIP+BASE64\n  content: " + gzb64},
		{"binary without encoding", "content: !!binary " + b64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "#cloud-config\nwrite_files:\n- path: /etc/key.pem\n  permissions: '0600'\n  " + tt.entry + "\n"
			p := mustParse(t, FormatCloudConfig, doc, Options{})
			if d := diffPlan(p, []Step{rootFile("/etc/key.pem", 0o600, secret)}, nil); d != "" {
				t.Errorf("plan (-want +got):\n%s\ndocument:\n%s", d, doc)
			}
		})
	}
}

func TestCloudConfigEncodingErrors(t *testing.T) {
	const secret = "c2VjcmV0IGtleSBtYXRlcmlhbA" // base64 of "secret key material"
	gz := gzipBytes(t, "secret key material")
	tests := []struct {
		name, entry string
		want        []string
	}{
		{"bad base64", "encoding: b64\n  content: " + secret + "!!" + secret,
			[]string{"write_files[0] (/etc/k): decoding base64: illegal data at input byte 26"}},
		{"bad binary", "content: !!binary " + secret + "*",
			[]string{"write_files[0] (/etc/k): content: !!binary: decoding base64: illegal data"}},
		{"not gzip", "encoding: gzip+base64\n  content: " + secret,
			[]string{"write_files[0] (/etc/k): decompressing gzip: gzip: invalid header"}},
		{"truncated gzip", "encoding: gz+b64\n  content: " + base64.StdEncoding.EncodeToString(gz[:len(gz)-6]),
			[]string{"write_files[0] (/etc/k): decompressing gzip: data is truncated"}},
		{"corrupt gzip", "encoding: gz+b64\n  content: " + base64.StdEncoding.EncodeToString(append(append([]byte{}, gz[:10]...), bytes.Repeat([]byte{0xff}, 20)...)),
			[]string{"write_files[0] (/etc/k): decompressing gzip: flate: corrupt input"}},
		{"unknown encoding", "encoding: rot13\n  content: " + secret,
			[]string{`write_files[0] (/etc/k): encoding rot13 is not supported`}},
		{"encoding list", "encoding: [b64]\n  content: " + secret,
			[]string{"write_files[0] (/etc/k): encoding: want a string, found a list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "#cloud-config\nwrite_files:\n- path: /etc/k\n  " + tt.entry + "\n"
			wantError(t, FormatCloudConfig, doc, Options{}, append(tt.want, "cloud-config: "), secret, "secret key material")
		})
	}
}

func TestCloudConfigGzipBomb(t *testing.T) {
	bomb := base64.StdEncoding.EncodeToString(gzipBytes(t, strings.Repeat("\x00", maxPlanSize+1)))
	doc := "#cloud-config\nwrite_files:\n- path: /etc/bomb\n  encoding: gzip+base64\n  content: " + bomb + "\n"
	wantError(t, FormatCloudConfig, doc, Options{}, []string{"write_files[0] (/etc/bomb): decompressing gzip: bootstrap data expands to more than 64 MiB"})
}

func TestCloudConfigAliasBomb(t *testing.T) {
	// One 1 MiB content repeated through aliases must not expand without bound.
	var doc strings.Builder
	doc.WriteString("#cloud-config\nbig: &big \"" + strings.Repeat("x", 1<<20) + "\"\nwrite_files:\n")
	for i := 0; i < 100; i++ {
		doc.WriteString("- {path: /etc/f, content: *big}\n")
	}
	wantError(t, FormatCloudConfig, doc.String(), Options{}, []string{"bootstrap data expands to more than 64 MiB"})
}

func TestCloudConfigPermissions(t *testing.T) {
	tests := []struct {
		value string
		want  os.FileMode
	}{
		{"'0640'", 0o640},
		{`"0600"`, 0o600},
		{"'640'", 0o640},      // a string is always octal
		{"'0o640'", 0o640},    // Python's int(s, 8) takes the 0o prefix
		{"' 0644 '", 0o644},   // and surrounding spaces
		{"!!str 0755", 0o755}, // an explicit string
		{"0640", 0o640},       // YAML 1.1 (cloud-init's PyYAML): a leading 0 is octal
		{"0o640", 0o640},      // a string to YAML 1.1, so octal
		{"420", 0o644},        // a decimal YAML integer is its value, as for cloud-init
		{"0x1a4", 0o644},      // YAML 1.1 hexadecimal
		{"0", 0},              // no permissions at all
		{"'4755'", 0o755 | os.ModeSetuid},
		{"'2775'", 0o775 | os.ModeSetgid},
		{"'1777'", 0o777 | os.ModeSticky},
		{"'7777'", 0o777 | os.ModeSetuid | os.ModeSetgid | os.ModeSticky},
		{"~", 0o644}, // null: the default
		{"", 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			doc := "#cloud-config\nwrite_files:\n- path: /etc/f\n  content: x\n  permissions: " + tt.value + "\n"
			p := mustParse(t, FormatCloudConfig, doc, Options{})
			if d := diffPlan(p, []Step{rootFile("/etc/f", tt.want, "x")}, nil); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
	// No permissions key at all.
	p := mustParse(t, FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: /etc/f\n", Options{})
	if d := diffPlan(p, []Step{rootFile("/etc/f", 0o644, "")}, nil); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}

	bad := []struct{ value, want string }{
		{"'0648'", `permissions: 0648 is not an octal mode like '0640'`},
		{"'rw-r--r--'", `permissions: rw-r--r-- is not an octal mode`},
		{"'10000'", "permissions: 10000 is not a file mode (0 to 07777)"},
		{"010000", "permissions: 010000 is not a file mode"},
		{"4096", "permissions: 4096 is not a file mode"},
		{"-1", "permissions: -1 is not an octal mode"},
		{"0.5", "permissions: 0.5 is not an octal mode"},
		{"true", "permissions: true is not an octal mode"},
		{"[0640]", "permissions: want an octal string like '0640', found a list"},
		{"{a: b}", "permissions: want an octal string like '0640', found a mapping"},
		{"'77777777777777777777777'", "permissions: 77777777777777777777777 is not a file mode"},
	}
	for _, tt := range bad {
		t.Run("bad "+tt.value, func(t *testing.T) {
			doc := "#cloud-config\nwrite_files:\n- path: /etc/f\n  content: x\n  permissions: " + tt.value + "\n"
			wantError(t, FormatCloudConfig, doc, Options{}, []string{"write_files[0] (/etc/f): " + tt.want})
		})
	}
}

func TestCloudConfigOwner(t *testing.T) {
	tests := []struct {
		value        string
		owner, group string
	}{
		{"root:root", "root", "root"},
		{"'1000:1000'", "1000", "1000"},
		{"etcd:etcd", "etcd", "etcd"},
		{"www-data", "www-data", ""}, // the group stays root
		{"' capi : wheel '", "capi", "wheel"},
		{"':docker'", "", "docker"},
		{"none:adm", "", "adm"},
		{"'-1:-1'", "", ""},
		{"1000", "1000", ""},
		{"~", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			doc := "#cloud-config\nwrite_files:\n- path: /etc/f\n  owner: " + tt.value + "\n"
			p := mustParse(t, FormatCloudConfig, doc, Options{})
			if d := diffPlan(p, []Step{file("/etc/f", 0o644, tt.owner, tt.group, "")}, nil); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
	bad := []struct{ value, want string }{
		{"'root:root:root'", `owner: group name root:root contains a character`},
		{"'ro ot'", `owner: user name "ro ot" contains a character`},
		{"[root, root]", "owner: want \"user:group\", found a list"},
	}
	for _, tt := range bad {
		t.Run("bad "+tt.value, func(t *testing.T) {
			wantError(t, FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: /etc/f\n  owner: "+tt.value+"\n", Options{}, []string{"write_files[0] (/etc/f): " + tt.want})
		})
	}
}

func TestCloudConfigOrderAppendDefer(t *testing.T) {
	doc := `#cloud-config
runcmd:
- echo run 1
- [sh, -c, 'echo "run 2"']
write_files:
- path: /etc/deferred-1
  content: d1
  defer: true
- path: /etc/first
  content: f1
- path: /etc/appended
  content: "more\n"
  append: true
- path: /etc/deferred-2
  content: d2
  defer: yes
  append: on
- path: /etc/not-deferred
  content: f2
  defer: false
  append: "false"
bootcmd:
- [mkdir, -p, /run/x]
- echo boot
`
	p := mustParse(t, FormatCloudConfig, doc, Options{})
	want := []Step{
		args("mkdir", "-p", "/run/x"),
		script("echo boot"),
		rootFile("/etc/first", 0o644, "f1"),
		appendFile("/etc/appended", 0o644, "root", "root", "more\n"),
		rootFile("/etc/not-deferred", 0o644, "f2"),
		rootFile("/etc/deferred-1", 0o644, "d1"),
		appendFile("/etc/deferred-2", 0o644, "root", "root", "d2"),
		script("echo run 1"),
		args("sh", "-c", `echo "run 2"`),
	}
	if d := diffPlan(p, want, nil); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
	if got, want := p.Steps[8].Command.String(), `sh -c 'echo "run 2"'`; got != want {
		t.Errorf("Command.String() = %q, want %q", got, want)
	}
}

func TestCloudConfigCommands(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []Step
	}{
		{"string runcmd is one script", "runcmd: |\n  echo a\n  echo b\n", []Step{script("echo a\necho b\n")}},
		{"multi-line entry", "runcmd:\n- |\n  set -e\n  echo a\n", []Step{script("set -e\necho a\n")}},
		{"scalars in argument lists keep their text", "runcmd:\n- [sleep, 10]\n- [echo, true, 0640, ~x]\n",
			[]Step{args("sleep", "10"), args("echo", "true", "0640", "~x")}},
		{"non-string scalar entry", "runcmd:\n- true\n- 42\n", []Step{script("true"), script("42")}},
		{"empty entries are dropped", "runcmd:\n- ''\n- []\n- '  '\n- echo x\n", []Step{script("echo x")}},
		{"null runcmd", "runcmd:\nbootcmd: ~\n", nil},
		{"aliases", "x: &cmd [echo, hi]\nruncmd:\n- *cmd\n- *cmd\n", []Step{args("echo", "hi"), args("echo", "hi")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, FormatCloudConfig, "#cloud-config\n"+tt.doc, Options{})
			var ignored []string
			if strings.HasPrefix(tt.doc, "x:") {
				ignored = []string{`cloud-config module "x"`}
			}
			if d := diffPlan(p, tt.want, ignored); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
}

func TestCloudConfigIgnored(t *testing.T) {
	doc := `#cloud-config
users:
- name: capi
ntp: {enabled: true}
packages: [curl]
disk_setup: {}
fs_setup: []
mounts: [[etcd_disk, /var/lib/etcd]]
merge_how: 'dict(recurse_array)+list(append)'
hostname: ignored-host
write_files:
- path: /etc/f
  content: x
  permission: '0600'
  source: ~
`
	p := mustParse(t, FormatCloudConfig, doc, Options{})
	want := []string{
		`cloud-config module "disk_setup"`,
		`cloud-config module "fs_setup"`,
		`cloud-config module "hostname"`,
		`cloud-config module "mounts"`,
		`cloud-config module "ntp"`,
		`cloud-config module "packages"`,
		`cloud-config module "users"`,
		`cloud-config write_files[0] (/etc/f) key "permission"`,
	}
	if d := diffPlan(p, []Step{rootFile("/etc/f", 0o644, "x")}, want); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
}

func TestCloudConfigYAMLFeatures(t *testing.T) {
	doc := `#cloud-config
x-defaults: &defaults
  owner: etcd:etcd
  permissions: '0600'
write_files:
- <<: *defaults
  path: /etc/a
  content: a
- <<: *defaults
  path: /etc/b
  permissions: '0640'
  content: "{{ not jinja }}\n#cloud-config\nwrite_files: []\n"
- path: /etc//c/../d/
  content: |-
    no trailing newline
- path: /etc/e
  content: >
    folded
    text
`
	p := mustParse(t, FormatCloudConfig, doc, Options{Hostname: "h"})
	want := []Step{
		file("/etc/a", 0o600, "etcd", "etcd", "a"),
		file("/etc/b", 0o640, "etcd", "etcd", "{{ not jinja }}\n#cloud-config\nwrite_files: []\n"),
		rootFile("/etc/d", 0o644, "no trailing newline"),
		rootFile("/etc/e", 0o644, "folded text\n"),
	}
	if d := diffPlan(p, want, []string{`cloud-config module "x-defaults"`}); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
}

// deepMerge defines mappings m0 to m<n-1>, each merging the one before.
func deepMerge(n int) string {
	var b strings.Builder
	b.WriteString("m0: &m0 {k0: v}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {k%d: v, <<: *m%d}\n", i, i, i, i-1)
	}
	return b.String()
}

func TestCloudConfigAliasExpansion(t *testing.T) {
	t.Run("merged mappings are read once", func(t *testing.T) {
		// Each level merges the level below ten times: read naively, 10^8 mappings.
		var doc strings.Builder
		doc.WriteString("#cloud-config\nx:\n  l0: &l0 {path: /etc/f, content: x}\n")
		for i := 1; i <= 8; i++ {
			fmt.Fprintf(&doc, "  l%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
		}
		doc.WriteString("write_files:\n- *l8\n- &self {path: /etc/g, <<: *self}\n")
		p := mustParse(t, FormatCloudConfig, doc.String(), Options{})
		if d := diffPlan(p, []Step{rootFile("/etc/f", 0o644, "x"), rootFile("/etc/g", 0o644, "")}, []string{`cloud-config module "x"`}); d != "" {
			t.Errorf("plan (-want +got):\n%s", d)
		}
	})
	t.Run("aliased argument lists", func(t *testing.T) {
		doc := "#cloud-config\nargs: &a [" + strings.TrimSuffix(strings.Repeat("x, ", 1000), ", ") + "]\nruncmd:\n" + strings.Repeat("- *a\n", 10000)
		wantError(t, FormatCloudConfig, doc, Options{}, []string{"runcmd[", "YAML aliases or merge keys expand to too many nodes"})
	})
}

func TestCloudConfigEmpty(t *testing.T) {
	for _, doc := range []string{"#cloud-config\n", "#cloud-config", "#cloud-config\n---\n", "#cloud-config\n# nothing\n", "  #Cloud-Config\n{}\n", "## template: jinja\n#cloud-config\n"} {
		p := mustParse(t, FormatCloudConfig, doc, Options{})
		if len(p.Steps) != 0 || len(p.Ignored) != 0 {
			t.Errorf("%q: want an empty plan, got %+v", doc, p)
		}
	}
}

func TestCloudConfigJinja(t *testing.T) {
	const header = "## template: jinja\n#cloud-config\n"
	tests := []struct {
		name, header, content string
		hostname, want        string
	}{
		{"ds.meta_data.hostname", header, "{{ ds.meta_data.hostname }}", "node-1", "node-1"},
		{"ds.meta_data.local_hostname", header, "{{ ds.meta_data.local_hostname }}", "node-1", "node-1"},
		{"v1.local_hostname", header, "{{ v1.local_hostname }}", "node-1", "node-1"},
		{"v1.hostname", header, "{{ v1.hostname }}", "node-1", "node-1"},
		{"local_hostname", header, "{{ local_hostname }}", "node-1", "node-1"},
		{"no spaces", header, "{{ds.meta_data.hostname}}", "n.example.com", "n.example.com"},
		{"odd spacing", header, "a={{   v1.local_hostname\t}} b={{local_hostname }}", "n", "a=n b=n"},
		{"whitespace control", header, "a  {{- local_hostname -}}  b", "n", "anb"},
		{"several", header, "{{ v1.hostname }}.{{ v1.hostname }}", "n", "n.n"},
		{"header spacing and case", "##Template:   JINJA  \r\n#cloud-config\n", "{{ local_hostname }}", "n", "n"},
		{"not jinja: braces stay", "#cloud-config\n", "{{ ds.meta_data.hostname }} {% if %} {# c #}", "n", "{{ ds.meta_data.hostname }} {% if %} {# c #}"},
		{"lone braces", header, "{ } }} {x} %} #}", "n", "{ } }} {x} %} #}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.header + "write_files:\n- path: /etc/h\n  content: '" + tt.content + "'\n"
			p := mustParse(t, FormatCloudConfig, doc, Options{Hostname: tt.hostname})
			if d := diffPlan(p, []Step{rootFile("/etc/h", 0o644, tt.want)}, nil); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}

	t.Run("whole document is rendered", func(t *testing.T) {
		doc := header + "runcmd:\n- [hostnamectl, set-hostname, '{{ v1.local_hostname }}']\n- echo {{ds.meta_data.hostname}}\n"
		p := mustParse(t, FormatCloudConfig, doc, Options{Hostname: "node-1"})
		if d := diffPlan(p, []Step{args("hostnamectl", "set-hostname", "node-1"), script("echo node-1")}, nil); d != "" {
			t.Errorf("plan (-want +got):\n%s", d)
		}
	})

	t.Run("line breaks like Jinja2", func(t *testing.T) {
		// Jinja2 normalises line breaks and drops one trailing line break, which a clipped
		// block scalar at the end of the document then does not have.
		doc := header + "write_files:\r\n- path: /etc/h\r\n  content: |\r\n    {{ local_hostname }}\r\n"
		p := mustParse(t, FormatCloudConfig, doc, Options{Hostname: "n"})
		if d := diffPlan(p, []Step{rootFile("/etc/h", 0o644, "n")}, nil); d != "" {
			t.Errorf("plan (-want +got):\n%s", d)
		}
		doc = "#cloud-config\nwrite_files:\n- path: /etc/h\n  content: |\n    n\n"
		p = mustParse(t, FormatCloudConfig, doc, Options{Hostname: "n"})
		if d := diffPlan(p, []Step{rootFile("/etc/h", 0o644, "n\n")}, nil); d != "" {
			t.Errorf("without jinja (-want +got):\n%s", d)
		}
	})

	bad := []struct {
		name, body, hostname string
		want                 []string
	}{
		{"other variable", "content: '{{ ds.meta_data.instance_id }}'", "n",
			[]string{`line 5: jinja expression "{{ ds.meta_data.instance_id }}" is not supported`, "ds.meta_data.hostname"}},
		{"filter", "content: '{{ v1.local_hostname | upper }}'", "n", []string{`jinja expression "{{ v1.local_hostname | upper }}" is not supported`}},
		{"statement", "content: '{% if true %}x{% endif %}'", "n", []string{`line 5: jinja statement "{% if true %}" is not supported`}},
		{"comment", "content: 'a {# note #}'", "n", []string{`jinja comment "{# note #}" is not supported`}},
		{"shell length", "content: 'echo ${#list[@]} #}'", "n", []string{`jinja comment "{#list[@]} #}" is not supported`}},
		{"unclosed", "content: '{{ local_hostname'", "n", []string{`line 5: jinja "{{ local_hostname'" is not closed by "}}"`}},
		{"no hostname", "content: '{{ local_hostname }}'", "", []string{`jinja expression "{{ local_hostname }}" needs the node's hostname, and none was given`}},
		{"bad hostname", "content: '{{ local_hostname }}'", "a: b\nc", []string{`hostname "a: b\nc" is not a valid hostname`}},
		{"hostname too long", "content: '{{ local_hostname }}'", strings.Repeat("a", 64), []string{"is not a valid hostname"}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			doc := header + "write_files:\n- path: /etc/h\n  " + tt.body + "\n"
			wantError(t, FormatCloudConfig, doc, Options{Hostname: tt.hostname}, append(tt.want, "cloud-config: "))
		})
	}

	t.Run("long expression is cut", func(t *testing.T) {
		long := "{{ " + strings.Repeat("x", 500) + " }}"
		_, err := Parse(FormatCloudConfig, []byte(header+"a: '"+long+"'\n"), Options{Hostname: "n"})
		if err == nil || len(err.Error()) > 400 {
			t.Errorf("want a short error, got %v", err)
		}
	})

	t.Run("other template type", func(t *testing.T) {
		wantError(t, FormatCloudConfig, "## template: basic\n#cloud-config\n", Options{}, []string{`line 1: template type basic is not supported (only jinja)`})
	})
}

func TestCloudConfigErrors(t *testing.T) {
	const secret = "PRIVATE-KEY-MATERIAL"
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"no header", "write_files: []\n", []string{`does not start with "#cloud-config"`}},
		{"shell script", "#!/bin/sh\necho " + secret + "\n", []string{`does not start with "#cloud-config"`}},
		{"jinja without cloud-config", "## template: jinja\n#!/bin/sh\n", []string{`does not start with "#cloud-config"`}},
		{"archive", "#cloud-config-archive\n- content: x\n", []string{"#cloud-config-archive user data is not supported"}},
		{"ignition json", `{"ignition": {"version": "2.3.0"}}`, []string{`does not start with "#cloud-config"`}},
		{"malformed yaml", "#cloud-config\nwrite_files:\n- path: /etc/f\n content: " + secret + "\n", []string{"malformed YAML: line"}},
		{"tab indentation", "#cloud-config\nwrite_files:\n\t- path: /etc/f\n", []string{"malformed YAML: line 3"}},
		{"unknown anchor", "#cloud-config\nruncmd: *nope\n", []string{"malformed YAML", "nope"}},
		{"two documents", "#cloud-config\nruncmd: [a]\n---\nruncmd: [b]\n", []string{"line 3: a second YAML document starts here"}},
		{"top level list", "#cloud-config\n- write_files\n", []string{"top level: want a mapping, found a list"}},
		{"top level string", "#cloud-config\nhello\n", []string{"top level: want a mapping, found a string"}},
		{"duplicate key", "#cloud-config\nruncmd: [a]\nruncmd: [b]\n", []string{`line 3: key runcmd appears twice`}},
		{"complex key", "#cloud-config\n? [a]\n: b\n", []string{"a mapping key is a list, not a string"}},
		{"write_files mapping", "#cloud-config\nwrite_files:\n  path: /etc/f\n", []string{"write_files: want a list of files, found a mapping"}},
		{"write_files string", "#cloud-config\nwrite_files: /etc/f\n", []string{"write_files: want a list of files, found a string"}},
		{"file entry string", "#cloud-config\nwrite_files:\n- /etc/f\n", []string{"write_files[0]: want a mapping, found a string"}},
		{"file entry null", "#cloud-config\nwrite_files:\n-\n", []string{"write_files[0]: want a mapping, found null"}},
		{"no path", "#cloud-config\nwrite_files:\n- content: " + secret + "\n", []string{"write_files[0]: path is missing"}},
		{"null path", "#cloud-config\nwrite_files:\n- path:\n  content: x\n", []string{"write_files[0]: path is missing"}},
		{"path list", "#cloud-config\nwrite_files:\n- path: [/etc/f]\n", []string{"write_files[0]: path: want a string, found a list"}},
		{"relative path", "#cloud-config\nwrite_files:\n- path: etc/f\n  content: " + secret + "\n", []string{"write_files[0] (etc/f): path is not absolute"}},
		{"root path", "#cloud-config\nwrite_files:\n- path: /etc/..\n", []string{"write_files[0] (/etc/..): path is the root directory"}},
		{"nul in path", "#cloud-config\nwrite_files:\n- path: \"/etc/\\0f\"\n", []string{`write_files[0] ("/etc/\x00f"): path contains a NUL byte`}},
		{"content list", "#cloud-config\nwrite_files:\n- path: /etc/f\n  content: [" + secret + "]\n", []string{"write_files[0] (/etc/f): content: want a string, found a list"}},
		{"content mapping", "#cloud-config\nwrite_files:\n- path: /etc/f\n  content: {a: " + secret + "}\n", []string{"content: want a string, found a mapping"}},
		{"content integer", "#cloud-config\nwrite_files:\n- path: /etc/f\n  content: 1234\n", []string{"content: want a string, found an integer (quote it)"}},
		{"content boolean", "#cloud-config\nwrite_files:\n- path: /etc/f\n  content: true\n", []string{"content: want a string, found a boolean (quote it)"}},
		{"append not boolean", "#cloud-config\nwrite_files:\n- path: /etc/f\n  append: sometimes\n", []string{"write_files[0] (/etc/f): append: want true or false, found sometimes"}},
		{"defer list", "#cloud-config\nwrite_files:\n- path: /etc/f\n  defer: [true]\n", []string{"write_files[0] (/etc/f): defer: want true or false, found a list"}},
		{"remote source", "#cloud-config\nwrite_files:\n- path: /etc/f\n  source: {uri: 'https://example.com/f?token=" + secret + "'}\n", []string{"write_files[0] (/etc/f): source: fetching file content from a URL is not supported"}},
		{"runcmd mapping", "#cloud-config\nruncmd: {a: b}\n", []string{"runcmd: want a list of commands, found a mapping"}},
		{"runcmd null entry", "#cloud-config\nruncmd:\n- echo\n-\n", []string{"runcmd[1]: command is null"}},
		{"runcmd mapping entry", "#cloud-config\nruncmd:\n- {echo: hi}\n", []string{"runcmd[0]: want a string or a list of arguments, found a mapping"}},
		{"nested argument list", "#cloud-config\nbootcmd:\n- [echo, [a, b]]\n", []string{"bootcmd[0][1]: want a string argument, found a list"}},
		{"null argument", "#cloud-config\nbootcmd:\n- [echo, ~]\n", []string{"bootcmd[0][1]: argument is null"}},
		{"merge of a list", "#cloud-config\nwrite_files:\n- {path: /etc/f, <<: [a]}\n", []string{"write_files[0]: line 3: merge key: want a mapping, found a string"}},
		{"merge nests too deeply", "#cloud-config\n" + deepMerge(10) + "write_files:\n- {path: /etc/f, <<: *m9}\n", []string{"write_files[0]: line 13: merge key: YAML merge keys nest too deeply"}},
		{"duplicate key in jinja document", "## template: jinja\n#cloud-config\nruncmd: [a]\nruncmd: [b]\n", []string{"line 4: key runcmd appears twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, FormatCloudConfig, tt.doc, Options{}, append(tt.want, "cloud-config: "), secret)
		})
	}
}

func TestErrorsQuoteDataSafely(t *testing.T) {
	long := "rel/" + strings.Repeat("x", 300)
	_, err := Parse(FormatCloudConfig, []byte("#cloud-config\nwrite_files:\n- path: "+long+"\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), `write_files[0] ("rel/xxx`) || !strings.Contains(err.Error(), `"...): path is not absolute`) || len(err.Error()) > 250 {
		t.Errorf("want a cut, quoted path, got %v", err)
	}
	wantError(t, FormatCloudConfig, "", Options{}, []string{`does not start with "#cloud-config"`})
	wantError(t, FormatIgnition, "", Options{}, []string{"bootstrap data is empty"})
}

func TestParseUnknownFormat(t *testing.T) {
	wantError(t, "yaml", "#cloud-config\n", Options{}, []string{`unknown bootstrap data format yaml (want "cloud-config" or "ignition")`})
	wantError(t, FormatCloudConfig, "#cloud-config\n"+strings.Repeat("#", maxDataSize), Options{}, []string{"more than the 16777216 bytes Dockyard accepts"})
}
