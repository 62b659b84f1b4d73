package main

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/pkg/errors"
	"github.com/spf13/pflag"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

// downEngine is an engine that does not answer.
type downEngine struct{ container.Runtime }

func (downEngine) Info(context.Context) (container.EngineInfo, error) {
	return container.EngineInfo{}, errors.New("dial unix /var/run/docker.sock: connect: connection refused")
}

func TestReadinessFollowsTheEngine(t *testing.T) {
	req := httptest.NewRequest("GET", "/readyz", nil)
	if err := engineCheck(docker.NewManager(fake.New(), docker.ManagerOptions{}))(req); err != nil {
		t.Errorf("an engine that answers: %v", err)
	}
	if err := engineCheck(docker.NewManager(downEngine{}, docker.ManagerOptions{}))(req); err == nil {
		t.Error("ready while the engine does not answer")
	}
}

// clusterctl needs a non-empty default for every variable, so the components pass
// --allowed-host-paths="" (DOCKYARD_ALLOWED_HOST_PATHS unset): that is no host path.
func TestAnEmptyQuotedHostPathListAllowsNone(t *testing.T) {
	var o options
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{`--allowed-host-paths=""`, "--allowed-image-repositories=localhost/dockyard/"}); err != nil {
		t.Fatal(err)
	}
	p, err := o.policy()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.HostPaths) != 0 {
		t.Errorf("host paths %q, want none", p.HostPaths)
	}
	if err := p.CheckImage("kindest/node:v1.34.4"); err != nil {
		t.Errorf("the --node-image-repository default is always allowed: %v", err)
	}
}
