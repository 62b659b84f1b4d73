package bootstrap

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"
)

// ign builds an Ignition config of the given version from its other top-level sections.
func ign(t testing.TB, version string, sections map[string]any) string {
	t.Helper()
	cfg := map[string]any{"ignition": map[string]any{"version": version}}
	for k, v := range sections {
		cfg[k] = v
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func storageFiles(files ...map[string]any) map[string]any {
	list := make([]any, len(files))
	for i, f := range files {
		if _, ok := f["filesystem"]; !ok {
			f["filesystem"] = "root"
		}
		list[i] = f
	}
	return map[string]any{"storage": map[string]any{"files": list}}
}

func dataURL(s string) string {
	return "data:," + url.PathEscape(s)
}

func TestIgnitionFiles(t *testing.T) {
	const secret = "-----BEGIN RSA PRIVATE KEY-----\nsecret key\n-----END RSA PRIVATE KEY-----\n"
	sum := sha512.Sum512([]byte(secret))
	gz := gzipBytes(t, secret)
	tests := []struct {
		name string
		file map[string]any
		want Step
	}{
		{"percent-encoded data URL", map[string]any{"path": "/etc/k", "mode": 384, "contents": map[string]any{"source": dataURL(secret)}},
			file("/etc/k", 0o600, "", "", secret)},
		{"unescaped data URL", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "data:,a+b=c/d?e"}},
			file("/etc/k", 0o644, "", "", "a+b=c/d?e")},
		{"base64 data URL", map[string]any{"path": "/etc/k", "mode": 420, "contents": map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString([]byte(secret))}},
			file("/etc/k", 0o644, "", "", secret)},
		{"base64 data URL with media type", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "DATA:text/plain;charset=utf-8;BASE64," + url.PathEscape(base64.StdEncoding.EncodeToString([]byte(secret)))}},
			file("/etc/k", 0o644, "", "", secret)},
		{"gzip", map[string]any{"path": "/etc/k", "contents": map[string]any{"compression": "gzip", "source": "data:;base64," + base64.StdEncoding.EncodeToString(gz)}},
			file("/etc/k", 0o644, "", "", secret)},
		{"gzip percent-encoded", map[string]any{"path": "/etc/k", "contents": map[string]any{"compression": "gzip", "source": "data:," + url.PathEscape(string(gz))}},
			file("/etc/k", 0o644, "", "", secret)},
		{"verified", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": dataURL(secret), "verification": map[string]any{"hash": "sha512-" + hex.EncodeToString(sum[:])}}},
			file("/etc/k", 0o644, "", "", secret)},
		{"verified after decompression", map[string]any{"path": "/etc/k", "contents": map[string]any{"compression": "gzip", "source": "data:;base64," + base64.StdEncoding.EncodeToString(gz), "verification": map[string]any{"hash": "sha512-" + hex.EncodeToString(sum[:])}}},
			file("/etc/k", 0o644, "", "", secret)},
		{"no source", map[string]any{"path": "/etc/empty"}, file("/etc/empty", 0o644, "", "", "")},
		{"empty data URL", map[string]any{"path": "/etc/empty", "contents": map[string]any{"source": "data:,"}}, file("/etc/empty", 0o644, "", "", "")},
		{"default mode", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "data:,x"}}, file("/etc/k", 0o644, "", "", "x")},
		{"mode 0", map[string]any{"path": "/etc/k", "mode": 0}, file("/etc/k", 0, "", "", "")},
		{"special bits", map[string]any{"path": "/usr/bin/k", "mode": 0o4755}, file("/usr/bin/k", os.ModeSetuid|0o755, "", "", "")},
		{"user and group by id", map[string]any{"path": "/etc/k", "user": map[string]any{"id": 1000}, "group": map[string]any{"id": 0}},
			file("/etc/k", 0o644, "1000", "0", "")},
		{"user and group by name", map[string]any{"path": "/etc/k", "user": map[string]any{"name": "etcd"}, "group": map[string]any{"name": "etcd"}},
			file("/etc/k", 0o644, "etcd", "etcd", "")},
		{"only group", map[string]any{"path": "/etc/k", "group": map[string]any{"name": "docker"}}, file("/etc/k", 0o644, "", "docker", "")},
		{"empty user", map[string]any{"path": "/etc/k", "user": map[string]any{}}, file("/etc/k", 0o644, "", "", "")},
		{"append", map[string]any{"path": "/etc/hosts", "append": true, "contents": map[string]any{"source": dataURL("10.0.0.1 lb\n")}},
			appendFile("/etc/hosts", 0o644, "", "", "10.0.0.1 lb\n")},
		{"path cleaned", map[string]any{"path": "/etc//x/../k/"}, file("/etc/k", 0o644, "", "", "")},
		{"no filesystem means root", map[string]any{"path": "/etc/k", "filesystem": ""}, file("/etc/k", 0o644, "", "", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, version := range []string{"2.3.0", "2.2.0", "2.1.0"} {
				p := mustParse(t, FormatIgnition, ign(t, version, storageFiles(tt.file)), Options{})
				if d := diffPlan(p, []Step{tt.want}, nil); d != "" {
					t.Errorf("%s: plan (-want +got):\n%s", version, d)
				}
			}
		})
	}
}

