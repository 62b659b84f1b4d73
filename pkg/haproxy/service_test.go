package haproxy

import (
	"fmt"
	"strings"
	"testing"
)

// A Service's configuration: one frontend per port, to that port's NodePort on every node,
// nodes sorted by name, ports in the Service's order.
func TestRenderServiceFrontendsAndBackends(t *testing.T) {
	out, err := RenderService(ServiceData{
		Service: "default/web",
		Ports:   []ServicePort{{Port: 80, NodePort: 30080}, {Port: 443, NodePort: 30443}},
		Nodes:   []ServiceBackend{{Name: "c1-md-0-b", Address: "172.30.0.4"}, {Name: "c1-control-plane-a", Address: "172.30.0.3"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `# Rendered by Dockyard for Service default/web; changes are overwritten.
global
  log stdout format raw local0 notice
  maxconn 4096
  hard-stop-after 1m

defaults
  mode tcp
  log global
  option dontlognull
  timeout connect 5s
  timeout client 10m
  timeout server 10m

frontend port-80
  bind *:80
  default_backend nodeport-80

backend nodeport-80
  option tcp-check
  server c1-control-plane-a 172.30.0.3:30080 check inter 5s fall 2 rise 1
  server c1-md-0-b 172.30.0.4:30080 check inter 5s fall 2 rise 1

frontend port-443
  bind *:443
  default_backend nodeport-443

backend nodeport-443
  option tcp-check
  server c1-control-plane-a 172.30.0.3:30443 check inter 5s fall 2 rise 1
  server c1-md-0-b 172.30.0.4:30443 check inter 5s fall 2 rise 1
`
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

// A Service without ports or nodes still gets a configuration haproxy loads: no frontend, or
// frontends without servers.
func TestRenderServiceWithoutPortsOrNodes(t *testing.T) {
	out, err := RenderService(ServiceData{Service: "default/web"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := string(out); strings.Contains(cfg, "frontend") || !strings.HasSuffix(cfg, "timeout server 10m\n") {
		t.Errorf("want the global and defaults sections only:\n%s", cfg)
	}
	out, err = RenderService(ServiceData{Service: "default/web", Ports: []ServicePort{{Port: 80, NodePort: 30080}}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := string(out); !strings.HasSuffix(cfg, "backend nodeport-80\n  option tcp-check\n") {
		t.Errorf("want a backend without servers:\n%s", cfg)
	}
}

func TestRenderServiceIPv6Node(t *testing.T) {
	out, err := RenderService(ServiceData{Service: "default/web", Ports: []ServicePort{{Port: 80, NodePort: 30080}},
		Nodes: []ServiceBackend{{Name: "n1", Address: "fd00::3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "  server n1 [fd00::3]:30080 check") {
		t.Errorf("want the IPv6 address in brackets:\n%s", out)
	}
}

// Whatever the workload cluster's API returns, nothing but checked names, addresses and ports
// reaches the configuration: a newline, a quote or a space could add haproxy directives.
func TestRenderServiceRefusesWhatCouldInject(t *testing.T) {
	good := func() ServiceData {
		return ServiceData{
			Service: "default/web",
			Ports:   []ServicePort{{Port: 80, NodePort: 30080}},
			Nodes:   []ServiceBackend{{Name: "n1", Address: "172.30.0.3"}},
		}
	}
	for _, tc := range []struct {
		name, want string
		change     func(*ServiceData)
	}{
		{"newline in the Service's name", "Service name", func(d *ServiceData) { d.Service = "default/web\nlisten stats\n  bind *:9000" }},
		{"newline in the namespace", "Service namespace", func(d *ServiceData) { d.Service = "default\nlisten x/web" }},
		{"no namespace", "not <namespace>/<name>", func(d *ServiceData) { d.Service = "web" }},
		{"quote in the Service's name", "Service name", func(d *ServiceData) { d.Service = `default/we"b` }},
		{"uppercase name", "Service name", func(d *ServiceData) { d.Service = "default/Web" }},
		{"newline in a node's name", "node name", func(d *ServiceData) { d.Nodes[0].Name = "n1 192.0.2.9:22\n  server evil" }},
		{"space in a node's name", "node name", func(d *ServiceData) { d.Nodes[0].Name = "n1 backup" }},
		{"quote in a node's name", "node name", func(d *ServiceData) { d.Nodes[0].Name = `n1"` }},
		{"newline in an address", "not a unicast IP address", func(d *ServiceData) { d.Nodes[0].Address = "172.30.0.3\n  server evil 192.0.2.9" }},
		{"address with a port", "not a unicast IP address", func(d *ServiceData) { d.Nodes[0].Address = "172.30.0.3:22" }},
		{"host name for an address", "not a unicast IP address", func(d *ServiceData) { d.Nodes[0].Address = "example.com" }},
		{"IPv6 zone", "not a unicast IP address", func(d *ServiceData) { d.Nodes[0].Address = "fe80::1%eth0" }},
		{"unspecified address", "not a unicast IP address", func(d *ServiceData) { d.Nodes[0].Address = "0.0.0.0" }},
		{"loopback address", "not a unicast IP address", func(d *ServiceData) { d.Nodes[0].Address = "127.0.0.1" }},
		{"port 0", "port 0 is not", func(d *ServiceData) { d.Ports[0].Port = 0 }},
		{"port too large", "port 65536 is not", func(d *ServiceData) { d.Ports[0].Port = 65536 }},
		{"negative NodePort", "NodePort -1 of port 80", func(d *ServiceData) { d.Ports[0].NodePort = -1 }},
		{"NodePort too large", "NodePort 70000 of port 80", func(d *ServiceData) { d.Ports[0].NodePort = 70000 }},
		{"port twice", "port 80 is listed twice", func(d *ServiceData) { d.Ports = append(d.Ports, ServicePort{Port: 80, NodePort: 30081}) }},
		{"node twice", "node n1 is listed twice", func(d *ServiceData) { d.Nodes = append(d.Nodes, ServiceBackend{Name: "n1", Address: "172.30.0.4"}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := good()
			tc.change(&d)
			out, err := RenderService(d)
			if err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
			if out != nil {
				t.Errorf("rendered %d bytes with an error", len(out))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error %q carries a newline", err)
			}
		})
	}
}

func TestRenderServiceIsBounded(t *testing.T) {
	d := ServiceData{Service: "default/web"}
	for i := range 2000 {
		d.Ports = append(d.Ports, ServicePort{Port: 1000 + i, NodePort: 30000})
	}
	for i := range 20 {
		d.Nodes = append(d.Nodes, ServiceBackend{Name: fmt.Sprintf("node-%d", i), Address: fmt.Sprintf("172.30.0.%d", i+2)})
	}
	if out, err := RenderService(d); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("rendered %d bytes, error %v; want the size bound", len(out), err)
	}
}
