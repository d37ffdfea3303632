package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/sandbox"
)

// The sandbox of the Isolated tools. A worker holds at most
// SandboxWorkerMemory: its size at start (about 13 MiB resident, counted
// as 16) plus SandboxMemory for its heap plus sandbox.RuntimeOverhead for
// the Go runtime's own mappings, 168 MiB in all. A host sizes its pool so
// that its workers' worst case and its own process fit its memory (the
// tool server: functions/assembly/mcpfn.SandboxSize).
const (
	// SandboxWorkers is the pool's size where the memory available is not
	// known (the dev server): a worst case of 4 x 168 MiB.
	SandboxWorkers = 4
	// SandboxPerUser is the default number of isolated runs one caller
	// may have at once (SANDBOX_PER_USER); a pool keeps more workers.
	SandboxPerUser = 2
	// SandboxMemory is how much a worker's heap may grow after start: two
	// of the 64 MiB arenas in which the Go runtime maps its heap. The
	// collector aims to keep a run under half of it, so a run has 64 MiB
	// of live data comfortably and up to about 120 MiB at a high CPU cost
	// (json_query over a 1 MiB input needs about 20).
	SandboxMemory = 128 << 20
	// SandboxWorkerStart is a worker's resident size at start, rounded
	// up.
	SandboxWorkerStart = 16 << 20
	// SandboxWorkerMemory is the most memory one worker may hold.
	SandboxWorkerMemory = SandboxWorkerStart + SandboxMemory + sandbox.RuntimeOverhead
	// SandboxMaxOutput bounds an isolated tool's output (encoded as JSON):
	// the 8 MiB a step's output may be. A result over the tool server's
	// inline limit leaves it by reference (toolclient.InlineBytes), so
	// the 6 MB a buffered Lambda function URL can answer is no bound.
	SandboxMaxOutput = 8 << 20
	// SandboxCPUBudget is the CPU time after which a worker is replaced.
	SandboxCPUBudget = 30 * time.Second
	// SandboxCPULimit is the CPU time at which the kernel kills a worker.
	// It exceeds SandboxCPUBudget by more than the longest isolated tool's
	// timeout, and a worker has one CPU (GOMAXPROCS=1) and is killed at
	// its deadline, so only a worker the server failed to stop reaches it.
	SandboxCPULimit = 60 * time.Second
)

// SandboxSize is the shape of a NewSandbox pool.
type SandboxSize struct {
	// Workers is the number of warm workers, which is also the number of
	// isolated tool runs at once; more wait for a free worker within
	// their tool's timeout.
	Workers int
	// PerUser is the number of isolated runs one caller (see Caller) may
	// have at once: at least 1 and below Workers, so that no caller can
	// occupy every worker.
	PerUser int
}

// NewSandbox starts the pool that runs the Isolated tools in worker
// processes of the program at path: normally sandbox.SelfPath(), this very
// binary, whose main calls ServeWorker when sandbox.IsWorker. The pool
// admits runs per caller (the Caller of the run's context; anonymous
// callers share one allowance): at most size.PerUser of one caller's runs
// at once, and, when every worker is busy, the freed worker goes to the
// earliest waiting run whose caller is under that cap. Workers start in
// the background; logger (nil: slog.Default()) hears of every worker
// stopped for a limit, a deadline or a crash. Close the pool at shutdown.
// It fails when size.PerUser is below 1 or not below size.Workers.
func NewSandbox(path string, size SandboxSize, logger *slog.Logger) (*sandbox.Pool, error) {
	return sandbox.New(sandbox.Options{
		Path:        path,
		Workers:     size.Workers,
		PerKey:      size.PerUser,
		Memory:      SandboxMemory,
		CPUBudget:   SandboxCPUBudget,
		CPULimit:    SandboxCPULimit,
		MaxResponse: SandboxMaxOutput + 1024, // the output plus its envelope
		Logger:      logger,
	})
}