func TestIgnitionFileErrors(t *testing.T) {
	const secret = "PRIVATE-KEY-MATERIAL"
	gz := gzipBytes(t, secret)
	tests := []struct {
		name string
		file map[string]any
		want string
	}{
		{"http", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "http://10.0.0.1/" + secret}},
			"storage.files[0] (/etc/k): contents.source is a remote http URL: Dockyard cannot fetch remote content in a node container"},
		{"https", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "https://example.com/k?sig=" + secret}},
			"storage.files[0] (/etc/k): contents.source is a remote https URL"},
		{"s3", map[string]any{"path": "/opt/k", "contents": map[string]any{"source": "s3://bucket/" + secret}},
			"storage.files[0] (/opt/k): contents.source is a remote s3 URL"},
		{"tftp", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "tftp://10.0.0.1/" + secret}},
			"storage.files[0] (/etc/k): contents.source is a remote tftp URL"},
		{"oem", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "oem:///" + secret}},
			"storage.files[0] (/etc/k): contents.source is a remote oem URL"},
		{"unknown scheme", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "file:///" + secret}},
			"storage.files[0] (/etc/k): contents.source has the unsupported URL scheme file"},
		{"not a URL", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": secret}},
			"storage.files[0] (/etc/k): contents.source is not a URL"},
		{"data URL without comma", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "data:" + secret}},
			"storage.files[0] (/etc/k): contents.source: data URL has no comma before its data"},
		{"bad percent-encoding", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "data:," + secret + "%zz"}},
			"storage.files[0] (/etc/k): contents.source: data URL: invalid percent-encoding at byte 20 of the data"},
		{"bad base64", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": "data:;base64," + secret}},
			"storage.files[0] (/etc/k): contents.source: data URL: decoding base64: illegal data at input byte 7"},
		{"not gzip", map[string]any{"path": "/etc/k", "contents": map[string]any{"compression": "gzip", "source": dataURL(secret)}},
			"storage.files[0] (/etc/k): contents: decompressing gzip: gzip: invalid header"},
		{"truncated gzip", map[string]any{"path": "/etc/k", "contents": map[string]any{"compression": "gzip", "source": "data:;base64," + base64.StdEncoding.EncodeToString(gz[:len(gz)-4])}},
			"storage.files[0] (/etc/k): contents: decompressing gzip: data is truncated"},
		{"unknown compression", map[string]any{"path": "/etc/k", "contents": map[string]any{"compression": "xz", "source": dataURL(secret)}},
			"storage.files[0] (/etc/k): contents.compression xz is not supported (only gzip)"},
		{"hash mismatch", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": dataURL(secret), "verification": map[string]any{"hash": "sha512-" + strings.Repeat("00", 64)}}},
			"storage.files[0] (/etc/k): contents do not match contents.verification.hash"},
		{"hash function", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": dataURL(secret), "verification": map[string]any{"hash": "sha256-00"}}},
			"storage.files[0] (/etc/k): contents.verification.hash: want sha512-<hex digest>"},
		{"hash size", map[string]any{"path": "/etc/k", "contents": map[string]any{"source": dataURL(secret), "verification": map[string]any{"hash": "sha512-00"}}},
			"storage.files[0] (/etc/k): contents.verification.hash: malformed sha512 digest"},
		{"relative path", map[string]any{"path": "etc/k"}, "storage.files[0] (etc/k): path is not absolute"},
		{"no path", map[string]any{"contents": map[string]any{"source": dataURL(secret)}}, "storage.files[0] (\"\"): path is empty"},
		{"mode too big", map[string]any{"path": "/etc/k", "mode": 4096}, "storage.files[0] (/etc/k): mode 4096 is not a file mode"},
		{"negative mode", map[string]any{"path": "/etc/k", "mode": -1}, "storage.files[0] (/etc/k): mode -1 is not a file mode"},
		{"user id and name", map[string]any{"path": "/etc/k", "user": map[string]any{"id": 0, "name": "root"}}, "storage.files[0] (/etc/k): user: has both id and name"},
		{"negative group id", map[string]any{"path": "/etc/k", "group": map[string]any{"id": -1}}, "storage.files[0] (/etc/k): group: id -1 is negative"},
		{"bad user name", map[string]any{"path": "/etc/k", "user": map[string]any{"name": "a b"}}, `storage.files[0] (/etc/k): user name "a b" contains a character`},
		{"append and overwrite", map[string]any{"path": "/etc/k", "append": true, "overwrite": true}, "storage.files[0] (/etc/k): has both append and overwrite"},
		{"undefined filesystem", map[string]any{"path": "/etc/k", "filesystem": "data"}, "storage.files[0] (/etc/k): filesystem data is not defined in storage.filesystems"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, FormatIgnition, ign(t, "2.3.0", storageFiles(tt.file)), Options{}, []string{"ignition: " + tt.want}, secret)
		})
	}
}

