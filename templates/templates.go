// Package templates carries Dockyard's clusterctl flavors (cluster-template*.yaml) and
// ClusterClasses (clusterclass-*.yaml), which make templates writes from templates/src, so the
// dockyard command holds them for its own version (pkg/repository).
package templates

import "embed"

// Flavors holds the flavors and ClusterClasses, at its root.
//
//go:embed cluster-template*.yaml clusterclass-*.yaml
var Flavors embed.FS
