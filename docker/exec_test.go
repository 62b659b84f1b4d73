package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 10}
	for _, s := range []string{"hello ", "world ", "and more"} {
		_, _ = b.Write([]byte(s))
	}
	if got := b.String(); got != "[...] d and more" {
		t.Errorf("got %q", got)
	}
	big := &tailBuffer{max: 4}
	_, _ = big.Write([]byte(strings.Repeat("x", 100) + "tail"))
	if got := big.String(); got != "[...] tail" {
		t.Errorf("got %q", got)
	}
	small := &tailBuffer{max: 100}
	_, _ = small.Write([]byte("short"))
	if got := small.String(); got != "short" {
		t.Errorf("got %q", got)
	}
}

// A node that floods its output costs the manager at most maxExecOutput per stream.
func TestACommandsOutputIsBounded(t *testing.T) {
	rt := inmemory.New("node")
	rt.SetExec(func(_ context.Context, _ *inmemory.Container, opts container.ExecOptions) (int, error) {
		chunk := []byte(strings.Repeat("y", 1<<20) + "\n")
		for range 64 { // 64 MiB
			if _, err := opts.Stdout.Write(chunk); err != nil {
				return -1, err
			}
		}
		return 3, nil
	})
	m := NewManager(rt, ManagerOptions{})
	if err := rt.CreateContainer(context.Background(), container.ContainerSpec{Name: "n", Image: "node"}); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(context.Background(), "n"); err != nil {
		t.Fatal(err)
	}
	r, err := m.run(context.Background(), "n", command{argv: []string{"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stdout) > maxExecOutput+16 || len(r.Output) > maxExecOutput+16 {
		t.Errorf("kept %d and %d bytes of 64 MiB", len(r.Stdout), len(r.Output))
	}
	var execErr *execError
	if err := r.err("n", "yes"); !errors.As(err, &execErr) || execErr.ExitCode != 3 || len(err.Error()) > maxExecOutput+200 {
		t.Errorf("error %T %v", err, execErr)
	}
}
