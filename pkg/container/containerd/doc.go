// Package containerd implements container.Runtime on a containerd daemon (1.6 or later) through
// the containerd Go client, with CNI plugins for networking. See the package documentation at
// the end of the brief for details.
package containerd
