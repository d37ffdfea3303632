package workflow

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
)

// Error codes of the workflow operations.
const (
	CodeWorkflowNotFound   = "WORKFLOW_NOT_FOUND"
	CodeProposalNotFound   = "PROPOSAL_NOT_FOUND"
	CodeProposalNotPending = "PROPOSAL_NOT_PENDING"
	CodeProposalConflict   = "PROPOSAL_CONFLICT"
	// CodeConcurrentUpdate is a Conflict the Store reports when a write's
	// condition on the workflow's version or the proposal's status fails;
	// the service re-reads and decides.
	CodeConcurrentUpdate = "CONCURRENT_UPDATE"
)

// Store persists workflows, their chat messages and proposals.
type Store interface {
	// CreateWorkflow stores w and increments its owner's workflow count,
	// in one transaction.
	CreateWorkflow(ctx context.Context, w Workflow) error
	// Workflow returns the workflow id. NotFound WORKFLOW_NOT_FOUND.
	Workflow(ctx context.Context, id string) (Workflow, error)
	// UpdateWorkflow sets the name and/or description of the workflow id
	// owned by userID, increments its version and returns it. NotFound,
	// Forbidden for another user's workflow.
	UpdateWorkflow(ctx context.Context, id, userID string, name, description *string, now time.Time) (Workflow, error)
	// DeleteWorkflow removes the workflow id owned by userID with its
	// messages and proposals and decrements the owner's count; deleteRuns,
	// when not nil, runs once the owner is checked, before the workflow
	// goes. NotFound, Forbidden, or deleteRuns' error.
	DeleteWorkflow(ctx context.Context, id, userID string, deleteRuns func(context.Context) error) error
	// ListWorkflows returns a page of userID's workflows, most recently
	// updated first, and how many the user has.
	ListWorkflows(ctx context.Context, userID string, page paging.Page) ([]Workflow, int, error)
	// Conversation returns the workflow and its messages in conversation
	// order, assistant messages with their proposals, in one read.
	// NotFound WORKFLOW_NOT_FOUND.
	Conversation(ctx context.Context, id string) (Workflow, []Message, error)
	// AddMessages stores msgs of workflow id and, when not nil, the
	// proposal p, in one transaction conditioned on the workflow existing.
	// NotFound when it is gone.
	AddMessages(ctx context.Context, workflowID string, p *Proposal, msgs ...Message) error
	// WorkflowProposal returns the workflow id and its proposal
	// proposalID in one consistent read. NotFound WORKFLOW_NOT_FOUND when
	// the workflow does not exist; found is false when the proposal does
	// not.
	WorkflowProposal(ctx context.Context, workflowID, proposalID string) (w Workflow, p Proposal, found bool, err error)
	// ApplyProposal writes next (whose Version is readVersion+1) and marks
	// the proposal applied at at, in one transaction conditioned on the
	// proposal being pending and the workflow's version being readVersion.
	// Conflict CONCURRENT_UPDATE when a condition fails.
	ApplyProposal(ctx context.Context, next Workflow, readVersion int, proposalID string, at time.Time) error
	// RejectProposal marks the proposal rejected at at, conditioned on it
	// being pending. Conflict CONCURRENT_UPDATE when it is not.
	RejectProposal(ctx context.Context, workflowID, proposalID string, at time.Time) error
}

// RunDeleter deletes the runs of a workflow (implemented by the run
// storage); Delete calls it before removing the workflow.
type RunDeleter interface {
	DeleteWorkflowRuns(ctx context.Context, workflowID string) error
}

// TriggerDeleter deletes the triggers of a workflow, with their
// schedules (implemented by package trigger); Delete calls it before
// removing the workflow.
type TriggerDeleter interface {
	DeleteWorkflowTriggers(ctx context.Context, workflowID string) error
}

