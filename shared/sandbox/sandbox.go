// Package sandbox runs evaluations of untrusted input in worker processes
// whose memory and CPU time the kernel bounds, so that an input that
// allocates gigabytes or loops forever stops its worker, never the service.
//
// A worker is the service's own binary started again with WorkerArg as its
// first argument: main calls ServeWorker when IsWorker reports true, before
// anything else. A Lambda function has only its bootstrap binary and the
// dev server only its own, so neither needs a second program. The worker
// starts with an empty environment (no secrets), GOMAXPROCS=1, a soft Go
// heap limit, and kernel limits it sets on itself before it takes any
// request:
//
//   - RLIMIT_AS: its address space may grow by at most Options.Memory plus
//     RuntimeOverhead from its size at start. A Go program reserves over
//     1 GiB of address space as it starts (mostly never touched), so the
//     limit is relative to that; past it the Go runtime aborts with "out
//     of memory". RLIMIT_AS is used rather than RLIMIT_DATA because the
//     kernel charges a mapping made over an address range the runtime
//     reserved earlier only for its growth, so a Go heap can pass
//     RLIMIT_DATA by hundreds of MiB. The Go runtime maps its heap 64 MiB
//     at a time (an arena) and, beside it, metadata for each arena and a
//     stack for each thread it starts: RuntimeOverhead is room for those,
//     so that a heap of Memory/64 MiB arenas fits. (Without it a 128 MiB
//     limit held one arena only, and an evaluation whose heap, fragmented,
//     needed a second one died or not depending on when the collector
//     ran.) The runtime reserves its first arena before the limit is set,
//     and starts its heap at a random offset in it: the worker first pins
//     that arena's unused part, untouched, and takes the limit from its
//     size before the next arena, so that the heap never grows, unseen by
//     the limit, into memory reserved at start (see claimHeapRemainder).
//   - RLIMIT_CPU, soft and hard equal: the kernel sends SIGKILL when the
//     worker's total CPU time reaches it. (A soft limit alone would do
//     nothing: the Go runtime ignores SIGXCPU unless the program asks for
//     it with signal.Notify.)
//   - RLIMIT_CORE 0.
//
// A Pool keeps a few warm workers. Each serves one evaluation at a time
// over its stdin and stdout. The pool kills a worker whose evaluation
// outlives its context, replaces a worker that died, and retires a worker
// that has used Options.CPUBudget of CPU time or whose own peak resident
// memory passed half of Options.Memory, so that the kernel's CPU limit is
// never what stops an ordinary evaluation and an idle worker holds little
// memory.
//
// Admission. Every evaluation names a key (the tool server passes its
// caller; the package knows nothing of users). At most Options.Workers
// evaluations run at once, at most Options.PerKey of them under one key,
// and PerKey is below Workers, so no key can occupy every worker. A
// request that cannot run waits, as long as its context allows, in one
// queue in arrival order: when a worker frees, it goes to the earliest
// waiter whose key is under its cap; a waiter whose key is at its cap
// holds back no one behind it. A key's flood of evaluations therefore
// occupies at most PerKey workers and is passed over while at its cap:
// another key's evaluation waits for the workers the other keys hold,
// never for the flood.
//
// Memory limits are kernel-enforced on Linux (AWS Lambda, the dev server
// on Linux). On other systems the worker still isolates crashes and is
// killed at its deadline, but only the Go heap's soft limit bounds its
// memory.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// WorkerArg is the first argument of a worker process.
const WorkerArg = "--sandbox-worker"

// RuntimeOverhead is the address space a worker may map beyond
// Options.Memory for the Go runtime's own needs as its heap grows: the
// metadata of each 64 MiB heap arena (about 1 MiB) and the stack of each
// thread it starts during an evaluation (8 MiB in a binary linked with C).
// A pool's sizing counts it: a worker's resident memory may reach its size
// at start plus Memory plus RuntimeOverhead (measured: a worker of about
// 14 MiB at start stopped at a 128 MiB Memory peaks near 132 MiB).
const RuntimeOverhead = 24 << 20

