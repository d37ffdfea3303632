package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/workflow"
)

// Durable runs: a run is executed by a Runner, reached through an Invoker
// (the runner Lambda function in AWS, a goroutine locally). Every step's
// start, carrying the previous step's result, is a checkpoint that
// stores the run, appends its events to the run's log and renews its
// lease when due, in one conditional write (the last step's result rides
// the run's end); the
// sweeper (ResumeExpired) gives a run whose lease expired to a new
// attempt, which continues from its first unfinished step.

// Store is the storage of runs (store.Runs).
type Store interface {
	// CreateRun stores a new run with its event log, active with lease
	// l; a run in a chat checks the chat. NotFound CHAT_NOT_FOUND.
	CreateRun(ctx context.Context, run workflow.Run, l job.Lease) error
	// CreateRetry stores a retry as CreateRun does and records it as
	// the latest retry of its chain, on the chain's root (its RetryRoot),
	// conditioned on the root's latest being after ("" for none).
	// Conflict RUN_ACTIVE when another retry in the chain was started
	// meanwhile.
	CreateRetry(ctx context.Context, run workflow.Run, l job.Lease, after string) error
	// SaveCheckpoint stores one checkpoint. Conflict RUN_STATE_CHANGED
	// when the run's status or attempt is not the expected one or its log
	// has ended.
	SaveCheckpoint(ctx context.Context, c workflow.Checkpoint) error
	// LoggedRun returns a run and the head of its log. NotFound
	// RUN_NOT_FOUND.
	LoggedRun(ctx context.Context, runID string) (workflow.Run, job.Head, error)
	// ClaimRun moves a run whose lease expired to its next attempt.
	// Conflict RUN_STATE_CHANGED when something else moved first.
	ClaimRun(ctx context.Context, run workflow.Run, expiredBefore, until time.Time) error
	// Run returns a run. NotFound RUN_NOT_FOUND.
	Run(ctx context.Context, runID string) (workflow.Run, error)
	// CancelRun cancels run (as read), conditioned on its status being
	// still the one read. Conflict RUN_STATE_CHANGED otherwise.
	CancelRun(ctx context.Context, run workflow.Run, now time.Time) (workflow.Run, error)
	// ChatOwner returns the owner of a chat. NotFound CHAT_NOT_FOUND.
	ChatOwner(ctx context.Context, chatID string) (string, error)
	// ChatRunsPage returns up to limit runs of a chat, oldest first, after
	// cursor, and the next page's cursor. Invalid INVALID_PAGINATION.
	ChatRunsPage(ctx context.Context, chatID string, limit int, cursor string) ([]workflow.Run, string, error)
	// WorkflowRunsPage returns up to limit runs of a workflow, newest
	// first, after cursor, and the next page's cursor. Invalid
	// INVALID_PAGINATION.
	WorkflowRunsPage(ctx context.Context, workflowID string, limit int, cursor string) ([]workflow.Run, string, error)
	// SaveElement records the output (JSON) of element j of forEach step
	// stepID; Elements returns the recorded ones by index; CountElements
	// counts them.
	SaveElement(ctx context.Context, runID, stepID string, j int, output []byte) error
	Elements(ctx context.Context, runID, stepID string) (map[int][]byte, error)
	CountElements(ctx context.Context, runID, stepID string) (int, error)
}

// RunnerRunTimeout bounds a durable run from its start, across its
// attempts, within the runner function's 900 s.
const RunnerRunTimeout = 840 * time.Second

