package runs

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/eventlog"
	"github.com/workflowchat/service/shared/workflow"
)

// WorkflowReader reads a workflow by id: NotFound WORKFLOW_NOT_FOUND. The
// workflow Store (store.Workflows) implements it.
type WorkflowReader interface {
	Workflow(ctx context.Context, id string) (workflow.Workflow, error)
}

// Repository is the run storage of the run endpoints (store.Runs).
type Repository interface {
	RunStore
	// ChatOwner returns the owner of chat chatID. NotFound CHAT_NOT_FOUND.
	ChatOwner(ctx context.Context, chatID string) (string, error)
	// RunsPage returns up to limit runs of chat chatID, oldest first,
	// after cursor (empty: from the first), and the next page's cursor,
	// empty on the last. Invalid INVALID_PAGINATION for a bad cursor.
	RunsPage(ctx context.Context, chatID string, limit int, cursor string) ([]workflow.Run, string, error)
	// CancelRun cancels the run runID of chat chatID owned by userID and
	// returns it. NotFound CHAT_NOT_FOUND or RUN_NOT_FOUND, Forbidden,
	// Invalid RUN_NOT_ACTIVE when it has finished.
	CancelRun(ctx context.Context, chatID, runID, userID string, now time.Time) (workflow.Run, error)
}

// Service implements the workflow run operations: start (and wait for)
// a run in a chat, cancel it, list a chat's runs; and, as the chat
// stream's chat.WorkflowRunner (chat.go), runs from the chat stream.
type Service struct {
	runs      Repository
	workflows WorkflowReader
	engine    *Engine
	now       func() time.Time
	durable   DurableStore
	invoker   workflow.Invoker
	lease     time.Duration
}

// Options are the dependencies of NewService. StepTimeout
// zero means DefaultStepTimeout; Now nil means time.Now.
type Options struct {
	Runs        Repository
	Workflows   WorkflowReader
	Tools       ToolRunner
	StepTimeout time.Duration
	// RunTimeout bounds a whole run (EngineOptions.RunTimeout).
	RunTimeout time.Duration
	Now        func() time.Time
	// BeforeStep is the engine's test hook (EngineOptions.BeforeStep).
	BeforeStep func(i int)
	// Durable stores the durable runs and Invoker hands them to a Runner:
	// without them, asynchronous starts and retries are refused.
	Durable DurableStore
	Invoker workflow.Invoker
	// Lease is a durable run's first lease; zero means eventlog.Lease.
	Lease time.Duration
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	eng := NewEngine(o.Tools, o.Runs, EngineOptions{StepTimeout: o.StepTimeout, RunTimeout: o.RunTimeout, Now: o.Now, BeforeStep: o.BeforeStep})
	if o.Lease <= 0 {
		o.Lease = eventlog.Lease
	}
	return &Service{runs: o.Runs, workflows: o.Workflows, engine: eng, now: o.Now, durable: o.Durable, invoker: o.Invoker, lease: o.Lease}
}

// Engine returns the service's engine.
func (s *Service) Engine() *Engine { return s.engine }

// ownedWorkflow returns the caller's workflow id: NotFound
// WORKFLOW_NOT_FOUND, then Forbidden.
func (s *Service) ownedWorkflow(ctx context.Context, op, id string) (workflow.Workflow, error) {
	return auth.Owned(ctx, op, func(ctx context.Context) (workflow.Workflow, error) { return s.workflows.Workflow(ctx, id) },
		func(w workflow.Workflow) string { return w.UserID })
}

// Start runs the caller's workflow workflowID in the caller's chat chatID
// and returns the finished run (completed, failed or cancelled). Errors:
// NotFound (CHAT_NOT_FOUND, WORKFLOW_NOT_FOUND), Forbidden, in that order
// (the chat first); storage errors.
func (s *Service) Start(ctx context.Context, chatID, workflowID string) (workflow.Run, error) {
	const op = "workflow.StartRun"
	wf, err := s.startable(ctx, op, chatID, workflowID)
	if err != nil {
		return workflow.Run{}, err
	}
	run := s.engine.NewRun(wf, chatID, auth.UserID(ctx))
	if err := s.engine.Execute(ctx, wf, &run, nil); err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	return run, nil
}

// startable checks that the caller may run workflow workflowID in chat
// chatID and returns the workflow (see Start).
func (s *Service) startable(ctx context.Context, op, chatID, workflowID string) (workflow.Workflow, error) {
	var (
		owner         string
		wf            workflow.Workflow
		ownErr, wfErr error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { owner, ownErr = s.runs.ChatOwner(gctx, chatID); return nil })
	g.Go(func() error { wf, wfErr = s.workflows.Workflow(gctx, workflowID); return nil })
	_ = g.Wait()
	if ownErr != nil {
		return workflow.Workflow{}, errs.Wrap(op, ownErr)
	}
	if err := auth.Authorize(ctx, op, owner); err != nil {
		return workflow.Workflow{}, err
	}
	if wfErr != nil {
		return workflow.Workflow{}, errs.Wrap(op, wfErr)
	}
	if err := auth.Authorize(ctx, op, wf.UserID); err != nil {
		return workflow.Workflow{}, err
	}
	return wf, nil
}

// Cancel cancels the run runID of the caller's chat chatID and returns it.
// NotFound (CHAT_NOT_FOUND, RUN_NOT_FOUND), Forbidden, Invalid
// RUN_NOT_ACTIVE when the run has finished.
func (s *Service) Cancel(ctx context.Context, chatID, runID string) (workflow.Run, error) {
	r, err := s.runs.CancelRun(ctx, chatID, runID, auth.UserID(ctx), s.now().UTC())
	return r, errs.Wrap("workflow.CancelRun", err)
}

// Page is a page of a chat's runs and the cursor of the next one,
// empty on the last page.
type Page struct {
	Runs []workflow.Run
	Next string
}

// List returns a page of at most limit runs of the caller's chat chatID,
// oldest first, after cursor (empty: the first page). NotFound
// CHAT_NOT_FOUND, Forbidden, Invalid INVALID_PAGINATION for a bad cursor.
func (s *Service) List(ctx context.Context, chatID string, limit int, cursor string) (Page, error) {
	const op = "workflow.ListRuns"
	owner, err := s.runs.ChatOwner(ctx, chatID)
	if err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, owner); err != nil {
		return Page{}, err
	}
	runs, next, err := s.runs.RunsPage(ctx, chatID, limit, cursor)
	if err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	return Page{Runs: runs, Next: next}, nil
}
