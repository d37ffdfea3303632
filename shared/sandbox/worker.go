package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Environment of a worker process: its limits. Nothing else of the
// parent's environment is passed on.
const (
	envMemory      = "SANDBOX_MEMORY"       // bytes
	envCPULimit    = "SANDBOX_CPU_LIMIT"    // whole seconds
	envMaxResponse = "SANDBOX_MAX_RESPONSE" // bytes
)

// hello is a worker's first message: the limits it put in place.
type hello struct {
	PID int `json:"pid"`
	// AddressSpace is its RLIMIT_AS in bytes, 0 where not enforced.
	AddressSpace uint64 `json:"addressSpace"`
	// CPUSeconds is its RLIMIT_CPU, 0 where not enforced.
	CPUSeconds uint64 `json:"cpuSeconds"`
	// StartMaxRSS is the kernel's peak resident size for it as it starts
	// (ru_maxrss, bytes). The kernel carries that figure over an exec from
	// the process image replaced, which, as Go starts a child, shares the
	// parent's memory: it is the parent's peak, not the worker's. A
	// maxrss at the worker's exit not above it tells nothing of the
	// worker's own peak.
	StartMaxRSS int64 `json:"startMaxRss"`
	// HeapClaimed is the part of the Go heap's first arena it pinned,
	// untouched, before setting RLIMIT_AS, in bytes (see
	// claimHeapRemainder); 0 where limits are not enforced.
	HeapClaimed int64 `json:"heapClaimed,omitempty"`
	// Error says why it could not put its limits in place; it then exits.
	Error string `json:"error,omitempty"`
}

// worker is a running worker process, seen from the pool. Only the holder
// of its slot uses it.
type worker struct {
	pid    int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *headBuffer

	killed atomic.Bool // the pool killed it
	exited atomic.Bool // reaped
	once   sync.Once

	// startMaxRSS is hello.StartMaxRSS.
	startMaxRSS int64
	// As reported after its last evaluation: its CPU time, and its own
	// peak resident size (VmHWM), never its parent's.
	cpu     time.Duration
	peakRSS int64
}

// startWorker starts a worker and waits for its hello.
func startWorker(ctx context.Context, o Options) (*worker, error) {
	cmd := exec.Command(o.Path, append([]string{WorkerArg}, o.Args...)...)
	cmd.Env = []string{
		"GOMAXPROCS=1",
		// In a binary linked with C (cgo, the default of a local go
		// build), every thread gets a 64 MiB malloc arena of address
		// space from glibc, so that a thread the Go runtime starts during
		// an evaluation takes half of its memory limit; with one arena a
		// thread costs only its stack. No effect without glibc.
		"MALLOC_ARENA_MAX=1",
		envMemory + "=" + strconv.FormatInt(o.Memory, 10),
		envCPULimit + "=" + strconv.FormatInt(int64((o.CPULimit+time.Second-1)/time.Second), 10),
		envMaxResponse + "=" + strconv.Itoa(o.MaxResponse),
	}
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	w := &worker{cmd: cmd, stdin: stdin, stdout: stdout, stderr: &headBuffer{max: 4096}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: start worker %s: %w", o.Path, err)
	}
	w.pid = cmd.Process.Pid

	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	type result struct {
		res response
		err error
	}
	ch := make(chan result, 1)
	go func() {
		res, err := readResponse(stdout, maxHelloBytes)
		ch <- result{res, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		w.kill()
		<-ch
		w.wait()
		return nil, fmt.Errorf("sandbox: worker %s did not start: %w", o.Path, ctx.Err())
	}
	var h hello
	switch {
	case r.err != nil:
		err = fmt.Errorf("no hello: %v", r.err)
	case r.res.status != statusHello:
		err = fmt.Errorf("first frame has status %d", r.res.status)
	case json.Unmarshal(r.res.payload, &h) != nil:
		err = errors.New("malformed hello")
	case h.Error != "":
		err = fmt.Errorf("it could not set its limits: %s", h.Error)
	case limitsEnforced && (h.AddressSpace == 0 || h.CPUSeconds == 0):
		err = fmt.Errorf("it reports no limits (%+v)", h)
	}
	if err != nil {
		w.kill()
		w.wait()
		return nil, fmt.Errorf("sandbox: worker %s is not usable: %v%s", o.Path, err, w.stderr.tail())
	}
	w.startMaxRSS = h.StartMaxRSS
	return w, nil
}

// ErrNoTimeLeft is the error of an evaluation whose context's deadline
// passed before it could be sent to a worker (the wait for one used the
// time): the caller's deadline, though its context's timer may not have
// fired yet. It wraps context.DeadlineExceeded.
var ErrNoTimeLeft = fmt.Errorf("sandbox: no time left: %w", context.DeadlineExceeded)

// do runs one evaluation; see Pool.Do.
func (w *worker) do(ctx context.Context, request []byte, o Options) ([]byte, error) {
	var timeout time.Duration
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			return nil, ErrNoTimeLeft
		}
	}
	type result struct {
		res response
		err error
	}
	ch := make(chan result, 1)
	go func() {
		if err := writeRequest(w.stdin, timeout, request); err != nil {
			ch <- result{err: err}
			return
		}
		res, err := readResponse(w.stdout, o.MaxResponse)
		ch <- result{res, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, w.failed(r.err, o)
		}
		w.cpu, w.peakRSS = r.res.cpu, r.res.peakRSS
		switch r.res.status {
		case statusOK:
			return r.res.payload, nil
		case statusTooLarge:
			return nil, &LimitError{Resource: Output, Limit: int64(o.MaxResponse), Detail: fmt.Sprintf("the response exceeds %d bytes", o.MaxResponse)}
		}
		w.kill()
		w.wait()
		return nil, &CrashError{Detail: fmt.Sprintf("response with status %d", r.res.status)}
	case <-ctx.Done():
		w.kill()
		<-ch
		w.wait()
		return nil, fmt.Errorf("sandbox: worker %d killed: %w", w.pid, ctx.Err())
	}
}

