// Package capie2e plugs Dockyard into Cluster API's end-to-end test framework
// (sigs.k8s.io/cluster-api/test/framework), the way CAPD plugs in with kind, so a provider's
// own suite (and Cluster API's shared specs, sigs.k8s.io/cluster-api/test/e2e) can run on
// Dockyard:
//
//   - ClusterProvider is a framework bootstrap cluster provider: Dockyard's management cluster
//     in one node container on the local engine (cmd/tools/mgmt), with the e2e config's images
//     preloaded and the engine's socket mounted for Dockyard's manager;
//   - LogCollector is the framework's ClusterLogCollector: every node's journals, bootstrap
//     output and engine inspect data, and the load balancer's, through Dockyard's node layer;
//   - OwnerReferenceAssertions and FinalizersAssertion describe Dockyard's kinds to the
//     framework's owner reference and finalizer checks;
//   - AddCertManager points a clusterctl configuration at a local cert-manager manifest,
//     which the framework's e2e config cannot express.
//
// The suite under e2e/ runs Cluster API's shared specs with these (docs/testing.md).
package capie2e
