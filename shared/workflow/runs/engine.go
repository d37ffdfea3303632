// Package runs runs workflows. Every run is durable, however it starts
// (the run routes, a chat stream, later triggers and MCP clients): the
// Service stores it with its event log and lease and hands it to a Runner
// through a workflow.Invoker (the runner function in AWS, a goroutine
// locally); the Runner's Engine executes the steps, each step's start
// (with the result of the step before) one checkpoint; the sweeper resumes a run whose runner died (ResumeExpired).
// Callers that want the outcome follow the run's log (Wait, Follow).
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"
)

// DefaultStepTimeout bounds one step of a run (docs/limits.md).
const DefaultStepTimeout = 30 * time.Second

// saveTimeout bounds the writes made with a detached context once the
// run's context is done.
const saveTimeout = 10 * time.Second

// ToolRunner runs one tool for a step: the tool gate in front of the
// tool server's catalog (it refuses a tool the user denies, and meters
// model-calling tools against the user's budget). Run never changes
// input: the engine may record it while the call runs.
type ToolRunner interface {
	Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error)
}

// Saver records a run's checkpoints and keeps its values:
//   - SaveRun stores run if its stored status is ifStatus, with the
//     events of what changed since the last checkpoint; values too large
//     for the record are spilled first (run's steps then hold their
//     spilled form). A failed condition (the run was cancelled, another
//     attempt took it over, or the sweeper ended it) is Conflict
//     workflow.CodeRunStateChanged;
//   - Keep returns the form of a step's input or output (what names it)
//     the engine holds while the run goes on: the value itself when small,
//     else its spilled form (stored now); TooLarge TOOL_VALUE_TOO_LARGE
//     over MaxValueBytes, and nothing is stored;
//   - SaveElement records the output of element j of forEach step stepID
//     (out, whose JSON is b) and returns the form the engine holds, as
//     Keep;
//   - Results returns the held form of a forEach step's output, from the
//     held forms of its elements' outputs; it fails as Keep;
//   - Whole returns a value whole: the value itself, or the one a
//     spilled value refers to.
type Saver interface {
	SaveRun(ctx context.Context, run workflow.Run, ifStatus string) error
	Keep(ctx context.Context, what string, v map[string]any) (map[string]any, error)
	SaveElement(ctx context.Context, stepID string, j int, out map[string]any, b []byte) (map[string]any, error)
	Results(ctx context.Context, elements []map[string]any) (map[string]any, error)
	Whole(ctx context.Context, v map[string]any) (map[string]any, error)
	// InputFiles returns input with the run's input files it holds
	// replaced by their text; its error is the run's failure.
	InputFiles(ctx context.Context, run *workflow.Run, input map[string]any) (map[string]any, error)
	// Recorded returns the run's steps as the store held them when the
	// attempt read the run: what a step changed and not recorded since
	// goes back to should the run be found cancelled (stopped).
	Recorded() []workflow.RunStep
}

// Engine executes the steps of a run: in order, each with its inputs
// resolved from the run's input and earlier outputs, every step's start
// (with the result of the step before) recorded through a Saver. It is
// the Runner's executor.
type Engine struct {
	tools       ToolRunner
	stepTimeout time.Duration
	runTimeout  time.Duration
	now         func() time.Time
	condition   func(src string, input map[string]any, outputs map[string]map[string]any) (bool, error)
	// beforeStep, when set, is called before each step's conditional
	// write: a test hook.
	beforeStep func(i int)
	// values admits the calls with large inputs, per user.
	values *valueGate
	// children starts the child runs of run_workflow steps.
	children Children
	// authWaits keeps the runs waiting for an authorization.
	authWaits AuthWaits
	// computeOnly reports whether a tool only computes from its input.
	computeOnly func(ctx context.Context, toolID string) bool
	// startDelay is how long what such steps did may wait unrecorded.
	startDelay time.Duration
}

// EngineOptions configures NewEngine. StepTimeout zero means
// DefaultStepTimeout; Now nil means time.Now.
type EngineOptions struct {
	StepTimeout time.Duration
	// RunTimeout bounds a whole run from its start, the time it waited
	// for people left out: a step does not start once it has passed, and
	// a step's timeout never reaches past it. Zero means no bound beyond
	// the steps' own.
	RunTimeout time.Duration
	Now        func() time.Time
	// Condition evaluates a step's `if` on the run's input and the
	// outputs of the steps that ran (condition.Eval; kept out of this
	// package so that what starts runs links no expression language).
	// Nil: a step with an `if` fails.
	Condition func(src string, input map[string]any, outputs map[string]map[string]any) (bool, error)
	// BeforeStep, when set, is called before step i's conditional write
	// (tests use it to cancel between steps).
	BeforeStep func(i int)
	// Children starts the child runs of run_workflow steps (the run
	// service); nil: such a step fails.
	Children Children
	// AuthWaits keeps the wait items of the runs waiting for the
	// authorization of a remote server (authwait.go); nil: such a run
	// waits until the sweeper's AuthCheck.
	AuthWaits AuthWaits
	// ComputeOnly reports whether a tool only computes from its input
	// (read-only, idempotent, closed world): the start of a step of it
	// may ride its end (execution.ridesItsEnd). Nil: no tool does.
	ComputeOnly func(ctx context.Context, toolID string) bool
	// StartDelay bounds how long such steps' starts and results may wait
	// unrecorded (callStartLater); zero means StartDelay.
	StartDelay time.Duration
}

// MaxElements bounds the array a forEach step runs over.
const MaxElements = 1000