// LazySandbox is a Sandbox whose pool (NewSandbox(path, logger)) starts
// at its first Do, so that a cold start spends nothing on worker processes
// until an isolated tool runs: McpFunction answers its first request
// without two workers starting beside it, and the first isolated tool call
// waits for a worker's start instead. Do fails as the pool's Do does, or
// with NewSandbox's error. It is safe for concurrent use.
type LazySandbox struct {
	pool func() (*sandbox.Pool, error)
}

// NewLazySandbox returns a LazySandbox of the program at path.
func NewLazySandbox(path string, size SandboxSize, logger *slog.Logger) *LazySandbox {
	return &LazySandbox{pool: sync.OnceValues(func() (*sandbox.Pool, error) { return NewSandbox(path, size, logger) })}
}

// Do runs request for caller key in a worker of the pool, started by the
// first call.
func (l *LazySandbox) Do(ctx context.Context, key string, request []byte) ([]byte, error) {
	p, err := l.pool()
	if err != nil {
		return nil, err
	}
	return p.Do(ctx, key, request)
}

// ServeWorker runs this process as a worker of a NewSandbox pool and never
// returns. Call it first thing in main when sandbox.IsWorker() reports
// true.
func ServeWorker() {
	sandbox.ServeWorker(WorkerHandler())
}

// workerRequest asks a worker to run one tool on a validated input.
type workerRequest struct {
	Tool  string         `json:"tool"`
	Input map[string]any `json:"input"`
}

// workerResponse is a worker's answer: the output object or an error.
type workerResponse struct {
	Output json.RawMessage `json:"output,omitempty"`
	Error  *workerError    `json:"error,omitempty"`
}

// workerError carries a tool's error across the process boundary.
type workerError struct {
	// Typed: the tool returned an *errs.Error with these fields;
	// otherwise Message is the error's text.
	Typed   bool              `json:"typed,omitempty"`
	Kind    errs.Kind         `json:"kind,omitempty"`
	Code    string            `json:"code,omitempty"`
	Message string            `json:"message"`
	Details []errs.FieldError `json:"details,omitempty"`
	// Deadline: the tool stopped because its deadline passed.
	Deadline bool `json:"deadline,omitempty"`
}

// WorkerHandler is a worker's handler: it runs the Isolated tools of
// Builtin(Config{}) on the inputs the registry validated, recovering
// panics, and answers their outputs or errors.
func WorkerHandler() sandbox.Handler {
	byID := map[string]*Tool{}
	for _, t := range Builtin(Config{}) {
		if t.Isolated {
			byID[t.ID] = t
		}
	}
	return func(ctx context.Context, request []byte) []byte {
		var req workerRequest
		if err := json.Unmarshal(request, &req); err != nil {
			return encodeWorkerError(ctx, fmt.Errorf("malformed worker request: %v", err))
		}
		t, ok := byID[req.Tool]
		if !ok {
			return encodeWorkerError(ctx, fmt.Errorf("tool %s does not run in a worker", req.Tool))
		}
		out, err := runRecovered(ctx, t, req.Input)
		if err != nil {
			return encodeWorkerError(ctx, err)
		}
		if out == nil {
			out = map[string]any{}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return encodeWorkerError(ctx, fmt.Errorf("tool %s produced output that is not JSON", t.ID))
		}
		resp, _ := json.Marshal(workerResponse{Output: b})
		return resp
	}
}

// runRecovered runs t, turning a panic into the error Registry.Run gives
// one in process.
func runRecovered(ctx context.Context, t *Tool, in map[string]any) (out map[string]any, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, errs.E("tools.worker", errs.Internal, CodeToolExecutionFailed, "tool "+t.ID+" failed unexpectedly")
		}
	}()
	return t.Run(ctx, in)
}

