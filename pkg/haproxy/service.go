package haproxy

import (
	"net/netip"
	"sort"
	"strings"
	"text/template"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A Service load balancer's configuration is rendered from names a workload cluster chose: its
// Service's namespace and name, its nodes' names and addresses, its ports. Each is checked
// before it reaches the configuration (ValidateService, ValidatePort, ValidateBackend), so no
// name can carry a newline, a quote or another haproxy keyword into it.

// ServicePort is a TCP port of a Service and the NodePort that serves it on every node.
type ServicePort struct {
	Port, NodePort int
}

// ServiceBackend is a node a Service's traffic goes to.
type ServiceBackend struct {
	// Name is the node's name, the haproxy server name.
	Name string
	// Address is the node's IP address on the cluster's network.
	Address string
}

// ServiceData is what a Service load balancer's configuration is rendered with.
type ServiceData struct {
	// Service is "<namespace>/<name>" in the workload cluster.
	Service string
	// Ports are served in this order; a port appears once.
	Ports []ServicePort
	// Nodes are listed sorted by name; a name appears once.
	Nodes []ServiceBackend
}

// ValidateService checks a Service's namespace and name: DNS-1123 labels, as the API server
// has them.
func ValidateService(namespace, name string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return errors.Errorf("Service namespace %q is not a DNS-1123 label: %s", truncate(namespace), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return errors.Errorf("Service name %q is not a DNS-1123 label: %s", truncate(name), strings.Join(errs, "; "))
	}
	return nil
}

// ValidatePort checks a Service port and its NodePort: both between 1 and 65535.
func ValidatePort(p ServicePort) error {
	if len(validation.IsValidPortNum(p.Port)) > 0 {
		return errors.Errorf("port %d is not between 1 and 65535", p.Port)
	}
	if len(validation.IsValidPortNum(p.NodePort)) > 0 {
		return errors.Errorf("NodePort %d of port %d is not between 1 and 65535", p.NodePort, p.Port)
	}
	return nil
}

// ValidateNodeName checks a node's name: a DNS-1123 subdomain, as the API server has Node
// names.
func ValidateNodeName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errors.Errorf("node name %q is not a DNS-1123 subdomain: %s", truncate(name), strings.Join(errs, "; "))
	}
	return nil
}

// ValidateBackend checks a node: its name (ValidateNodeName), and its address a plain unicast
// IP address (no zone, not loopback).
func ValidateBackend(b ServiceBackend) error {
	if err := ValidateNodeName(b.Name); err != nil {
		return err
	}
	_, err := backendAddress(b)
	return err
}

func backendAddress(b ServiceBackend) (netip.Addr, error) {
	ip, err := netip.ParseAddr(b.Address)
	if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsLoopback() || ip.IsMulticast() {
		return netip.Addr{}, errors.Errorf("address %q of node %s is not a unicast IP address", truncate(b.Address), b.Name)
	}
	return ip, nil
}

// truncate shortens a rejected value for an error message.
func truncate(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// ServiceTemplate is a Service load balancer's configuration: one TCP frontend per Service
// port, to that port's NodePort on every node, health-checked.
const ServiceTemplate = `# Rendered by Dockyard for Service {{ .Service }}; changes are overwritten.
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
{{- range .Frontends }}

frontend port-{{ .Port }}
  bind *:{{ .Port }}
  default_backend nodeport-{{ .Port }}

backend nodeport-{{ .Port }}
  option tcp-check
{{- range .Servers }}
  server {{ .Name }} {{ .Endpoint }} check inter 5s fall 2 rise 1
{{- end }}
{{- end }}
`

var serviceTemplate = template.Must(template.New("service-haproxy.cfg").Option("missingkey=error").Parse(ServiceTemplate))

// serviceView is ServiceData checked and laid out for ServiceTemplate.
type serviceView struct {
	Service   string
	Frontends []serviceFrontend
}

type serviceFrontend struct {
	Port    int
	Servers []serviceServer
}

type serviceServer struct {
	Name, Endpoint string
}

// RenderService renders a Service load balancer's configuration. It checks every name, address
// and port first and renders nothing when one is invalid or repeated: callers skip what
// ValidateService, ValidatePort and ValidateBackend refuse before they get here. The output is
// bounded by MaxConfigSize.
func RenderService(data ServiceData) ([]byte, error) {
	namespace, name, ok := strings.Cut(data.Service, "/")
	if !ok {
		return nil, errors.Errorf("Service %q is not <namespace>/<name>", truncate(data.Service))
	}
	if err := ValidateService(namespace, name); err != nil {
		return nil, err
	}
	nodes := append([]ServiceBackend(nil), data.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	addresses := make([]netip.Addr, len(nodes))
	for i, n := range nodes {
		if err := ValidateBackend(n); err != nil {
			return nil, err
		}
		if i > 0 && nodes[i-1].Name == n.Name {
			return nil, errors.Errorf("node %s is listed twice", n.Name)
		}
		addresses[i], _ = backendAddress(n)
	}
	view := serviceView{Service: data.Service}
	seen := map[int]bool{}
	for _, p := range data.Ports {
		if err := ValidatePort(p); err != nil {
			return nil, err
		}
		if seen[p.Port] {
			return nil, errors.Errorf("port %d is listed twice", p.Port)
		}
		seen[p.Port] = true
		f := serviceFrontend{Port: p.Port}
		for i, n := range nodes {
			f.Servers = append(f.Servers, serviceServer{Name: n.Name, Endpoint: netip.AddrPortFrom(addresses[i], uint16(p.NodePort)).String()})
		}
		view.Frontends = append(view.Frontends, f)
	}
	out := &limitedBuffer{limit: MaxConfigSize}
	if err := serviceTemplate.Execute(out, view); err != nil {
		return nil, errors.Wrapf(err, "rendering the haproxy configuration of Service %s", data.Service)
	}
	return out.Bytes(), nil
}
