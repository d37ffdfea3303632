// Package runs runs workflows. Every run is durable, however it starts
// (the run routes, a chat stream, later triggers and MCP clients): the
// Service stores it with its event log and lease and hands it to a Runner
// through a workflow.Invoker (the runner function in AWS, a goroutine
// locally); the Runner's Engine executes the steps, each start and end a
// checkpoint; the sweeper resumes a run whose runner died (ResumeExpired).
// Callers that want the outcome follow the run's log (Wait, Follow).
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
// run's context is done.
const saveTimeout = 10 * time.Second

// ToolRunner runs one tool for a step: the tool gate in front of the
// tool server's catalog (it refuses a tool the user denies, and meters
// model-calling tools against the user's budget).
type ToolRunner interface {
	Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error)
}

// Saver records a run's checkpoints: SaveRun stores run if its stored
// status is ifStatus, with the events of what changed since the last
// checkpoint. A failed condition (the run was cancelled, another attempt
// took it over, or the sweeper ended it) is Conflict
// workflow.CodeRunStateChanged.
type Saver interface {
	SaveRun(ctx context.Context, run workflow.Run, ifStatus string) error
}

// Engine executes the steps of a run: in order, each with its inputs
// resolved from the run's input and earlier outputs, every start and end
// of a step recorded through a Saver. It is the Runner's executor.
type Engine struct {
	tools       ToolRunner
	stepTimeout time.Duration
	runTimeout  time.Duration
	now         func() time.Time
	// beforeStep, when set, is called before each step's conditional
	// write: a test hook.
	beforeStep func(i int)
}

// EngineOptions configures NewEngine. StepTimeout zero means
// DefaultStepTimeout; Now nil means time.Now.
type EngineOptions struct {
	StepTimeout time.Duration
	// RunTimeout bounds a whole run from its start: a step does not start
	// once it has passed, and a step's timeout never reaches past it.
	// Zero means no bound beyond the steps' own.
	RunTimeout time.Duration
	Now        func() time.Time
	// BeforeStep, when set, is called before step i's conditional write
	// (tests use it to cancel between steps).
	BeforeStep func(i int)
}

// NewEngine returns an Engine running tools.
func NewEngine(tools ToolRunner, o EngineOptions) *Engine {
	if o.StepTimeout <= 0 {
		o.StepTimeout = DefaultStepTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Engine{tools: tools, stepTimeout: o.StepTimeout, runTimeout: o.RunTimeout, now: o.Now, beforeStep: o.BeforeStep}
}

func (e *Engine) clock() time.Time { return e.now().UTC() }

// NewRun returns a pending run of wf for userID (in chat chatID, or none),
// every step pending, with the snapshot of wf's steps it will execute. It
// is not stored.
func NewRun(wf workflow.Workflow, chatID, userID string, now time.Time) workflow.Run {
	run := workflow.Run{ID: uuid.NewString(), ChatID: chatID, WorkflowID: wf.ID, UserID: userID, Status: workflow.RunPending,
		StartedAt: now.UTC(), Steps: make([]workflow.RunStep, len(wf.Steps)), Attempt: 1, WorkflowVersion: wf.Version,
		Plan: append([]workflow.Step(nil), wf.Steps...)}
	for i, s := range wf.Steps {
		run.Steps[i] = workflow.RunStep{ID: s.ID, ToolID: s.ToolID, Status: workflow.StepPending}
	}
	return run
}

// Continue runs the steps of run (stored, pending or running) that have
// not completed, recording each checkpoint through save:
//   - a pending run is first marked running;
//   - before each step, a write conditioned on the run still running
//     records the step as running, and after it another records its
//     result; a failed condition means the run was cancelled (or taken
//     over): the remaining steps become cancelled and so does the run (a
//     step that finished keeps its result);
//   - a step's inputs are resolved from earlier outputs (ResolveInputs);
//     the outputs of completed steps (run before a resume, or reused by a
//     retry) feed the later steps and those steps do not run again; a
//     template error or a tool error fails the step and the run, and the
//     remaining steps are skipped;
//   - each step runs under the step timeout, within the run's.
//
// It returns an error only when the run could not be recorded; the
// outcome of the run is run.Status. steps are the run's plan.
func (e *Engine) Continue(ctx context.Context, save Saver, steps []workflow.Step, run *workflow.Run) error {
	const op = "workflow.Continue"
	x := execution{e: e, save: save, run: run}
	if run.Status == workflow.RunPending {
		run.Status = workflow.RunRunning
		if err := x.store(ctx, workflow.RunPending); err != nil {
			return x.stopped(ctx, op, err)
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
			return x.finish(ctx, op, workflow.RunCancelled, "the run was cancelled")
		}
		rs := &run.Steps[i]
		started := e.clock()
		timeout := e.stepTimeout
		if e.runTimeout > 0 {
			left := e.runTimeout - started.Sub(run.StartedAt)
			if left <= 0 {
				return x.finish(ctx, op, workflow.RunFailed, fmt.Sprintf("the run exceeded its time limit of %s", e.runTimeout))
			}
			timeout = min(timeout, left)
		}
		rs.Status, rs.StartedAt = workflow.StepRunning, &started
		input, err := workflow.ResolveInputs(step.Inputs, outputs)
		if err != nil {
			return x.failStep(ctx, op, i, err.Error())
		}
		rs.Input = input
		if err := x.store(ctx, workflow.RunRunning); err != nil {
			rs.Status, rs.StartedAt, rs.Input = workflow.StepPending, nil, nil
			return x.stopped(ctx, op, err)
		}
		out, err := e.runStep(ctx, step.ToolID, input, timeout)
		done := e.clock()
		rs.CompletedAt = &done
		if err != nil {
			if ctx.Err() != nil {
				rs.Status = workflow.StepCancelled
				return x.finish(ctx, op, workflow.RunCancelled, "the run was cancelled")
			}
			if timeout < e.stepTimeout && errors.Is(err, errStepTimedOut) {
				// The step had only what was left of the run's time: the
				// run's limit stopped it, and the run says so.
				msg := fmt.Sprintf("the run exceeded its time limit of %s", e.runTimeout)
				rs.Status, rs.Error = workflow.StepFailed, msg
				return x.finish(ctx, op, workflow.RunFailed, msg)
			}
			return x.failStep(ctx, op, i, err.Error())
		}
		if out == nil {
			out = map[string]any{}
		}
		rs.Status, rs.Output = workflow.StepCompleted, out
		outputs[step.ID] = out
		if i < len(steps)-1 {
			// Record the step's result now, so that the run reads true
			// while the next step runs; the last one is recorded by finish.
			if err := x.store(ctx, workflow.RunRunning); err != nil {
				return x.stopped(ctx, op, err)
			}
		}
	}
	return x.finish(ctx, op, workflow.RunCompleted, "")
}

// runStep runs one tool under the step timeout. The step's own timeout is
// reported as such (errStepTimedOut); a tool that stopped at a limit of
// its own (jq's, say) keeps its message, which names that limit; other
// errors give their client-safe message.
func (e *Engine) runStep(ctx context.Context, toolID string, input map[string]any, timeout time.Duration) (map[string]any, error) {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := e.tools.Run(sctx, toolID, input)
	if err == nil {
		return out, nil
	}
	if ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w after %s", errStepTimedOut, timeout)
	}
	return nil, errors.New(errs.MessageOf(err, "the tool failed"))
}