// RunnerOptions configure NewRunner. Lease zero means job.LeaseTime; Now
// nil means time.Now.
type RunnerOptions struct {
	Store Store
	// Values keeps the values too large for a run's record (the blob
	// store); nil: they are cut to fit.
	Values blob.Backend
	// Files reads the attachments a run's input names; nil: a run whose
	// input names one fails.
	Files Files
	// Jobs renews a run's lease while a long step runs.
	Jobs  job.Store
	Tools ToolRunner
	// Idempotent reports whether a tool declares idempotentHint: a step
	// of it caught running by a resume runs again, else it fails
	// INTERRUPTED. Nil: no tool is idempotent.
	Idempotent func(ctx context.Context, toolID string) (bool, error)
	// ComputeOnly reports whether a tool only computes from its input
	// (EngineOptions.ComputeOnly). Nil: no tool does.
	ComputeOnly func(ctx context.Context, toolID string) bool
	// StartDelay is EngineOptions.StartDelay (zero: StartDelay).
	StartDelay  time.Duration
	StepTimeout time.Duration
	// RunTimeout bounds a run from its start, across its attempts; zero
	// means RunnerRunTimeout.
	RunTimeout time.Duration
	Lease      time.Duration
	// CancelCheck is how often a running attempt reads whether its run
	// was cancelled; zero means DefaultCancelCheck.
	CancelCheck time.Duration
	Now         func() time.Time
	// Condition evaluates steps' `if` (EngineOptions.Condition).
	Condition func(src string, input map[string]any, outputs map[string]map[string]any) (bool, error)
	// BeforeStep is the engine's test hook (EngineOptions.BeforeStep).
	BeforeStep func(i int)
	// Ended, when set, is told of every run whose log this Runner ends
	// (whatever the outcome), after the write: the release of a
	// schedule trigger's overlap marker. Its failure is logged.
	Ended func(ctx context.Context, run workflow.Run) error
	// Children starts the child runs of run_workflow steps (the run
	// service, EngineOptions.Children).
	Children Children
	// AuthWaits keeps the runs waiting for an authorization
	// (EngineOptions.AuthWaits).
	AuthWaits AuthWaits
}

// Runner executes durable runs: one attempt per Run call.
type Runner struct {
	store      Store
	values     blob.Backend
	files      Files
	jobs       job.Store
	engine     *Engine
	idempotent func(ctx context.Context, toolID string) (bool, error)
	lease      time.Duration
	check      time.Duration
	now        func() time.Time
	ended      func(ctx context.Context, run workflow.Run) error
}

