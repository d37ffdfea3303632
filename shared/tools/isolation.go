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

// The sandbox of the Isolated tools, sized for the smallest host: the tool
// server's Lambda function has 512 MB for itself and its workers. At most
// SandboxWorkers * (a worker's ~15 MB at start + SandboxMemory) = 286 MB
// for the workers, leaving over 200 MB for the server's own process, which
// holds at most a 1 MiB request and a SandboxMaxOutput response per call.
const (
	// SandboxWorkers is the number of warm workers, which is also the
	// number of isolated tool runs at once per process; more wait for a
	// free worker within their tool's timeout.
	SandboxWorkers = 2
	// SandboxMemory is how much a worker's address space may grow after
	// start. The Go runtime reserves it 64 MiB at a time, so a run has
	// roughly 64 to 120 MiB of live data (json_query over a 1 MiB input
	// needs about 20).
	SandboxMemory = 128 << 20
	// SandboxMaxOutput bounds an isolated tool's output (encoded as JSON):
	// under the 6 MB a buffered Lambda function URL can answer.
	SandboxMaxOutput = 4 << 20
	// SandboxCPUBudget is the CPU time after which a worker is replaced.
	SandboxCPUBudget = 30 * time.Second
	// SandboxCPULimit is the CPU time at which the kernel kills a worker.
	// It exceeds SandboxCPUBudget by more than the longest isolated tool's
	// timeout, and a worker has one CPU (GOMAXPROCS=1) and is killed at
	// its deadline, so only a worker the server failed to stop reaches it.
	SandboxCPULimit = 60 * time.Second
)

// NewSandbox starts the pool that runs the Isolated tools in worker
// processes of the program at path: normally sandbox.SelfPath(), this very
// binary, whose main calls ServeWorker when sandbox.IsWorker. Workers start
// in the background; logger (nil: slog.Default()) hears of every worker
// stopped for a limit, a deadline or a crash. Close the pool at shutdown.
func NewSandbox(path string, logger *slog.Logger) (*sandbox.Pool, error) {
	return sandbox.New(sandbox.Options{
		Path:        path,
		Workers:     SandboxWorkers,
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
func NewLazySandbox(path string, logger *slog.Logger) *LazySandbox {
	return &LazySandbox{pool: sync.OnceValues(func() (*sandbox.Pool, error) { return NewSandbox(path, logger) })}
}

// Do runs request in a worker of the pool, started by the first call.
func (l *LazySandbox) Do(ctx context.Context, request []byte) ([]byte, error) {
	p, err := l.pool()
	if err != nil {
		return nil, err
	}
	return p.Do(ctx, request)
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

// runIsolated runs tool id in a worker of s and returns its output or its
// error, rebuilt as the tool returned it (for Registry.Run to map), or the
// sandbox's verdict: TOOL_RESOURCE_LIMIT for a limit, TOOL_EXECUTION_FAILED
// for a crash or a worker that cannot start, ctx's error at its end.
func runIsolated(ctx context.Context, s Sandbox, id string, in map[string]any) (map[string]any, error) {
	op := "tools.runIsolated(" + id + ")"
	req, err := json.Marshal(workerRequest{Tool: id, Input: in})
	if err != nil {
		return nil, errs.E(op, errs.Invalid, CodeInvalidParams, "the input is not representable as JSON").WithCause(err)
	}
	resp, err := s.Do(ctx, req)
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