// NewEngine returns an Engine running tools.
func NewEngine(tools ToolRunner, o EngineOptions) *Engine {
	if o.StepTimeout <= 0 {
		o.StepTimeout = DefaultStepTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.StartDelay <= 0 {
		o.StartDelay = StartDelay
	}
	if o.Condition == nil {
		o.Condition = func(string, map[string]any, map[string]map[string]any) (bool, error) {
			return false, errors.New("this runner cannot evaluate conditions")
		}
	}
	return &Engine{tools: tools, stepTimeout: o.StepTimeout, runTimeout: o.RunTimeout, now: o.Now, condition: o.Condition, beforeStep: o.BeforeStep, values: newValueGate(MaxUserValueBytes, MaxProcessValueBytes), children: o.Children, authWaits: o.AuthWaits, computeOnly: o.ComputeOnly, startDelay: o.StartDelay}
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
// not finished, recording each checkpoint through save:
//   - before each step's tool runs, one write conditioned on the run's
//     status (and attempt) records the step as running with its resolved
//     input, and with it what happened since the last write: the result
//     of the step before (or its skip or failure), and for a pending run
//     its start; the last step's result is written with the run's end. A
//     crash after a step's tool and before that write finds the step
//     running, as a crash during it. A failed condition means the run
//     was cancelled (or taken over): the remaining steps become cancelled
//     and so does the run (a step that finished keeps its result);
//   - a step's inputs are resolved from the run's input (an input file,
//     a property of format attachment, read as the file's text) and
//     earlier outputs (workflow.Scope); the outputs of finished steps (run before
//     a resume, or reused by a retry) feed the later steps and those steps
//     do not run again;
//   - a step whose `if` is false is skipped; a forEach step runs its tool
//     per element, Parallelism() at once, each element's output recorded
//     as it finishes (a resume runs only the others); a human step
//     (ask_human) leaves the run waiting for an answer (Service.Respond),
//     and Continue returns;
//   - a template, condition or tool error fails the step: with
//     continueOnError the step is failed with output {"error": ...} (a
//     forEach element's result is that object) and the run goes on,
//     otherwise the run fails and the remaining steps are skipped;
//   - each call runs under the step timeout, within the run's.
//
// It returns an error only when the run could not be recorded; the
// outcome of the run is run.Status. steps are the run's plan.
func (e *Engine) Continue(ctx context.Context, save Saver, steps []workflow.Step, run *workflow.Run) error {
	const op = "workflow.Continue"
	x := &execution{e: e, save: save, run: run, stored: run.Status, recorded: save.Recorded()}
	switch run.Status {
	case workflow.RunWaiting:
		return nil // a person answers first
	case workflow.RunPending:
		// Recorded by the first checkpoint (the first step's start, or
		// the run's end), conditioned on the run still pending.
		run.Status = workflow.RunRunning
	}
	input, err := save.Whole(ctx, run.Input)
	if err != nil {
		return errs.Wrap(op, err)
	}
	// Each input file is read here once, so that a run whose file cannot
	// be read fails before its first step; the steps read the files they
	// name again, so that the run never holds them all.
	for _, name := range run.InputFiles {
		if _, err := save.InputFiles(ctx, run, map[string]any{name: input[name]}); err != nil {
			if errs.Is(err, errs.Unavailable) || errs.Is(err, errs.Internal) {
				return errs.Wrap(op, err) // not recorded: the next attempt reads again
			}
			return x.finish(ctx, op, workflow.RunFailed, errs.MessageOf(err, "an input file cannot be read"))
		}
	}
	// outputs holds the outputs of the steps that finished in the form
	// Keep returns (spilled when large); a step reads whole only those it
	// names (load).
	outputs := make(map[string]map[string]any, len(steps))
	var span stepSpan
	defer span.end()
	for i, step := range steps {
		rs := &run.Steps[i]
		switch rs.Status {
		case workflow.StepCompleted, workflow.StepFailed: // failed: with continueOnError
			// A step that finished before a resume or a pause: its
			// output feeds the later steps that read it.
			outputs[step.ID] = rs.Output
			continue
		case workflow.StepSkipped:
			continue
		}
		ctx := span.start(ctx, i, rs)
		if e.beforeStep != nil {
			e.beforeStep(i)
		}
		if ctx.Err() != nil {
			return x.finish(ctx, op, workflow.RunCancelled, "the run was cancelled")
		}
		timeout, ok := x.timeout(step)
		if !ok {
			msg := fmt.Sprintf("the run exceeded its time limit of %s", e.runTimeout)
			if len(rs.Attempts) > 0 {
				// A step of a retry whose attempt failed ran: it fails
				// for the run's limit, before its next attempt, and is
				// not skipped as a step that never ran.
				now := e.clock()
				rs.Status, rs.Error, rs.CompletedAt, rs.RetryAt = workflow.StepFailed, msg, &now, nil
			}
			return x.finish(ctx, op, workflow.RunFailed, msg)
		}
		scope, msg, err := x.load(ctx, step, input, outputs)
		if err != nil {
			return x.unrecorded(ctx, op, err)
		}
		if msg != "" {
			if done, err := x.stepFailed(ctx, op, i, step, msg, outputs); done {
				return err
			}
			continue
		}
		if step.If != "" {
			yes, err := e.condition(step.If, scope.Input, scope.Steps)
			if err != nil {
				if done, err := x.stepFailed(ctx, op, i, step, "if: "+errs.MessageOf(err, err.Error()), outputs); done {
					return err
				}
				continue
			}
			if !yes {
				now := e.clock()
				rs.Status, rs.StartedAt, rs.CompletedAt = workflow.StepSkipped, &now, &now
				x.unrecord(i, true) // recorded with the next checkpoint
				continue
			}
		}
		var out map[string]any
		switch {
		case step.ToolID == workflow.AskHumanToolID:
			msg, err = x.ask(ctx, op, i, step, scope)
			if err == nil && msg == "" {
				return nil // waiting for an answer
			}
		case step.ToolID == workflow.RunWorkflowToolID && step.ForEach == "":
			msg, err = x.child(ctx, op, i, step, scope) // children.go
			if err == nil && msg == "" {
				return nil // waiting for the child run
			}
		case step.ForEach != "":
			out, msg, err = x.forEach(ctx, op, i, step, scope)
			if x.paused {
				return err // waiting for an authorization (authwait.go)
			}
		default:
			out, msg, err = x.single(ctx, op, i, step, scope, timeout)
			if x.paused {
				return err // waiting for an authorization (authwait.go)
			}
			if err == nil && !x.over {
				var waiting bool
				if waiting, err = x.attempted(ctx, op, i, step, msg); waiting {
					return err // the next attempt waits for its time
				}
			}
		}
		if err != nil || x.over {
			return err // recorded: cancelled, stopped, or the run's limit
		}
		if msg != "" {
			if done, err := x.stepFailed(ctx, op, i, step, msg, outputs); done {
				return err
			}
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		done := e.clock()
		rs.Status, rs.Output, rs.CompletedAt, rs.Elements = workflow.StepCompleted, out, &done, nil
		outputs[step.ID] = out
		// The step's result is recorded by the next checkpoint, in the
		// same write: the next step's start (before its tool runs), a
		// wait for a person, or the run's end (finish). Until then the
		// store shows the step running, so a crash meanwhile is one
		// during the step (its tool is not run again unless idempotent).
		// The result of a tool that only computes may be made again by
		// the next attempt: the next such step need not record it first.
		x.unrecord(i, step.ForEach == "" && x.redoable(ctx, step))
	}
	return x.finish(ctx, op, workflow.RunCompleted, "")
}

// timeout returns how long the next call of step may take: its own
// timeoutSeconds, else the engine's step timeout, within what is left of
// the run's time (runLeft); false when nothing is left.
func (x *execution) timeout(step workflow.Step) (time.Duration, bool) {
	left, ok := x.runLeft()
	return min(step.CallTimeout(x.e.stepTimeout), left), ok
}

// runLeft returns what is left of the run's time limit (no limit: the
// longest duration); false when nothing is.
func (x *execution) runLeft() (time.Duration, bool) {
	if x.e.runTimeout <= 0 {
		return time.Duration(math.MaxInt64), true
	}
	left := x.e.runTimeout - busy(x.run, x.e.clock())
	return max(left, 0), left > 0
}

// busy is how long run has been going at now, the time its human steps
// and its child runs waited, its steps waited for authorizations, and
// its steps with a retry waited between their attempts, left out: a
// wait holds no runner.
func busy(run *workflow.Run, now time.Time) time.Duration {
	d := now.Sub(run.StartedAt)
	for _, s := range run.Steps {
		if s.Reused { // a retry's reused step ran and waited in the run it retries
			continue
		}
		if (s.ToolID == workflow.AskHumanToolID || s.ChildRunID != "") && s.StartedAt != nil && s.CompletedAt != nil {
			d -= s.CompletedAt.Sub(*s.StartedAt)
		}
		d -= time.Duration(s.AuthorizationWaitedMs+s.RetryWaitedMs) * time.Millisecond
	}
	return d
}

// single runs a step's one tool call: the step is recorded running with
// its resolved input, then the tool runs. It returns the output, or the
// message of a failure of the step; err when the run ended (cancelled,
// the run's time limit: recorded) or could not be recorded.
func (x *execution) single(ctx context.Context, op string, i int, step workflow.Step, scope workflow.Scope, timeout time.Duration) (map[string]any, string, error) {
	rs := &x.run.Steps[i]
	var deadline *time.Time // of an authorization it waited for before
	if rs.Reason == workflow.WaitAuthorization {
		deadline = rs.ExpiresAt
		rs.Reason, rs.ExpiresAt = "", nil
	}
	started := x.e.clock()
	rs.Status, rs.StartedAt = workflow.StepRunning, &started
	input, err := resolve(scope, step.Inputs)
	if err != nil {
		return nil, err.Error(), nil
	}
	if rs.Input, err = x.save.Keep(ctx, "the step's input", input); err != nil {
		rs.Status, rs.StartedAt = workflow.StepPending, nil
		if msg, ok := valueTooLarge(err); ok {
			return nil, msg, nil
		}
		return nil, "", x.unrecorded(ctx, op, err)
	}
	var out map[string]any
	if x.ridesItsEnd(ctx, step) {
		out, timeout, err = x.callStartLater(ctx, i, step.ToolID, input, timeout)
	} else if err = x.store(ctx); err == nil {
		out, timeout, err = x.call(ctx, step.ToolID, input, timeout)
	} else {
		err = errStartNotRecorded{err}
	}
	if e, ok := err.(errStartNotRecorded); ok {
		rs.Status, rs.StartedAt, rs.Input = workflow.StepPending, nil, nil
		return nil, "", x.stopped(ctx, op, e.err)
	}
	if err == nil {
		if out == nil {
			out = map[string]any{}
		}
		kept, err := x.save.Keep(ctx, "the step's output", out)
		if err != nil {
			msg, err := limitFailure(op, err)
			return nil, msg, err
		}
		return kept, "", nil
	}
	done := x.e.clock()
	if ctx.Err() != nil {
		rs.Status, rs.CompletedAt = workflow.StepCancelled, &done
		x.over = true
		return nil, "", x.finish(ctx, op, workflow.RunCancelled, "the run was cancelled")
	}
	if timeout < step.CallTimeout(x.e.stepTimeout) && errors.Is(err, errStepTimedOut) {
		// The call had only what was left of the run's time: the run's
		// limit stopped it, and the run says so.
		msg := fmt.Sprintf("the run exceeded its time limit of %s", x.e.runTimeout)
		if step.Retry != nil {
			addAttempt(rs, msg, done) // the step's last call, as its others
		}
		rs.Status, rs.Error, rs.CompletedAt = workflow.StepFailed, msg, &done
		x.over = true
		return nil, "", x.finish(ctx, op, workflow.RunFailed, msg)
	}
	if serverID, ok := authServer(err); ok {
		return nil, "", x.waitAuth(ctx, op, i, serverID, deadline)
	}
	return nil, err.Error(), nil
}

// StartDelay is how long the call of a step whose start rides its end
// (execution.ridesItsEnd), with what the steps before it did unrecorded,
// may run before its start is recorded after all: a step that is still
// running after it shows as running, the progress of quick steps shows
// within it, and a stop of the run is noticed within it (the checkpoint's
// condition fails) if the heartbeat did not notice it first.
const StartDelay = time.Second

// errStartNotRecorded is the failure of the checkpoint of a step's start:
// the step did not run (or its call was cancelled and waited for), and
// err says why the run stops.
type errStartNotRecorded struct{ err error }

func (e errStartNotRecorded) Error() string { return e.err.Error() }

// redoable reports whether step's call may be made again harmlessly by
// the next attempt, should a crash lose its start or its result: it has
// no retry policy (whose attempts are recorded one by one) and its tool
// only computes from its input (EngineOptions.ComputeOnly; never a
// person's answer, a child run or a remote tool).
func (x *execution) redoable(ctx context.Context, step workflow.Step) bool {
	return step.Retry == nil && step.ToolID != workflow.AskHumanToolID && step.ToolID != workflow.RunWorkflowToolID &&
		x.e.onlyComputes(ctx, step.ToolID)
}

// onlyComputes reports whether the engine was told that tool toolID only
// computes from its input (EngineOptions.ComputeOnly).
func (e *Engine) onlyComputes(ctx context.Context, toolID string) bool {
	return e.computeOnly != nil && e.computeOnly(ctx, toolID)
}

// ridesItsEnd reports whether the start of step, about to run, may be
// recorded with its end (by the next checkpoint) rather than before its
// call: the step is redoable, and what the run holds unrecorded, if
// anything, is too (skips, results of redoable steps) and is younger
// than StartDelay, and fewer than MaxRiders steps wait with it. A crash
// during the call then loses only what the next attempt makes again
// harmlessly, and nothing waits unrecorded longer than StartDelay
// (callStartLater records it once that has passed). So a run of such
// steps that each end quickly costs one checkpoint a second, or one per
// MaxRiders+1 steps, not one a step.
func (x *execution) ridesItsEnd(ctx context.Context, step workflow.Step) bool {
	if !x.redoable(ctx, step) || x.riders >= MaxRiders {
		return false
	}
	return !x.unsaved || (!x.unredoable && time.Since(x.unsavedSince) < x.e.startDelay)
}

// MaxRiders bounds the steps whose starts ride one checkpoint (and so
// their results and events): each step's record and events hold its
// input and output in the record (up to SpillBytes each, larger ones
// cut), about 130 KB at most, so a checkpoint of MaxRiders of them stays
// far under DynamoDB's 4 MB a transaction and its 100 items.
const MaxRiders = 8

// unrecord notes that the run holds a change of step i no checkpoint
// recorded yet (its start or result, a skip): the next checkpoint records
// it. redoable tells whether the next attempt would make it again
// harmlessly should a crash lose it (ridesItsEnd); such a change is also
// undone should the run be found cancelled (stopped).
func (x *execution) unrecord(i int, redoable bool) {
	if !x.unsaved {
		x.unsaved, x.unsavedSince = true, time.Now()
	}
	x.unredoable = x.unredoable || !redoable
	if redoable {
		x.redoables = append(x.redoables, i)
	}
}

// callStartLater calls the step's tool (as call) without recording its
// start first: if the call ends within StartDelay of the oldest change
// the run holds unrecorded (of the call's start when there is none), its
// start is recorded with its end by a later checkpoint (x.unsaved); else
// the start, and everything before it, is recorded while the call goes
// on. A failed write of the start cancels
// the call, waits for it and is returned as errStartNotRecorded. The call
// runs on another goroutine while the start is written; it reads a copy
// of the run, and a tool call never changes its input (ToolRunner).
func (x *execution) callStartLater(ctx context.Context, i int, toolID string, input map[string]any, timeout time.Duration) (map[string]any, time.Duration, error) {
	type result struct {
		out     map[string]any
		timeout time.Duration
		err     error
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The call reads the run (its time so far) from a copy: the write
	// below may rewrite the run's steps meanwhile (their spilled forms).
	view := snapshot(*x.run)
	cx := &execution{e: x.e, run: &view}
	done := make(chan result, 1)
	began := time.Now()
	go func() {
		out, t, err := cx.call(cctx, toolID, input, timeout)
		done <- result{out, t, err}
	}()
	wait := x.e.startDelay
	if x.unsaved {
		wait -= time.Since(x.unsavedSince)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-done:
		// The start, with the step's end: unrecorded since the call
		// began, so later riders wait no longer than StartDelay from it.
		if !x.unsaved {
			x.unsaved, x.unsavedSince = true, began
		}
		x.unrecord(i, true)
		x.riders++
		return r.out, r.timeout, r.err
	case <-timer.C:
	}
	if err := x.store(ctx); err != nil {
		cancel()
		<-done
		return nil, 0, errStartNotRecorded{err}
	}
	r := <-done
	return r.out, r.timeout, r.err
}

// stepFailed records step i as failed with msg. With continueOnError the
// step's output is {"error": msg}, later steps read it, and the run goes
// on (done false, unless the write failed); otherwise the run fails
// (done true).
func (x *execution) stepFailed(ctx context.Context, op string, i int, step workflow.Step, msg string, outputs map[string]map[string]any) (done bool, err error) {
	if !step.ContinueOnError {
		return true, x.failStep(ctx, op, i, msg)
	}
	rs := &x.run.Steps[i]
	now := x.e.clock()
	if rs.StartedAt == nil {
		rs.StartedAt = &now
	}
	out := map[string]any{"error": msg}
	rs.Status, rs.Error, rs.CompletedAt, rs.Output, rs.Elements = workflow.StepFailed, msg, &now, out, nil
	outputs[step.ID] = out
	x.unrecord(i, false) // recorded with the next checkpoint, as a result
	return false, nil
}

// forEach runs a forEach step: its tool once per element of the array
// step.ForEach names, Parallelism() at once, each element's inputs
// resolved with {{item}}; each output is recorded as it finishes (one
// checkpoint per element), so a resume runs only the elements that have
// none. A failed call fails the step (the calls still running are
// cancelled and their elements left unrecorded) unless continueOnError,
// which records {"error": ...} as its result. The results are counted as
// they grow: once their JSON passes MaxValueBytes the step fails
// TOOL_VALUE_TOO_LARGE at once (the calls running are cancelled) and its
// output is never stored. An element whose server needs the user's
// authorization starts no more elements; once the calls running have
// finished (each recorded) the step waits for the authorization as a
// single step does (authwait.go), and afterwards runs only the elements
// with no recorded output. It returns the step's output {"results":
// [...]} in the form Keep returns, or the message of the step's failure;
// err when the run ended or could not be recorded.
func (x *execution) forEach(ctx context.Context, op string, i int, step workflow.Step, scope workflow.Scope) (map[string]any, string, error) {
	rs := &x.run.Steps[i]
	items, err := scope.Items(step.ForEach)
	if err != nil {
		return nil, err.Error(), nil
	}
	if len(items) > MaxElements {
		return nil, fmt.Sprintf("forEach %s has %d elements, more than the %d a step may run over", step.ForEach, len(items), MaxElements), nil
	}
	if rs.Elements == nil {
		rs.Elements = map[int]map[string]any{}
	}
	var deadline *time.Time // of an authorization it waited for before
	if rs.Reason == workflow.WaitAuthorization {
		deadline = rs.ExpiresAt
		rs.Reason, rs.ExpiresAt = "", nil
	}
	started := x.e.clock()
	rs.Status, rs.StartedAt = workflow.StepRunning, &started
	rs.Input = map[string]any{"forEach": step.ForEach, "elements": len(items)}
	if err := x.store(ctx); err != nil {
		rs.Status, rs.StartedAt, rs.Input = workflow.StepPending, nil, nil
		return nil, "", x.stopped(ctx, op, err)
	}

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu sync.Mutex // guards rs.Elements, size, failure, stop
		// size is the length of the JSON of the step's output as the
		// elements recorded so far make it: {"results":[...]} with each
		// element at its place, the ones not yet recorded left out.
		size    = len(`{"` + workflow.ForEachOutput + `":[]}`)
		counted = len(rs.Elements) // the elements in size
		failure string
		stop    error // a write that failed
		wg      sync.WaitGroup
		sem     = make(chan struct{}, step.Parallelism())
		// authID is the server an element's call found needing the
		// user's authorization; halt, closed then, starts no more
		// elements while the calls running finish (authwait.go).
		authID string
		halt   = make(chan struct{})
	)
	for _, m := range rs.Elements { // recorded before a resume
		size += keptSize(m) + 1
	}
	if size > MaxValueBytes+1 {
		// Not seen before the resume (recorded by a version without the
		// bound, say): the step fails without running more elements.
		return nil, fmt.Sprintf("%s: the results of forEach step %s pass %d bytes of JSON", toolclient.CodeValueTooLarge, step.ID, MaxValueBytes), nil
	}
	record := func(j int, out map[string]any) {
		b, err := json.Marshal(out)
		mu.Lock()
		if err == nil && size+len(b)+1 > MaxValueBytes+1 {
			// Counted as the results grow: the step fails as soon as they
			// pass the bound, and the element is not recorded.
			if failure == "" {
				failure = fmt.Sprintf("%s: the results of forEach step %s pass %d bytes of JSON with %d of its %d elements",
					toolclient.CodeValueTooLarge, step.ID, MaxValueBytes, counted+1, len(items))
			}
			cancel()
			mu.Unlock()
			return
		}
		if err == nil {
			size += len(b) + 1
			counted++
		}
		mu.Unlock()
		var held map[string]any
		if err == nil {
			// One small write per element, apart from the run's record,
			// with a context a cancel does not cut midway.
			wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
			held, err = x.save.SaveElement(wctx, step.ID, j, out, b)
			wcancel()
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if stop == nil {
				stop = err
			}
			cancel()
			return
		}
		rs.Elements[j] = held
	}
	fail := func(j int, msg string) {
		mu.Lock()
		defer mu.Unlock()
		if failure == "" {
			failure = fmt.Sprintf("element %d: %s", j, msg)
		}
		cancel()
	}
	// needAuth stops the starts, not the calls running: a call cut
	// midway could not run again (its tool may not be idempotent), one
	// that finishes is recorded, and those its server refused ran
	// nothing and run after the authorization.
	needAuth := func(serverID string) {
		mu.Lock()
		defer mu.Unlock()
		if authID == "" {
			authID = serverID
			close(halt)
		}
	}
	// Elements whose inputs do not name the item resolve the same input:
	// it is resolved once, and every call reads that one copy (a call
	// never changes its input: ToolRunner). Others are each resolved
	// once admitted, by the size their resolution will have.
	var (
		same       = !workflow.UsesItem(step.Inputs)
		shared     map[string]any
		sharedErr  error
		sharedSize int
	)
	if same {
		shared, sharedErr = resolve(scope, step.Inputs)
		sharedSize = workflow.MinJSONSize(shared, MaxValueBytes+1)
	}
	before := make(map[int]bool, len(rs.Elements)) // finished before a resume
	for j := range rs.Elements {
		before[j] = true
	}
	for j, item := range items {
		if before[j] {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-fctx.Done():
		case <-halt:
		}
		if fctx.Err() != nil || halted(halt) {
			break
		}
		timeout, ok := x.timeout(step)
		if !ok {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			var (
				out map[string]any
				err = sharedErr
			)
			if err == nil {
				in, size := func() (map[string]any, error) { return shared, nil }, sharedSize
				if !same {
					escope := scope.WithItem(item)
					in, size = func() (map[string]any, error) { return resolve(escope, step.Inputs) }, escope.ResolvedSize(step.Inputs, MaxValueBytes+1)
				}
				out, _, err = x.callAdmitted(fctx, step.ToolID, size, in, timeout)
			}
			switch {
			case err == nil:
				if out == nil {
					out = map[string]any{}
				}
				record(j, out)
			case fctx.Err() != nil && ctx.Err() == nil && !errors.Is(err, errStepTimedOut):
				// Cancelled by another element's failure: left unrecorded.
			case ctx.Err() == nil && authServerOf(err) != "":
				needAuth(authServerOf(err)) // left unrecorded: it runs once authorized
			case step.ContinueOnError && ctx.Err() == nil:
				record(j, map[string]any{"error": err.Error()})
			default:
				fail(j, err.Error())
			}
		})
	}
	wg.Wait()
	switch {
	case stop != nil:
		return nil, "", errs.Wrap(op, stop) // not recorded: the runner's next attempt goes on
	case ctx.Err() != nil:
		done := x.e.clock()
		rs.Status, rs.CompletedAt = workflow.StepCancelled, &done
		x.over = true
		return nil, "", x.finish(ctx, op, workflow.RunCancelled, "the run was cancelled")
	case failure != "":
		return nil, failure, nil
	case authID != "":
		// The elements recorded are kept (each its own write); the
		// others run once the server is authorized.
		return nil, "", x.waitAuth(ctx, op, i, authID, deadline)
	}
	elements := make([]map[string]any, len(items))
	for j := range items {
		m, ok := rs.Elements[j]
		if !ok { // the run's time limit passed before it started
			x.over = true
			msg := fmt.Sprintf("the run exceeded its time limit of %s", x.e.runTimeout)
			done := x.e.clock()
			rs.Status, rs.Error, rs.CompletedAt = workflow.StepFailed, msg, &done
			return nil, "", x.finish(ctx, op, workflow.RunFailed, msg)
		}
		elements[j] = m
	}
	out, err := x.save.Results(ctx, elements)
	if err != nil {
		msg, err := limitFailure(op, err)
		return nil, msg, err
	}
	return out, "", nil
}

// keptSize is the length of the JSON of a value held as Keep returns it:
// a spilled value's recorded size, or its own.
func keptSize(m map[string]any) int {
	if _, spilled := workflow.SpilledKey(m); spilled {
		if n, ok := m["size"].(float64); ok {
			return int(n)
		}
		if n, ok := m["size"].(int); ok {
			return n
		}
	}
	b, _ := json.Marshal(m)
	return len(b)
}

// ask starts a human step: its resolved inputs are the request
// (workflow.ParseHumanRequest); the step becomes waiting, with its
// deadline when it has a timeout, and so does the run, which no runner
// holds until it is answered (Service.Respond) or its deadline passes
// (the sweeper). It returns the message of a failed step when the inputs
// make the request invalid; err when the run could not be recorded.
func (x *execution) ask(ctx context.Context, op string, i int, step workflow.Step, scope workflow.Scope) (string, error) {
	rs := &x.run.Steps[i]
	input, err := resolve(scope, step.Inputs)
	if err != nil {
		return err.Error(), nil
	}
	req, err := workflow.ParseHumanRequest(input)
	if err != nil {
		return detailed(err), nil
	}
	now := x.e.clock()
	rs.Status, rs.StartedAt, rs.Input = workflow.StepWaiting, &now, input
	if req.Timeout > 0 {
		t := now.Add(req.Timeout)
		rs.ExpiresAt = &t
	}
	x.run.Status = workflow.RunWaiting
	if err := x.store(ctx); err != nil {
		rs.Status, rs.StartedAt, rs.Input, rs.ExpiresAt = workflow.StepPending, nil, nil, nil
		x.run.Status = workflow.RunRunning
		return "", x.stopped(ctx, op, err)
	}
	return "", nil
}

// detailed is err's client-safe message with its field details.
func detailed(err error) string {
	var e *errs.Error
	if !errors.As(err, &e) || len(e.Details) < 2 {
		return errs.MessageOf(err, err.Error())
	}
	parts := make([]string, len(e.Details))
	for i, d := range e.Details {
		parts[i] = d.Field + ": " + d.Message
	}
	return strings.Join(parts, "; ")
}

// call runs one tool call of a step with its resolved input (callAdmitted).
func (x *execution) call(ctx context.Context, toolID string, input map[string]any, timeout time.Duration) (map[string]any, time.Duration, error) {
	return x.callAdmitted(ctx, toolID, workflow.MinJSONSize(input, MaxValueBytes+1), func() (map[string]any, error) { return input, nil }, timeout)
}

// callAdmitted runs one tool call of a step once its input, size bytes
// of JSON (what resolve returns counts: Scope.ResolvedSize), is admitted
// (a large one waits while the user's runs have MaxUserValueBytes of
// large inputs in flight, at most until the run's time limit), and only
// then resolves it (resolve's error is the call's); under timeout cut to
// what is left of the run's time once admitted, which it returns. A
// cancel of ctx ends the wait.
func (x *execution) callAdmitted(ctx context.Context, toolID string, size int, resolve func() (map[string]any, error), timeout time.Duration) (map[string]any, time.Duration, error) {
	actx := ctx
	if x.e.runTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, x.e.runTimeout-busy(x.run, x.e.clock()))
		defer cancel()
	}
	release, err := x.e.values.admit(actx, x.run.UserID, size)
	if err != nil {
		if ctx.Err() != nil {
			return nil, timeout, ctx.Err()
		}
		return nil, 0, fmt.Errorf("%w after %s", errStepTimedOut, timeout) // the run's time ran out first
	}
	defer release()
	input, err := resolve()
	if err != nil {
		return nil, timeout, err
	}
	left, _ := x.runLeft() // the wait for admission may have used some
	timeout = min(timeout, left)
	out, err := x.e.runStep(ctx, toolID, input, timeout)
	return out, timeout, err
}

