// Package controllers holds Dockyard's reconcilers of DockyardCluster, DockyardMachine,
// DockyardMachinePool and DockyardMachineTemplate, following Cluster API's v1beta2 provider
// contracts. Every reconciler begins the same way (reconcile.go: owner, Cluster, pause,
// finalizer, one deferred patch) and then runs named phases, each owning its conditions; files
// are split by concern (_phases, _bootstrap, _replicas, _delete, _status). They reach
// containers only through the node layer, package docker (docs/architecture.md).
package controllers
