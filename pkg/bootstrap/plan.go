// Package bootstrap translates the bootstrap data Cluster API's bootstrap providers write
// (cloud-config and Ignition) into a Plan: the ordered files and commands a node container
// runs. It only parses; running a plan in a node is the job of package docker.
package bootstrap

import (
	"os"
	"strings"
)

// Format is the value of the "format" key of a bootstrap data secret.
type Format string

// Formats Cluster API's kubeadm bootstrap provider emits.
const (
	FormatCloudConfig Format = "cloud-config"
	FormatIgnition    Format = "ignition"
)

// Plan is what a node must do to bootstrap, in order.
type Plan struct {
	// Steps run in order; the first failing step stops the plan.
	Steps []Step
	// Ignored names the parts of the bootstrap data Dockyard cannot honour in a container
	// (for example the cloud-config modules "ntp" or "disk_setup", or Ignition's
	// "storage.disks"). The plan runs without them; the machine's condition names them.
	Ignored []string
}

// Step is one file to write or one command to run; exactly one of File and Command is set.
type Step struct {
	File    *File
	Command *Command
}

// File is a file to write in the node.
type File struct {
	// Path is absolute.
	Path string
	// Content is decoded (no base64 or gzip left).
	Content []byte
	// Mode holds the permission bits; 0644 when the data does not say.
	Mode os.FileMode
	// Owner and Group are names or numeric ids; empty means root.
	Owner string
	Group string
	// Append adds Content to the end of an existing file instead of replacing it.
	Append bool
}

// Command is a command to run in the node.
type Command struct {
	// Script is run by /bin/sh -c when Args is empty.
	Script string
	// Args is run as an argument vector (cloud-config's list form).
	Args []string
}

// String renders the command for conditions and logs the way a user wrote it.
func (c Command) String() string {
	if len(c.Args) == 0 {
		return c.Script
	}
	return shellJoin(c.Args)
}

// Options adjust how bootstrap data is translated for one node.
type Options struct {
	// Hostname of the node, substituted for the instance metadata variables of a
	// "## template: jinja" cloud-config ({{ ds.meta_data.hostname }} and friends).
	Hostname string
}

// ShellQuote quotes s for a POSIX shell: the result is one word whose value is s.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !strings.ContainsRune("/-_.=:,+@", r) && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = ShellQuote(a)
	}
	return strings.Join(quoted, " ")
}
