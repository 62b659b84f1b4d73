// Command manager runs Dockyard's controllers and webhooks (package cmd/manager): a Cluster API
// infrastructure provider whose nodes are containers on a local container engine.
package main

import (
	"os"

	"k8s.io/klog/v2"

	"github.com/dockyard-dev/dockyard/cmd/manager"
)

func main() {
	if err := manager.Main(os.Args[1:]); err != nil {
		klog.Background().Error(err, "Manager failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}