// Options are the dependencies of NewService. Runs (Triggers) nil skips
// deleting runs (triggers); Now nil means time.Now.
type Options struct {
	Store    Store
	Runs     RunDeleter
	Triggers TriggerDeleter
	Now      func() time.Time
}

// Service implements the workflow operations: create, read, update,
// delete, list, and read the workflow chat. Posting to the chat and the
// proposals it makes are package proposal's; runs are package run's.
type Service struct {
	store    Store
	runs     RunDeleter
	triggers TriggerDeleter
	now      func() time.Time
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{store: o.Store, runs: o.Runs, triggers: o.Triggers, now: o.Now}
}

func (s *Service) clock() time.Time { return s.now().UTC() }

// Create creates a workflow for the signed-in user, who must be
// req.UserID (Forbidden otherwise).
func (s *Service) Create(ctx context.Context, req CreateRequest) (Workflow, error) {
	const op = "workflow.Create"
	uid := auth.UserID(ctx)
	if req.UserID != uid {
		return Workflow{}, errs.E(op, errs.Forbidden, "FORBIDDEN", "userId must be the signed-in user")
	}
	now := s.clock()
	w := Workflow{ID: uuid.NewString(), UserID: uid, Name: strings.TrimSpace(req.Name), Steps: []Step{}, Version: 1, CreatedAt: now, UpdatedAt: now}
	if req.Description != nil {
		w.Description = *req.Description
	}
	if err := s.store.CreateWorkflow(ctx, w); err != nil {
		return Workflow{}, errs.Wrap(op, err)
	}
	return w, nil
}

// Get returns the workflow id. NotFound, then Forbidden.
func (s *Service) Get(ctx context.Context, id string) (Workflow, error) {
	return auth.Owned(ctx, "workflow.Get", func(ctx context.Context) (Workflow, error) { return s.store.Workflow(ctx, id) },
		func(w Workflow) string { return w.UserID })
}

// Update changes the name and/or description of workflow id. NotFound,
// Forbidden.
func (s *Service) Update(ctx context.Context, id string, req UpdateRequest) (Workflow, error) {
	if req.Name != nil {
		n := strings.TrimSpace(*req.Name)
		req.Name = &n
	}
	w, err := s.store.UpdateWorkflow(ctx, id, auth.UserID(ctx), req.Name, req.Description, s.clock())
	return w, errs.Wrap("workflow.Update", err)
}

// Delete removes workflow id with its triggers, runs, messages and
// proposals. The store checks the owner with its first write (no read)
// and marks the workflow deleting (no trigger can be added then); the
// triggers, then the runs, are deleted once it has. NotFound, Forbidden.
func (s *Service) Delete(ctx context.Context, id string) error {
	deleteDependents := func(ctx context.Context) error {
		if s.triggers != nil {
			if err := s.triggers.DeleteWorkflowTriggers(ctx, id); err != nil {
				return err
			}
		}
		if s.runs != nil {
			return s.runs.DeleteWorkflowRuns(ctx, id)
		}
		return nil
	}
	return errs.Wrap("workflow.Delete", s.store.DeleteWorkflow(ctx, id, auth.UserID(ctx), deleteDependents))
}

// List returns a page of userID's workflows and their total. Forbidden
// unless userID is the signed-in user.
func (s *Service) List(ctx context.Context, userID string, page paging.Page) ([]Workflow, int, error) {
	const op = "workflow.List"
	if err := auth.Authorize(ctx, op, userID); err != nil {
		return nil, 0, err
	}
	ws, total, err := s.store.ListWorkflows(ctx, userID, page)
	return ws, total, errs.Wrap(op, err)
}

// Messages returns the workflow chat of id in conversation order.
// NotFound, Forbidden.
func (s *Service) Messages(ctx context.Context, id string) ([]Message, error) {
	const op = "workflow.Messages"
	w, msgs, err := s.store.Conversation(ctx, id)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, w.UserID); err != nil {
		return nil, err
	}
	return msgs, nil
}