// NewRunner returns a Runner.
func NewRunner(o RunnerOptions) *Runner {
	if o.Lease <= 0 {
		o.Lease = job.LeaseTime
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Idempotent == nil {
		o.Idempotent = func(context.Context, string) (bool, error) { return false, nil }
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = RunnerRunTimeout
	}
	if o.CancelCheck <= 0 {
		o.CancelCheck = DefaultCancelCheck
	}
	eng := NewEngine(o.Tools, EngineOptions{StepTimeout: o.StepTimeout, RunTimeout: o.RunTimeout, Now: o.Now, Condition: o.Condition, BeforeStep: o.BeforeStep, Children: o.Children, AuthWaits: o.AuthWaits, ComputeOnly: o.ComputeOnly, StartDelay: o.StartDelay})
	return &Runner{store: o.Store, values: o.Values, files: o.Files, jobs: o.Jobs, engine: eng, idempotent: o.Idempotent, lease: o.Lease, check: o.CancelCheck, now: o.Now, ended: o.Ended}
}

// Run executes attempt ref.Attempt of a durable run from its first
// unfinished step. A run that is gone, finished, or taken over by another
// attempt is left alone (nil). A step the previous attempt left running
// runs again when its tool is idempotent, else it fails INTERRUPTED and so
// does the run. Cancellation is noticed at the next checkpoint. It fails
// only when the run could not be read or recorded; the sweeper then takes
// it over once its lease expires.
func (r *Runner) Run(ctx context.Context, ref workflow.RunRef) (err error) {
	const op = "runs.Runner.Run"
	ctx, span := tracing.StartAttempt(context.WithoutCancel(ctx), ref.RunID, ref.Attempt)
	defer func() { tracing.End(span, err) }()
	run, head, err := r.store.LoggedRun(ctx, ref.RunID)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	if run.Attempt != ref.Attempt || !head.Active || run.Status == workflow.RunWaiting {
		return nil // another attempt's, over, or waiting for a person
	}
	// The runner serves no request: the run's steps act for the user who
	// started it (their tool policies and budget), on any host.
	ctx = auth.ActingFor(ctx, run.UserID)
	l := newRunLog(r.store, run, head.LastSeq, r.lease, r.now)
	l.ended, l.values = r.ended, values{backend: r.values, runID: run.ID, json: workflow.NewValueJSON()}
	if !workflow.Active(run.Status) {
		// Cancelled before this attempt started: end the log.
		return ignoreConflict(errs.Wrap(op, l.SaveRun(ctx, run, run.Status)))
	}
	for i := range run.Steps {
		rs := &run.Steps[i]
		if rs.Status != workflow.StepRunning {
			continue
		}
		retry, exhausted, err := r.retryInterrupted(ctx, l, &run, i)
		if err != nil {
			return errs.Wrap(op, err)
		}
		// A run_workflow step starts the same child again (childRunID):
		// it always runs again (it waits for the child; it calls no
		// tool), as does, unless its retry has no attempt left, a step
		// whose tool only computes (its start may have been recorded, its
		// result then lost with the riders after it: ridesItsEnd) or is
		// idempotent.
		if ok, err := r.idempotent(ctx, rs.ToolID); retry || rs.ToolID == workflow.RunWorkflowToolID ||
			(!exhausted && (r.engine.onlyComputes(ctx, rs.ToolID) || (err == nil && ok))) {
			// It runs again; a forEach step keeps the outputs of the
			// elements that finished (rs.Elements) and runs the others.
			if i < len(run.Plan) && run.Plan[i].ForEach != "" {
				if rs.Elements, err = r.elements(ctx, run.ID, rs.ID); err != nil {
					return errs.Wrap(op, err)
				}
			}
			rs.Status, rs.StartedAt, rs.Input = workflow.StepPending, nil, nil
			l.rebase(run)
			continue
		}
		why := "its tool is not idempotent, so it is not run again"
		if exhausted {
			why = fmt.Sprintf("that was its last attempt (%d)", len(rs.Attempts))
		}
		interrupt(&run, i, r.now().UTC(), why)
		return ignoreConflict(errs.Wrap(op, l.SaveRun(ctx, run, workflow.RunRunning)))
	}
	if err := l.values.plan(ctx, &run); err != nil {
		return errs.Wrap(op, err)
	}
	for i := range run.Steps {
		rs := &run.Steps[i]
		if rs.Status == workflow.StepPending && rs.Reason == workflow.WaitAuthorization && i < len(run.Plan) && run.Plan[i].ForEach != "" {
			// A forEach step that waited for an authorization runs only
			// the elements with no recorded output.
			if rs.Elements, err = r.elements(ctx, run.ID, rs.ID); err != nil {
				return errs.Wrap(op, err)
			}
		}
	}
	l.files = r.files
	if len(run.Plan) != len(run.Steps) {
		now := r.now().UTC()
		workflow.MarkRest(&run, workflow.StepSkipped)
		run.Status, run.Error, run.CompletedAt = workflow.RunFailed, "the run has no snapshot of its steps", &now
		return ignoreConflict(errs.Wrap(op, l.SaveRun(ctx, run, workflow.RunRunning)))
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := r.heartbeat(ctx, ref, cancel)
	defer stop()
	return errs.Wrap(op, r.engine.Continue(cctx, l, run.Plan, &run))
}

// elements returns the recorded outputs of forEach step stepID's elements.
func (r *Runner) elements(ctx context.Context, runID, stepID string) (map[int]map[string]any, error) {
	recs, err := r.store.Elements(ctx, runID, stepID)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	out := make(map[int]map[string]any, len(recs))
	for j, b := range recs {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, errs.E("runs.elements", errs.Internal, "", "internal error").WithCause(fmt.Errorf("element %d of step %s: %w", j, stepID, err))
		}
		out[j] = m
	}
	return out, nil
}

// DefaultCancelCheck is how often a runner reads whether its run was cancelled
// while a step runs (one read of the log's head).
const DefaultCancelCheck = 2 * time.Second

// heartbeat renews the run's lease every third of it while the run's
// steps run, and reads the log's head every CancelCheck (or third of the
// lease, when shorter): a run cancelled meanwhile (store.Runs.CancelRun
// marks the head) has cancel called, which stops the step at once. It returns the function
// that stops the heartbeat.
func (r *Runner) heartbeat(ctx context.Context, ref workflow.RunRef, cancel func()) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	jref := job.Ref{Kind: workflow.RunKind, Collection: ref.RunID, ID: ref.RunID}
	wg.Go(func() {
		t := time.NewTicker(min(r.check, r.lease/3))
		defer t.Stop()
		renewed := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if h, err := r.jobs.Head(ctx, jref); err == nil && h.Active && h.Status == workflow.RunCancelled {
					cancel()
				}
				if time.Since(renewed) < r.lease/3 {
					continue
				}
				renewed = time.Now()
				if err := r.jobs.Append(ctx, jref, nil, job.Lease{Until: r.now().Add(r.lease)}); err != nil {
					logging.FromContext(ctx).InfoContext(ctx, "renew run lease", "runId", jref.ID, "err", err.Error())
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// interrupt fails step i of run (caught running by a resume) with
// INTERRUPTED and why it does not run again, skips the rest and fails
// the run.
func interrupt(run *workflow.Run, i int, now time.Time, why string) {
	rs := &run.Steps[i]
	rs.Status, rs.CompletedAt = workflow.StepFailed, &now
	rs.Error = workflow.CodeInterrupted + ": the step was interrupted and " + why
	workflow.MarkRest(run, workflow.StepSkipped)
	run.Status, run.CompletedAt = workflow.RunFailed, &now
	run.Error = fmt.Sprintf("%s: step %s was interrupted", workflow.CodeInterrupted, rs.ID)
}

func ignoreConflict(err error) error {
	if errs.CodeOf(err) == workflow.CodeRunStateChanged {
		return nil
	}
	return err
}

// ResumeOptions configure ResumeExpired: the store, the Invoker that
// hands a run to its next attempt, the lease of that attempt (zero:
// job.LeaseTime) and the clock (nil: time.Now).
type ResumeOptions struct {
	Store Store
	// Values is the blob store of runs' large values (RunnerOptions.Values).
	Values  blob.Backend
	Invoker workflow.Invoker
	Lease   time.Duration
	Now     func() time.Time
	// Ended is told of every run whose log the sweeper ends (see
	// RunnerOptions.Ended).
	Ended func(ctx context.Context, run workflow.Run) error
}

// ResumeExpired is the sweeper's handler of workflow.RunKind: a run whose
// lease expired is taken over for its next attempt and handed to invoker;
// after MaxRunAttempts it fails INTERRUPTED; a run cancelled while no
// runner held it has its log ended. Every write is conditioned on the
// lease still being expired, so a runner that renewed meanwhile, or
// another sweeper, wins.
func ResumeExpired(o ResumeOptions) job.Handler {
	if o.Lease <= 0 {
		o.Lease = job.LeaseTime
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return func(ctx context.Context, e job.Expired) (err error) {
		const op = "runs.ResumeExpired"
		ctx, span := tracing.StartResume(ctx, e.ID)
		defer func() { tracing.End(span, err) }()
		run, head, err := o.Store.LoggedRun(ctx, e.ID)
		if errs.Is(err, errs.NotFound) {
			return nil
		}
		if err != nil {
			return errs.Wrap(op, err)
		}
		now := o.Now()
		if !head.Active || head.LeaseUntil.After(now) {
			return nil
		}
		l := newRunLog(o.Store, run, head.LastSeq, o.Lease, o.Now)
		l.expiredBefore, l.ended, l.values = now, o.Ended, values{backend: o.Values, runID: run.ID}
		switch {
		case !workflow.Active(run.Status):
			return ignoreConflict(errs.Wrap(op, l.SaveRun(ctx, run, run.Status)))
		case run.Status == workflow.RunWaiting && childStep(run) >= 0:
			d := parentDeps{store: o.Store, values: o.Values, invoker: o.Invoker, lease: o.Lease, now: o.Now, ended: o.Ended}
			return errs.Wrap(op, childDue(ctx, d, l, run, childStep(run)))
		case run.Status == workflow.RunWaiting && authStep(run) >= 0:
			return errs.Wrap(op, authDue(ctx, o.Invoker, l, run, authStep(run), now))
		case run.Status == workflow.RunWaiting:
			return errs.Wrap(op, timeOut(ctx, o.Invoker, l, run, now))
		case run.Attempt >= workflow.MaxRunAttempts:
			prev := run.Status
			t := now.UTC()
			i := slices.IndexFunc(run.Steps, func(s workflow.RunStep) bool { return s.Status == workflow.StepRunning })
			if i >= 0 {
				interrupt(&run, i, t, fmt.Sprintf("the run has made its %d attempts", run.Attempt))
			} else {
				workflow.MarkRest(&run, workflow.StepSkipped)
				run.Status, run.CompletedAt = workflow.RunFailed, &t
			}
			run.Error = fmt.Sprintf("%s: the run was interrupted %d times", workflow.CodeInterrupted, run.Attempt)
			return ignoreConflict(errs.Wrap(op, l.SaveRun(ctx, run, prev)))
		}
		if err := o.Store.ClaimRun(ctx, run, now, now.Add(o.Lease)); err != nil {
			return ignoreConflict(errs.Wrap(op, err))
		}
		return errs.Wrap(op, o.Invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt + 1}))
	}
}

// CodeHumanTimeout is the error of a human step no one answered in time
// (onTimeout fail).
const CodeHumanTimeout = "HUMAN_TIMEOUT"

// timeOut handles a waiting run whose lease ended: when its human step's
// deadline has passed, the step times out as its onTimeout says (fail:
// the step and the run fail; continue: the step completes with approved
// false and timedOut true, and the run goes to the runner); before the
// deadline (a heartbeat renewed the lease after the step began waiting)
// the lease is set to the deadline again. Every write is conditioned on
// the run still waiting, so an answer that came first wins.
func timeOut(ctx context.Context, invoker workflow.Invoker, l *runLog, run workflow.Run, now time.Time) error {
	if j := retryingStep(run); j >= 0 {
		return retryDue(ctx, invoker, l, run, j, now)
	}
	i := slices.IndexFunc(run.Steps, func(s workflow.RunStep) bool { return s.Status == workflow.StepWaiting })
	t := now.UTC()
	if i < 0 {
		workflow.MarkRest(&run, workflow.StepSkipped)
		run.Status, run.Error, run.CompletedAt = workflow.RunFailed, "the run was waiting with no step waiting", &t
		return ignoreConflict(l.SaveRun(ctx, run, workflow.RunWaiting))
	}
	rs := &run.Steps[i]
	if rs.ExpiresAt == nil || now.Before(*rs.ExpiresAt) {
		return ignoreConflict(l.SaveRun(ctx, run, workflow.RunWaiting))
	}
	// The request as the step resolved it, whole: a large one (an
	// inputSchema with a long enum) is kept spilled, and its onTimeout is
	// in it. A blob store that cannot be read now leaves the run to the
	// next sweep; a request lost or unreadable for good times out as
	// onTimeout fail, so that the run does not wait forever.
	input, err := l.values.whole(ctx, rs.Input)
	if err != nil && !errs.Is(err, errs.NotFound) {
		return errs.Wrap("runs.timeOut", err)
	}
	req, _ := workflow.ParseHumanRequest(input)
	waited := rs.ExpiresAt.Sub(*rs.StartedAt).Round(time.Second)
	if req.OnTimeout == workflow.OnTimeoutContinue {
		answer(&run, i, workflow.HumanAnswer{RespondedAt: t, TimedOut: true}, t)
		if err := l.SaveRun(ctx, run, workflow.RunWaiting); err != nil {
			return ignoreConflict(err)
		}
		return invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt})
	}
	rs.Status, rs.CompletedAt, rs.ExpiresAt = workflow.StepFailed, &t, nil
	rs.Error = fmt.Sprintf("%s: no answer within %s", CodeHumanTimeout, waited)
	workflow.MarkRest(&run, workflow.StepSkipped)
	run.Status, run.CompletedAt = workflow.RunFailed, &t
	run.Error = fmt.Sprintf("step %s failed: %s", rs.ID, rs.Error)
	return ignoreConflict(l.SaveRun(ctx, run, workflow.RunWaiting))
}

// newRunLog returns the Saver of run, whose log's last event is lastSeq.
// A log with no event yet starts with run_started, whatever the run's
// status (a run cancelled before any runner took it).
func newRunLog(store Store, run workflow.Run, lastSeq int64, lease time.Duration, now func() time.Time) *runLog {
	l := &runLog{store: store, seq: lastSeq, lease: lease, now: now, recorded: slices.Clone(run.Steps)}
	l.rebase(run)
	return l
}

// rebase makes run the state the next checkpoint's events are computed
// from.
func (l *runLog) rebase(run workflow.Run) {
	l.prev = snapshot(run)
	if l.seq == 0 {
		l.prev.Status = workflow.RunPending
	}
}

// runLog is the Saver of a durable run's engine: each SaveRun is a
// checkpoint carrying the events that tell what changed since the last
// one.
type runLog struct {
	store         Store
	values        values
	files         Files
	prev          workflow.Run
	seq           int64
	lease         time.Duration
	now           func() time.Time
	expiredBefore time.Time
	// renewed is when a checkpoint of this log last renewed its lease.
	renewed time.Time
	// ended, when set, is told of the run once a checkpoint ended its log.
	ended func(ctx context.Context, run workflow.Run) error
	// written is each step's JSON as this log's last checkpoint wrote it
	// (nil before its first), so that a checkpoint writes only the steps
	// that changed since.
	written [][]byte
	// writtenFrom is the steps written encodes (a copy): a step that
	// is still the SameRecord is not encoded again.
	writtenFrom []workflow.RunStep
	// recorded is the run's steps as the attempt read them (Recorded).
	recorded []workflow.RunStep
}

// Recorded returns the run's steps as the attempt read them from the
// store, before it reset any for their next run.
func (l *runLog) Recorded() []workflow.RunStep { return l.recorded }

// SaveRun stores run as a checkpoint with its events (see runEvents); a
// run that has finished ends its log.
func (l *runLog) SaveRun(ctx context.Context, run workflow.Run, ifStatus string) error {
	if err := l.values.fit(ctx, &run); err != nil {
		return err
	}
	evs := runEvents(l.prev, run)
	data := make([]json.RawMessage, len(evs))
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			return errs.Wrap("runs.runLog", err)
		}
		data[i] = b
	}
	recs := job.Chain(l.seq, l.seq+1, data...)
	end := !workflow.Active(run.Status)
	// The lease is renewed when a third of it has passed since this log
	// last renewed it (the heartbeat renews it too while steps run), and
	// by a checkpoint that waits for a person (its lease is the step's
	// deadline); else the checkpoint leaves the head's lease and index
	// entry as they are, which it would only rewrite.
	now := l.now()
	var until time.Time
	if end || run.Status == workflow.RunWaiting || l.renewed.IsZero() || now.Sub(l.renewed) >= l.lease/3 {
		until = leaseUntil(run, now, l.lease)
	}
	steps := make([][]byte, len(run.Steps))
	var changed []int
	for i, s := range run.Steps {
		if i < len(l.written) && i < len(l.writtenFrom) && s.SameRecord(l.writtenFrom[i]) {
			steps[i] = l.written[i] // as the last checkpoint wrote it
			continue
		}
		b, err := workflow.EncodeStep(s, l.values.json)
		if err != nil {
			return errs.Wrap("runs.runLog", err)
		}
		steps[i] = b
		if i >= len(l.written) || !bytes.Equal(b, l.written[i]) {
			changed = append(changed, i)
		}
	}
	partial := l.written != nil && len(l.written) == len(steps)
	err := l.store.SaveCheckpoint(ctx, workflow.Checkpoint{Run: run, IfStatus: ifStatus, Events: recs,
		End: end, LeaseUntil: until, ExpiredBefore: l.expiredBefore, Values: l.values.json,
		StepsJSON: steps, Partial: partial, Changed: changed})
	if err != nil {
		return err
	}
	l.written = steps
	l.prev = snapshot(run)
	l.writtenFrom = l.prev.Steps
	if !until.IsZero() {
		l.renewed = now
	}
	l.seq += int64(len(recs))
	if end && l.ended != nil {
		if err := l.ended(ctx, run); err != nil {
			logging.FromContext(ctx).WarnContext(ctx, "the end of a run could not be passed on", "runId", run.ID, "err", err.Error())
		}
	}
	return nil
}

