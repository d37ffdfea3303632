package runs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/runworkflow"
	"github.com/workflowchat/service/shared/workflow"
)

// Child runs: a run_workflow step starts a run of another of its user's
// workflows through the run service's one front door (Service.StartChild:
// the same checks, rate limit and events as any start), with the parent's
// id, its depth plus one and its lineage, then the parent waits as it
// does for a person: no runner holds it. The end of the child (whatever
// ends it: its runner, a cancel, the sweeper) passes through the run
// service's Ended hook to Service.RunEnded, which completes the parent's
// step with the child's last output (or fails it) in one write
// conditioned on the parent still waiting, and hands the parent to the
// runner. Every write that could be lost to a crash is made good: the
// child's id derives from the parent's run and step, so a step found
// running by a resume starts nothing new; a parent stored waiting reads
// its child once more, so a child that ended before that write still
// resumes it; and a waiting parent's lease expires every ChildCheck, when
// the sweeper reads its child and resumes it if the child ended without
// telling it.

// Children starts the child runs of run_workflow steps (the run service:
// Service implements it).
type Children interface {
	// StartChild starts run childID of req's workflow as a child of
	// parent (see Service.StartChild).
	StartChild(ctx context.Context, parent workflow.Run, childID string, req runworkflow.Request) (workflow.Run, error)
	// SettleChild resumes the parent of run childID when the child has
	// ended (see Service.SettleChild).
	SettleChild(ctx context.Context, childID string) error
}

// CodeDepthExceeded is the error of a run_workflow step whose child
// would nest deeper than runworkflow.MaxDepth.
const CodeDepthExceeded = "WORKFLOW_DEPTH_EXCEEDED"

// ChildCheck is how often, in leases, the sweeper reads the child of a
// waiting parent (a crash may have lost the child's word of its end).
const ChildCheck = 4

// childRunID is the id of the child run step stepID of run runID starts:
// the same on every attempt, so that a resumed step finds the child it
// started.
func childRunID(runID, stepID string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("run_workflow:"+runID+"/"+stepID)).String()
}

// child starts a run_workflow step: its resolved inputs name the child's
// workflow and input. A workflow that is the run's own or one of its
// ancestors' (WORKFLOW_CYCLE), a child past runworkflow.MaxDepth
// (WORKFLOW_DEPTH_EXCEEDED), a workflow unknown or another user's
// (WORKFLOW_NOT_FOUND), an input its schema refuses (INVALID_INPUT) or a
// start refused (RATE_LIMITED) fail the step: it returns the message. Else
// the step is recorded running (the previous step's result with it), the
// child is started, and the step and the run are recorded waiting for
// it; err when the run could not be recorded or the child could not be
// started now (the run's next attempt goes on).
func (x *execution) child(ctx context.Context, op string, i int, step workflow.Step, scope workflow.Scope) (string, error) {
	rs := &x.run.Steps[i]
	input, err := resolve(scope, step.Inputs)
	if err != nil {
		return err.Error(), nil
	}
	req, err := runworkflow.Parse(input)
	if err != nil {
		return "INVALID_PARAMS: " + detailed(err), nil
	}
	switch {
	case x.e.children == nil:
		return runworkflow.ID + " cannot run here: this runner starts no child runs", nil
	case req.WorkflowID == x.run.WorkflowID || slices.Contains(x.run.Lineage, req.WorkflowID):
		return fmt.Sprintf("%s: workflow %s is this run's own or one that runs it", runworkflow.CodeWorkflowCycle, req.WorkflowID), nil
	case x.run.Depth+1 > runworkflow.MaxDepth:
		return fmt.Sprintf("%s: child runs nest at most %d deep", CodeDepthExceeded, runworkflow.MaxDepth), nil
	}
	started := x.e.clock()
	rs.Status, rs.StartedAt = workflow.StepRunning, &started
	if rs.Input, err = x.save.Keep(ctx, "the step's input", input); err != nil {
		rs.Status, rs.StartedAt = workflow.StepPending, nil
		if msg, ok := valueTooLarge(err); ok {
			return msg, nil
		}
		return "", x.unrecorded(ctx, op, err)
	}
	if err := x.store(ctx); err != nil {
		rs.Status, rs.StartedAt, rs.Input = workflow.StepPending, nil, nil
		return "", x.stopped(ctx, op, err)
	}
	id := childRunID(x.run.ID, rs.ID)
	c, err := x.e.children.StartChild(ctx, *x.run, id, req)
	switch {
	case errs.CodeOf(err) == workflow.CodeRunExists:
		// Started by an attempt that died before recording the wait.
	case errs.Is(err, errs.NotFound) || errs.Is(err, errs.Forbidden):
		return fmt.Sprintf("%s: workflow %s is not one of your workflows", runworkflow.CodeWorkflowNotFound, req.WorkflowID), nil
	case errs.Is(err, errs.Invalid) || errs.Is(err, errs.RateLimited) || errs.Is(err, errs.Conflict):
		return errs.CodeOf(err) + ": " + detailed(err), nil
	case err != nil:
		return "", x.unrecorded(ctx, op, err) // not now: the step is running, the next attempt starts the same child
	default:
		id = c.ID
	}
	rs.Status, rs.ChildRunID = workflow.StepWaiting, id
	x.run.Status = workflow.RunWaiting
	if err := x.store(ctx); err != nil {
		// ChildRunID stays: the cancelled run's end cancels the child.
		rs.Status = workflow.StepRunning
		x.run.Status = workflow.RunRunning
		return "", x.stopped(ctx, op, err)
	}
	// A child that ended before the wait was recorded found no parent
	// waiting for it: read it once more.
	if err := x.e.children.SettleChild(ctx, id); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "settle a child run; the sweeper will", "runId", x.run.ID, "childRunId", id, "err", err.Error())
	}
	return "", nil
}