// runStep runs one tool under the step timeout. The step's own timeout is
// reported as such (errStepTimedOut); a tool that stopped at a limit of
// its own (jq's, say) keeps its message, which names that limit, and a
// value the tool server refused (TOOL_VALUE_TOO_LARGE) its code too;
// other errors give their client-safe message.
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
	if msg, ok := valueTooLarge(err); ok {
		return nil, errors.New(msg) // the tool server refused a value: the code says which limit
	}
	if id, ok := authServer(err); ok {
		return nil, authNeeded{msg: errs.MessageOf(err, "the MCP server needs your authorization"), serverID: id}
	}
	return nil, errors.New(errs.MessageOf(err, "the tool failed"))
}

// authNeeded is a call's error when its server needs the user's
// authorization: its message, and the server (authServer).
type authNeeded struct{ msg, serverID string }

func (a authNeeded) Error() string                 { return a.msg }
func (a authNeeded) AuthorizationServerID() string { return a.serverID }

// errStepTimedOut is the error of a call its step's timeout stopped: its
// code is TOOL_TIMEOUT, as a tool's own timeout's.
var errStepTimedOut = errors.New(toolclient.CodeToolTimeout + ": step timed out")

// limitFailure returns the failure of a step whose value err refused
// (TooLarge TOOL_VALUE_TOO_LARGE: its message with the code), or else err
// wrapped with op (the value could not be stored: the run stops, not
// recorded, and its next attempt goes on).
func limitFailure(op string, err error) (string, error) {
	if msg, ok := valueTooLarge(err); ok {
		return msg, nil
	}
	return "", errs.Wrap(op, err)
}