func TestIgnitionVersions(t *testing.T) {
	for _, v := range []string{"2.0.0", "2.1.0", "2.2.0", "2.3.0"} {
		p := mustParse(t, FormatIgnition, `{"ignition":{"version":"`+v+`"}}`, Options{})
		if len(p.Steps) != 0 || len(p.Ignored) != 0 {
			t.Errorf("%s: want an empty plan, got %+v", v, p)
		}
	}
	// A spec 2.0 config: user and group ids without names, "enable".
	p := mustParse(t, FormatIgnition, `{"ignition":{"version":"2.0.0"},
		"storage":{"files":[{"filesystem":"root","path":"/etc/k","mode":420,"user":{"id":0},"group":{"id":0},"contents":{"source":"data:,x"}}]},
		"systemd":{"units":[{"name":"a.service","enable":true,"contents":"[Unit]\n"}]}}`, Options{})
	want := []Step{
		file("/etc/k", 0o644, "0", "0", "x"),
		file("/etc/systemd/system/a.service", 0o644, "", "", "[Unit]\n"),
		args("systemctl", "daemon-reload"),
		args("systemctl", "enable", "a.service"),
		args("systemctl", "start", "a.service"),
	}
	if d := diffPlan(p, want, nil); d != "" {
		t.Errorf("2.0.0 plan (-want +got):\n%s", d)
	}

	bad := []struct{ doc, want string }{
		{`{"ignition":{"version":"3.0.0"}}`, `spec 3.x is not supported (ignition.version 3.0.0)`},
		{`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/k","contents":{"source":"data:,x"}}]}}`, `spec 3.x is not supported (ignition.version 3.4.0): Dockyard reads Ignition spec 2.0.0 to 2.3.0`},
		{`{"ignition":{"version":"3.5.0-experimental"}}`, `spec 3.x is not supported`},
		{`{"ignition":{"version":"4.0.0"}}`, `spec 4.x is not supported`},
		{`{"ignition":{"version":"2.4.0"}}`, `spec version 2.4.0 is not supported: Dockyard reads Ignition spec 2.0.0 to 2.3.0`},
		{`{"ignition":{"version":"2.4.0-experimental"}}`, `spec version 2.4.0-experimental is not supported`},
		{`{"ignition":{"version":"2.3.1"}}`, `spec version 2.3.1 is not supported`},
		{`{"ignition":{"version":"1.0.0"}}`, `spec version 1.0.0 is not supported`},
		{`{"ignitionVersion":1}`, `spec 1 (ignitionVersion) is not supported`},
		{`{"ignition":{"version":"2.3"}}`, `ignition.version 2.3 is not a valid version`},
		{`{"ignition":{"version":"two"}}`, `ignition.version two is not a valid version`},
		{`{"ignition":{"version":""}}`, `ignition.version "" is not a valid version`},
		{`{"ignition":{"version":"99999999999999999999.0.0"}}`, `ignition.version 99999999999999999999.0.0 is not a valid version`},
		{`{"ignition":{}}`, `ignition.version is missing`},
		{`{"storage":{}}`, `ignition.version is missing`},
		{`{}`, `ignition.version is missing`},
		{`null`, `ignition.version is missing`},
		{`{"ignition":{"version":2.3}}`, `ignition.version: want a string, found a JSON number`},
		{`{"ignition":"2.3.0"}`, `ignition: want an object, found a JSON string`},
		{`["ignition"]`, `the config: want an object, found a JSON array`},
	}
	for _, tt := range bad {
		t.Run(tt.want, func(t *testing.T) {
			wantError(t, FormatIgnition, tt.doc, Options{}, []string{"ignition: " + tt.want})
		})
	}
}