// noDeadline is the lease of a run waiting without a deadline: out of
// the sweeper's reach.
const noDeadline = 100 * 365 * 24 * time.Hour

// leaseUntil is the lease a checkpoint of run at now gives it: a waiting
// run's lasts until its human step's deadline, when the sweeper times it
// out (ResumeExpired); a running run's, lease.
func leaseUntil(run workflow.Run, now time.Time, lease time.Duration) time.Time {
	if run.Status != workflow.RunWaiting {
		return now.Add(lease)
	}
	for _, s := range run.Steps {
		if s.Status == workflow.StepWaiting && s.ChildRunID != "" {
			return now.Add(ChildCheck * lease) // children.go
		}
		if s.Status == workflow.StepWaiting && s.Reason == workflow.WaitAuthorization && s.ExpiresAt != nil {
			return minTime(now.Add(AuthCheck), *s.ExpiresAt) // authwait.go
		}
		if s.Status == workflow.StepWaiting && s.ExpiresAt != nil {
			return *s.ExpiresAt
		}
		if s.Status == workflow.StepPending && s.RetryAt != nil {
			return *s.RetryAt
		}
	}
	return now.Add(noDeadline)
}

// SaveElement records out (whose JSON is b) as element j's output of
// step stepID: one write apart from the run's record, the output spilled
// when large. It returns the form the engine holds (see values.element).
func (l *runLog) SaveElement(ctx context.Context, stepID string, j int, out map[string]any, b []byte) (map[string]any, error) {
	rec, held, err := l.values.element(ctx, out, b)
	if err != nil {
		return nil, err
	}
	return held, l.store.SaveElement(ctx, l.values.runID, stepID, j, rec)
}

