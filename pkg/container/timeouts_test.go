package container_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// hung is an engine whose calls never return until their context ends.
type hung struct{ container.Runtime }

func (hung) InspectContainer(ctx context.Context, _ string) (*container.Container, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hung) Exec(ctx context.Context, _ string, _ container.ExecOptions) (int, error) {
	<-ctx.Done()
	return -1, ctx.Err()
}

// slowStream's stream fails once its call's context ended.
type slowStream struct{ container.Runtime }

type ctxReader struct{ ctx context.Context }

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return copy(p, "x"), nil
}
func (r ctxReader) Close() error { return nil }

func (slowStream) SaveImages(ctx context.Context, _ []string) (io.ReadCloser, error) {
	return ctxReader{ctx}, nil
}

func TestCallsEndAtTheirDeadline(t *testing.T) {
	rt := container.WithTimeouts(hung{inmemory.New()}, container.Timeouts{Call: 50 * time.Millisecond, Transfer: time.Second})
	ctx := context.Background()
	start := time.Now()
	if _, err := rt.InspectContainer(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("inspect: %v, want the deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("hung calls took %s", took)
	}
	// A command's deadline is its caller's (the node layer's exec helper), not the decorator's.
	execCtx, cancel := context.WithTimeout(ctx, 80*time.Millisecond)
	defer cancel()
	if _, err := rt.Exec(execCtx, "x", container.ExecOptions{Cmd: []string{"true"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("exec: %v, want its caller's deadline", err)
	}
}

func TestStreamsKeepTheirDeadlineUntilClosed(t *testing.T) {
	rt := container.WithTimeouts(slowStream{inmemory.New()}, container.Timeouts{Call: time.Second, Transfer: 100 * time.Millisecond})
	rc, err := rt.SaveImages(context.Background(), []string{"img"})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// Readable now (the call returned, its deadline still runs)...
	if _, err := rc.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the stream ended with its call: %v", err)
	}
	// ...and not past it.
	time.Sleep(200 * time.Millisecond)
	if _, err := io.ReadAll(rc); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("read past the transfer deadline: %v", err)
	}
}

// An engine that did not answer in time is left alone for a while: calls fail at once, saying
// why, instead of each waiting for the deadline; it is asked again after.
func TestAnEngineThatDidNotAnswerIsLeftAloneAWhile(t *testing.T) {
	rt := container.WithTimeouts(hung{inmemory.New()}, container.Timeouts{Call: 50 * time.Millisecond, Transfer: time.Second, Quiet: 300 * time.Millisecond})
	ctx := context.Background()
	if _, err := rt.InspectContainer(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("inspect: %v, want the deadline", err)
	}
	start := time.Now()
	_, err := rt.ListContainers(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "not asked again before") || !strings.Contains(err.Error(), "did not answer within 50ms") {
		t.Errorf("a call while the engine is left alone: %v", err)
	}
	if took := time.Since(start); took > 40*time.Millisecond {
		t.Errorf("a call while the engine is left alone took %s, want at once", took)
	}
	time.Sleep(350 * time.Millisecond)
	// One call asks it again (and finds it still hung): the others fail at once meanwhile, and
	// after, for another quiet time.
	probed := make(chan error)
	go func() { _, err := rt.InspectContainer(ctx, "x"); probed <- err }()
	time.Sleep(10 * time.Millisecond)
	if _, err := rt.ListContainers(ctx, nil); err == nil || !strings.Contains(err.Error(), "not asked again") {
		t.Errorf("a call while another asks the engine again: %v", err)
	}
	if err := <-probed; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the call asking again: %v, want the deadline", err)
	}
	if _, err := rt.ListContainers(ctx, nil); err == nil {
		t.Error("the engine was asked again right after it did not answer the probe")
	}
	time.Sleep(350 * time.Millisecond)
	if _, err := rt.ListContainers(ctx, nil); err != nil {
		t.Errorf("the engine answered the probe after its quiet time: %v", err)
	}
	if _, err := rt.ListContainers(ctx, nil); err != nil {
		t.Errorf("the engine is not asked as usual after it answered: %v", err)
	}
	// A caller's own deadline says nothing of the engine.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := rt.InspectContainer(short, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("inspect: %v, want the caller's deadline", err)
	}
	if _, err := rt.ListContainers(ctx, nil); err != nil {
		t.Errorf("the engine was left alone for its caller's deadline: %v", err)
	}
}
