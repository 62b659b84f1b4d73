package patch

import (
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// A containerd 1.6 configuration (version 2) as node images carry it, abridged.
const nodeContainerdConfig = `version = 2
root = "/var/lib/containerd"

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.10.1"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
`

func TestContainerdPatchesApply(t *testing.T) {
	out, err := (Containerd{Merge: []string{
		// kind's configuration guide, "Local Registry" (containerd's mirrors, before config_path).
		`[plugins."io.containerd.grpc.v1.cri".registry.mirrors."localhost:5000"]
  endpoint = ["http://kind-registry:5000"]`,
		`[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"`,
		// For version 3 configurations only: skipped.
		"version = 3\n[plugins.\"io.containerd.cri.v1.images\"]\n  discard_unpacked_layers = true",
	}, JSON6902: []string{
		`[{"op": "replace", "path": "/root", "value": "/var/lib/containerd2"}]`,
		"- op: add\n  path: /plugins/io.containerd.grpc.v1.cri/stream_idle_timeout\n  value: 5m",
		`[{"op": "remove", "path": "/plugins/io.containerd.grpc.v1.cri/sandbox_image"}]`,
	}}).Apply([]byte(nodeContainerdConfig))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	if err := toml.Unmarshal(out, &got); err != nil {
		t.Fatalf("the merged configuration is not TOML: %v\n%s", err, out)
	}
	cri := got["plugins"].(map[string]any)["io.containerd.grpc.v1.cri"].(map[string]any)
	ctrd := cri["containerd"].(map[string]any)
	if ctrd["snapshotter"] != "native" {
		t.Errorf("snapshotter %v, want the patch's", ctrd["snapshotter"])
	}
	runc := ctrd["runtimes"].(map[string]any)["runc"].(map[string]any)["options"].(map[string]any)
	if runc["SystemdCgroup"] != true {
		t.Errorf("SystemdCgroup %v: a patch of another key of the table lost it", runc["SystemdCgroup"])
	}
	registry := cri["registry"].(map[string]any)
	if registry["config_path"] != "/etc/containerd/certs.d" {
		t.Errorf("config_path %v lost", registry["config_path"])
	}
	mirror := registry["mirrors"].(map[string]any)["localhost:5000"].(map[string]any)
	if e, _ := mirror["endpoint"].([]any); len(e) != 1 || e[0] != "http://kind-registry:5000" {
		t.Errorf("mirror endpoint %v", mirror["endpoint"])
	}
	if v := got["version"]; v != int64(2) {
		t.Errorf("version %v (%T), want 2", v, v)
	}
	if _, ok := got["plugins"].(map[string]any)["io.containerd.cri.v1.images"]; ok {
		t.Error("a patch for another configuration version was merged")
	}

	if got["root"] != "/var/lib/containerd2" || cri["sandbox_image"] != nil || cri["stream_idle_timeout"] != "5m" {
		t.Errorf("JSON 6902 patches not applied: root %v, sandbox_image %v, stream_idle_timeout %v", got["root"], cri["sandbox_image"], cri["stream_idle_timeout"])
	}

	for _, c := range []struct {
		patches Containerd
		field   string
	}{
		{Containerd{Merge: []string{"version = 2", "[plugins"}}, "containerdConfigPatches[1]"},
		{Containerd{JSON6902: []string{"op: add"}}, "containerdConfigPatchesJSON6902[0]"},
		{Containerd{JSON6902: []string{`[{"op": "remove", "path": "/nothing"}]`}}, "containerdConfigPatchesJSON6902[0]"},
	} {
		if _, err := c.patches.Apply([]byte(nodeContainerdConfig)); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.patches, err, c.field)
		}
	}
}

func TestContainerdMarkNamesThePatches(t *testing.T) {
	mark := func(merge ...string) string { return Containerd{Merge: merge}.Mark() }
	a, b := mark("x = 1"), mark("x = 2")
	if a == b || a != mark("x = 1") || !strings.HasPrefix(a, "#") || !strings.HasSuffix(a, "\n") {
		t.Errorf("marks %q and %q", a, b)
	}
	if mark("a", "b") == mark("ab") {
		t.Error("two patches and their concatenation have one mark")
	}
	if (Containerd{Merge: []string{"a"}}).Mark() == (Containerd{JSON6902: []string{"a"}}).Mark() {
		t.Error("a merge patch and a JSON 6902 patch have one mark")
	}
}
