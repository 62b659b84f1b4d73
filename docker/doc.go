// Package docker is the node layer: what a node and a load balancer are for Dockyard, on one
// container engine behind container.Runtime. A Manager is the node layer of one engine, chosen
// above it (the manager's flag, or a cluster's DockyardCluster through
// controllers/infrastructure): it never asks again which engine a cluster runs on, never reads
// the API and never calls back up. It owns the names, labels and run flags of nodes; creates,
// starts, checks and deletes node containers; runs bootstrap plans in them (the runner in
// internal/runner); and gives each cluster's control plane one address, chosen once per engine:
// a haproxy container it renders and reloads, or the engine's own front. Every command it runs
// in a node goes through one runner (exec.go), whose argv all come from internal/nodecmd.
// Controllers, the management cluster code and the CLI use it through the Manager and its
// handles (Node, LoadBalancer, Registry, ServiceLoadBalancer, Event), never the engine: a lint
// rule keeps it that way (docs/architecture.md).
package docker
