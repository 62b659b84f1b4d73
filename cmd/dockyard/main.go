// Command dockyard is Dockyard's command line, with kind's habits: it makes a management
// cluster in containers and installs Cluster API and Dockyard in it with clusterctl's library,
// then creates, lists, loads images into, exports the logs of and deletes workload clusters,
// always through Cluster API objects.
//
// Called as manager (a link or copy of the binary by that name, as the manager image made of it
// holds it at /manager), it is Dockyard's manager instead: the binary carries the manager of its
// own version, so it can make that image without the source tree.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/dockyard-dev/dockyard/cmd/manager"
)

// managerName is the program name the binary runs Dockyard's manager by.
const managerName = "manager"

func main() {
	if filepath.Base(os.Args[0]) == managerName {
		if err := manager.Main(os.Args[1:]); err != nil {
			klog.Background().Error(err, "Manager failed")
			klog.FlushAndExit(klog.ExitFlushTimeout, 1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "\nError: %v\n", err)
		stop()
		os.Exit(1) //nolint:gocritic // stop ran
	}
}

func newRootCommand() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "dockyard",
		Short: "Kubernetes clusters in containers, made by Cluster API",
		Long: `dockyard makes Kubernetes clusters out of containers on the local engine (Docker, Podman or
containerd), the way Cluster API makes them anywhere: a management cluster in a container runs
Cluster API and Dockyard, and every workload cluster is a Cluster object there.

  dockyard quickstart                       management cluster, providers, and a 1+1 cluster
  dockyard create cluster dev --workers 2   another cluster (or --config kind.yaml)
  dockyard scale cluster dev --workers 3    through Cluster API, waiting for the nodes
  dockyard upgrade cluster dev --kubernetes-version v1.34.4
  dockyard load image app:dev --cluster dev the host engine's image into every node of it
  dockyard get kubeconfig dev > dev.conf    a kubeconfig that works from the host
  dockyard export logs ./logs --cluster dev every node's journals, pods' logs, inspect data
  dockyard delete cluster dev`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	g.register(root)
	root.AddCommand(
		quickstartCommand(g),
		createCommand(g),
		scaleCommand(g),
		upgradeCommand(g),
		getCommand(g),
		deleteCommand(g),
		loadCommand(g),
		exportCommand(g),
		registryCommand(g),
		pushCommand(g),
		versionCommand(),
	)
	return root
}

func say(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
