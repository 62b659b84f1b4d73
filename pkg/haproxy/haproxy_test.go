package haproxy

import (
	"strings"
	"testing"
)

func TestRenderDefaultTemplateListsBackendsSorted(t *testing.T) {
	out, err := Render("", Data{FrontendPort: 6443, Backends: []Backend{
		{Name: "c1-cp-b", Address: "172.18.0.4", Port: 6443},
		{Name: "c1-cp-a", Address: "172.18.0.3", Port: 6443},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(out)
	a := strings.Index(cfg, "server c1-cp-a 172.18.0.3:6443")
	b := strings.Index(cfg, "server c1-cp-b 172.18.0.4:6443")
	if a < 0 || b < 0 || a > b {
		t.Fatalf("backends missing or unsorted:\n%s", cfg)
	}
	if !strings.Contains(cfg, "bind *:6443") || strings.Contains(cfg, ":::6443") {
		t.Errorf("want the frontend on IPv4 only:\n%s", cfg)
	}
}

// On a dual-stack network the load balancer listens on both families.
func TestRenderDefaultTemplateListensOnIPv6Too(t *testing.T) {
	out, err := Render("", Data{FrontendPort: 6443, IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := string(out); !strings.Contains(cfg, "  bind *:6443\n  bind :::6443 v6only\n") {
		t.Errorf("want binds on IPv4 and IPv6:\n%s", cfg)
	}
}

func TestRenderWithoutBackendsIsStillAConfig(t *testing.T) {
	out, err := Render("", Data{FrontendPort: 6443})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "\n  server ") {
		t.Errorf("no server lines expected:\n%s", out)
	}
}

func TestRenderCustomTemplate(t *testing.T) {
	tmpl := "frontend f\n  bind *:{{ .FrontendPort }}\n{{ range .Backends }}# {{ .Name }}={{ .Address }}\n{{ end }}"
	out, err := Render(tmpl, Data{FrontendPort: 7443, Backends: []Backend{{Name: "n1", Address: "192.0.2.1", Port: 6443}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "frontend f\n  bind *:7443\n# n1=192.0.2.1\n"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestRenderReportsTemplateErrors(t *testing.T) {
	for name, tmpl := range map[string]string{
		"syntax":        "{{ .FrontendPort ",
		"unknown field": "{{ .NoSuchField }}",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Render(tmpl, Data{}); err == nil {
				t.Fatal("expected an error")
			}
		})
	}
}

// A user's template runs inside the manager: whatever it says, rendering ends with an error that
// names the problem, without spinning, allocating gigabytes or recursing.
func TestRenderRefusesTemplatesWithoutABound(t *testing.T) {
	many := make([]Backend, 64)
	for i := range many {
		many[i] = Backend{Name: strings.Repeat("n", 200), Address: "192.0.2.1", Port: 6443}
	}
	for _, tc := range []struct {
		name, tmpl, want string
	}{
		{"range over a huge number", "{{ range 1000000000000 }}{{ end }}", "range may only go over .Backends"},
		{"range over a variable", "{{ $n := 1000000000000 }}{{ range $n }}{{ end }}", "range may only go over .Backends"},
		{"range over the port", "{{ range .FrontendPort }}{{ end }}", "range may only go over .Backends"},
		{"nested ranges", "{{ range .Backends }}{{ range $.Backends }}x{{ end }}{{ end }}", "a range inside a range"},
		{"printf with a huge width", `{{ printf "%999999999d" 1 }}`, "function printf is not allowed"},
		{"printf in a pipeline", `{{ 1 | printf "%999999999d" }}`, "function printf is not allowed"},
		{"printf inside a range", `{{ range .Backends }}{{ if eq (printf "%d" 1) "1" }}{{ end }}{{ end }}`, "function printf is not allowed"},
		{"recursive template", `{{ define "x" }}{{ template "x" . }}{{ end }}{{ template "x" . }}`, "define, block and template are not allowed"},
		{"block", `{{ block "b" . }}x{{ end }}`, "define, block and template are not allowed"},
		{"output larger than the bound", strings.Repeat("{{ range .Backends }}"+strings.Repeat("x", 4096)+"{{ .Name }}{{ end }}", 8), "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(tc.tmpl, Data{FrontendPort: 6443, Backends: many})
			if err == nil {
				t.Fatalf("rendered %d bytes, want an error", len(out))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestRenderAllowsWhatConfigurationsUse(t *testing.T) {
	tmpl := `{{ $port := .FrontendPort }}bind *:{{ $port }}
{{ with .Backends }}{{ len . }} backends{{ end }}
{{ range $i, $b := .Backends }}{{ if and (ne $i 0) (gt $b.Port 0) }}, {{ end }}{{ $b.Name | html }}{{ end }}
{{ if not .Backends }}none{{ else }}{{ (index .Backends 0).Address }}{{ end }}`
	out, err := Render(tmpl, Data{FrontendPort: 6443, Backends: []Backend{{Name: "a", Address: "192.0.2.1", Port: 6443}, {Name: "b", Address: "192.0.2.2", Port: 6443}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "bind *:6443\n2 backends\na, b\n192.0.2.1"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}
