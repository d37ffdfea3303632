package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// limitsEnforced: on Linux a worker must report its address space and CPU
// limits.
const limitsEnforced = true

// sysProcAttr: a worker is killed when the pool's process dies, and has
// its own process group, so a terminal's Ctrl+C reaches the service (which
// closes its pool) but not its workers directly.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

func selfPath() (string, error) { return "/proc/self/exe", nil }

// applyLimits sets this worker's RLIMIT_AS to its current address space
// size plus mem and RuntimeOverhead, its RLIMIT_CPU (soft and hard) to
// cpu rounded up to whole seconds, and RLIMIT_CORE to 0. A limit is never
// raised above the hard limit the process inherited.
func applyLimits(mem int64, cpu time.Duration) hello {
	h := hello{PID: os.Getpid()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		h.StartMaxRSS = ru.Maxrss << 10
	}
	size, err := statusKB("VmSize")
	if err != nil {
		h.Error = err.Error()
		return h
	}
	if h.AddressSpace, err = setLimit(syscall.RLIMIT_AS, size+uint64(mem)+RuntimeOverhead); err != nil {
		h.Error = "RLIMIT_AS: " + err.Error()
		return h
	}
	if h.CPUSeconds, err = setLimit(syscall.RLIMIT_CPU, uint64((cpu+time.Second-1)/time.Second)); err != nil {
		h.Error = "RLIMIT_CPU: " + err.Error()
		return h
	}
	if _, err = setLimit(syscall.RLIMIT_CORE, 0); err != nil {
		h.Error = "RLIMIT_CORE: " + err.Error()
	}
	return h
}

// setLimit sets resource's soft and hard limits to v (at most the current
// hard limit) and returns the limit read back.
func setLimit(resource int, v uint64) (uint64, error) {
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(resource, &cur); err != nil {
		return 0, err
	}
	v = min(v, cur.Max)
	if err := syscall.Setrlimit(resource, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
		return 0, err
	}
	if err := syscall.Getrlimit(resource, &cur); err != nil {
		return 0, err
	}
	if cur.Cur != v || cur.Max != v {
		return 0, fmt.Errorf("set to %d, reads back %d/%d", v, cur.Cur, cur.Max)
	}
	return v, nil
}

// statusKB reads a size of this process from /proc/self/status, in
// bytes: VmSize (its address space) or VmHWM (its peak resident size
// since its exec).
func statusKB(field string) (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// usage returns this process's CPU time and its own peak resident set
// size: VmHWM, which the kernel keeps per address space, so it starts
// afresh at the worker's exec. (getrusage's ru_maxrss would not do: the
// kernel carries it over the exec from the parent's; see
// hello.StartMaxRSS.)
func usage() (time.Duration, int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	peak, _ := statusKB("VmHWM")
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(peak)
}

// exitInfo reports whether a dead worker was killed by SIGKILL or SIGXCPU
// (as the CPU limit does) and the peak resident set size of its exit
// status: the larger of its own and its parent's when it started (see
// hello.StartMaxRSS).
func exitInfo(state *os.ProcessState) (cpuKill bool, peakRSS int64) {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		cpuKill = ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGXCPU
	}
	if ru, ok := state.SysUsage().(*syscall.Rusage); ok {
		peakRSS = ru.Maxrss << 10
	}
	return cpuKill, peakRSS
}
