package workflow

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
)

// WorkflowReader reads a workflow by id: NotFound WORKFLOW_NOT_FOUND. The
// workflow Store (store.Workflows) implements it.
type WorkflowReader interface {
	Workflow(ctx context.Context, id string) (Workflow, error)
}

// RunRepository is the run storage of the run endpoints (store.Runs).
type RunRepository interface {
	RunStore
	// ChatOwner returns the owner of chat chatID. NotFound CHAT_NOT_FOUND.
	ChatOwner(ctx context.Context, chatID string) (string, error)
	// RunsPage returns up to limit runs of chat chatID, oldest first,
	// after cursor (empty: from the first), and the next page's cursor,
	// empty on the last. Invalid INVALID_PAGINATION for a bad cursor.
	RunsPage(ctx context.Context, chatID string, limit int, cursor string) ([]Run, string, error)
	// CancelRun cancels the run runID of chat chatID owned by userID and
	// returns it. NotFound CHAT_NOT_FOUND or RUN_NOT_FOUND, Forbidden,
	// Invalid RUN_NOT_ACTIVE when it has finished.
	CancelRun(ctx context.Context, chatID, runID, userID string, now time.Time) (Run, error)
}

// RunService implements the workflow run operations: start (and wait for)
// a run in a chat, cancel it, list a chat's runs; and, through
// ChatRunner, runs from the chat stream.
type RunService struct {
	runs      RunRepository
	workflows WorkflowReader
	engine    *Engine
	now       func() time.Time
}

// RunServiceOptions are the dependencies of NewRunService. StepTimeout
// zero means DefaultStepTimeout; Now nil means time.Now.
type RunServiceOptions struct {
	Runs        RunRepository
	Workflows   WorkflowReader
	Tools       ToolRunner
	StepTimeout time.Duration
	// RunTimeout bounds a whole run (EngineOptions.RunTimeout).
	RunTimeout time.Duration
	Now        func() time.Time
	// BeforeStep is the engine's test hook (EngineOptions.BeforeStep).
	BeforeStep func(i int)
}

// NewRunService returns a RunService.
func NewRunService(o RunServiceOptions) *RunService {
	if o.Now == nil {
		o.Now = time.Now
	}
	eng := NewEngine(o.Tools, o.Runs, EngineOptions{StepTimeout: o.StepTimeout, RunTimeout: o.RunTimeout, Now: o.Now, BeforeStep: o.BeforeStep})
	return &RunService{runs: o.Runs, workflows: o.Workflows, engine: eng, now: o.Now}
}

// Engine returns the service's engine.
func (s *RunService) Engine() *Engine { return s.engine }

// ownedWorkflow returns the caller's workflow id: NotFound
// WORKFLOW_NOT_FOUND, then Forbidden.
func (s *RunService) ownedWorkflow(ctx context.Context, op, id string) (Workflow, error) {
	return auth.Owned(ctx, op, func(ctx context.Context) (Workflow, error) { return s.workflows.Workflow(ctx, id) },
		func(w Workflow) string { return w.UserID })
}

// Start runs the caller's workflow workflowID in the caller's chat chatID
// and returns the finished run (completed, failed or cancelled). Errors:
// NotFound (CHAT_NOT_FOUND, WORKFLOW_NOT_FOUND), Forbidden, in that order
// (the chat first); storage errors.
func (s *RunService) Start(ctx context.Context, chatID, workflowID string) (Run, error) {
	const op = "workflow.StartRun"
	var (
		owner         string
		wf            Workflow
		ownErr, wfErr error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { owner, ownErr = s.runs.ChatOwner(gctx, chatID); return nil })
	g.Go(func() error { wf, wfErr = s.workflows.Workflow(gctx, workflowID); return nil })
	_ = g.Wait()
	if ownErr != nil {
		return Run{}, errs.Wrap(op, ownErr)
	}
	if err := auth.Authorize(ctx, op, owner); err != nil {
		return Run{}, err
	}
	if wfErr != nil {
		return Run{}, errs.Wrap(op, wfErr)
	}
	if err := auth.Authorize(ctx, op, wf.UserID); err != nil {
		return Run{}, err
	}
	run := s.engine.NewRun(wf, chatID, auth.UserID(ctx))
	if err := s.engine.Execute(ctx, wf, &run, nil); err != nil {
		return Run{}, errs.Wrap(op, err)
	}
	return run, nil
}

