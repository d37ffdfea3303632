package tools_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

// workerPeaks samples, every 2 ms until stop is called, the peak resident
// size (VmHWM) of this process's child processes, the sandbox's workers,
// and returns the largest seen. VmHWM is the kernel's high-water mark of
// a process, so a sample after the peak still sees it, as long as the
// worker lives (a worker retired for its memory is killed as its call
// ends: what it reached after the last sample is missed).
func workerPeaks(tb testing.TB) (stop func() int64) {
	tb.Helper()
	self := strconv.Itoa(os.Getpid())
	var (
		mu   sync.Mutex
		peak int64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	sample := func() {
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, s := range stats {
			b, err := os.ReadFile(s)
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...: comm may hold spaces.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 {
				continue
			}
			f := strings.Fields(string(b[i+1:]))
			if len(f) < 2 || f[1] != self {
				continue
			}
			if kb := vmHWM(filepath.Join(filepath.Dir(s), "status")); kb > 0 {
				mu.Lock()
				peak = max(peak, kb<<10)
				mu.Unlock()
			}
		}
	}
	wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// vmHWM reads the VmHWM line (kB) of a /proc/<pid>/status file; 0 when
// it cannot.
func vmHWM(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// growing16MiB is code that adds strings of 16 MiB until its worker's
// memory limit stops it: the case whose peak, before the worker claimed
// its first heap arena's unused remainder at start, passed the 168 MiB a
// worker is counted at (177.3 MiB).
const growing16MiB = "const a = []; for (let i = 0; ; i++) a.push('x'.repeat(1 << 24) + i);"

// BenchmarkCodeWorkerMemory measures the peak resident memory of the
// sandbox worker running a code step, on Linux, where the kernel bounds a
// worker's address space at its size at start plus the code tool's 128
// MiB (tools.SandboxMemory) and the Go runtime's overhead
// (sandbox.RuntimeOverhead). floor: `return 6 * 7`, a warm worker's own
// size. heap_64MiB: code that builds and returns the length of 64 MiB of
// strings, within the bound (the worker is retired after it, its peak
// having passed half the bound). bound_1GiB_string and bound_growing_list:
// code that allocates 1 GiB at once, or strings of 32 MiB until it
// cannot, and bound_growing_list_16MiB strings of 16 MiB, each stopped at the bound (TOOL_RESOURCE_LIMIT, the call's
// failure alone; `timeouts/op` counts the calls that a loaded machine
// cut at their 15 s first, TOOL_TIMEOUT). `peak-MiB` is the largest VmHWM of the pool's workers
// sampled during the case, `x-floor-peak` its ratio to the floor's; the
// bound is what a pool's sizing (mcpfn.SandboxSize: 168 MiB a worker in
// the worst case) counts on.
func BenchmarkCodeWorkerMemory(b *testing.B) {
	r := newRegistry(b, tools.Config{}).WithSandbox(testSandbox(b))
	ctx := context.Background()
	// Warm the pool: every worker started.
	for range 3 {
		if _, err := r.Run(ctx, "code", js("return 1;", nil)); err != nil {
			b.Fatal(err)
		}
	}
	var floor int64
	for _, tc := range []struct {
		name, source string
		limit        bool
	}{
		{"floor", "return 6 * 7;", false},
		{"heap_64MiB", "const a = []; for (let i = 0; i < 64; i++) a.push('x'.repeat(1 << 20) + i); return a.length;", false},
		{"bound_1GiB_string", "return 'x'.repeat(1 << 30).length;", true},
		{"bound_growing_list", "const a = []; for (let i = 0; ; i++) a.push('x'.repeat(1 << 25) + i);", true},
		{"bound_growing_list_16MiB", growing16MiB, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			stop := workerPeaks(b)
			timeouts := 0
			for b.Loop() {
				_, err := r.Run(tools.WithCaller(ctx, "bench"), "code", js(tc.source, nil))
				switch {
				case tc.limit && errs.CodeOf(err) == tools.CodeToolTimeout:
					// A machine loaded enough that the worker's CPU share
					// cannot reach the bound within the call's 15 s.
					timeouts++
				case tc.limit && errs.CodeOf(err) != tools.CodeToolResourceLimit:
					b.Fatalf("%s: %v, want the memory limit", tc.name, err)
				case !tc.limit && err != nil:
					b.Fatalf("%s: %v", tc.name, err)
				}
			}
			peak := stop()
			if peak == 0 {
				b.Skip("no worker's VmHWM could be read")
			}
			if tc.name == "floor" {
				floor = peak
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(timeouts)/float64(b.N), "timeouts/op")
			if floor > 0 {
				b.ReportMetric(float64(peak)/float64(floor), "x-floor-peak")
			}
		})
	}
}
