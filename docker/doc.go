// Package docker is the node layer: what a node and a load balancer are for Dockyard, on any
// container engine behind container.Runtime. It owns their names, labels and run flags,
// creates, starts, checks and deletes node containers, runs bootstrap plans in them (the runner
// in internal/runner), and renders and reloads the haproxy load balancer. Controllers, the
// management cluster code and the CLI use it through the Manager and its handles (Node,
// LoadBalancer, Event) and never the engine: a lint rule keeps it that way
// (docs/architecture.md).
package docker
