//go:build linux

// Package sandboxtest lets tests look at a service process and its sandbox
// workers from outside, through /proc, and cap the service's memory as a
// Lambda function's is capped.
package sandboxtest

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/workflowchat/service/shared/sandbox"
)

// Workers returns the pids of the live sandbox worker processes (first
// argument sandbox.WorkerArg) whose parent is pid, sorted.
func Workers(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid ...", where comm may hold spaces and
		// parentheses.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && args[1] == sandbox.WorkerArg {
			out = append(out, child)
		}
	}
	slices.Sort(out)
	return out
}

// LimitedWorkers returns the Workers of pid that have their address space
// and CPU time limits in place (a worker sets them as it starts, before it
// takes a request).
func LimitedWorkers(pid int) []int {
	var out []int
	for _, w := range Workers(pid) {
		if Limited(w) {
			out = append(out, w)
		}
	}
	return out
}

// Limited reports whether process pid has finite soft and hard limits of
// address space and CPU time.
func Limited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return false
	}
	var as, cpu bool
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		finite := len(f) > 4 && f[3] != "unlimited" && f[4] != "unlimited"
		switch {
		case strings.HasPrefix(line, "Max address space"):
			as = finite
		case strings.HasPrefix(line, "Max cpu time"):
			cpu = finite
		}
	}
	return as && cpu
}

// LimitAddressSpace lets process pid's address space grow by at most
// growth bytes from its current size (RLIMIT_AS). Relative, because a Go
// process reserves over 1 GiB of address space, mostly never touched, as
// it starts: a Lambda function's memory is what it may add to that.
func LimitAddressSpace(pid int, growth uint64) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return fmt.Errorf("VmSize %q: %w", v, err)
			}
			lim := unix.Rlimit{Cur: kb<<10 + growth, Max: kb<<10 + growth}
			return unix.Prlimit(pid, unix.RLIMIT_AS, &lim, nil)
		}
	}
	return fmt.Errorf("no VmSize in /proc/%d/status", pid)
}

// CPUTicks returns the CPU time (user plus system, in clock ticks) that
// process pid has used so far, and false when it cannot be read (the
// process is gone).
func CPUTicks(pid int) (int64, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// After "pid (comm) ": state is field 3, utime 14 and stime 15.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return utime + stime, true
}
