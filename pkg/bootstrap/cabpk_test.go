package bootstrap

// Tests over documents rendered by Cluster API's kubeadm bootstrap provider (CABPK) itself, at
// the version in go.mod, through its cloudinit and ignition packages.

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/ignition"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
)

var update = flag.Bool("update", false, "rewrite the CABPK-rendered documents in testdata")

// fakeCertificates are the certificates CABPK writes for a control plane machine, with short
// stand-ins for the key material.
func fakeCertificates() secret.Certificates {
	c := secret.NewCertificatesForInitialControlPlane(nil)
	for _, cert := range c {
		name := filepath.Base(cert.KeyFile)
		cert.KeyPair = &certs.KeyPair{
			Cert: []byte("-----BEGIN CERTIFICATE-----\ncert for " + name + "\n-----END CERTIFICATE-----\n"),
			Key:  []byte("-----BEGIN RSA PRIVATE KEY-----\nsecret key " + name + "\n-----END RSA PRIVATE KEY-----\n"),
		}
	}
	return c
}

// certificateSteps are the files fakeCertificates become, in CABPK's order.
func certificateSteps(owner, group string) []Step {
	var steps []Step
	for _, c := range []struct{ cert, key string }{
		{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key"},
		{"/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/pki/etcd/ca.key"},
		{"/etc/kubernetes/pki/front-proxy-ca.crt", "/etc/kubernetes/pki/front-proxy-ca.key"},
		{"/etc/kubernetes/pki/sa.pub", "/etc/kubernetes/pki/sa.key"},
	} {
		name := filepath.Base(c.key)
		steps = append(steps,
			file(c.cert, 0o640, owner, group, "-----BEGIN CERTIFICATE-----\ncert for "+name+"\n-----END CERTIFICATE-----\n"),
			file(c.key, 0o600, owner, group, "-----BEGIN RSA PRIVATE KEY-----\nsecret key "+name+"\n-----END RSA PRIVATE KEY-----\n"))
	}
	return steps
}

func gzipBase64(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

const (
	clusterConfiguration = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: c1\ncontrolPlaneEndpoint: 10.0.0.10:6443\n"
	initConfiguration    = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: '{{ ds.meta_data.local_hostname }}'\n"
	joinConfiguration    = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\nnodeRegistration:\n  name: '{{ ds.meta_data.local_hostname }}'\n"
	placeholderContent   = "This placeholder file is used to create the /run/cluster-api sub directory in a way that is compatible with both Linux and Windows (mkdir -p /run/cluster-api does not work with Windows)"
)

// fullBaseUserData uses every part of KubeadmConfig that reaches the bootstrap data.
func fullBaseUserData(t testing.TB) cloudinit.BaseUserData {
	return cloudinit.BaseUserData{
		BootCommands:        []string{"echo boot > /run/boot"},
		PreKubeadmCommands:  []string{"hostnamectl set-hostname '{{ ds.meta_data.hostname }}'", `echo "quoted" 'single'`},
		PostKubeadmCommands: []string{"echo post"},
		KubeadmVerbosity:    "--v=5",
		AdditionalFiles: []bootstrapv1.File{
			{Path: "/etc/b64", Encoding: bootstrapv1.Base64, Content: base64.StdEncoding.EncodeToString([]byte("decoded base64\n")), Permissions: "0600", Owner: "nobody:nogroup"},
			{Path: "/etc/gzb64", Encoding: bootstrapv1.GzipBase64, Content: gzipBase64(t, "decoded gzip\n"), Permissions: "0644", Append: ptr.To(true)},
			{Path: "/etc/plain.conf", Content: "host={{ ds.meta_data.hostname }}\n", Permissions: "640", Owner: "root"},
		},
		Users: []bootstrapv1.User{{
			Name: "capi", Sudo: "ALL=(ALL) NOPASSWD:ALL", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3Nza capi@example"}, LockPassword: ptr.To(false),
		}},
		NTP: &bootstrapv1.NTP{Servers: []string{"time.example.com"}, Enabled: ptr.To(true)},
		DiskSetup: &bootstrapv1.DiskSetup{
			Partitions:  []bootstrapv1.Partition{{Device: "/dev/sdb", Layout: ptr.To(true), TableType: "gpt"}},
			Filesystems: []bootstrapv1.Filesystem{{Device: "/dev/sdb1", Filesystem: "ext4", Label: "etcd_disk", Overwrite: ptr.To(false)}},
		},
		Mounts: []bootstrapv1.MountPoints{{"etcd_disk", "/var/lib/etcd"}},
	}
}

// renderings are the CABPK documents the tests use, by testdata file name.
func renderings(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	must := func(name string, data []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("rendering %s: %v", name, err)
		}
		out[name] = data
	}

	data, err := cloudinit.NewInitControlPlane(&cloudinit.ControlPlaneInput{
		BaseUserData: cloudinit.BaseUserData{
			PreKubeadmCommands:  []string{"hostnamectl set-hostname '{{ ds.meta_data.hostname }}'"},
			PostKubeadmCommands: []string{"echo done"},
			KubeadmVerbosity:    "--v=5",
		},
		Certificates:         fakeCertificates(),
		ClusterConfiguration: clusterConfiguration,
		InitConfiguration:    initConfiguration,
	})
	must("cabpk-init.cloud-config.yaml", data, err)

	data, err = cloudinit.NewJoinControlPlane(&cloudinit.ControlPlaneJoinInput{
		BaseUserData: cloudinit.BaseUserData{
			Users: []bootstrapv1.User{{Name: "ops", Groups: "wheel", Shell: "/bin/bash"}},
			NTP:   &bootstrapv1.NTP{Servers: []string{"0.pool.ntp.org"}},
		},
		Certificates:      fakeCertificates(),
		JoinConfiguration: joinConfiguration,
	})
	must("cabpk-join-control-plane.cloud-config.yaml", data, err)

	data, err = cloudinit.NewNode(&cloudinit.NodeInput{
		BaseUserData:      fullBaseUserData(t),
		JoinConfiguration: joinConfiguration,
	})
	must("cabpk-node-full.cloud-config.yaml", data, err)

	data, _, err = ignition.NewInitControlPlane(&ignition.ControlPlaneInput{
		ControlPlaneInput: &cloudinit.ControlPlaneInput{
			BaseUserData: cloudinit.BaseUserData{
				PreKubeadmCommands:  []string{"envsubst < /etc/kubeadm.yml > /etc/kubeadm.yml.tmp", "mv /etc/kubeadm.yml.tmp /etc/kubeadm.yml"},
				PostKubeadmCommands: []string{"echo done"},
			},
			Certificates:         fakeCertificates(),
			ClusterConfiguration: clusterConfiguration,
			InitConfiguration:    "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n",
		},
		Ignition: &bootstrapv1.IgnitionSpec{},
	})
	must("cabpk-init.ignition.json", data, err)

	data, _, err = ignition.NewNode(&ignition.NodeInput{
		NodeInput: &cloudinit.NodeInput{
			BaseUserData:      fullBaseUserData(t),
			JoinConfiguration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n",
		},
		Ignition: &bootstrapv1.IgnitionSpec{ContainerLinuxConfig: bootstrapv1.ContainerLinuxConfig{
			AdditionalConfig: `storage:
  directories:
  - path: /opt/bin
    mode: 0750
  links:
  - path: /usr/local/bin/k
    target: /usr/bin/kubectl
systemd:
  units:
  - name: containerd.service
    dropins:
    - name: 10-limits.conf
      contents: |
        [Service]
        LimitNOFILE=1048576
  - name: update-engine.service
    mask: true
`,
		}},
	})
	must("cabpk-node-full.ignition.json", data, err)
	return out
}

// TestCABPKTestdata checks that the CABPK documents in testdata (fuzzing seeds) are what CABPK
// renders; go test -run TestCABPKTestdata -update rewrites them.
func TestCABPKTestdata(t *testing.T) {
	for name, data := range renderings(t) {
		p := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (run go test -run TestCABPKTestdata -update)", err)
		}
		// Gzip output may differ between Go versions; compare what matters, the plans.
		gotPlan, err1 := Parse(formatOf(name), got, Options{Hostname: "node-1"})
		wantPlan, err2 := Parse(formatOf(name), data, Options{Hostname: "node-1"})
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v, %v", name, err1, err2)
		}
		if d := diffPlan(gotPlan, wantPlan.Steps, wantPlan.Ignored); d != "" {
			t.Errorf("testdata/%s is not what CABPK renders now (run go test -run TestCABPKTestdata -update) (-rendered +testdata):\n%s", name, d)
		}
	}
}

