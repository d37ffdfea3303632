package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
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

// heapArenaBytes is the unit in which the Go runtime reserves its heap's
// address space on 64-bit Linux.
const heapArenaBytes = 64 << 20

// claimHeapRemainder pins, untouched, the part of the Go heap's first
// arena that the runtime reserved as it started but has not used yet, and
// returns the blocks to keep alive, their size, and the address space
// size (VmSize) before the runtime reserved its next arena.
//
// Why: the runtime reserves its heap 64 MiB at a time, and the first
// arena is reserved (counted in VmSize) before the worker sets its
// RLIMIT_AS. A limit of VmSize plus Memory lets the heap fill that
// arena's remainder, which costs no address space, on top of Memory; and
// the runtime starts its heap at a random offset in that arena, so the
// remainder, anywhere from 0 to 64 MiB, made a worker's peak vary by as
// much (177 MiB against the 168 counted, with strings of 16 MiB). Pinned,
// the remainder is never resident (fresh pages are known to be zero: a
// large allocation does not write them) and never handed out again, so
// the heap grows only in arenas the limit counts: the limit is set from
// the returned size, the next arena included, and Memory's 128 MiB then
// holds exactly two arenas whatever the offset.
//
// The collector is off meanwhile, so that it starts no thread; a growth
// of VmSize by less than an arena (a thread's stack) is taken as part of
// the start size.
func claimHeapRemainder() (keep [][]byte, claimed int64, base uint64, err error) {
	prev := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(prev)
	if base, err = statusKB("VmSize"); err != nil {
		return nil, 0, 0, err
	}
	const block = 1 << 20
	for range 2 * heapArenaBytes / block {
		b := make([]byte, block)
		size, err := statusKB("VmSize")
		if err != nil {
			return nil, 0, 0, err
		}
		if size >= base+heapArenaBytes {
			// b is the first block of the next arena: left to the heap.
			return keep, claimed, base, nil
		}
		keep, claimed, base = append(keep, b), claimed+block, size
	}
	return nil, 0, 0, errors.New("the Go heap reserved no new arena after 128 MiB of blocks")
}

// applyLimits sets this worker's RLIMIT_AS to base (its address space size
// before the heap's next arena; see claimHeapRemainder) plus mem and
// RuntimeOverhead, its RLIMIT_CPU (soft and hard) to cpu rounded up to
// whole seconds, and RLIMIT_CORE to 0. A limit is never raised above the
// hard limit the process inherited.
func applyLimits(mem int64, cpu time.Duration, base uint64) hello {
	h := hello{PID: os.Getpid()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		h.StartMaxRSS = ru.Maxrss << 10
	}
	var err error
	if h.AddressSpace, err = setLimit(syscall.RLIMIT_AS, base+uint64(mem)+RuntimeOverhead); err != nil {
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