func TestIgnitionMalformed(t *testing.T) {
	const secret = "PRIVATE-KEY-MATERIAL"
	tests := []struct{ doc, want string }{
		{``, "bootstrap data is empty"},
		{" \n", "bootstrap data is empty"},
		{`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"path":"/etc/k","contents":{"source":"data:,` + secret + `"}}]`, "malformed JSON at byte 121: unexpected end of JSON input"},
		{`{"ignition":{"version":"2.3.0"},}`, "malformed JSON at byte 33: invalid character '}' looking for beginning of object key string"},
		{`{"ignition":{"version":"2.3.0"}} {}`, "malformed JSON at byte 34: invalid character '{' after top-level value"},
		{"#cloud-config\nruncmd: [x]\n", "bootstrap data is a cloud-config document, not an Ignition config"},
		{"## template: jinja\n#cloud-config\n", "bootstrap data is a cloud-config document"},
		{`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"path":"/etc/k","mode":"0644"}]}}`, "storage.files.mode: want an integer, found a JSON string"},
		{`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"path":"/etc/k","mode":420.5}]}}`, "storage.files.mode: want an integer, found a JSON number 420.5"},
		{`{"ignition":{"version":"2.3.0"},"storage":{"files":{"path":"/etc/k"}}}`, "storage.files: want an array, found a JSON object"},
		{`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"path":"/etc/k","contents":{"source":["data:,` + secret + `"]}}]}}`, "storage.files.contents.source: want a string, found a JSON array"},
		{`{"ignition":{"version":"2.3.0"},"systemd":{"units":[{"name":"a.service","enabled":"yes"}]}}`, "systemd.units.enabled: want a boolean, found a JSON string"},
		{`{"ignition":{"version":"2.3.0"},"systemd":[]}`, "systemd: want an object, found a JSON array"},
		{`{"ignition":{"version":"2.3.0","config":{"append":[{"source":"https://example.com/c.ign"}]}}}`, "ignition.config: appending or replacing the config with another one is not supported"},
		{`{"ignition":{"version":"2.3.0","config":{"replace":{"source":"data:,{}"}}}}`, "ignition.config: appending or replacing"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			wantError(t, FormatIgnition, tt.doc, Options{}, []string{"ignition: " + tt.want}, secret)
		})
	}
}

