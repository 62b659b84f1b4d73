// Package onacluster holds the tests of the Kubernetes engine that need an infrastructure
// cluster (make test-kubernetes-engine makes one and runs them): the conformance suite, Pods'
// lifecycle, volumes, events, fronts and zones. The engine's unit tests, which need none, are
// beside it and run in make test.
package onacluster
