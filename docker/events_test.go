package docker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

// The watcher hands Dockyard's containers' events to every subscriber, and after the engine's
// stream breaks (an engine restart) it subscribes again and asks for a resync, since events
// were missed.
func TestEngineEventsSurviveABrokenStream(t *testing.T) {
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), testr.New(t)))
	defer cancel()
	rt := fake.New("img")
	w := docker.NewEngineEvents(rt)
	a, b := w.Subscribe(), w.Subscribe()
	done := make(chan error)
	go func() { done <- w.Start(ctx) }()
	next := func(ch <-chan container.Event) container.Event {
		t.Helper()
		select {
		case e := <-ch:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return container.Event{}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	waitFor("watching", func() bool { return rt.CallCount("Events") == 1 })

	key := docker.ClusterKey{Namespace: "ns", Name: "c"}
	startFake(t, rt, "stranger", "net", nil)
	startFake(t, rt, "c-node.ns", "net", key.MachineLabels("node"))
	for _, ch := range []<-chan container.Event{a, b} {
		if e := next(ch); e.Action != "start" || e.Name != "c-node.ns" {
			t.Errorf("event %+v, want the start of c-node.ns (and nothing of containers without Dockyard's label)", e)
		}
	}

	rt.BreakEvents(errors.New("engine restarted"))
	for _, ch := range []<-chan container.Event{a, b} {
		if e := next(ch); e.Action != docker.ResyncAction {
			t.Errorf("event %+v after the stream broke, want %s", e, docker.ResyncAction)
		}
	}
	rt.StopContainer("c-node.ns", 137)
	if e := next(a); e.Action != "die" || e.Name != "c-node.ns" {
		t.Errorf("event %+v on the new stream, want die of c-node.ns", e)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return when its context ended")
	}
}