func formatOf(name string) Format {
	if filepath.Ext(name) == ".json" {
		return FormatIgnition
	}
	return FormatCloudConfig
}

func TestParseCABPK(t *testing.T) {
	docs := renderings(t)
	opts := Options{Hostname: "node-1"}
	kubeadmJoin := "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml --v=5 && echo success > /run/cluster-api/bootstrap-success.complete"
	joinConfigurationRendered := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\nnodeRegistration:\n  name: 'node-1'\n"
	kubeadmService := "[Unit]\nDescription=kubeadm\n# Run only once. After successful run, this file is moved to /tmp/.\nConditionPathExists=/etc/kubeadm.yml\nAfter=network.target\n[Service]\n# To not restart the unit when it exits, as it is expected.\nType=oneshot\nExecStart=/bin/bash /etc/kubeadm.sh\n[Install]\nWantedBy=multi-user.target\n"

	tests := []struct {
		name    string
		steps   []Step
		ignored []string
	}{{
		name: "cabpk-init.cloud-config.yaml",
		steps: append(certificateSteps("root", "root"),
			rootFile("/run/kubeadm/kubeadm.yaml", 0o640, "---\n"+clusterConfiguration+"\n---\n"+
				"apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: 'node-1'\n"),
			rootFile("/run/cluster-api/placeholder", 0o640, placeholderContent),
			script("hostnamectl set-hostname 'node-1'"),
			script("kubeadm init --config /run/kubeadm/kubeadm.yaml --v=5 && echo success > /run/cluster-api/bootstrap-success.complete"),
			script("echo done"),
		),
	}, {
		name: "cabpk-join-control-plane.cloud-config.yaml",
		steps: append(certificateSteps("root", "root"),
			// CABPK leaves out the "---" line here, unlike for workers.
			rootFile("/run/kubeadm/kubeadm-join-config.yaml", 0o640, joinConfigurationRendered),
			rootFile("/run/cluster-api/placeholder", 0o640, placeholderContent),
			script("kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"),
		),
		ignored: []string{`cloud-config module "ntp"`, `cloud-config module "users"`},
	}, {
		name: "cabpk-node-full.cloud-config.yaml",
		steps: []Step{
			script("echo boot > /run/boot"),
			file("/etc/b64", 0o600, "nobody", "nogroup", "decoded base64\n"),
			appendFile("/etc/gzb64", 0o644, "root", "root", "decoded gzip\n"),
			// "640" is octal to cloud-init; the owner "root" leaves the group alone.
			file("/etc/plain.conf", 0o640, "root", "", "host=node-1\n"),
			rootFile("/run/kubeadm/kubeadm-join-config.yaml", 0o640, "---\n"+joinConfigurationRendered),
			rootFile("/run/cluster-api/placeholder", 0o640, placeholderContent),
			script("hostnamectl set-hostname 'node-1'"),
			script(`echo "quoted" 'single'`),
			script(kubeadmJoin),
			script("echo post"),
		},
		ignored: []string{
			`cloud-config module "disk_setup"`, `cloud-config module "fs_setup"`, `cloud-config module "mounts"`,
			`cloud-config module "ntp"`, `cloud-config module "users"`,
		},
	}, {
		name: "cabpk-init.ignition.json",
		steps: append(certificateSteps("root", "root"),
			file("/etc/kubeadm.sh", 0o700, "", "", "#!/bin/bash\nset -e\n\n"+
				"envsubst < /etc/kubeadm.yml > /etc/kubeadm.yml.tmp\nmv /etc/kubeadm.yml.tmp /etc/kubeadm.yml\n\n"+
				"kubeadm init --config /etc/kubeadm.yml \n"+
				"mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\n"+
				"mv /etc/kubeadm.yml /tmp/\n\necho done\n"),
			file("/etc/kubeadm.yml", 0o600, "", "", "---\n"+clusterConfiguration+"\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n"),
			file("/etc/systemd/system/kubeadm.service", 0o644, "", "", kubeadmService),
			args("systemctl", "daemon-reload"),
			args("systemctl", "enable", "kubeadm.service"),
			args("systemctl", "start", "kubeadm.service"),
		),
	}, {
		name: "cabpk-node-full.ignition.json",
		steps: []Step{
			script("mkdir -p /opt/bin && chmod 0750 /opt/bin"),
			file("/etc/sudoers.d/capi", 0o600, "", "", "capi ALL=(ALL) NOPASSWD:ALL\n"),
			file("/etc/ssh/sshd_config", 0o600, "", "", "# Use most defaults for sshd configuration.\nSubsystem sftp internal-sftp\n"+
				"ClientAliveInterval 180\nUseDNS no\nUsePAM yes\nPrintLastLog no # handled by PAM\nPrintMotd no # handled by PAM\n\n"+
				"Match User capi\n  PasswordAuthentication yes\n"),
			// CABPK's Ignition decodes base64 (as a YAML !!binary) ...
			file("/etc/b64", 0o600, "nobody", "nogroup", "decoded base64\n"),
			// ... but writes gzip+base64 content as it is, and drops append.
			file("/etc/gzb64", 0o644, "", "", gzipBase64(t, "decoded gzip\n")+"\n"),
			// Its Container Linux Config reads permissions "640" as decimal 640 = 01200, and it
			// has no Jinja: the expression stays.
			file("/etc/plain.conf", os.ModeSticky|0o200, "root", "", "host={{ ds.meta_data.hostname }}\n"),
			file("/etc/kubeadm.sh", 0o700, "", "", "#!/bin/bash\nset -e\n\n"+
				"hostnamectl set-hostname '{{ ds.meta_data.hostname }}'\necho \"quoted\" 'single'\n\n"+
				"kubeadm join --config /etc/kubeadm.yml --v=5\n"+
				"mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\n"+
				"mv /etc/kubeadm.yml /tmp/\n\necho post\n"),
			file("/etc/kubeadm.yml", 0o600, "", "", "---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"),
			file("/etc/ntp.conf", 0o644, "", "", "# Common pool\nserver time.example.com\n\n"+
				"# Warning: Using default NTP settings will leave your NTP\n# server accessible to all hosts on the Internet.\n\n"+
				"# If you want to deny all machines (including your own)\n# from accessing the NTP server, uncomment:\n#restrict default ignore\n\n"+
				"# Default configuration:\n# - Allow only time queries, at a limited rate, sending KoD when in excess.\n"+
				"# - Allow all local queries (IPv4, IPv6)\nrestrict default nomodify nopeer noquery notrap limited kod\n"+
				"restrict 127.0.0.1\nrestrict [::1]\n"),
			script("mkdir -p /usr/local/bin && ln -sfn /usr/bin/kubectl /usr/local/bin/k"),
			file("/etc/systemd/system/kubeadm.service", 0o644, "", "", kubeadmService),
			file("/etc/systemd/system/containerd.service.d/10-limits.conf", 0o644, "", "", "[Service]\nLimitNOFILE=1048576\n"),
			args("systemctl", "daemon-reload"),
			args("systemctl", "mask", "update-engine.service"),
			args("systemctl", "enable", "kubeadm.service"),
			script("if systemctl cat -- ntpd.service >/dev/null 2>&1; then systemctl enable -- ntpd.service; fi"),
			args("systemctl", "start", "kubeadm.service"),
			script("if systemctl cat -- ntpd.service >/dev/null 2>&1; then systemctl start -- ntpd.service; fi"),
		},
		ignored: []string{
			"Ignition passwd.users",
			"Ignition storage.disks",
			`Ignition storage.filesystems[0] ("etcd_disk" on /dev/sdb1)`,
			`Ignition systemd unit "var-lib-etcd.mount" (mounts /dev/sdb1)`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, ok := docs[tt.name]
			if !ok {
				t.Fatalf("no rendering named %s", tt.name)
			}
			p := mustParse(t, formatOf(tt.name), string(data), opts)
			if d := diffPlan(p, tt.steps, tt.ignored); d != "" {
				t.Errorf("plan (-want +got):\n%s\ndocument:\n%s", d, data)
			}
		})
	}
}
