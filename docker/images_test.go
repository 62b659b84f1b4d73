package docker

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

func TestCopyImagesFromLoadsOnceAndKeepsIDs(t *testing.T) {
	ctx := context.Background()
	from := NewManager(inmemory.New("localhost/dockyard/node:v1", "localhost/dockyard/haproxy:latest"), ManagerOptions{})
	to := NewManager(inmemory.New(), ManagerOptions{})
	refs := []string{"localhost/dockyard/node:v1", "localhost/dockyard/haproxy:latest"}
	var log bytes.Buffer
	if err := to.CopyImagesFrom(ctx, from, refs, &log); err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		src, _ := from.runtime.InspectImage(ctx, ref)
		dst, err := to.runtime.InspectImage(ctx, ref)
		if err != nil || dst.ID != src.ID {
			t.Errorf("%s on the target: %v, %v; want ID %s", ref, dst, err, src.ID)
		}
	}
	log.Reset()
	if err := to.CopyImagesFrom(ctx, from, refs, &log); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(log.String(), "already loaded"); got != 2 {
		t.Errorf("a second copy said %q, want both already loaded", log.String())
	}
	if err := to.CopyImagesFrom(ctx, from, []string{"localhost/dockyard/missing:v1"}, &log); err == nil || !strings.Contains(err.Error(), "localhost/dockyard/missing:v1") {
		t.Errorf("copying a missing image: %v", err)
	}
}
