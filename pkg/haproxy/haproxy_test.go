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
	if !strings.Contains(cfg, "bind *:6443") {
		t.Errorf("frontend port missing:\n%s", cfg)
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
