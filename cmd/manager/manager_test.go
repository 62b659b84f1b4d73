package manager

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pkg/errors"
	"github.com/spf13/pflag"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// downEngine is an engine that does not answer.
type downEngine struct{ container.Runtime }

func (downEngine) Info(context.Context) (container.EngineInfo, error) {
	return container.EngineInfo{}, errors.New("dial unix /var/run/docker.sock: connect: connection refused")
}

func TestReadinessFollowsTheEngine(t *testing.T) {
	req := httptest.NewRequest("GET", "/readyz", nil)
	if err := engineCheck(docker.NewManager(inmemory.New(), docker.ManagerOptions{}))(req); err != nil {
		t.Errorf("an engine that answers: %v", err)
	}
	if err := engineCheck(docker.NewManager(downEngine{inmemory.New()}, docker.ManagerOptions{}))(req); err == nil {
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

// TestComponentArgsParseWithTheirDefaults parses the manager's arguments as clusterctl init
// writes them when no variable is set: each ${DOCKYARD_X:=default} becomes its default, quotes
// and all (an empty list is `""`). A flag that cannot read its default stops the manager at
// start on every management cluster.
func TestComponentArgsParseWithTheirDefaults(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := regexp.MustCompile(`\$\{[A-Z0-9_]+:=([^}]*)\}`)
	var args []string
	for _, line := range strings.Split(string(raw), "\n") {
		arg, ok := strings.CutPrefix(strings.TrimSpace(line), "- --")
		if !ok {
			continue
		}
		args = append(args, "--"+defaults.ReplaceAllString(arg, "$1"))
	}
	if len(args) < 10 {
		t.Fatalf("found %d manager arguments in config/manager/manager.yaml: %q", len(args), args)
	}
	var o options
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the manager's arguments with their defaults: %v\n%q", err, args)
	}
	if _, err := o.policy(); err != nil {
		t.Errorf("the policy of the default arguments: %v", err)
	}
	if ports, err := o.openPorts(); err != nil || len(ports) != 0 {
		t.Errorf("management ports open to workloads by default: %v (%v), want none", ports, err)
	}
}

func TestManagementPortsOpenToWorkloads(t *testing.T) {
	for _, tc := range []struct {
		arg     string
		want    []int
		wantErr bool
	}{
		{arg: `""`},
		{arg: "6443", want: []int{6443}},
		{arg: "6443,10250", want: []int{6443, 10250}},
		{arg: "0", wantErr: true},
		{arg: "70000", wantErr: true},
		{arg: "api", wantErr: true},
	} {
		var o options
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse([]string{"--management-ports-open-to-workloads=" + tc.arg}); err != nil {
			t.Fatal(err)
		}
		got, err := o.openPorts()
		if (err != nil) != tc.wantErr || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: got %v, %v; want %v (error: %v)", tc.arg, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "--management-ports-open-to-workloads") {
			t.Errorf("%s: the error does not name the flag: %v", tc.arg, err)
		}
	}
}

// docs/flags.md names every flag of the manager, and no flag it does not have.
func TestTheFlagsReferenceIsComplete(t *testing.T) {
	var o options
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.addFlags(fs)
	have := map[string]bool{"kubeconfig": true}
	fs.VisitAll(func(f *pflag.Flag) { have[f.Name] = true })
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`(--?[a-z][a-z0-9-]*)`").FindAllStringSubmatch(string(doc), -1) {
		name := strings.TrimLeft(m[1], "-")
		named[name] = true
		if !have[name] {
			t.Errorf("docs/flags.md names --%s, which the manager does not have", name)
		}
	}
	for name := range have {
		if !named[name] {
			t.Errorf("docs/flags.md does not name --%s", name)
		}
	}
}

// Listening on every address, the manager needs the name in-memory endpoints carry: 0.0.0.0 is
// no address a client can dial.
func TestInMemoryAddressOfEveryInterfaceNeedsAHost(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr bool
	}{
		{args: []string{"--in-memory-address=0.0.0.0"}, wantErr: true},
		{args: []string{"--in-memory-address=::"}, wantErr: true},
		{args: []string{"--in-memory-address=0.0.0.0", "--in-memory-host=dockyard-in-memory.dockyard-system.svc"}},
		{args: []string{"--in-memory-address=10.244.0.7"}},
	} {
		var o options
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := o.validate()
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want one: %t", tc.args, err, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "--in-memory-host") {
			t.Errorf("%q: the error %q does not name --in-memory-host", tc.args, err)
		}
	}
}