// StartChild starts run childID of req.WorkflowID with req.Input as a
// child of parent, for parent's user, through Start (the workflow must be
// theirs, the input valid against its schema, the run counted against
// their rate limit): trigger type workflow, ParentRunID, Depth one more
// than parent's and Lineage parent's with parent's workflow. Errors are
// Start's; Conflict RUN_EXISTS when childID exists.
func (s *Service) StartChild(ctx context.Context, parent workflow.Run, childID string, req runworkflow.Request) (workflow.Run, error) {
	ctx = auth.ActingFor(ctx, parent.UserID)
	return s.Start(ctx, StartRequest{WorkflowID: req.WorkflowID, Input: req.Input, RunID: childID,
		Trigger: &workflow.Trigger{Type: workflow.TriggerWorkflow}, parent: &parent})
}

// SettleChild resumes the parent of run childID (see RunEnded) when the
// child has ended. It fails when the child cannot be read.
func (s *Service) SettleChild(ctx context.Context, childID string) error {
	c, err := s.store.Run(ctx, childID)
	if err != nil {
		return errs.Wrap("runs.SettleChild", err)
	}
	return s.RunEnded(ctx, c)
}

// RunEnded is told of every run whose log ended (the Ended hook of the
// run service, the runner and the sweeper): a child run resumes its
// parent waiting for it (childEnded), and a run that ended while a child
// of its was still active (cancelled) cancels that child, whose own end
// cancels its children in turn. Runs with neither are left alone.
func (s *Service) RunEnded(ctx context.Context, run workflow.Run) error {
	if workflow.Active(run.Status) {
		return nil
	}
	var failed error
	for _, st := range run.Steps {
		if st.ChildRunID == "" || st.Status == workflow.StepCompleted || st.Status == workflow.StepFailed {
			continue
		}
		c, err := s.store.Run(ctx, st.ChildRunID)
		if errs.Is(err, errs.NotFound) {
			continue
		}
		if err == nil && workflow.Active(c.Status) {
			_, err = s.cancel(auth.ActingFor(ctx, c.UserID), "runs.RunEnded", c)
			if errs.CodeOf(err) == workflow.CodeRunNotActive {
				err = nil
			}
		}
		if err != nil {
			failed = errs.Wrap("runs.RunEnded", err)
		}
	}
	if run.ParentRunID != "" {
		d := parentDeps{store: s.store, invoker: s.invoker, lease: s.lease, now: s.now, ended: s.ended}
		if s.values != nil {
			d.values = s.values
		}
		if err := d.childEnded(ctx, run); err != nil {
			failed = err
		}
	}
	return failed
}

// parentDeps are what resumes a parent: the run service's, or the
// sweeper's.
type parentDeps struct {
	store   Store
	values  blob.Backend
	invoker workflow.Invoker
	lease   time.Duration
	now     func() time.Time
	ended   func(ctx context.Context, run workflow.Run) error
}

