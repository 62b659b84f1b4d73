// Command dockyard-mgmt runs the end-to-end suites' Cluster API management plane
// (test/framework) by hand: etcd, kube-apiserver, kube-controller-manager, Cluster API's core,
// kubeadm bootstrap and control plane managers and Dockyard's manager, as local processes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dockyard-dev/dockyard/test/framework"
)

const usage = `usage: dockyard-mgmt <command> [flags]

commands:
  build   build (or find in the cache) every binary the plane runs, and clusterctl; print their paths
  up      start the plane and keep it running until SIGINT/SIGTERM; SIGUSR1 restarts Dockyard's
          manager, SIGUSR2 prints the dump (objects, conditions, process logs)
`

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var opts framework.Options
	var dockyardArgs stringList
	fs.StringVar(&opts.WorkDir, "work-dir", "", "work directory (logs, certificates, kubeconfig); a temporary one when empty")
	fs.BoolVar(&opts.KeepWorkDir, "keep", false, "keep the work directory on exit")
	fs.StringVar(&opts.CacheDir, "cache", "", "cache of built binaries (default $DOCKYARD_CACHE or ~/.cache/dockyard)")
	fs.StringVar(&opts.KubernetesVersion, "kubernetes-version", framework.DefaultKubernetesVersion, "version of kube-apiserver and kube-controller-manager")
	fs.StringVar(&opts.EtcdVersion, "etcd-version", framework.DefaultEtcdVersion, "etcd version")
	fs.StringVar(&opts.ClusterAPIVersion, "cluster-api-version", framework.DefaultClusterAPIVersion, "Cluster API version")
	fs.StringVar(&opts.DockyardBinary, "dockyard-binary", "", "prebuilt Dockyard manager; built from the repository when empty")
	fs.BoolVar(&opts.GuardEngineHost, "guard-engine-host", true, "run Dockyard's manager with --guard-engine-host, as deployed")
	fs.Var(&dockyardArgs, "dockyard-arg", "flag for Dockyard's manager, e.g. --dockyard-arg=--load-balancer-image=... (repeatable)")
	_ = fs.Parse(os.Args[2:])
	opts.DockyardArgs = dockyardArgs
	opts.Log = os.Stderr

	var err error
	switch os.Args[1] {
	case "build":
		err = build(ctx, opts)
	case "up":
		err = up(ctx, opts)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dockyard-mgmt %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func build(ctx context.Context, opts framework.Options) error {
	start := time.Now()
	bins, err := framework.BuildBinaries(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("etcd                          %s\n", bins.Etcd)
	fmt.Printf("kube-apiserver                %s\n", bins.KubeAPIServer)
	fmt.Printf("kube-controller-manager       %s\n", bins.KubeControllerManager)
	fmt.Printf("cluster-api core              %s\n", bins.ClusterAPICore)
	fmt.Printf("cluster-api kubeadm bootstrap %s\n", bins.ClusterAPIKubeadmBootstrap)
	fmt.Printf("cluster-api kubeadm cp        %s\n", bins.ClusterAPIKubeadmControlPlane)
	fmt.Printf("clusterctl                    %s\n", bins.Clusterctl)
	fmt.Printf("cluster-api module            %s\n", bins.ClusterAPIModuleDir)
	fmt.Fprintf(os.Stderr, "done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

func up(ctx context.Context, opts framework.Options) error {
	plane, err := framework.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("export KUBECONFIG=%s\n", plane.Kubeconfig())
	fmt.Printf("# logs: %s; pid %d: kill -USR1 restarts Dockyard's manager, kill -USR2 dumps, Ctrl-C stops\n", plane.LogDir(), os.Getpid())

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(signals)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case s := <-signals:
			if s == syscall.SIGUSR1 {
				if err := plane.RestartDockyard(ctx); err != nil {
					fmt.Fprintf(os.Stderr, "restarting Dockyard's manager: %v\n", err)
				}
			} else {
				plane.Dump(ctx, os.Stdout)
			}
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return plane.Stop(stopCtx)
}