// failed classifies the end of an evaluation whose frames could not be
// exchanged: a response over the limit (the worker is killed), or the
// worker's death.
func (w *worker) failed(err error, o Options) error {
	var tooLarge errFrameTooLarge
	if errors.As(err, &tooLarge) {
		w.kill()
		w.wait()
		return &LimitError{Resource: Output, Limit: int64(o.MaxResponse), Detail: tooLarge.Error()}
	}
	// The pipe broke: the worker is exiting. Reap it; should it linger,
	// kill it.
	t := time.AfterFunc(5*time.Second, w.kill)
	w.wait()
	t.Stop()
	return classify(w.cmd.ProcessState, w.killed.Load(), w.stderr.String(), w.startMaxRSS, o)
}

// classify says why a worker died during an evaluation. Tool code in a
// worker recovers its panics, so a worker dies of a runtime fault: out of
// memory (its address space limit, a stack over its maximum), the CPU
// limit's SIGKILL, or, rarely, another fault. startMaxRSS is the worker's
// hello.StartMaxRSS: the exit status's peak resident size is the worker's
// own only above it.
func classify(state *os.ProcessState, killedByPool bool, stderr string, startMaxRSS int64, o Options) error {
	detail := "worker " + state.String()
	if line := fatalLine(stderr); line != "" {
		detail += ": " + line
	}
	cpuKill, peak := exitInfo(state)
	peakText := "its own peak RSS is not known: under its parent's"
	if peak > startMaxRSS {
		peakText = fmt.Sprintf("peak RSS %d MiB", peak>>20)
	} else {
		peak = 0
	}
	cpu := state.UserTime() + state.SystemTime()
	switch {
	case outOfMemory(stderr) || peak >= o.Memory/2:
		return &LimitError{Resource: Memory, Limit: o.Memory, Detail: fmt.Sprintf("%s (%s)", detail, peakText), PeakRSS: peak}
	// Only the kernel's CPU limit sends SIGKILL to a worker the pool did
	// not kill (short of the system's OOM killer); the worker's rusage can
	// read well under the limit on a loaded machine, so the bound is loose.
	case cpuKill && !killedByPool && cpu >= o.CPULimit/2:
		return &LimitError{Resource: CPU, Limit: int64(o.CPULimit), Detail: fmt.Sprintf("%s after %s of CPU time", detail, cpu.Round(time.Millisecond))}
	}
	return &CrashError{Detail: detail}
}

// outOfMemory reports whether a worker's stderr shows the Go runtime
// giving up for lack of memory.
func outOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "stack overflow", "stack exceeds"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// fatalLine returns the first line of a Go runtime fault, if any.
func fatalLine(stderr string) string {
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "runtime:") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "SIG") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func (w *worker) kill() {
	w.killed.Store(true)
	_ = w.cmd.Process.Kill()
}

// wait reaps the worker once.
func (w *worker) wait() {
	w.once.Do(func() {
		_ = w.cmd.Wait()
		w.exited.Store(true)
	})
}

func (w *worker) alive() bool { return !w.killed.Load() && !w.exited.Load() }

// spent reports whether w should be retired: it has used its CPU budget,
// or its memory peaked over half its limit (it would keep that memory
// while idle).
func (w *worker) spent(o Options) bool {
	return w.cpu >= o.CPUBudget || w.peakRSS >= o.Memory/2
}

// headBuffer keeps the first max bytes written to it and drops the rest.
type headBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}

// tail formats the captured stderr for an error message.
func (h *headBuffer) tail() string {
	if s := strings.TrimSpace(h.String()); s != "" {
		return "; stderr: " + s
	}
	return ""
}
