//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/gobuild"
	"github.com/workflowchat/service/shared/sandbox"
)

// workerBin is internal/testworker, built without the race detector
// whatever this test binary's flags: the race runtime's shadow memory
// counts against RLIMIT_AS, so a race-enabled worker would not measure
// what production workers do.
var workerBin string

func TestMain(m *testing.M) {
	bin, remove, err := gobuild.ForMain("testworker", "./internal/testworker")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// newPool returns a pool of testworker processes with generous limits,
// changed by edit, closed when the test ends. Its two workers serve one
// evaluation per key at once; do uses one key, and the pool serves
// sequential evaluations from the same warm worker.
func newPool(t *testing.T, edit func(*sandbox.Options)) *sandbox.Pool {
	t.Helper()
	o := sandbox.Options{
		Path:        workerBin,
		Workers:     2,
		PerKey:      1,
		Memory:      256 << 20,
		CPUBudget:   20 * time.Second,
		CPULimit:    60 * time.Second,
		MaxResponse: 1 << 20,
		Logger:      slog.New(slog.DiscardHandler),
	}
	if edit != nil {
		edit(&o)
	}
	p, err := sandbox.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// do runs one command under key "test" and fails the test on an error.
func do(t *testing.T, p *sandbox.Pool, cmd string) string {
	t.Helper()
	return doAs(t, p, "test", cmd)
}

// doAs runs one command under key and fails the test on an error.
func doAs(t *testing.T, p *sandbox.Pool, key, cmd string) string {
	t.Helper()
	out, err := p.Do(context.Background(), key, []byte(cmd))
	if err != nil {
		t.Fatalf("Do(%q): %v", cmd, err)
	}
	return string(out)
}

func pid(t *testing.T, p *sandbox.Pool) int {
	t.Helper()
	n, err := strconv.Atoi(do(t, p, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// exists reports whether process pid exists (a zombie included).
func exists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// limits returns the soft and hard values of a /proc/pid/limits row.
func limits(t *testing.T, pid int, row string) (soft, hard string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, row); ok {
			f := strings.Fields(rest)
			return f[0], f[1]
		}
	}
	t.Fatalf("no %q in /proc/%d/limits", row, pid)
	return "", ""
}

func vmSize(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmSize")
	return 0
}

func expectLimit(t *testing.T, err error, want sandbox.Resource) *sandbox.LimitError {
	t.Helper()
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Resource != want {
		t.Fatalf("err = %v (%T), want a %s LimitError", err, err, want)
	}
	return le
}

// TestWorkerProcess checks what a worker is: a separate process with an
// empty environment but for its limits, GOMAXPROCS=1, and the kernel
// limits it set on itself before its first request.
func TestWorkerProcess(t *testing.T) {
	t.Parallel()
	const mem = 96 << 20
	p := newPool(t, func(o *sandbox.Options) { o.Memory = mem; o.CPULimit = 45 * time.Second })
	warm(t, p)
	if got := do(t, p, "echo hello"); got != "hello" {
		t.Errorf("echo = %q", got)
	}
	w := pid(t, p)
	if w == os.Getpid() {
		t.Fatal("the worker is this process")
	}
	env := strings.Split(do(t, p, "env"), "\n")
	slices.Sort(env)
	want := []string{"GOMAXPROCS=1", "MALLOC_ARENA_MAX=1", "SANDBOX_CPU_LIMIT=45", "SANDBOX_MAX_RESPONSE=1048576", "SANDBOX_MEMORY=" + strconv.Itoa(mem)}
	if !slices.Equal(env, want) {
		t.Errorf("worker environment %q, want only %q", env, want)
	}

	soft, hard := limits(t, w, "Max address space")
	as, err := strconv.ParseUint(soft, 10, 64)
	if err != nil || soft != hard {
		t.Fatalf("RLIMIT_AS %s/%s, want a number, soft = hard", soft, hard)
	}
	// The limit is the size at start plus mem and the runtime's overhead;
	// the worker has grown a little since, never past it.
	if size := vmSize(t, w); as < size || as-size > mem+sandbox.RuntimeOverhead {
		t.Errorf("RLIMIT_AS %d with VmSize %d: want VmSize < limit <= VmSize + %d", as, size, mem+sandbox.RuntimeOverhead)
	}
	if soft, hard := limits(t, w, "Max cpu time"); soft != "45" || hard != "45" {
		t.Errorf("RLIMIT_CPU %s/%s, want 45/45", soft, hard)
	}
	if soft, hard := limits(t, w, "Max core file size"); soft != "0" || hard != "0" {
		t.Errorf("RLIMIT_CORE %s/%s, want 0/0", soft, hard)
	}
	// Cheap evaluations keep the same warm worker.
	for range 5 {
		if got := pid(t, p); got != w {
			t.Fatalf("worker changed from %d to %d without cause", w, got)
		}
	}
}

// TestDeadlineKillsWorker: an evaluation that ignores its deadline is
// killed when the deadline passes, the worker is reaped before Do returns,
// and a new worker serves the next request.
func TestDeadlineKillsWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, nil)
	before := pid(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out, err := p.Do(ctx, "test", []byte("spin"))
	if !errors.Is(err, context.DeadlineExceeded) || out != nil {
		t.Fatalf("spin past the deadline: %q, %v; want context.DeadlineExceeded", out, err)
	}
	if exists(before) {
		t.Errorf("worker %d still exists after its deadline", before)
	}
	if after := pid(t, p); after == before {
		t.Errorf("the killed worker %d serves again", before)
	}
}

// TestCanceledWhileWaiting: a request whose context is already done does
// not reach a worker.
func TestCanceledWhileWaiting(t *testing.T) {
	t.Parallel()
	p := newPool(t, nil)
	warm(t, p)
	w := pid(t, p)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Repeatedly: a free worker and a done context are both ready at
	// once, and the context must win every time.
	for range 50 {
		if _, err := p.Do(ctx, "test", []byte("touch "+filepath.Join(dir, "ran"))); !errors.Is(err, context.Canceled) {
			t.Fatalf("Do with a canceled context: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the request ran")
	}
	if got := pid(t, p); got != w {
		t.Errorf("worker %d replaced by %d: a canceled request reached it and it was killed", w, got)
	}
}

// TestWorkerDeathReplaced: a worker that exits during an evaluation is a
// CrashError, and another worker serves the next request.
func TestWorkerDeathReplaced(t *testing.T) {
	t.Parallel()
	p := newPool(t, nil)
	before := pid(t, p)
	_, err := p.Do(context.Background(), "test", []byte("exit 3"))
	var ce *sandbox.CrashError
	if !errors.As(err, &ce) || !strings.Contains(ce.Detail, "exit status 3") {
		t.Fatalf("exit 3: %v, want a CrashError naming the exit status", err)
	}
	if after := pid(t, p); after == before || exists(before) {
		t.Errorf("worker %d after the death of %d (still there: %v)", after, before, exists(before))
	}
}

// TestMemoryLimit: an allocation past the memory limit, or a stack past
// its maximum, stops the worker with a memory LimitError; allocations
// under it succeed, and the pool serves on.
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	const mem = 128 << 20
	p := newPool(t, func(o *sandbox.Options) { o.Memory = mem })
	if got := do(t, p, "alloc 32"); got != "allocated" {
		t.Fatalf("alloc 32 MiB under a 128 MiB limit: %q", got)
	}
	for _, cmd := range []string{"alloc 512", "recurse"} {
		_, err := p.Do(context.Background(), "test", []byte(cmd))
		le := expectLimit(t, err, sandbox.Memory)
		if le.Limit != mem {
			t.Errorf("%s: limit %d, want %d", cmd, le.Limit, mem)
		}
		// The worker's own peak, where its exit status tells it, stays
		// within what a pool's host counts a worker at: its start size
		// (about 14 MiB, counted as 16) plus mem plus the runtime's
		// overhead. (The heap once filled its first arena's unused part
		// uncounted, up to 64 MiB more.)
		const counted = 16<<20 + mem + sandbox.RuntimeOverhead
		if le.PeakRSS > counted {
			t.Errorf("%s: worker peaked at %d MiB, above the %d MiB counted", cmd, le.PeakRSS>>20, counted>>20)
		}
		t.Logf("%s: peak at exit %d MiB (0: not known)", cmd, le.PeakRSS>>20)
		if got := do(t, p, "echo after"); got != "after" {
			t.Errorf("after %s: %q", cmd, got)
		}
	}
}

// TestHeapArenasFit: the Go runtime maps its heap in 64 MiB arenas, with
// metadata and thread stacks beside them; a heap that needs two arenas
// fits a 128 MiB limit, also in a worker that has started more threads
// (in a binary linked with C each thread used to cost a 64 MiB malloc
// arena of address space).
func TestHeapArenasFit(t *testing.T) {
	t.Parallel()
	p := newPool(t, func(o *sandbox.Options) { o.Memory = 128 << 20 })
	if got := do(t, p, "alloc 96"); got != "allocated" {
		t.Fatalf("alloc 96 MiB (two heap arenas) under a 128 MiB limit: %q", got)
	}
	q := newPool(t, func(o *sandbox.Options) { o.Memory = 128 << 20 })
	w := pid(t, q)
	if got := do(t, q, "threads 2"); got != "threads" {
		t.Fatalf("threads 2: %q", got)
	}
	if got := do(t, q, "pid"); got != strconv.Itoa(w) {
		t.Fatalf("the threads are in worker %d, the next evaluation in %s", w, got)
	}
	if got := do(t, q, "alloc 96"); got != "allocated" {
		t.Fatalf("alloc 96 MiB after two more threads: %q", got)
	}
}

// TestPeakIsTheWorkersOwn: a worker's peak memory is its own, not its
// parent's. The kernel carries a process's peak RSS over an exec, and a Go
// parent starts a child in its own address space, so getrusage in a
// worker (and the exit status) report the parent's peak when it is
// larger. Here the parent's peak is over half the workers' memory: a
// worker that measured it would be retired after every evaluation, and
// its CPU limit would read as a memory limit.
func TestPeakIsTheWorkersOwn(t *testing.T) {
	t.Parallel()
	const mem = 128 << 20
	big := make([]byte, 3*mem)
	for i := range big {
		big[i] = 1
	}
	p := newPool(t, func(o *sandbox.Options) { o.Memory = mem })
	warm(t, p)
	w := pid(t, p)
	if got := do(t, p, "echo small"); got != "small" {
		t.Fatal(got)
	}
	if got := pid(t, p); got != w {
		t.Errorf("worker %d retired after a small evaluation, replaced by %d: its parent's peak was taken for its own", w, got)
	}

	q := newPool(t, func(o *sandbox.Options) {
		o.Memory = mem
		o.CPUBudget = 500 * time.Millisecond
		o.CPULimit = time.Second
	})
	_, err := q.Do(context.Background(), "test", []byte("spin"))
	expectLimit(t, err, sandbox.CPU)

	r := newPool(t, func(o *sandbox.Options) { o.Memory = mem })
	_, err = r.Do(context.Background(), "test", []byte("alloc 512"))
	le := expectLimit(t, err, sandbox.Memory)
	if m := regexp.MustCompile(`peak RSS (\d+) MiB`).FindStringSubmatch(le.Detail); m != nil {
		if n, _ := strconv.Atoi(m[1]); n >= len(big)>>20 {
			t.Errorf("the memory limit's detail %q reports the parent's peak as the worker's", le.Detail)
		}
	}
	runtime.KeepAlive(big)
}

// TestCPULimit: a worker that runs past its CPU limit with no deadline is
// killed by the kernel (RLIMIT_CPU's hard limit, SIGKILL), a CPU
// LimitError.
func TestCPULimit(t *testing.T) {
	t.Parallel()
	p := newPool(t, func(o *sandbox.Options) { o.CPUBudget = 500 * time.Millisecond; o.CPULimit = time.Second })
	_, err := p.Do(context.Background(), "test", []byte("spin"))
	expectLimit(t, err, sandbox.CPU)
	if got := do(t, p, "echo after"); got != "after" {
		t.Errorf("after the CPU limit: %q", got)
	}
}

// TestRetirement: a worker that has used its CPU budget, or whose memory
// peaked over half the limit, is replaced after its evaluation, which
// itself succeeds.
func TestRetirement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*sandbox.Options)
		cmd  string
		want string
	}{
		{"CPU budget", func(o *sandbox.Options) { o.CPUBudget = 50 * time.Millisecond }, "burn 100", "burnt"},
		{"memory peak", func(o *sandbox.Options) { o.Memory = 256 << 20 }, "alloc 150", "allocated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPool(t, tc.edit)
			before := pid(t, p)
			if got := do(t, p, tc.cmd); got != tc.want {
				t.Fatalf("%s = %q, want %q", tc.cmd, got, tc.want)
			}
			if after := pid(t, p); after == before {
				t.Errorf("worker %d was not retired", before)
			}
		})
	}
}