// valueTooLarge returns the step failure of err, with its code, when err
// refused a value over its bound (TOOL_VALUE_TOO_LARGE).
func valueTooLarge(err error) (string, bool) {
	if errs.CodeOf(err) != toolclient.CodeValueTooLarge {
		return "", false
	}
	return toolclient.CodeValueTooLarge + ": " + errs.MessageOf(err, "a value is too large"), true
}

// resolve resolves a step's inputs in scope, the text its templates
// build bounded to MaxValueBytes (TOOL_VALUE_TOO_LARGE past it): a step's
// input can be no larger, and a template repeating a large value must
// not build it in memory first.
func resolve(scope workflow.Scope, inputs map[string]any) (map[string]any, error) {
	in, err := scope.ResolveInputsWithin(inputs, MaxValueBytes)
	if errors.Is(err, workflow.ErrTextTooLarge) {
		return nil, fmt.Errorf("%s: the step's input is more than %d bytes of JSON: its templates build more text than that", toolclient.CodeValueTooLarge, MaxValueBytes)
	}
	return in, err
}

// MaxStepReads bounds the JSON of the earlier values one step reads (the
// fields of earlier outputs and input properties its templates name, the
// whole values its condition names): what a step holds in memory at
// once, besides its own input and output.
const MaxStepReads = 2 * MaxValueBytes

