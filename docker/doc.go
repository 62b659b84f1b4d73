// Package docker is what a node and a load balancer are for Dockyard, on any container engine
// behind container.Runtime: their names and labels, creating, starting, waiting for and
// deleting node containers, running bootstrap plans inside them, and rendering and reloading
// the haproxy load balancer. Controllers call it (the Manager, and a Node handle per node
// container); it calls the engine.
package docker