// TestConcurrencyBound: with every worker busy, a request waits for one
// as long as its context allows and never runs meanwhile; once a worker
// is free, a waiting request runs.
func TestConcurrencyBound(t *testing.T) {
	t.Parallel()
	p := newPool(t, nil)
	dir := t.TempDir()
	releases := []string{filepath.Join(dir, "r1"), filepath.Join(dir, "r2")}
	var wg sync.WaitGroup
	for i, r := range releases {
		wg.Go(func() {
			if got := doAs(t, p, fmt.Sprint("holder", i), "hold "+r); got != "released" {
				t.Errorf("hold = %q", got)
			}
		})
	}
	for _, r := range releases {
		waitFor(t, r+".started")
	}

	ran := filepath.Join(dir, "ran")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.Do(ctx, "third", []byte("touch "+ran)); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for a free worker") {
		t.Fatalf("a third request with both workers busy: %v, want it to time out waiting", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the third request ran although both workers were busy")
	}
	if st := p.Stats(); st != (sandbox.Stats{Running: 2}) {
		t.Errorf("stats after the wait ended: %+v, want 2 running, none waiting", st)
	}

	waiting := make(chan string, 1)
	go func() {
		out, err := p.Do(context.Background(), "third", []byte("touch "+ran))
		if err != nil {
			out = []byte(err.Error())
		}
		waiting <- string(out)
	}()
	for _, r := range releases {
		if err := os.WriteFile(r, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if got := <-waiting; got != "touched" {
		t.Errorf("the waiting request: %q", got)
	}
}

// holder is an evaluation of the testworker's "hold" command in flight.
type holder struct {
	path string      // the file that releases it
	out  chan string // its answer or error
}

// startHold sends "hold" under key in the background.
func startHold(t *testing.T, p *sandbox.Pool, key, path string) *holder {
	t.Helper()
	h := &holder{path: path, out: make(chan string, 1)}
	go func() {
		out, err := p.Do(context.Background(), key, []byte("hold "+path))
		if err != nil {
			out = []byte(err.Error())
		}
		h.out <- string(out)
	}()
	return h
}

func (h *holder) started() bool {
	_, err := os.Stat(h.path + ".started")
	return err == nil
}

// release lets h's evaluation end and waits for its answer.
func (h *holder) release(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(h.path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := <-h.out; got != "released" {
		t.Errorf("hold %s: %q", h.path, got)
	}
}

// waitStats waits up to 10 min for p's stats to be want (a bound for a
// stuck pool, not a measure of its speed).
func waitStats(t *testing.T, p *sandbox.Pool, want sandbox.Stats) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for p.Stats() != want {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want %+v", p.Stats(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestAdmissionPerKey: one key runs at most PerKey evaluations at once;
// a freed worker goes to the earliest waiter whose key is under its cap,
// so a waiter of a key at its cap does not hold back a later waiter of
// another key, and among waiters under their caps arrival order holds.
// Every step is observed (files, Stats), never timed.
func TestAdmissionPerKey(t *testing.T) {
	t.Parallel()
	p := newPool(t, func(o *sandbox.Options) { o.Workers = 3; o.PerKey = 2 })
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }

	a1 := startHold(t, p, "a", path("a1"))
	a2 := startHold(t, p, "a", path("a2"))
	b1 := startHold(t, p, "b", path("b1"))
	for _, h := range []*holder{a1, a2, b1} {
		waitFor(t, h.path+".started")
	}
	waitStats(t, p, sandbox.Stats{Running: 3})

	// Queue a3, b2, c1 in this order: each is waiting before the next
	// arrives.
	a3 := startHold(t, p, "a", path("a3"))
	waitStats(t, p, sandbox.Stats{Running: 3, Waiting: 1})
	b2 := startHold(t, p, "b", path("b2"))
	waitStats(t, p, sandbox.Stats{Running: 3, Waiting: 2})
	c1 := startHold(t, p, "c", path("c1"))
	waitStats(t, p, sandbox.Stats{Running: 3, Waiting: 3})

	// b1 frees a worker: a3 came first but "a" is at its cap (a1, a2),
	// so b2 gets it.
	b1.release(t)
	waitFor(t, b2.path+".started")
	if st := p.Stats(); st != (sandbox.Stats{Running: 3, Waiting: 2}) {
		t.Errorf("after b1: %+v, want 3 running (a1 a2 b2), 2 waiting (a3 c1)", st)
	}
	if a3.started() || c1.started() {
		t.Errorf("after b1, a3 started %v, c1 started %v; want b2 alone", a3.started(), c1.started())
	}

	// a1 frees a worker: "a" is under its cap again and a3 arrived before
	// c1.
	a1.release(t)
	waitFor(t, a3.path+".started")
	if c1.started() {
		t.Error("after a1, c1 started before a3, which arrived first")
	}

	// Another "a" arrives while a2 and a3 run: it waits, and c1, earlier
	// and under its cap, gets the next worker.
	a4 := startHold(t, p, "a", path("a4"))
	waitStats(t, p, sandbox.Stats{Running: 3, Waiting: 2})
	b2.release(t)
	waitFor(t, c1.path+".started")
	if a4.started() {
		t.Error("a4 runs while a2 and a3 do: over the per-key cap")
	}
	waitStats(t, p, sandbox.Stats{Running: 3, Waiting: 1})

	for _, h := range []*holder{a2, a3, c1} {
		h.release(t)
	}
	waitFor(t, a4.path+".started")
	a4.release(t)
	waitStats(t, p, sandbox.Stats{})
}

// waitFor waits up to 30 s for path to exist.
func waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute) // a bound for a stuck worker, not a measure
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOutputLimit: a response over MaxResponse is refused by the worker
// itself, so the worker stays.
// warm returns once both of p's workers have started. The pool starts
// them in the background and hands out the last idle one, so a worker
// ready late would answer the next request and look like a replacement
// to a test comparing pids. With one worker held, a request needs the
// other.
func warm(t *testing.T, p *sandbox.Pool) {
	t.Helper()
	h := startHold(t, p, "holder", filepath.Join(t.TempDir(), "release"))
	waitFor(t, h.path+".started")
	pid(t, p)
	h.release(t)
}

func TestOutputLimit(t *testing.T) {
	t.Parallel()
	p := newPool(t, func(o *sandbox.Options) { o.MaxResponse = 1000 })
	warm(t, p)
	before := pid(t, p)
	if got := do(t, p, "big 1000"); len(got) != 1000 {
		t.Errorf("big 1000: %d bytes", len(got))
	}
	_, err := p.Do(context.Background(), "test", []byte("big 1001"))
	if le := expectLimit(t, err, sandbox.Output); le.Limit != 1000 {
		t.Errorf("limit %d", le.Limit)
	}
	if after := pid(t, p); after != before {
		t.Errorf("worker changed from %d to %d", before, after)
	}
}

// TestClose: Close stops every worker; Do then fails with ErrClosed.
func TestClose(t *testing.T) {
	t.Parallel()
	p := newPool(t, func(o *sandbox.Options) { o.Workers = 2 })
	w := pid(t, p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Do(context.Background(), "test", []byte("pid")); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Do after Close: %v", err)
	}
	if exists(w) {
		t.Errorf("worker %d survives Close", w)
	}
}

// TestNotAWorker: a program that does not answer as a worker is refused
// with its own words.
func TestNotAWorker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path, want string
	}{
		{"/bin/sh", "not usable"},
		{filepath.Join(t.TempDir(), "missing"), "start worker"},
	}
	for _, tc := range tests {
		p := newPool(t, func(o *sandbox.Options) { o.Path = tc.path })
		if _, err := p.Do(context.Background(), "test", []byte("pid")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.path, err, tc.want)
		}
	}
}

