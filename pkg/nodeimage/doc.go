// Package nodeimage holds, in its sub-packages, the node image's side of Dockyard's contract
// with its nodes: nodecmd, the argv of every command the node layer runs in a node, and
// runner, the bootstrap runner's scripts and protocol. They are ground packages so that the
// node layer, which runs the commands, and the in-memory engine, which answers them for nodes
// that exist only in the manager, read the same words.
package nodeimage
