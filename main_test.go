package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

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
	if err := engineCheck(fake.New())(req); err != nil {
		t.Errorf("an engine that answers: %v", err)
	}
	if err := engineCheck(downEngine{})(req); err == nil {
		t.Error("ready while the engine does not answer")
	}
}