// load returns the scope step resolves against: the run's input and the
// outputs of the earlier steps that step reads, whole (read from the
// blob store when spilled), kept only in part when its templates name
// fields of them; the input files it reads replaced by their text. The
// engine holds them while the step runs and no longer. It returns the
// message of the step's failure when what it reads passes MaxStepReads
// (TOOL_VALUE_TOO_LARGE) or an input file cannot be read; err when a
// value cannot be read (the run stops, not recorded).
func (x *execution) load(ctx context.Context, step workflow.Step, input map[string]any, kept map[string]map[string]any) (workflow.Scope, string, error) {
	fields := map[string]map[string]bool{} // step id (or input) -> fields; nil: all
	name := func(id, field string) {
		f, ok := fields[id]
		switch {
		case ok && f == nil:
		case field == "":
			fields[id] = nil
		case !ok:
			fields[id] = map[string]bool{field: true}
		default:
			f[field] = true
		}
	}
	for _, r := range workflow.Refs([]any{step.Inputs, step.ForEach}) {
		switch {
		case r.IsInput():
			name(workflow.InputRef, r.Output)
		case r.IsStep():
			name(r.StepID, r.Output)
		}
	}
	if step.If != "" {
		for _, id := range identRe().FindAllString(step.If, -1) {
			if _, ok := kept[id]; ok || id == workflow.InputRef {
				name(id, "")
			}
		}
	}
	left := MaxStepReads
	part := func(whole map[string]any, f map[string]bool) (map[string]any, bool) {
		if f != nil {
			sub := make(map[string]any, len(f))
			for k := range f {
				if v, ok := whole[k]; ok {
					sub[k] = v
				}
			}
			whole = sub
		}
		left -= workflow.MinJSONSize(whole, left+1)
		return whole, left >= 0
	}
	tooMuch := fmt.Sprintf("%s: step %s reads more than %d bytes of JSON of the run's input and earlier outputs", toolclient.CodeValueTooLarge, step.ID, MaxStepReads)
	scope := workflow.Scope{Steps: make(map[string]map[string]any, len(fields))}
	for id, f := range fields {
		if id == workflow.InputRef {
			continue
		}
		m, ok := kept[id]
		if !ok {
			continue // not run (or skipped): the reference's error says so
		}
		whole, err := x.save.Whole(ctx, m)
		if err != nil {
			return workflow.Scope{}, "", err
		}
		if scope.Steps[id], ok = part(whole, f); !ok {
			return workflow.Scope{}, tooMuch, nil
		}
	}
	f, ok := fields[workflow.InputRef]
	if !ok {
		return scope, "", nil
	}
	in, ok := part(input, f)
	if !ok {
		return workflow.Scope{}, tooMuch, nil
	}
	if len(x.run.InputFiles) > 0 {
		files, err := x.save.InputFiles(ctx, x.run, in)
		if err != nil {
			if errs.Is(err, errs.Unavailable) || errs.Is(err, errs.Internal) {
				return workflow.Scope{}, "", err
			}
			return workflow.Scope{}, errs.MessageOf(err, "an input file cannot be read"), nil
		}
		for _, name := range x.run.InputFiles {
			if text, ok := files[name].(string); ok && in[name] != text {
				left -= len(text)
			}
		}
		if left < 0 {
			return workflow.Scope{}, tooMuch, nil
		}
		in = files
	}
	scope.Input = in
	return scope, "", nil
}