func TestIgnitionStorage(t *testing.T) {
	doc := `{"ignition":{"version":"2.3.0","security":{"tls":{"certificateAuthorities":[{"source":"https://example.com/ca.pem"}]}},"timeouts":{"httpTotal":10}},
	"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}],"groups":[{"name":"docker"}]},
	"networkd":{"units":[{"name":"00-eth0.network","contents":"[Match]\nName=eth0\n"}]},
	"storage":{
		"disks":[{"device":"/dev/sdb","wipeTable":true}],
		"raid":[{"name":"md0","level":"raid1","devices":["/dev/sdc","/dev/sdd"]}],
		"filesystems":[
			{"name":"data","mount":{"device":"/dev/sdb1","format":"ext4"}},
			{"name":"oem","path":"/usr/share/oem"},
			{"name":"root","mount":{"device":"/dev/disk/by-label/ROOT","format":"ext4"}}
		],
		"directories":[
			{"filesystem":"root","path":"/opt/a/b/c","mode":448},
			{"filesystem":"root","path":"/opt/a","user":{"name":"app"},"group":{"id":1000}},
			{"filesystem":"data","path":"/lost"},
			{"filesystem":"oem","path":"/bin","mode":493},
			{"filesystem":"root","path":"/srv"}
		],
		"files":[
			{"filesystem":"oem","path":"/grub.cfg","contents":{"source":"data:,set%20x"}},
			{"filesystem":"data","path":"/also-lost","contents":{"source":"data:,y"}}
		],
		"links":[
			{"filesystem":"root","path":"/etc/localtime","target":"/usr/share/zoneinfo/UTC"},
			{"filesystem":"root","path":"/opt/current","target":"-releases/v1","user":{"name":"app"}},
			{"filesystem":"root","path":"/hard","target":"/etc/hostname","hard":true,"user":{"name":"app"}},
			{"path":"/hard2","target":"/etc/hostname","hard":true},
			{"filesystem":"oem","path":"/h","target":"/grub.cfg","hard":true},
			{"filesystem":"data","path":"/l","target":"/x"}
		]
	}}`
	p := mustParse(t, FormatIgnition, doc, Options{})
	want := []Step{
		// Directories shallowest first (by their path on their filesystem, as Ignition sorts
		// them), in document order otherwise.
		script("mkdir -p /usr/share/oem/bin && chmod 0755 /usr/share/oem/bin"),
		script("mkdir -p /srv && chmod 0755 /srv"),
		script("mkdir -p /opt/a && chmod 0755 /opt/a && chown app:1000 /opt/a"),
		script("mkdir -p /opt/a/b/c && chmod 0700 /opt/a/b/c"),
		file("/usr/share/oem/grub.cfg", 0o644, "", "", "set x"),
		script("mkdir -p /etc && ln -sfn /usr/share/zoneinfo/UTC /etc/localtime"),
		script("mkdir -p /opt && ln -sfn -- -releases/v1 /opt/current && chown -h app /opt/current"),
		script("ln -fn /etc/hostname /hard"),
		script("ln -fn /etc/hostname /hard2"),
		script("mkdir -p /usr/share/oem && ln -fn /usr/share/oem/grub.cfg /usr/share/oem/h"),
	}
	ignored := []string{
		"Ignition networkd.units",
		"Ignition passwd.groups",
		"Ignition passwd.users",
		"Ignition storage.directories[2] (/lost) on filesystem \"data\"",
		"Ignition storage.disks",
		"Ignition storage.files[1] (/also-lost) on filesystem \"data\"",
		`Ignition storage.filesystems[0] ("data" on /dev/sdb1)`,
		"Ignition storage.links[5] (/l) on filesystem \"data\"",
		"Ignition storage.raid",
	}
	if d := diffPlan(p, want, ignored); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}

	bad := []struct{ storage, want string }{
		{`"filesystems":[{"name":"x","path":"/x","mount":{"device":"/dev/sda","format":"ext4"}}]`, `storage.filesystems[0] (x): has both mount and path`},
		{`"filesystems":[{"name":"x"}]`, `storage.filesystems[0] (x): has neither mount nor path`},
		{`"filesystems":[{"name":"x","path":"x"}]`, `storage.filesystems[0] (x): path: path is not absolute`},
		{`"directories":[{"filesystem":"root","path":"/d","mode":8192}]`, `storage.directories[0] (/d): mode 8192 is not a file mode`},
		{`"directories":[{"filesystem":"root","path":"d"}]`, `storage.directories[0] (d): path is not absolute`},
		{`"directories":[{"filesystem":"root","path":"/d","user":{"id":-5}}]`, `storage.directories[0] (/d): user: id -5 is negative`},
		{`"links":[{"filesystem":"root","path":"/l"}]`, `storage.links[0] (/l): target is missing`},
		{`"links":[{"filesystem":"root","path":"/l","target":"a\u0000b"}]`, `storage.links[0] (/l): target contains a NUL byte`},
		{`"links":[{"filesystem":"nope","path":"/l","target":"/x"}]`, `storage.links[0] (/l): filesystem nope is not defined`},
		{`"links":[{"filesystem":"root","path":"/l","target":"/x","group":{"id":1,"name":"x"}}]`, `storage.links[0] (/l): group: has both id and name`},
	}
	for _, tt := range bad {
		t.Run(tt.want, func(t *testing.T) {
			wantError(t, FormatIgnition, `{"ignition":{"version":"2.3.0"},"storage":{`+tt.storage+`}}`, Options{}, []string{"ignition: " + tt.want})
		})
	}
}