// childEnded resumes child's parent when it waits for child, in one
// checkpoint conditioned on the parent still waiting (an answer that came
// first, a cancel, wins): child completed, the step completes with the
// output of child's last step that ran, whole; child failed or cancelled,
// the step fails CHILD_RUN_FAILED, and so does the parent unless the
// step continues on error. A parent still active goes to the runner.
func (d parentDeps) childEnded(ctx context.Context, child workflow.Run) error {
	const op = "runs.childEnded"
	parent, head, err := d.store.LoggedRun(ctx, child.ParentRunID)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	i := slices.IndexFunc(parent.Steps, func(s workflow.RunStep) bool {
		return s.ChildRunID == child.ID && s.Status == workflow.StepWaiting
	})
	if parent.Status != workflow.RunWaiting || i < 0 || !head.Active {
		return nil
	}
	l := newRunLog(d.store, parent, head.LastSeq, d.lease, d.now)
	l.ended, l.values = d.ended, values{backend: d.values, runID: parent.ID}
	if err := l.values.plan(ctx, &parent); err != nil {
		return errs.Wrap(op, err)
	}
	out, msg, err := childResult(ctx, values{backend: d.values, runID: child.ID}, child)
	if err != nil {
		return errs.Wrap(op, err)
	}
	settle(&parent, i, out, msg, d.now().UTC())
	if err := l.SaveRun(ctx, parent, workflow.RunWaiting); err != nil {
		return ignoreConflict(errs.Wrap(op, err))
	}
	if !workflow.Active(parent.Status) {
		return nil
	}
	if err := d.invoker.Invoke(ctx, workflow.RunRef{RunID: parent.ID, Attempt: parent.Attempt}); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "hand the resumed parent run to the runner; the sweeper will", "runId", parent.ID, "err", err.Error())
	}
	return nil
}

// childResult returns the output a completed child gives its parent's
// step (its last step's that ran, whole; {} when none ran), or the
// message of the step's failure for a child that did not complete.
func childResult(ctx context.Context, v values, child workflow.Run) (map[string]any, string, error) {
	if child.Status != workflow.RunCompleted {
		reason := child.Error
		if reason == "" {
			reason = "it " + child.Status
		}
		return nil, fmt.Sprintf("%s: child run %s %s: %s", runworkflow.CodeChildRunFailed, child.ID, child.Status, reason), nil
	}
	for j := len(child.Steps) - 1; j >= 0; j-- {
		s := child.Steps[j]
		if s.Status != workflow.StepCompleted && s.Status != workflow.StepFailed {
			continue
		}
		if s.Output == nil {
			break
		}
		out, err := v.whole(ctx, s.Output)
		return out, "", err
	}
	return map[string]any{}, "", nil
}

// settle records the end of waiting step i of parent: completed with out,
// or failed with msg (the output {"error": msg} and the run going on
// under continueOnError; else the rest skipped and the run failed). The
// run is running again unless it failed.
func settle(parent *workflow.Run, i int, out map[string]any, msg string, now time.Time) {
	rs := &parent.Steps[i]
	rs.CompletedAt = &now
	parent.Status = workflow.RunRunning
	if msg == "" {
		rs.Status, rs.Output = workflow.StepCompleted, out
		return
	}
	rs.Status, rs.Error = workflow.StepFailed, msg
	if i < len(parent.Plan) && parent.Plan[i].ContinueOnError {
		rs.Output = map[string]any{"error": msg}
		return
	}
	workflow.MarkRest(parent, workflow.StepSkipped)
	parent.Status, parent.CompletedAt = workflow.RunFailed, &now
	parent.Error = fmt.Sprintf("step %s failed: %s", rs.ID, msg)
}

// childDue handles a waiting parent whose lease ended while step i waits
// for its child: a child that ended resumes it (the word of its end was
// lost), one that is gone fails the step; else the lease is renewed for
// ChildCheck more leases.
func childDue(ctx context.Context, d parentDeps, l *runLog, run workflow.Run, i int) error {
	const op = "runs.childDue"
	c, err := d.store.Run(ctx, run.Steps[i].ChildRunID)
	switch {
	case errs.Is(err, errs.NotFound):
		if err := l.values.plan(ctx, &run); err != nil {
			return errs.Wrap(op, err)
		}
		settle(&run, i, nil, runworkflow.CodeChildRunFailed+": the child run is gone (its workflow was deleted)", d.now().UTC())
		if err := l.SaveRun(ctx, run, workflow.RunWaiting); err != nil || !workflow.Active(run.Status) {
			return ignoreConflict(errs.Wrap(op, err))
		}
		return errs.Wrap(op, d.invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt}))
	case err != nil:
		return errs.Wrap(op, err)
	case !workflow.Active(c.Status):
		return d.childEnded(ctx, c)
	}
	return ignoreConflict(errs.Wrap(op, l.SaveRun(ctx, run, workflow.RunWaiting)))
}

// childStep returns the index of run's step waiting for a child run, or
// -1.
func childStep(run workflow.Run) int {
	return slices.IndexFunc(run.Steps, func(s workflow.RunStep) bool {
		return s.Status == workflow.StepWaiting && s.ChildRunID != ""
	})
}
