// Command dockyard is Dockyard's command line: it makes a management cluster in containers on
// the local engine and installs Cluster API and Dockyard in it with the real clusterctl, then
// creates workload clusters through them, the way a user of Dockyard would.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const usage = `usage: dockyard <command> [flags]

commands:
  quickstart           make (or reuse) the management cluster, install Cluster API and Dockyard in it
                       with clusterctl, create a workload cluster and print both kubeconfigs
  delete               delete the quickstart's workload cluster, then the management cluster
  management create    make (or finish making) the management cluster; print its kubeconfig path
  management delete    delete the management cluster
  management kubeconfig  print the management cluster's kubeconfig

Run "dockyard <command> -h" for the flags. make quickstart builds what these need first.
`

func main() {
	cmd, args := command(os.Args[1:])
	run, ok := commands[cmd]
	if !ok {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("dockyard "+cmd, flag.ExitOnError)
	if err := run(ctx, fs, args); err != nil {
		fmt.Fprintf(os.Stderr, "\ndockyard %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// command splits the command words ("management create") from the flags.
func command(args []string) (string, []string) {
	if len(args) == 0 {
		return "", nil
	}
	if args[0] == "management" && len(args) > 1 {
		return "management " + args[1], args[2:]
	}
	return args[0], args[1:]
}

var commands = map[string]func(ctx context.Context, fs *flag.FlagSet, args []string) error{
	"quickstart":            quickstartCommand,
	"delete":                deleteCommand,
	"management create":     managementCreateCommand,
	"management delete":     managementDeleteCommand,
	"management kubeconfig": managementKubeconfigCommand,
}

func say(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