// TestWorkerRefusesToRunByHand: started without a pool's environment, a
// worker says so and exits 1.
func TestWorkerRefusesToRunByHand(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(workerBin, sandbox.WorkerArg)
	cmd.Env = []string{}
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "SANDBOX_MEMORY") {
		t.Errorf("worker without configuration: %v %s", err, out)
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	ok := sandbox.Options{Path: workerBin, Workers: 2, PerKey: 1, Memory: 1 << 20, CPUBudget: time.Second, CPULimit: 2 * time.Second, MaxResponse: 1}
	if p, err := sandbox.New(ok); err != nil {
		t.Fatalf("New(%+v): %v", ok, err)
	} else {
		p.Close()
	}
	tests := []struct {
		name string
		edit func(*sandbox.Options)
	}{
		{"no path", func(o *sandbox.Options) { o.Path = "" }},
		{"no workers", func(o *sandbox.Options) { o.Workers = 0 }},
		{"one worker", func(o *sandbox.Options) { o.Workers = 1 }},
		{"no per-key cap", func(o *sandbox.Options) { o.PerKey = 0 }},
		{"one key may hold every worker", func(o *sandbox.Options) { o.Workers, o.PerKey = 3, 3 }},
		{"no memory", func(o *sandbox.Options) { o.Memory = 0 }},
		{"no response", func(o *sandbox.Options) { o.MaxResponse = 0 }},
		{"CPU limit under budget", func(o *sandbox.Options) { o.CPULimit = o.CPUBudget }},
		{"no CPU budget", func(o *sandbox.Options) { o.CPUBudget = 0 }},
	}
	for _, tc := range tests {
		o := ok
		tc.edit(&o)
		if p, err := sandbox.New(o); err == nil {
			p.Close()
			t.Errorf("%s: New accepted %+v", tc.name, o)
		}
	}
}

