// Package images holds the files Dockyard's images are assembled from: the node's entrypoint,
// systemd units and configuration, the load balancer's default configuration, the scripts of
// the kube-proxy and flannel images, the pause program, the CNI manifest, and the local
// registry's configuration and front (registryproxy: authentication, push prefixes, immutable
// tags). They are embedded so that cmd/dockyard-build is self-contained and so that their
// content keys the image caches (cmd/tools/imagebuild hashes them).
package images

import "embed"

// Files is the tree of this directory, minus Go sources other than the pause program's and the
// registry proxy's (their tests stay out).
//
//go:embed node haproxy iptables kube-proxy cni pause/main.go registryproxy/main.go rootfs registry e2e netpol
var Files embed.FS