func TestIgnitionUnits(t *testing.T) {
	doc := `{"ignition":{"version":"2.3.0"},"systemd":{"units":[
		{"name":"kubeadm.service","enabled":true,"contents":"[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
		{"name":"containerd.service","dropins":[{"name":"10-a.conf","contents":"[Service]\nLimitNOFILE=1\n"},{"name":"20-empty.conf"}]},
		{"name":"docker.service","enabled":true,"dropins":[{"name":"10-b.conf","contents":"[Service]\n"}]},
		{"name":"ntpd.service","enabled":true},
		{"name":"locksmithd.service","mask":true,"enabled":true,"contents":"[Service]\n","dropins":[{"name":"x.conf","contents":"[Service]\n"}]},
		{"name":"legacy.timer","enable":true,"contents":"[Timer]\nOnCalendar=daily\n"},
		{"name":"off.service","enabled":false,"contents":"[Service]\n"},
		{"name":"maybe-off.service","enabled":false},
		{"name":"-.mount","enabled":true,"contents":"[Mount]\nWhat=tmpfs\nWhere=/\n"},
		{"name":"tmp.mount","enabled":true,"contents":"[Mount]\nWhat=tmpfs\nWhere=/tmp\nType=tmpfs\n"},
		{"name":"var-lib-etcd.mount","enabled":true,"contents":"[Mount]\n  What = /dev/disk/by-label/etcd\nWhere=/var/lib/etcd\n"},
		{"name":"swapfile.swap","enabled":true,"contents":"[Swap]\nWhat=/dev/sdc\n"}
	]}}`
	p := mustParse(t, FormatIgnition, doc, Options{})
	want := []Step{
		file("/etc/systemd/system/kubeadm.service", 0o644, "", "", "[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"),
		file("/etc/systemd/system/containerd.service.d/10-a.conf", 0o644, "", "", "[Service]\nLimitNOFILE=1\n"),
		file("/etc/systemd/system/docker.service.d/10-b.conf", 0o644, "", "", "[Service]\n"),
		file("/etc/systemd/system/locksmithd.service.d/x.conf", 0o644, "", "", "[Service]\n"),
		file("/etc/systemd/system/legacy.timer", 0o644, "", "", "[Timer]\nOnCalendar=daily\n"),
		file("/etc/systemd/system/off.service", 0o644, "", "", "[Service]\n"),
		file("/etc/systemd/system/-.mount", 0o644, "", "", "[Mount]\nWhat=tmpfs\nWhere=/\n"),
		file("/etc/systemd/system/tmp.mount", 0o644, "", "", "[Mount]\nWhat=tmpfs\nWhere=/tmp\nType=tmpfs\n"),
		args("systemctl", "daemon-reload"),
		args("systemctl", "mask", "locksmithd.service"),
		args("systemctl", "enable", "kubeadm.service"),
		script("if systemctl cat -- docker.service >/dev/null 2>&1; then systemctl enable -- docker.service; fi"),
		script("if systemctl cat -- ntpd.service >/dev/null 2>&1; then systemctl enable -- ntpd.service; fi"),
		args("systemctl", "enable", "legacy.timer"),
		args("systemctl", "disable", "off.service"),
		script("if systemctl cat -- maybe-off.service >/dev/null 2>&1; then systemctl disable -- maybe-off.service; fi"),
		args("systemctl", "enable", "--", "-.mount"),
		args("systemctl", "enable", "tmp.mount"),
		args("systemctl", "start", "kubeadm.service"),
		script("if systemctl cat -- docker.service >/dev/null 2>&1; then systemctl start -- docker.service; fi"),
		script("if systemctl cat -- ntpd.service >/dev/null 2>&1; then systemctl start -- ntpd.service; fi"),
		args("systemctl", "start", "legacy.timer"),
		args("systemctl", "start", "--", "-.mount"),
		args("systemctl", "start", "tmp.mount"),
	}
	ignored := []string{
		`Ignition systemd unit "swapfile.swap" (mounts /dev/sdc)`,
		`Ignition systemd unit "var-lib-etcd.mount" (mounts /dev/disk/by-label/etcd)`,
	}
	if d := diffPlan(p, want, ignored); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
	if got, want := p.Steps[16].Command.String(), "systemctl enable -- -.mount"; got != want {
		t.Errorf("Command.String() = %q, want %q", got, want)
	}

	bad := []struct{ units, want string }{
		{`[{"name":"kubeadm"}]`, `systemd.units[0] (kubeadm): "" is not a systemd unit type Ignition accepts`},
		{`[{"name":"a.conf"}]`, `systemd.units[0] (a.conf): .conf is not a systemd unit type`},
		{`[{"name":""}]`, `systemd.units[0] (""): name is missing`},
		{`[{"name":"../../etc/passwd.service"}]`, `systemd.units[0] (../../etc/passwd.service): name contains a slash`},
		{`[{"name":"a\nb.service"}]`, `systemd.units[0] ("a\nb.service"): name contains a control character`},
		{`[{"name":"a.service","dropins":[{"name":"x"}]}]`, `systemd.units[0] (a.service): dropins[0] (x): a drop-in name must end in .conf`},
		{`[{"name":"a.service","dropins":[{"name":"../x.conf","contents":"x"}]}]`, `systemd.units[0] (a.service): dropins[0]: name contains a slash`},
		{`[{"name":"a.service","dropins":[{"contents":"x"}]}]`, `systemd.units[0] (a.service): dropins[0]: name is missing`},
	}
	for _, tt := range bad {
		t.Run(tt.want, func(t *testing.T) {
			wantError(t, FormatIgnition, `{"ignition":{"version":"2.3.0"},"systemd":{"units":`+tt.units+`}}`, Options{}, []string{"ignition: " + tt.want})
		})
	}
}

