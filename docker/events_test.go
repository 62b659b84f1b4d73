package docker

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// The watcher hands Dockyard's containers' events to every subscriber, and after the engine's
// stream breaks (an engine restart) it subscribes again and asks for a resync, since events
// were missed.
func TestEngineEventsSurviveABrokenStream(t *testing.T) {
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), testr.New(t)))
	defer cancel()
	rt := inmemory.New("img")
	w := NewEngineEvents(NewManager(rt, ManagerOptions{}))
	a, b := w.Subscribe(), w.Subscribe()
	done := make(chan error)
	go func() { done <- w.Start(ctx) }()
	next := func(ch <-chan Event) Event {
		t.Helper()
		select {
		case e := <-ch:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return Event{}
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

	key := ClusterKey{Namespace: "ns", Name: "c"}
	startFake(t, rt, "stranger", "net", nil)
	startFake(t, rt, "c-node.ns", "net", key.MachineLabels("node"))
	for _, ch := range []<-chan Event{a, b} {
		if e := next(ch); e.Action != "start" || e.Kind != NodeEvent || e.Cluster != key || e.Machine != "node" {
			t.Errorf("event %+v, want the start of node ns/node of cluster ns/c (and nothing of containers without Dockyard's label)", e)
		}
	}

	rt.BreakEvents(errors.New("engine restarted"))
	for _, ch := range []<-chan Event{a, b} {
		if e := next(ch); e.Kind != ResyncEvent {
			t.Errorf("event %+v after the stream broke, want a resync", e)
		}
	}
	rt.StopContainer("c-node.ns", 137)
	if e := next(a); e.Action != "die" || e.Machine != "node" {
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

// The node layer's events say what changed in its own words: a node of a machine, a load
// balancer, a network; the engine's labels stay inside the layer.
func TestEventsInTheNodeLayersWords(t *testing.T) {
	key := ClusterKey{Namespace: "ns", Name: "c"}
	lb := key.labels(roleLoadBalancer)
	cp := key.labels(RoleControlPlane)
	cp[machineLabel] = "ns/c-cp-0"
	mgmt := ClusterKey{Name: "mgmt"}.labels(RoleControlPlane)
	mgmt[machineLabel] = "/control-plane"
	for _, tc := range []struct {
		in   container.Event
		want Event
		ok   bool
	}{
		{container.Event{Type: container.EventContainer, Action: "die", Labels: lb}, Event{Kind: LoadBalancerEvent, Cluster: key, Role: roleLoadBalancer, Action: "die"}, true},
		{container.Event{Type: container.EventContainer, Action: "start", Labels: cp}, Event{Kind: NodeEvent, Cluster: key, Machine: "c-cp-0", Role: RoleControlPlane, Action: "start"}, true},
		{container.Event{Type: container.EventContainer, Action: "destroy", Labels: mgmt}, Event{Kind: NodeEvent, Cluster: ClusterKey{Name: "mgmt"}, Machine: "control-plane", Role: RoleControlPlane, Action: "destroy"}, true},
		{container.Event{Type: container.EventNetwork, Action: "disconnect", Name: "net"}, Event{Kind: NetworkEvent, Action: "disconnect"}, true},
		{container.Event{Type: container.EventContainer, Action: "start", Labels: map[string]string{"other": "x"}}, Event{}, false},
	} {
		got, ok := eventOf(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("eventOf(%+v) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// An engine added to the watcher (before Start or after) is watched until it is removed; then
// its events stop, while the manager's own engine's go on.
func TestEngineEventsOfAddedEnginesStopWhenRemoved(t *testing.T) {
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), testr.New(t)))
	defer cancel()
	own, early, late := inmemory.New("img"), inmemory.New("img"), inmemory.New("img")
	host := NewManager(own, ManagerOptions{})
	earlyNodes, lateNodes := host.ForEngine(early), host.ForEngine(late)
	w := NewEngineEvents(host)
	w.Add(earlyNodes)
	ch := w.Subscribe()
	go func() { _ = w.Start(ctx) }()
	w.Add(lateNodes)
	w.Add(lateNodes) // once is enough: still one watch
	for deadline := time.Now().Add(10 * time.Second); own.CallCount("Events") != 1 || early.CallCount("Events") != 1 || late.CallCount("Events") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("watches: own %d, early %d, late %d, want one each", own.CallCount("Events"), early.CallCount("Events"), late.CallCount("Events"))
		}
	}
	key := ClusterKey{Namespace: "ns", Name: "c"}
	expect := func(rt *inmemory.Runtime, machine string, heard bool) {
		t.Helper()
		startFake(t, rt, machine+".ns", "net", key.MachineLabels(machine))
		select {
		case e := <-ch:
			if !heard || e.Machine != machine {
				t.Errorf("event %+v, want %v of machine %s", e, heard, machine)
			}
		case <-time.After(500 * time.Millisecond):
			if heard {
				t.Errorf("no event of machine %s", machine)
			}
		}
	}
	expect(early, "early", true)
	expect(late, "late", true)
	w.Remove(earlyNodes)
	w.Remove(lateNodes)
	w.Remove(lateNodes) // not watched: nothing to do
	expect(early, "early-2", false)
	expect(late, "late-2", false)
	expect(own, "own", true)
}