// Keep returns the form of v the engine holds (see values.keep).
func (l *runLog) Keep(ctx context.Context, what string, v map[string]any) (map[string]any, error) {
	return l.values.keep(ctx, what, v)
}

// Results returns the form of a forEach step's output the engine holds
// (see values.results).
func (l *runLog) Results(ctx context.Context, elements []map[string]any) (map[string]any, error) {
	return l.values.results(ctx, elements)
}

// Whole returns v whole (see values.whole).
func (l *runLog) Whole(ctx context.Context, v map[string]any) (map[string]any, error) {
	return l.values.whole(ctx, v)
}

// InputFiles returns input with each of run's input files (properties of
// format attachment, holding an attachment's id) replaced by the file's
// text, which steps read. It fails with the file's error, naming the
// property: the run cannot go on.
func (l *runLog) InputFiles(ctx context.Context, run *workflow.Run, input map[string]any) (map[string]any, error) {
	if len(run.InputFiles) == 0 {
		return input, nil
	}
	out := maps.Clone(input)
	for _, name := range run.InputFiles {
		id, ok := input[name].(string)
		if !ok {
			continue
		}
		if l.files == nil {
			return nil, errs.E("runs.InputFiles", errs.Invalid, "", fmt.Sprintf("input.%s names an attachment, which this runner cannot read", name))
		}
		text, err := l.files.FileText(ctx, run.UserID, id)
		if err != nil {
			return nil, errs.E("runs.InputFiles", errs.KindOf(err), errs.CodeOf(err), fmt.Sprintf("input.%s: %s", name, errs.MessageOf(err, "the attachment cannot be read"))).WithCause(err)
		}
		out[name] = text
	}
	return out, nil
}