func TestIgnitionDuplicateUnits(t *testing.T) {
	// CABPK appends the KubeadmConfig's additional config to its own, so a unit can appear twice.
	doc := `{"ignition":{"version":"2.3.0"},"systemd":{"units":[
		{"name":"kubeadm.service","enabled":true,"contents":"[Service]\n"},
		{"name":"masked.service","enabled":true,"contents":"[Service]\n"},
		{"name":"kubeadm.service","enabled":true,"dropins":[{"name":"10-x.conf","contents":"[Service]\nEnvironment=A=1\n"}]},
		{"name":"masked.service","mask":true}
	]}}`
	p := mustParse(t, FormatIgnition, doc, Options{})
	want := []Step{
		file("/etc/systemd/system/kubeadm.service", 0o644, "", "", "[Service]\n"),
		file("/etc/systemd/system/kubeadm.service.d/10-x.conf", 0o644, "", "", "[Service]\nEnvironment=A=1\n"),
		args("systemctl", "daemon-reload"),
		args("systemctl", "mask", "masked.service"),
		args("systemctl", "enable", "kubeadm.service"),
		args("systemctl", "start", "kubeadm.service"),
	}
	if d := diffPlan(p, want, nil); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
}

func TestIgnitionBudget(t *testing.T) {
	bomb := "data:;base64," + base64.StdEncoding.EncodeToString(gzipBytes(t, strings.Repeat("\x00", maxPlanSize+1)))
	doc := ign(t, "2.3.0", storageFiles(map[string]any{"path": "/bomb", "contents": map[string]any{"compression": "gzip", "source": bomb}}))
	wantError(t, FormatIgnition, doc, Options{}, []string{"storage.files[0] (/bomb): contents: decompressing gzip: bootstrap data expands to more than 64 MiB"})

	// Many files that are each within bounds add up.
	big := "data:;base64," + base64.StdEncoding.EncodeToString(gzipBytes(t, strings.Repeat("x", 8<<20)))
	var files []map[string]any
	for i := 0; i < 9; i++ {
		files = append(files, map[string]any{"path": "/f", "contents": map[string]any{"compression": "gzip", "source": big}})
	}
	wantError(t, FormatIgnition, ign(t, "2.3.0", storageFiles(files...)), Options{}, []string{"bootstrap data expands to more than 64 MiB"})
}