func encodeWorkerError(ctx context.Context, err error) []byte {
	we := &workerError{Message: err.Error(), Deadline: ctx.Err() != nil}
	var e *errs.Error
	if errors.As(err, &e) {
		we = &workerError{Typed: true, Kind: e.Kind, Code: e.Code, Message: e.Message, Details: e.Details, Deadline: we.Deadline}
	}
	b, _ := json.Marshal(workerResponse{Error: we})
	return b
}

// runIsolated runs tool id in a worker of s, admitted under ctx's Caller,
// and returns its output or its error, rebuilt as the tool returned it
// (for Registry.Run to map), or the sandbox's verdict: TOOL_RESOURCE_LIMIT
// for a limit, TOOL_EXECUTION_FAILED for a crash or a worker that cannot
// start, ctx's error at its end, TOOL_TIMEOUT when the sandbox saw ctx's
// deadline pass first.
func runIsolated(ctx context.Context, s Sandbox, id string, in map[string]any) (map[string]any, error) {
	op := "tools.runIsolated(" + id + ")"
	req, err := json.Marshal(workerRequest{Tool: id, Input: in})
	if err != nil {
		return nil, errs.E(op, errs.Invalid, CodeInvalidParams, "the input is not representable as JSON").WithCause(err)
	}
	resp, err := s.Do(ctx, Caller(ctx), req)
	if err != nil {
		var limit *sandbox.LimitError
		var crash *sandbox.CrashError
		switch {
		case errors.As(err, &limit):
			return nil, &errs.Error{Op: op, Kind: errs.Internal, Code: CodeToolResourceLimit, Message: limitMessage(id, limit), Err: err}
		case errors.As(err, &crash):
			return nil, errs.E(op, errs.Internal, CodeToolExecutionFailed, "tool "+id+" failed unexpectedly").WithCause(err)
		case ctx.Err() != nil:
			return nil, err
		case errors.Is(err, sandbox.ErrNoTimeLeft):
			// The sandbox found no time left before ctx's own timer fired
			// (the wait for a worker took it): the deadline's verdict.
			return nil, &errs.Error{Op: op, Kind: errs.Timeout, Code: CodeToolTimeout, Message: "tool " + id + " did not finish in time", Err: err}
		}
		return nil, errs.E(op, errs.Internal, CodeToolExecutionFailed, "tool "+id+" could not run: its worker process is not available").WithCause(err)
	}
	var wr workerResponse
	if err := json.Unmarshal(resp, &wr); err != nil {
		return nil, errs.E(op, errs.Internal, CodeToolExecutionFailed, "tool "+id+" failed unexpectedly").WithCause(fmt.Errorf("worker response: %w", err))
	}
	if we := wr.Error; we != nil {
		switch {
		case we.Deadline:
			return nil, &errs.Error{Op: op, Kind: errs.Timeout, Code: CodeToolTimeout, Message: "tool " + id + " did not finish in time", Err: context.DeadlineExceeded}
		case we.Typed:
			return nil, &errs.Error{Op: op, Kind: we.Kind, Code: we.Code, Message: we.Message, Details: we.Details}
		}
		return nil, errors.New(we.Message)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(wr.Output, &fields); err != nil || fields == nil {
		return nil, errs.E(op, errs.Internal, CodeToolExecutionFailed, "tool "+id+" failed unexpectedly").WithCause(fmt.Errorf("worker output %.100q: %v", wr.Output, err))
	}
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		out[k] = v
	}
	return out, nil
}

// limitMessage is the client's message for a run stopped by a limit.
func limitMessage(id string, e *sandbox.LimitError) string {
	switch e.Resource {
	case sandbox.Memory:
		return fmt.Sprintf("tool %s was stopped: it exceeded its memory limit (%d MiB)", id, e.Limit>>20)
	case sandbox.CPU:
		return fmt.Sprintf("tool %s was stopped: it exceeded its CPU time limit", id)
	case sandbox.Output:
		return fmt.Sprintf("tool %s produced more than its output limit (%d MiB)", id, SandboxMaxOutput>>20)
	}
	return fmt.Sprintf("tool %s was stopped: it exceeded a resource limit", id)
}