// snapshot copies what runEvents compares.
func snapshot(r workflow.Run) workflow.Run {
	r.Steps = slices.Clone(r.Steps)
	return r
}

// runEvents returns the events between two states of a run: run_started
// when it leaves pending, a step event per step whose status changed, and
// the run's final event when it finished (also when it was already
// finished in prev: a run cancelled while no runner held it).
func runEvents(prev, cur workflow.Run) []workflow.RunEvent {
	var evs []workflow.RunEvent
	if prev.Status == workflow.RunPending && cur.Status != workflow.RunPending {
		evs = append(evs, workflow.RunEvent{Type: workflow.EventRunStarted, RunID: cur.ID, Attempt: cur.Attempt})
	}
	for i, s := range cur.Steps {
		if i < len(prev.Steps) && prev.Steps[i].Status == s.Status {
			continue
		}
		ev := workflow.RunEvent{RunID: cur.ID, StepID: s.ID, ToolID: s.ToolID}
		if ridden(prev, i, s) {
			// Its start rode its end (execution.ridesItsEnd): its
			// step_started comes first, in the same write.
			started := ev
			started.Type, started.Input = workflow.EventStepStarted, workflow.WithoutKey(s.Input)
			evs = append(evs, started)
		}
		switch s.Status {
		case workflow.StepRunning:
			ev.Type, ev.Input = workflow.EventStepStarted, workflow.WithoutKey(s.Input)
		case workflow.StepCompleted:
			ev.Type, ev.Output = workflow.EventStepCompleted, workflow.WithoutKey(s.Output)
		case workflow.StepFailed:
			ev.Type, ev.Error = workflow.EventStepFailed, s.Error
		case workflow.StepWaiting:
			ev.Type, ev.Input, ev.ExpiresAt, ev.ChildRunID = workflow.EventStepWaiting, s.Input, s.ExpiresAt, s.ChildRunID
			ev.Reason, ev.MCPServerID, ev.AuthorizationURL = s.Reason, s.MCPServerID, s.AuthorizationURL
		case workflow.StepPending:
			if s.RetryAt == nil {
				continue
			}
			ev = retryingEvent(cur.ID, s)
		default:
			continue
		}
		evs = append(evs, ev)
	}
	switch cur.Status {
	case workflow.RunCompleted:
		evs = append(evs, workflow.RunEvent{Type: workflow.EventRunCompleted, RunID: cur.ID})
	case workflow.RunFailed:
		evs = append(evs, workflow.RunEvent{Type: workflow.EventRunFailed, RunID: cur.ID, Error: cur.Error})
	case workflow.RunCancelled:
		evs = append(evs, workflow.RunEvent{Type: workflow.EventRunCancelled, RunID: cur.ID, Error: cur.Error})
	}
	return evs
}

