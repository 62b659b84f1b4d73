package docker

import (
	"os"
	"testing"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestMain gives the node layer's logs (ctrl.LoggerFrom of a context without a logger) klog's
// logger, as the manager does, so a failing test shows them and controller-runtime does not print
// a stack trace that looks like a failure.
func TestMain(m *testing.M) {
	ctrl.SetLogger(klog.Background())
	os.Exit(m.Run())
}
