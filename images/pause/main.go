// Command pause is the process of a pod sandbox container: it holds the pod's namespaces open,
// reaps the zombies of a shared PID namespace and exits cleanly on SIGINT or SIGTERM.
// dockyard-build compiles it statically into the image kubeadm names as the pause image.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set by the linker to the pause tag kubeadm asks for.
var version = "dev"

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("pause", version, "(dockyard)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1, orphaned processes will not be reaped here")
	}

	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every child that has exited; SIGCHLD signals can coalesce, so it loops until
// no exited child is left.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
