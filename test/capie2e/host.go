package capie2e

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HostFootprint is what the host did while a spec ran.
type HostFootprint struct {
	// Cores the host has; zero when its CPU counters could not be read (not Linux).
	Cores int
	// BusyMilliCPU is the host's CPU not idle (nor waiting on I/O), in millicores, on average.
	BusyMilliCPU float64
	// PeakLoad1 is the highest one-minute load average sampled.
	PeakLoad1 float64
	// SelfMilliCPU is the spec's own process (the e2e suite and Cluster API's framework in it).
	SelfMilliCPU float64
}

// hostReading is one reading of the host's CPU counters and the process's own CPU time.
type hostReading struct {
	at         time.Time
	busy, all  uint64 // clock ticks, from /proc/stat
	self       time.Duration
	ticksKnown bool
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux architecture Go runs on.
const clockTicks = 100

func readHost() hostReading {
	h := hostReading{at: time.Now()}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		h.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return h
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return h
	}
	// user nice system idle iowait irq softirq steal; guest and guest_nice are in user already.
	for i, f := range fields[1:min(len(fields), 9)] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return h
		}
		h.all += n
		if i != 3 && i != 4 { // idle and iowait
			h.busy += n
		}
	}
	h.ticksKnown = true
	return h
}

// readLoad is the host's one-minute load average, 0 when unknown.
func readLoad() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(raw), " ")
	l, err := strconv.ParseFloat(first, 64)
	if err != nil {
		return 0
	}
	return l
}

func hostFootprint(start, end hostReading, peakLoad float64) HostFootprint {
	elapsed := end.at.Sub(start.at)
	if elapsed <= 0 || !start.ticksKnown || !end.ticksKnown {
		return HostFootprint{}
	}
	h := HostFootprint{Cores: runtime.NumCPU(), PeakLoad1: peakLoad}
	h.BusyMilliCPU = float64(end.busy-start.busy) / clockTicks / elapsed.Seconds() * 1000
	h.SelfMilliCPU = float64(end.self-start.self) / float64(elapsed) * 1000
	return h
}