// TestTimeout: Options.Timeout kills an evaluation that outlives it with a
// Time LimitError, and counts from the evaluation's start, not its
// admission: a request queued behind another of its key gets its whole
// time.
func TestTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	p := newPool(t, func(o *sandbox.Options) { o.Timeout = timeout })
	warm(t, p)
	before := pid(t, p)
	start := time.Now()
	_, err := p.Do(context.Background(), "test", []byte("spin"))
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Resource != sandbox.Time || le.Limit != int64(timeout) {
		t.Fatalf("spin: %v, want a time LimitError", err)
	}
	if took := time.Since(start); took > timeout+30*time.Second {
		t.Errorf("spin stopped after %s", took)
	}
	if exists(before) {
		t.Errorf("worker %d still exists after its timeout", before)
	}
	// An evaluation queued behind another of its key keeps its whole
	// time: the first holds its worker until the timeout kills it, the
	// second, queued meanwhile for longer than the timeout, then runs and
	// answers.
	dir := t.TempDir()
	first := startHold(t, p, "test", filepath.Join(dir, "never"))
	waitFor(t, first.path+".started")
	second := make(chan string, 1)
	go func() {
		out, err := p.Do(context.Background(), "test", []byte("echo queued"))
		if err != nil {
			out = []byte(err.Error())
		}
		second <- string(out)
	}()
	if got := <-first.out; !strings.Contains(got, "time limit") {
		t.Errorf("the first evaluation: %q, want it stopped at its time limit", got)
	}
	if got := <-second; got != "queued" {
		t.Errorf("the evaluation queued behind it: %q, want its answer", got)
	}
}
