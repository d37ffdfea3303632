// Package runs runs workflows: the Engine executes a workflow's steps on a
// ToolRunner (the tool server through toolclient.Catalog) and records the
// run; Service starts, cancels and lists runs in a chat (the run routes)
// and runs workflows for the chat stream (chat.WorkflowRunner).
package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/workflow"
)

// DefaultStepTimeout bounds one step of a run (README.md, Limits).
const DefaultStepTimeout = 30 * time.Second

// saveTimeout bounds the writes made with a detached context once the
// caller's context is done (client disconnect).
const saveTimeout = 10 * time.Second

// ToolRunner runs one tool. toolclient.Catalog and tools.Registry
// satisfy it.
type ToolRunner interface {
	Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error)
}

// RunStore records runs for the Engine.
type RunStore interface {
	// CreateRun stores a new run. Conflict when a run with its id exists.
	CreateRun(ctx context.Context, run workflow.Run) error
	// SaveRun overwrites the run's status, steps, error and completedAt,
	// only if its stored status is ifStatus. A failed condition (the run
	// was cancelled, or is gone) is an error of kind Conflict with code
	// workflow.CodeRunStateChanged.
	SaveRun(ctx context.Context, run workflow.Run, ifStatus string) error
}

// Step event kinds.
const (
	StepStarted  = "start"
	StepFinished = "end"
)

// StepEvent reports the start or end of a step to an observer. Input is the
// resolved input (Start and End); Output is the tool's output and Error the
// failure (End only). A step that failed before its tool ran (a template
// error) has an End without a Start.
type StepEvent struct {
	Kind   string
	StepID string
	ToolID string
	Input  map[string]any
	Output map[string]any
	Error  string
	Status string // End: the step's status
}

// Engine executes workflows: steps in order, each with its inputs resolved
// from earlier outputs, recording the run in a RunStore.
type Engine struct {
	tools       ToolRunner
	store       RunStore
	stepTimeout time.Duration
	runTimeout  time.Duration
	now         func() time.Time
	// beforeStep, when set, is called before each step's conditional
	// write: a test hook.
	beforeStep func(i int)
}

// Run time limits, within the timeouts of the functions that run
// workflows (template.yaml): a run started through the HTTP API must end
// before API Gateway's 30 s; a run in the chat stream within the stream
// function's 600 s.
const (
	APIRunTimeout    = 25 * time.Second
	StreamRunTimeout = 540 * time.Second
)

// EngineOptions configures NewEngine. StepTimeout zero means
// DefaultStepTimeout; Now nil means time.Now.
type EngineOptions struct {
	StepTimeout time.Duration
	// RunTimeout bounds a whole run: a step does not start once it has
	// passed, and a step's timeout never reaches past it. Zero means no
	// bound beyond the steps' own (at most MaxSteps × StepTimeout).
	RunTimeout time.Duration
	Now        func() time.Time
	// BeforeStep, when set, is called before step i's conditional write
	// (tests use it to cancel between steps).
	BeforeStep func(i int)
}

