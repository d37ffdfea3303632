package runs

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/eventlog"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/workflow"
)

var errNoRunner = errs.E("runs.Service", errs.Internal, "RUNNER_UNAVAILABLE", "asynchronous runs are not configured")

// StartAsync stores a pending durable run of the caller's workflow
// workflowID in the caller's chat chatID, hands it to the runner and
// returns it without waiting. Errors as Start's; a runner that cannot be
// reached is not an error (the sweeper hands the run over once its first
// lease expires).
func (s *Service) StartAsync(ctx context.Context, chatID, workflowID string) (workflow.Run, error) {
	const op = "workflow.StartRunAsync"
	wf, err := s.startable(ctx, op, chatID, workflowID)
	if err != nil {
		return workflow.Run{}, err
	}
	run := s.engine.NewRun(wf, chatID, auth.UserID(ctx))
	return run, s.launch(ctx, op, run)
}

// launch stores the durable run and invokes the runner on it.
func (s *Service) launch(ctx context.Context, op string, run workflow.Run) error {
	if s.durable == nil || s.invoker == nil {
		return errNoRunner
	}
	if err := s.durable.CreateLoggedRun(ctx, run, s.now().Add(s.lease)); err != nil {
		return errs.Wrap(op, err)
	}
	if err := s.invoker.Invoke(ctx, workflow.RunRef{ChatID: run.ChatID, RunID: run.ID, Attempt: run.Attempt}); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "invoke the runner; the sweeper will", "runId", run.ID, "err", err.Error())
	}
	return nil
}

// ownedChat checks that chat chatID is the caller's: NotFound
// CHAT_NOT_FOUND, Forbidden.
func (s *Service) ownedChat(ctx context.Context, op, chatID string) error {
	owner, err := s.runs.ChatOwner(ctx, chatID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	return auth.Authorize(ctx, op, owner)
}

// Get returns run runID of the caller's chat chatID: NotFound
// CHAT_NOT_FOUND or RUN_NOT_FOUND, Forbidden.
func (s *Service) Get(ctx context.Context, chatID, runID string) (workflow.Run, error) {
	const op = "workflow.GetRun"
	if s.durable == nil {
		return workflow.Run{}, errNoRunner
	}
	if err := s.ownedChat(ctx, op, chatID); err != nil {
		return workflow.Run{}, err
	}
	r, err := s.durable.Run(ctx, chatID, runID)
	return r, errs.Wrap(op, err)
}

// Retry starts a new durable run that retries run runID of the caller's
// chat chatID from step fromStepID, or (empty) from its first step that
// did not complete: the steps before it are completed with reused: true
// and the retried run's outputs, and the rest run asynchronously, as the
// retried run's snapshot of its steps says. Errors: NotFound
// (CHAT_NOT_FOUND, RUN_NOT_FOUND), Forbidden, Conflict RUN_ACTIVE when the
// run is still active, Invalid RUN_NOT_RETRYABLE (completed without
// fromStepID, or recorded without a snapshot), Invalid VALIDATION_FAILED
// for a fromStepID that is not a step of the run or comes after a step
// that did not complete.
func (s *Service) Retry(ctx context.Context, chatID, runID, fromStepID string) (workflow.Run, error) {
	const op = "workflow.RetryRun"
	orig, err := s.Get(ctx, chatID, runID)
	if err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	if workflow.Active(orig.Status) {
		return workflow.Run{}, errs.E(op, errs.Conflict, workflow.CodeRunActive, "the workflow run is still "+orig.Status+"; cancel it first")
	}
	if len(orig.Plan) != len(orig.Steps) {
		return workflow.Run{}, errs.E(op, errs.Invalid, workflow.CodeRunNotRetryable, "the workflow run was recorded without a snapshot of its steps")
	}
	from := slices.IndexFunc(orig.Steps, func(st workflow.RunStep) bool { return st.Status != workflow.StepCompleted })
	if from < 0 {
		from = len(orig.Steps)
	}
	if fromStepID != "" {
		i := slices.IndexFunc(orig.Steps, func(st workflow.RunStep) bool { return st.ID == fromStepID })
		if i < 0 || i > from {
			var f errs.FieldErrors
			if i < 0 {
				f.Add("fromStepId", "is not a step of the run")
			} else {
				f.Add("fromStepId", "comes after step %s, which did not complete", orig.Steps[from].ID)
			}
			return workflow.Run{}, f.Err(op)
		}
		from = i
	}
	if from == len(orig.Steps) {
		return workflow.Run{}, errs.E(op, errs.Invalid, workflow.CodeRunNotRetryable, "the workflow run completed; give fromStepId to run steps again")
	}
	run := workflow.Run{ID: uuid.NewString(), ChatID: chatID, WorkflowID: orig.WorkflowID, UserID: auth.UserID(ctx),
		Status: workflow.RunPending, StartedAt: s.now().UTC(), Attempt: 1, WorkflowVersion: orig.WorkflowVersion,
		RetryOf: orig.ID, Plan: orig.Plan, Steps: make([]workflow.RunStep, len(orig.Steps))}
	for i, st := range orig.Steps {
		if i < from {
			st.Reused = true
			run.Steps[i] = st
			continue
		}
		run.Steps[i] = workflow.RunStep{ID: st.ID, ToolID: st.ToolID, Status: workflow.StepPending}
	}
	return run, s.launch(ctx, op, run)
}

// Events returns a follower of the events of durable run runID of the
// caller's chat chatID after seq (0: from the first). NotFound
// CHAT_NOT_FOUND, RUN_NOT_FOUND (also for a run without a log: not
// started asynchronously, or its log expired), Forbidden.
func (s *Service) Events(ctx context.Context, chatID, runID string, after int64) (*RunFollower, error) {
	const op = "workflow.RunEvents"
	if s.durable == nil {
		return nil, errNoRunner
	}
	if err := s.ownedChat(ctx, op, chatID); err != nil {
		return nil, err
	}
	f := &RunFollower{s: s, chatID: chatID, runID: runID, after: after}
	var err error
	f.first, f.active, err = s.durable.RunEvents(ctx, chatID, runID, after)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	return f, nil
}

// RunFollower replays and follows a durable run's events.
type RunFollower struct {
	s             *Service
	chatID, runID string
	after         int64
	first         []eventlog.Record
	active        bool
}

// Follow sends each event with its SSE id through send until the run's
// last event, ctx's end or send's first error, which it returns.
func (f *RunFollower) Follow(ctx context.Context, send func(id string, ev json.RawMessage) error) error {
	used := false
	read := func(ctx context.Context, after int64) ([]eventlog.Record, bool, error) {
		if !used {
			used = true
			return f.first, f.active, nil
		}
		return f.s.durable.RunEvents(ctx, f.chatID, f.runID, after)
	}
	return eventlog.Follow(ctx, read, f.after, eventlog.FollowOptions{IsLast: isLastEvent}, func(r eventlog.Record) error {
		return send(eventlog.ID{Stream: f.runID, Seq: r.Seq}.String(), r.Data)
	})
}
