package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkg/errors"
)

// Ports are distinct, free, and outside the kernel's ephemeral range, where outgoing
// connections would take them.
func TestFreePortsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := pickRange()
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatalf("the kernel's ephemeral range: %v", err)
	}
	var eLo, eHi int
	if _, err := fmt.Sscan(string(raw), &eLo, &eHi); err != nil {
		t.Fatal(err)
	}
	ports, err := freePorts(16)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p < lo || p > hi || (p >= eLo && p <= eHi) {
			t.Errorf("port %d: duplicate, outside %d-%d, or in the ephemeral range %d-%d", p, lo, hi, eLo, eHi)
		}
		seen[p] = true
	}
	if len(ports) != 16 {
		t.Errorf("%d ports, want 16", len(ports))
	}
}

// A process that exits saying its address is in use fails its wait with errPortTaken, so Start
// starts again; any other exit does not.
func TestWaitReadyTellsATakenPort(t *testing.T) {
	for name, tc := range map[string]struct {
		says  string
		taken bool
	}{
		"address in use": {says: "failed to create listener: listen tcp 127.0.0.1:42291: bind: address already in use", taken: true},
		"another error":  {says: "unknown flag: --nope", taken: false},
	} {
		t.Run(name, func(t *testing.T) {
			proc := &process{
				name: "proc", path: "/bin/sh", args: []string{"-c", "echo '" + tc.says + "'; exit 1"},
				logPath: filepath.Join(t.TempDir(), "proc.log"),
				ready:   func(context.Context) error { return errors.New("not serving") },
			}
			if err := proc.start(); err != nil {
				t.Fatal(err)
			}
			err := proc.waitReady(context.Background(), time.Minute)
			if err == nil {
				t.Fatal("waitReady of a process that exited succeeded")
			}
			if got := errors.Is(err, errPortTaken); got != tc.taken {
				t.Errorf("errors.Is(%v, errPortTaken) = %v, want %v", err, got, tc.taken)
			}
		})
	}
}
