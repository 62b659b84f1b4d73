package imagebuild

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

func TestTransferLoadsOnceAndKeepsIDs(t *testing.T) {
	ctx := context.Background()
	from, to := fake.New("localhost/dockyard/node:v1", "localhost/dockyard/haproxy:latest"), fake.New()
	refs := []string{"localhost/dockyard/node:v1", "localhost/dockyard/haproxy:latest"}
	var log bytes.Buffer
	if err := Transfer(ctx, from, to, refs, &log); err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		src, _ := from.InspectImage(ctx, ref)
		dst, err := to.InspectImage(ctx, ref)
		if err != nil || dst.ID != src.ID {
			t.Errorf("%s on the target: %v, %v; want ID %s", ref, dst, err, src.ID)
		}
	}
	log.Reset()
	if err := Transfer(ctx, from, to, refs, &log); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(log.String(), "already loaded"); got != 2 {
		t.Errorf("a second transfer said %q, want both already loaded", log.String())
	}
	if err := Transfer(ctx, from, to, []string{"localhost/dockyard/missing:v1"}, &log); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Errorf("transferring a missing image: %v", err)
	}
}