// identRe matches the names in a condition: a superset of the step ids
// and the input it reads (names in its string literals included).
var identRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`) })

// execution is one Continue: the run it updates in place and the Saver
// that records it.
type execution struct {
	e    *Engine
	save Saver
	run  *workflow.Run
	// over is set once a step's call ended the run (recorded), or a
	// checkpoint found it cancelled or taken over.
	over bool
	// stored is the run's status as last recorded: the next checkpoint
	// is conditioned on it; recorded holds its steps as last recorded
	// (as the attempt found them, then as each checkpoint wrote them).
	stored   string
	recorded []workflow.RunStep
	// unsaved is set while the run holds what no checkpoint recorded
	// yet (a step's result, a skip): the next one records it. It has
	// since unsavedSince; unredoable is set when some of it could not be
	// made again harmlessly by the next attempt (unrecord).
	unsaved      bool
	unsavedSince time.Time
	unredoable   bool
	// riders counts the steps whose starts wait for the next checkpoint;
	// redoables are the steps with redoable changes it will record.
	riders    int
	redoables []int
	// paused is set once a step's call left the run waiting for an
	// authorization (recorded: authwait.go).
	paused bool
}

// failStep fails step i with msg, skips the rest and fails the run.
func (x *execution) failStep(ctx context.Context, op string, i int, msg string) error {
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
func (x *execution) finish(ctx context.Context, op, status, msg string) error {
	rest := workflow.StepSkipped
	if status == workflow.RunCancelled {
		rest = workflow.StepCancelled
	}
	workflow.MarkRest(x.run, rest)
	now := x.e.clock()
	x.run.Status, x.run.Error, x.run.CompletedAt = status, msg, &now
	if err := x.store(ctx); err != nil {
		return x.stopped(ctx, op, err)
	}
	return nil
}

// stopped handles a failed conditional write: a changed state means the
// run was cancelled (by the cancel endpoint) or taken over: record the
// engine's view of the steps under the cancelled status (a write that
// fails again when another attempt holds the run). A step with redoable
// changes no checkpoint recorded (a start that rode, the result of a
// step that only computes, a skip) goes back to what was recorded, and
// so is cancelled as the cancel recorded it: it may have run after the
// cancel, and it did nothing outside the run; any other step keeps its
// outcome, as its effects happened. Other errors are returned.
func (x *execution) stopped(ctx context.Context, op string, err error) error {
	if errs.CodeOf(err) != workflow.CodeRunStateChanged {
		return errs.Wrap(op, err)
	}
	x.over = true // no later step starts: their checkpoints would fail too
	for _, i := range x.redoables {
		if i < len(x.recorded) && i < len(x.run.Steps) {
			x.run.Steps[i] = x.recorded[i]
		}
	}
	workflow.MarkRest(x.run, workflow.StepCancelled)
	x.run.Status = workflow.RunCancelled
	x.run.Error = "the run was cancelled"
	if x.run.CompletedAt == nil {
		now := x.e.clock()
		x.run.CompletedAt = &now
	}
	if err := x.storeIf(ctx, workflow.RunCancelled); err != nil && errs.CodeOf(err) != workflow.CodeRunStateChanged {
		logging.FromContext(ctx).WarnContext(ctx, "record cancelled run", "runId", x.run.ID, "err", err.Error())
	}
	return nil
}

// store records the run as a checkpoint conditioned on the status it
// was last recorded with (storeIf).
func (x *execution) store(ctx context.Context) error {
	return x.storeIf(ctx, x.stored)
}

// storeIf records the run if its stored status is ifStatus, with a
// context detached from ctx (bounded by saveTimeout): a cancel stops the
// steps' tool calls, never a checkpoint midway, so that the outcome is
// recorded.
func (x *execution) storeIf(ctx context.Context, ifStatus string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	if err := x.save.SaveRun(dctx, *x.run, ifStatus); err != nil {
		return err
	}
	x.stored, x.unsaved, x.unsavedSince, x.unredoable, x.riders = x.run.Status, false, time.Time{}, false, 0
	x.recorded, x.redoables = slices.Clone(x.run.Steps), x.redoables[:0]
	return nil
}

// unrecorded returns err, a failure that stops the run unrecorded (a
// value that cannot be read or kept now: the next attempt goes on), once
// what the run holds unrecorded (the result of the step before) is
// recorded, so that the next attempt does not find that step running.
// A failed condition means the run was cancelled or taken over
// (stopped).
func (x *execution) unrecorded(ctx context.Context, op string, err error) error {
	if x.unsaved {
		if serr := x.store(ctx); serr != nil {
			if errs.CodeOf(serr) == workflow.CodeRunStateChanged {
				return x.stopped(ctx, op, serr)
			}
			logging.FromContext(ctx).WarnContext(ctx, "record a step's result", "runId", x.run.ID, "err", serr.Error())
		}
	}
	return errs.Wrap(op, err)
}