// Options configure a Pool.
type Options struct {
	// Path is the worker program; Args follow WorkerArg on its command
	// line. SelfPath is the running binary.
	Path string
	Args []string
	// Workers is the number of warm workers, which is also the number of
	// evaluations that run at once.
	Workers int
	// PerKey is the number of evaluations of one key that run at once: at
	// least 1 and below Workers.
	PerKey int
	// Memory is how much a worker's heap may grow after it has started, in
	// bytes; a multiple of 64 MiB, the unit in which the Go runtime maps
	// its heap, uses it all. Its address space may grow by Memory plus
	// RuntimeOverhead.
	Memory int64
	// CPUBudget is the CPU time after which a worker is retired once its
	// current evaluation ends.
	CPUBudget time.Duration
	// CPULimit is the CPU time at which the kernel kills a worker. It must
	// exceed CPUBudget by more than the longest evaluation, so that only a
	// worker whose parent failed to stop it reaches it.
	CPULimit time.Duration
	// MaxResponse is the largest response, in bytes, a worker may return.
	MaxResponse int
	// Timeout, when positive, bounds each evaluation from the moment a
	// worker is given it, beside the deadline of Do's context: the time a
	// request waits for admission does not count against it, so that an
	// evaluation queued behind a slow one still gets all of its time. Its
	// passing kills the worker and is a LimitError of Time.
	Timeout time.Duration
	// StartTimeout bounds a worker's start, until it reports its limits in
	// place; zero means 10 s.
	StartTimeout time.Duration
	// Logger receives a warning for every worker stopped for a limit, a
	// deadline or a crash; nil means slog.Default().
	Logger *slog.Logger
}

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("sandbox: pool closed")

// Resource is what an evaluation ran out of.
type Resource string

// The resources a LimitError reports.
const (
	Memory Resource = "memory"
	CPU    Resource = "cpu"
	Output Resource = "output"
	Time   Resource = "time"
)

// LimitError reports that an evaluation exceeded one of its worker's
// limits; the worker was stopped (for Memory and CPU) or its response
// dropped (for Output).
type LimitError struct {
	Resource Resource
	// Limit is the bound that was passed: bytes for Memory and Output, CPU
	// time for CPU, wall-clock time (Options.Timeout) for Time.
	Limit int64
	// Detail describes the worker's end, for logs.
	Detail string
	// PeakRSS is, for Memory, the worker's own peak resident size in
	// bytes as its exit status reports it; 0 when not known (the status
	// then holds its parent's larger peak, see hello.StartMaxRSS).
	PeakRSS int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("sandbox: %s limit exceeded: %s", e.Resource, e.Detail)
}

// CrashError reports that a worker stopped during an evaluation for a
// reason other than a limit (a runtime fault). Detail is for logs.
type CrashError struct{ Detail string }

func (e *CrashError) Error() string { return "sandbox: worker crashed: " + e.Detail }

// Pool is a set of warm worker processes. It is safe for concurrent use.
type Pool struct {
	o     Options
	log   *slog.Logger
	adm   *admission
	ready chan struct{} // one token per entry of idle
	done  chan struct{} // closed by Close

	mu     sync.Mutex
	closed bool
	// idle holds one entry per worker slot nobody holds: an idle worker,
	// or nil (start one). The last one in is the first out, so a lightly
	// used pool keeps serving from the same warm worker.
	idle []*worker
	live map[*worker]struct{}
	bg   sync.WaitGroup // background starts and retirements; Add only under mu while !closed
}

// Stats is a snapshot of a pool's admission.
type Stats struct {
	// Running is the number of evaluations admitted (running, or about to
	// run on the worker they were given).
	Running int
	// Waiting is the number of evaluations waiting for admission.
	Waiting int
}

