// Package haproxy renders the configuration of a cluster's load balancer: haproxy in TCP mode
// in front of the control plane nodes' API servers, from Dockyard's template or a user's.
package haproxy

import (
	"bytes"
	"sort"
	"text/template"

	"github.com/pkg/errors"
)

// Backend is one control plane node behind the load balancer.
type Backend struct {
	// Name of the node, used as the haproxy server name.
	Name string
	// Address is the node's IP address on the cluster's network.
	Address string
	// Port the node's API server listens on.
	Port int
}

// Data is what a configuration template is rendered with.
type Data struct {
	// FrontendPort is the port the load balancer listens on.
	FrontendPort int
	// Backends are the control plane nodes, sorted by name.
	Backends []Backend
	// IPv6 says the load balancer has an IPv6 address too (the cluster's network is
	// dual-stack): it listens on both families.
	IPv6 bool
}

// DefaultTemplate is Dockyard's haproxy configuration. Health checks keep an API server out of
// the rotation until it answers /healthz, so a control plane node can join the backends as
// soon as its container runs. Established connections survive a reload: the old worker keeps
// serving them (for up to hard-stop-after) while the new one takes new connections.
const DefaultTemplate = `# Rendered by Dockyard; changes are overwritten.
global
  log stdout format raw local0 notice
  maxconn 4096
  hard-stop-after 10m

defaults
  mode tcp
  log global
  option dontlognull
  timeout connect 5s
  # Watches through the load balancer can be idle for a long time.
  timeout client 30m
  timeout server 30m

frontend control-plane
  bind *:{{ .FrontendPort }}
{{- if .IPv6 }}
  bind :::{{ .FrontendPort }} v6only
{{- end }}
  default_backend kube-apiservers

backend kube-apiservers
  option httpchk GET /healthz
  http-check expect status 200
  default-server inter 1s fall 2 rise 1 check check-ssl verify none
{{- range .Backends }}
  server {{ .Name }} {{ .Address }}:{{ .Port }}
{{- end }}
`

// MaxConfigSize bounds a rendered configuration; haproxy configurations are a few KiB.
const MaxConfigSize = 1 << 20

// Render renders a configuration template. An empty template means DefaultTemplate.
//
// A user's template runs inside the manager, so it is held to a restricted language whose cost
// is bounded by its own length times the number of backends (see checkTemplate), and its
// output to MaxConfigSize: no template can hang the manager, exhaust its memory or hold the
// cluster's lock for long.
func Render(tmpl string, data Data) ([]byte, error) {
	if tmpl == "" {
		tmpl = DefaultTemplate
	}
	t, err := template.New("haproxy.cfg").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, errors.Wrap(err, "parsing the haproxy configuration template")
	}
	if err := checkTemplate(t); err != nil {
		return nil, errors.Wrap(err, "checking the haproxy configuration template")
	}
	backends := append([]Backend(nil), data.Backends...)
	sort.Slice(backends, func(i, j int) bool { return backends[i].Name < backends[j].Name })
	data.Backends = backends
	out := &limitedBuffer{limit: MaxConfigSize}
	if err := t.Execute(out, data); err != nil {
		return nil, errors.Wrap(err, "rendering the haproxy configuration template")
	}
	return out.Bytes(), nil
}

// limitedBuffer fails writes past its limit, which stops the template's execution.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		return 0, errors.Errorf("the configuration would be larger than %d bytes", b.limit)
	}
	return b.Buffer.Write(p)
}
