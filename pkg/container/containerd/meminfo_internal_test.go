package containerd

import "testing"

func TestParseMemTotal(t *testing.T) {
	got, err := parseMemTotal("MemTotal:        8048128 kB\nMemFree:         1234 kB\n")
	if err != nil || got != 8048128*1024 {
		t.Errorf("parseMemTotal: %d, %v; want %d", got, err, 8048128*1024)
	}
	for _, bad := range []string{"", "MemFree: 12 kB\n", "MemTotal: 12\n", "MemTotal: x kB\n", "MemTotal: 0 kB\n"} {
		if got, err := parseMemTotal(bad); err == nil {
			t.Errorf("parseMemTotal(%q) = %d, want an error", bad, got)
		}
	}
	// The host the tests run on has a /proc/meminfo (containerd's host is Linux).
	if mem, err := hostMemory(); err != nil || mem <= 0 {
		t.Errorf("hostMemory: %d, %v", mem, err)
	}
}
