package patch

import (
	"strings"
	"testing"
)

func TestJSON6902(t *testing.T) {
	for _, s := range []string{
		`[{"op":"replace","path":"/maxPods","value":150}]`,
		"- op: replace\n  path: /maxPods\n  value: 150\n",
	} {
		p, ops, err := JSON6902(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out, err := p.Apply([]byte(`{"maxPods":110}`))
		if err != nil || string(out) != `{"maxPods":150}` {
			t.Errorf("%q applied: %s, %v", s, out, err)
		}
		if string(ops) != `[{"op":"replace","path":"/maxPods","value":150}]` {
			t.Errorf("%q as JSON: %s", s, ops)
		}
	}
	for _, s := range []string{"op: replace", "[{", `{"op":"add"}`} {
		if _, _, err := JSON6902(s); err == nil || !strings.Contains(err.Error(), "not a JSON 6902 patch") {
			t.Errorf("%q: error %v, want one saying it is not a JSON 6902 patch", s, err)
		}
	}
}

func TestTOML(t *testing.T) {
	table, err := TOML([]byte("version = 2\n[plugins.cri]\nsandbox_image = \"pause\"\n"))
	if err != nil || table["version"] != int64(2) {
		t.Errorf("table %v, error %v", table, err)
	}
	if _, err := TOML([]byte("version = = 2")); err == nil || !strings.Contains(err.Error(), "not TOML") {
		t.Errorf("error %v, want one saying it is not TOML", err)
	}
}