// New checks o and returns a pool whose workers start in the background.
// It fails when Path is empty, Workers is below 2, PerKey is below 1 or
// not below Workers, Memory or MaxResponse is not positive, or CPULimit
// does not exceed CPUBudget.
func New(o Options) (*Pool, error) {
	switch {
	case o.Path == "":
		return nil, errors.New("sandbox: no worker program")
	case o.PerKey < 1 || o.Workers < o.PerKey+1:
		return nil, fmt.Errorf("sandbox: %d workers for %d evaluations per key; want at least 1 per key and more workers than that", o.Workers, o.PerKey)
	case o.Memory <= 0 || o.MaxResponse <= 0:
		return nil, errors.New("sandbox: memory and response limits must be positive")
	case o.CPUBudget <= 0 || o.CPULimit <= o.CPUBudget:
		return nil, fmt.Errorf("sandbox: the CPU limit (%s) must exceed the CPU budget (%s), both positive", o.CPULimit, o.CPUBudget)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	p := &Pool{o: o, log: o.Logger, adm: newAdmission(o.Workers, o.PerKey), ready: make(chan struct{}, o.Workers), done: make(chan struct{}), live: map[*worker]struct{}{}}
	if p.log == nil {
		p.log = slog.Default()
	}
	for range o.Workers {
		p.refill()
	}
	return p, nil
}

// Do sends request to a free worker and returns its response. It waits
// for admission under key (see the package comment) as long as ctx
// allows, and the evaluation gets what is left of ctx's deadline: a
// worker still busy when ctx ends is killed. Errors:
//   - ctx's error, wrapped, when ctx ends first (waiting or evaluating);
//   - *LimitError: the evaluation passed the memory, CPU, response or
//     time (Options.Timeout) limit;
//   - *CrashError: the worker stopped for another reason;
//   - ErrClosed after Close, or a worker that cannot start.
func (p *Pool) Do(ctx context.Context, key string, request []byte) ([]byte, error) {
	select {
	case <-p.done:
		return nil, ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: waiting for a free worker: %w", err)
	}
	if err := p.adm.acquire(ctx, key, p.done); err != nil {
		return nil, err
	}
	defer p.adm.release(key)
	// Admission leaves an entry of idle for every admitted request; one
	// being refilled arrives when its worker has started.
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("sandbox: waiting for a worker to start: %w", ctx.Err())
	case <-p.done:
		return nil, ErrClosed
	}
	w := p.take()
	if err := ctx.Err(); err != nil {
		// Ended as it was admitted: the worker, not started on it, stays.
		p.put(w)
		return nil, fmt.Errorf("sandbox: waiting for a free worker: %w", err)
	}
	if w == nil {
		var err error
		if w, err = p.start(ctx); err != nil {
			p.put(nil)
			return nil, err
		}
	}
	evalCtx := ctx
	if p.o.Timeout > 0 {
		var cancel context.CancelFunc
		evalCtx, cancel = context.WithTimeout(ctx, p.o.Timeout)
		defer cancel()
	}
	resp, err := w.do(evalCtx, request, p.o)
	if err != nil && ctx.Err() == nil && evalCtx.Err() != nil {
		err = &LimitError{Resource: Time, Limit: int64(p.o.Timeout), Detail: fmt.Sprintf("worker %d killed after %s: %v", w.pid, p.o.Timeout, err)}
	}
	switch {
	case err != nil && !w.alive():
		p.stopped(w, err)
		p.refill()
	case err == nil && w.spent(p.o):
		p.retire(w)
		p.refill()
	default:
		p.put(w)
	}
	return resp, err
}

// Stats reports how many evaluations run and wait.
func (p *Pool) Stats() Stats {
	running, waiting := p.adm.stats()
	return Stats{Running: running, Waiting: waiting}
}

// take removes the last entry of idle; the caller has received a token
// from ready, so there is one.
func (p *Pool) take() *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.idle[len(p.idle)-1]
	p.idle = p.idle[:len(p.idle)-1]
	return w
}

// put makes w (nil: a slot whose worker must be started) idle.
func (p *Pool) put(w *worker) {
	p.mu.Lock()
	p.idle = append(p.idle, w)
	p.mu.Unlock()
	p.ready <- struct{}{}
}

// Close kills every worker and waits for the pool's background work.
// Later calls of Do fail with ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
		for w := range p.live {
			w.kill()
		}
	}
	p.mu.Unlock()
	p.bg.Wait()
	// Reap the idle workers; a busy one is reaped by its Do.
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		if w != nil {
			w.wait()
		}
	}
	return nil
}

// background runs f in a goroutine Close waits for, and reports false
// (without running f) once the pool is closed.
func (p *Pool) background(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.bg.Go(f)
	return true
}

// refill starts a worker in the background and makes it (or nil, when it
// cannot start) idle, in place of the slot's worker that ended.
func (p *Pool) refill() {
	p.background(func() {
		w, err := p.start(context.Background())
		if err != nil && !errors.Is(err, ErrClosed) {
			p.log.Error("sandbox: a worker did not start", "err", err.Error())
		}
		p.put(w)
	})
}

// start starts a worker and registers it; it fails with ErrClosed when the
// pool is closed, killing a worker started meanwhile.
func (p *Pool) start(ctx context.Context) (*worker, error) {
	if p.isClosed() {
		return nil, ErrClosed
	}
	w, err := startWorker(ctx, p.o)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.live[w] = struct{}{}
	}
	p.mu.Unlock()
	if closed {
		w.kill()
		w.wait()
		return nil, ErrClosed
	}
	return w, nil
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// forget unregisters w.
func (p *Pool) forget(w *worker) {
	p.mu.Lock()
	delete(p.live, w)
	p.mu.Unlock()
}

// stopped records the end of a worker that died or was killed during an
// evaluation (it has been reaped).
func (p *Pool) stopped(w *worker, err error) {
	p.forget(w)
	if !p.isClosed() {
		p.log.Warn("sandbox: worker stopped", "pid", w.pid, "reason", err.Error())
	}
}

// retire stops an idle worker that has used its CPU budget or much
// memory, in the background.
func (p *Pool) retire(w *worker) {
	p.forget(w)
	stop := func() {
		w.kill()
		w.wait()
	}
	if !p.background(stop) {
		stop()
	}
}