// ridden reports whether step s (step i of a run at prev) ran and
// finished with no checkpoint of its start: it was pending at prev, and
// it holds an input (kept only once its call starts) and has finished.
func ridden(prev workflow.Run, i int, s workflow.RunStep) bool {
	was := workflow.StepPending
	if i < len(prev.Steps) {
		was = prev.Steps[i].Status
	}
	return was == workflow.StepPending && s.Input != nil && s.StartedAt != nil &&
		(s.Status == workflow.StepCompleted || s.Status == workflow.StepFailed)
}

// isLastEvent reports whether rec is a run's final event.
func isLastEvent(rec job.Record) bool {
	var e workflow.RunEvent
	return json.Unmarshal(rec.Data, &e) == nil && e.Last()
}

// InProcess is the Invoker of the dev server and the tests: it runs the
// Runner in a goroutine, detached from the caller. Wait waits for the
// runs it started.
type InProcess struct {
	Runner *Runner
	wg     sync.WaitGroup
}

// Invoke starts ref on the Runner in a goroutine; it never fails.
func (p *InProcess) Invoke(ctx context.Context, ref workflow.RunRef) error {
	// Like a Lambda invoke, the runner gets the run's reference and
	// nothing of the request (no session: it acts for the run's user);
	// only the logger is kept.
	ctx = logging.WithLogger(context.Background(), logging.FromContext(ctx))
	p.wg.Go(func() {
		if err := p.Runner.Run(ctx, ref); err != nil {
			logging.FromContext(ctx).WarnContext(ctx, "workflow run attempt", "runId", ref.RunID, "attempt", ref.Attempt, "err", err.Error())
		}
	})
	return nil
}

// Wait waits for every run started so far to return.
func (p *InProcess) Wait() { p.wg.Wait() }

// decodeEvent decodes a run event's record.
func decodeEvent(rec job.Record, ev *workflow.RunEvent) error {
	return errs.Wrap("runs.decodeEvent", json.Unmarshal(rec.Data, ev))
}