// NewEngine returns an Engine running tools and recording runs in store.
func NewEngine(tools ToolRunner, store RunStore, o EngineOptions) *Engine {
	if o.StepTimeout <= 0 {
		o.StepTimeout = DefaultStepTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Engine{tools: tools, store: store, stepTimeout: o.StepTimeout, runTimeout: o.RunTimeout, now: o.Now, beforeStep: o.BeforeStep}
}

func (e *Engine) clock() time.Time { return e.now().UTC() }

// NewRun returns a pending run of wf in chat chatID for userID, every step
// pending. It is not stored: Execute stores it.
func (e *Engine) NewRun(wf workflow.Workflow, chatID, userID string) workflow.Run {
	run := workflow.Run{ID: uuid.NewString(), ChatID: chatID, WorkflowID: wf.ID, UserID: userID, Status: workflow.RunPending,
		StartedAt: e.clock(), Steps: make([]workflow.RunStep, len(wf.Steps)), Attempt: 1, WorkflowVersion: wf.Version,
		Plan: append([]workflow.Step(nil), wf.Steps...)}
	for i, s := range wf.Steps {
		run.Steps[i] = workflow.RunStep{ID: s.ID, ToolID: s.ToolID, Status: workflow.StepPending}
	}
	return run
}

// Execute stores run (made by NewRun) as pending, then runs wf's steps in
// order, updating run in place and in the store:
//   - before each step, a write conditioned on the run still being running
//     records the step as running, and after it another records its result;
//     a failed condition means the run was cancelled: the remaining steps
//     become cancelled and so does the run (a step that finished keeps its
//     result);
//   - a step's inputs are resolved from earlier outputs (Resolve); a
//     template error or a tool error fails the step and the run, and the
//     remaining steps are skipped;
//   - each step runs under the step timeout;
//   - ctx done (the client left) cancels the run; the final state is still
//     stored, with a detached context.
//
// observe, if not nil, is told when each step starts and ends. Execute
// returns an error only when the run could not be recorded; the outcome of
// the run is run.Status.
func (e *Engine) Execute(ctx context.Context, wf workflow.Workflow, run *workflow.Run, observe func(StepEvent)) error {
	const op = "workflow.Execute"
	if observe == nil {
		observe = func(StepEvent) {}
	}
	if err := e.store.CreateRun(ctx, *run); err != nil {
		return errs.Wrap(op, err)
	}
	return e.Continue(ctx, e.store, wf.Steps, run, observe)
}

// Continue runs the steps of run (stored, pending or running) that have
// not completed, recording it in store as Execute does: a pending run is
// first marked running; the outputs of its completed steps (run before a
// resume, or reused by a retry) feed the later steps' inputs, and those
// steps do not run again. steps are the run's steps (its plan).
func (e *Engine) Continue(ctx context.Context, store RunStore, steps []workflow.Step, run *workflow.Run, observe func(StepEvent)) error {
	const op = "workflow.Continue"
	if observe == nil {
		observe = func(StepEvent) {}
	}
	e = &Engine{tools: e.tools, store: store, stepTimeout: e.stepTimeout, runTimeout: e.runTimeout, now: e.now, beforeStep: e.beforeStep}
	if run.Status == workflow.RunPending {
		run.Status = workflow.RunRunning
		if err := e.save(ctx, run, workflow.RunPending); err != nil {
			return e.stopped(ctx, op, run, err)
		}
	}
	outputs := make(map[string]map[string]any, len(steps))
	for i, step := range steps {
		if rs := run.Steps[i]; rs.Status == workflow.StepCompleted {
			outputs[step.ID] = rs.Output
			continue
		}
		if e.beforeStep != nil {
			e.beforeStep(i)
		}
		if ctx.Err() != nil {
			return e.finish(ctx, op, run, workflow.RunCancelled, "the run was cancelled")
		}
		rs := &run.Steps[i]
		started := e.clock()
		timeout := e.stepTimeout
		if e.runTimeout > 0 {
			left := e.runTimeout - started.Sub(run.StartedAt)
			if left <= 0 {
				return e.finish(ctx, op, run, workflow.RunFailed, fmt.Sprintf("the run exceeded its time limit of %s", e.runTimeout))
			}
			timeout = min(timeout, left)
		}
		rs.Status, rs.StartedAt = workflow.StepRunning, &started
		input, err := workflow.ResolveInputs(step.Inputs, outputs)
		if err != nil {
			rs.StartedAt = nil
			rs.Status = workflow.StepPending
			return e.failStep(ctx, op, run, i, step.Inputs, err.Error(), observe)
		}
		rs.Input = input
		if err := e.save(ctx, run, workflow.RunRunning); err != nil {
			rs.Status, rs.StartedAt = workflow.StepPending, nil
			return e.stopped(ctx, op, run, err)
		}
		observe(StepEvent{Kind: StepStarted, StepID: step.ID, ToolID: step.ToolID, Input: input})
		out, err := e.runStep(ctx, step.ToolID, input, timeout)
		done := e.clock()
		rs.CompletedAt = &done
		if err != nil {
			if ctx.Err() != nil {
				rs.Status = workflow.StepCancelled
				observe(StepEvent{Kind: StepFinished, StepID: step.ID, ToolID: step.ToolID, Input: input, Error: "cancelled", Status: workflow.StepCancelled})
				return e.finish(ctx, op, run, workflow.RunCancelled, "the run was cancelled")
			}
			if timeout < e.stepTimeout && errors.Is(err, errStepTimedOut) {
				// The step had only what was left of the run's time: the
				// run's limit stopped it, and the run says so.
				return e.failRun(ctx, op, run, i, input, fmt.Sprintf("the run exceeded its time limit of %s", e.runTimeout), observe)
			}
			return e.failStep(ctx, op, run, i, input, err.Error(), observe)
		}
		if out == nil {
			out = map[string]any{}
		}
		rs.Status, rs.Output = workflow.StepCompleted, out
		outputs[step.ID] = out
		observe(StepEvent{Kind: StepFinished, StepID: step.ID, ToolID: step.ToolID, Input: input, Output: out, Status: workflow.StepCompleted})
		if i < len(steps)-1 {
			// Record the step's result now, so that the run reads true
			// while the next step runs; the last one is recorded by finish.
			if err := e.save(ctx, run, workflow.RunRunning); err != nil {
				return e.stopped(ctx, op, run, err)
			}
		}
	}
	return e.finish(ctx, op, run, workflow.RunCompleted, "")
}

// runStep runs one tool under the step timeout. A timeout is reported as
// such; other errors with their client-safe message.
func (e *Engine) runStep(ctx context.Context, toolID string, input map[string]any, timeout time.Duration) (map[string]any, error) {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := e.tools.Run(sctx, toolID, input)
	if err == nil {
		return out, nil
	}
	if ctx.Err() == nil && (errors.Is(sctx.Err(), context.DeadlineExceeded) || errs.Is(err, errs.Timeout)) {
		return nil, fmt.Errorf("%w after %s", errStepTimedOut, timeout)
	}
	return nil, errors.New(errs.MessageOf(err, "the tool failed"))
}

var errStepTimedOut = errors.New("step timed out")

// failRun fails step i and the run with the same msg (the run's own
// limit stopped the step), skipping the rest.
func (e *Engine) failRun(ctx context.Context, op string, run *workflow.Run, i int, input map[string]any, msg string, observe func(StepEvent)) error {
	rs := &run.Steps[i]
	now := e.clock()
	rs.Status, rs.Error, rs.CompletedAt = workflow.StepFailed, msg, &now
	observe(StepEvent{Kind: StepFinished, StepID: rs.ID, ToolID: rs.ToolID, Input: input, Error: msg, Status: workflow.StepFailed})
	return e.finish(ctx, op, run, workflow.RunFailed, msg)
}

// failStep fails step i with msg, skips the rest and fails the run.
func (e *Engine) failStep(ctx context.Context, op string, run *workflow.Run, i int, input map[string]any, msg string, observe func(StepEvent)) error {
	rs := &run.Steps[i]
	now := e.clock()
	if rs.StartedAt == nil {
		rs.StartedAt = &now
	}
	rs.Status, rs.Error, rs.CompletedAt = workflow.StepFailed, msg, &now
	observe(StepEvent{Kind: StepFinished, StepID: rs.ID, ToolID: rs.ToolID, Input: input, Error: msg, Status: workflow.StepFailed})
	return e.finish(ctx, op, run, workflow.RunFailed, fmt.Sprintf("step %s failed: %s", rs.ID, msg))
}

// finish marks the steps not yet finished (skipped after a failure,
// cancelled otherwise) and stores the run's final status, conditioned on it
// still running. When the condition fails the run was cancelled meanwhile.
func (e *Engine) finish(ctx context.Context, op string, run *workflow.Run, status, msg string) error {
	rest := workflow.StepSkipped
	if status == workflow.RunCancelled {
		rest = workflow.StepCancelled
	}
	workflow.MarkRest(run, rest)
	now := e.clock()
	run.Status, run.Error, run.CompletedAt = status, msg, &now
	if err := e.save(ctx, run, workflow.RunRunning); err != nil {
		return e.stopped(ctx, op, run, err)
	}
	return nil
}

// stopped handles a failed conditional write: a changed state means the
// run was cancelled (by the cancel endpoint): record the engine's view of
// the steps under the cancelled status. Other errors are returned.
func (e *Engine) stopped(ctx context.Context, op string, run *workflow.Run, err error) error {
	if errs.CodeOf(err) != workflow.CodeRunStateChanged {
		return errs.Wrap(op, err)
	}
	workflow.MarkRest(run, workflow.StepCancelled)
	run.Status = workflow.RunCancelled
	run.Error = "the run was cancelled"
	if run.CompletedAt == nil {
		now := e.clock()
		run.CompletedAt = &now
	}
	if err := e.save(ctx, run, workflow.RunCancelled); err != nil && errs.CodeOf(err) != workflow.CodeRunStateChanged {
		logging.FromContext(ctx).WarnContext(ctx, "record cancelled run", "runId", run.ID, "err", err.Error())
	}
	return nil
}

// save stores run if its stored status is ifStatus, with a detached context
// when ctx is done so that the outcome is recorded after a disconnect.
func (e *Engine) save(ctx context.Context, run *workflow.Run, ifStatus string) error {
	if ctx.Err() != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
		ctx = dctx
	}
	workflow.Bound(run)
	return e.store.SaveRun(ctx, *run, ifStatus)
}