var errStepTimedOut = errors.New("step timed out")

// execution is one Continue: the run it updates in place and the Saver
// that records it.
type execution struct {
	e    *Engine
	save Saver
	run  *workflow.Run
}

// failStep fails step i with msg, skips the rest and fails the run.
func (x execution) failStep(ctx context.Context, op string, i int, msg string) error {
	rs := &x.run.Steps[i]
	now := x.e.clock()
	if rs.StartedAt == nil {
		rs.StartedAt = &now
	}
	rs.Status, rs.Error, rs.CompletedAt = workflow.StepFailed, msg, &now
	return x.finish(ctx, op, workflow.RunFailed, fmt.Sprintf("step %s failed: %s", rs.ID, msg))
}

// finish marks the steps not yet finished (skipped after a failure,
// cancelled otherwise) and stores the run's final status, conditioned on it
// still running. When the condition fails the run was cancelled meanwhile.
func (x execution) finish(ctx context.Context, op, status, msg string) error {
	rest := workflow.StepSkipped
	if status == workflow.RunCancelled {
		rest = workflow.StepCancelled
	}
	workflow.MarkRest(x.run, rest)
	now := x.e.clock()
	x.run.Status, x.run.Error, x.run.CompletedAt = status, msg, &now
	if err := x.store(ctx, workflow.RunRunning); err != nil {
		return x.stopped(ctx, op, err)
	}
	return nil
}

// stopped handles a failed conditional write: a changed state means the
// run was cancelled (by the cancel endpoint) or taken over: record the
// engine's view of the steps under the cancelled status (a write that
// fails again when another attempt holds the run). Other errors are
// returned.
func (x execution) stopped(ctx context.Context, op string, err error) error {
	if errs.CodeOf(err) != workflow.CodeRunStateChanged {
		return errs.Wrap(op, err)
	}
	workflow.MarkRest(x.run, workflow.StepCancelled)
	x.run.Status = workflow.RunCancelled
	x.run.Error = "the run was cancelled"
	if x.run.CompletedAt == nil {
		now := x.e.clock()
		x.run.CompletedAt = &now
	}
	if err := x.store(ctx, workflow.RunCancelled); err != nil && errs.CodeOf(err) != workflow.CodeRunStateChanged {
		logging.FromContext(ctx).WarnContext(ctx, "record cancelled run", "runId", x.run.ID, "err", err.Error())
	}
	return nil
}

// store records the run if its stored status is ifStatus, with a
// detached context when ctx is done so that the outcome is recorded.
func (x execution) store(ctx context.Context, ifStatus string) error {
	if ctx.Err() != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
		ctx = dctx
	}
	workflow.Bound(x.run)
	return x.save.SaveRun(ctx, *x.run, ifStatus)
}