// Cancel cancels the run runID of the caller's chat chatID and returns it.
// NotFound (CHAT_NOT_FOUND, RUN_NOT_FOUND), Forbidden, Invalid
// RUN_NOT_ACTIVE when the run has finished.
func (s *RunService) Cancel(ctx context.Context, chatID, runID string) (Run, error) {
	r, err := s.runs.CancelRun(ctx, chatID, runID, auth.UserID(ctx), s.now().UTC())
	return r, errs.Wrap("workflow.CancelRun", err)
}

// RunPage is a page of a chat's runs and the cursor of the next one,
// empty on the last page.
type RunPage struct {
	Runs []Run
	Next string
}

// List returns a page of at most limit runs of the caller's chat chatID,
// oldest first, after cursor (empty: the first page). NotFound
// CHAT_NOT_FOUND, Forbidden, Invalid INVALID_PAGINATION for a bad cursor.
func (s *RunService) List(ctx context.Context, chatID string, limit int, cursor string) (RunPage, error) {
	const op = "workflow.ListRuns"
	owner, err := s.runs.ChatOwner(ctx, chatID)
	if err != nil {
		return RunPage{}, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, owner); err != nil {
		return RunPage{}, err
	}
	runs, next, err := s.runs.RunsPage(ctx, chatID, limit, cursor)
	if err != nil {
		return RunPage{}, errs.Wrap(op, err)
	}
	return RunPage{Runs: runs, Next: next}, nil
}

// ChatRunner returns the service as the chat stream's chat.WorkflowRunner.
func (s *RunService) ChatRunner() chat.WorkflowRunner { return chatRunner{s} }

type chatRunner struct{ s *RunService }

// CheckWorkflow checks that workflowID is the caller's workflow.
func (c chatRunner) CheckWorkflow(ctx context.Context, workflowID string) error {
	_, err := c.s.ownedWorkflow(ctx, "workflow.CheckWorkflow", workflowID)
	return err
}

// PrepareRun checks the caller's workflow (the chat has been checked by
// the stream) and returns its execution.
func (c chatRunner) PrepareRun(ctx context.Context, chatID, workflowID string) (chat.PreparedRun, error) {
	wf, err := c.s.ownedWorkflow(ctx, "workflow.PrepareRun", workflowID)
	if err != nil {
		return chat.PreparedRun{}, err
	}
	userID := auth.UserID(ctx)
	return chat.PreparedRun{
		WorkflowName: wf.Name,
		Execute: func(ctx context.Context, observe func(chat.WorkflowStep)) (chat.WorkflowOutcome, error) {
			run := c.s.engine.NewRun(wf, chatID, userID)
			err := c.s.engine.Execute(ctx, wf, &run, func(e StepEvent) {
				observe(chat.WorkflowStep{Done: e.Kind == StepFinished, StepID: e.StepID, ToolID: e.ToolID,
					Input: e.Input, Output: e.Output, Error: e.Error, Status: e.Status})
			})
			if err != nil {
				return chat.WorkflowOutcome{}, err
			}
			return outcomeOf(run), nil
		},
	}, nil
}

func outcomeOf(r Run) chat.WorkflowOutcome {
	o := chat.WorkflowOutcome{RunID: r.ID, Status: r.Status, Error: r.Error}
	for _, st := range r.Steps {
		o.Steps = append(o.Steps, chat.WorkflowStepOutcome{ID: st.ID, ToolID: st.ToolID, Status: st.Status, Output: st.Output, Error: st.Error})
	}
	return o
}
