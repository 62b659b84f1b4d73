// Package controllers holds Dockyard's reconcilers: the Cluster API contract flow of
// DockyardCluster and DockyardMachine, one file per kind.
package controllers
