package workflow

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
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

// MaxApplyAttempts bounds how many times Apply re-reads and retries when
// concurrent writes beat it.
const MaxApplyAttempts = 5

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
	// messages and proposals and decrements the owner's count. NotFound,
	// Forbidden.
	DeleteWorkflow(ctx context.Context, id, userID string) error
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

// Options are the dependencies of NewService. Runs nil skips deleting
// runs; Now nil means time.Now.
type Options struct {
	Store   Store
	Models  *model.Registry
	Catalog ToolCatalog
	Runs    RunDeleter
	Now     func() time.Time
}

// Service implements the workflow operations.
type Service struct {
	store   Store
	models  *model.Registry
	catalog ToolCatalog
	runs    RunDeleter
	now     func() time.Time
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{store: o.Store, models: o.Models, catalog: o.Catalog, runs: o.Runs, now: o.Now}
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

// Delete removes workflow id with its runs, messages and proposals.
// NotFound, Forbidden.
func (s *Service) Delete(ctx context.Context, id string) error {
	const op = "workflow.Delete"
	if _, err := s.Get(ctx, id); err != nil {
		return errs.Wrap(op, err)
	}
	if s.runs != nil {
		if err := s.runs.DeleteWorkflowRuns(ctx, id); err != nil {
			return errs.Wrap(op, err)
		}
	}
	return errs.Wrap(op, s.store.DeleteWorkflow(ctx, id, auth.UserID(ctx)))
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

// Exchange is the result of posting a workflow chat message.
type Exchange struct {
	UserMessage      Message `json:"userMessage"`
	AssistantMessage Message `json:"assistantMessage"`
}

// Send posts a user message to the chat of workflow id and returns it with
// the assistant's reply, which may carry a pending proposal. The messages
// and the proposal are stored in one transaction. Errors: Invalid
// (INVALID_MODEL), NotFound, Forbidden, the model's and the catalog's.
func (s *Service) Send(ctx context.Context, id string, req MessageRequest) (Exchange, error) {
	const op = "workflow.Send"
	if _, err := s.models.Lookup(req.ModelID); err != nil {
		return Exchange{}, errs.Wrap(op, err)
	}
	w, history, err := s.store.Conversation(ctx, id)
	if err != nil {
		return Exchange{}, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, w.UserID); err != nil {
		return Exchange{}, err
	}
	tools, err := s.catalog.Tools(ctx)
	if err != nil {
		return Exchange{}, errs.Wrap(op, err)
	}
	now := s.clock()
	user := Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: model.RoleUser, Content: req.Content, CreatedAt: now}
	content, changes, proposed, err := s.assist(ctx, req.ModelID, w, history, user, tools)
	if err != nil {
		return Exchange{}, errs.Wrap(op, err)
	}
	replyAt := s.clock()
	if !replyAt.After(now) {
		replyAt = now.Add(time.Microsecond)
	}
	reply := Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: model.RoleAssistant, CreatedAt: replyAt}
	var p *Proposal
	if proposed {
		if changes == nil {
			changes = []Change{}
		}
		if _, probs := ApplyChanges(w, changes, tools); len(probs) > 0 {
			content = strings.TrimSpace(content + "\n\nI could not propose these changes, because they are not valid for this workflow: " + summarize(probs))
		} else {
			p = &Proposal{ID: uuid.NewString(), WorkflowID: w.ID, MessageID: reply.ID, Status: ProposalPending,
				Changes: changes, BaseVersion: w.Version, CreatedAt: replyAt}
		}
	}
	if strings.TrimSpace(content) == "" {
		content = "I have proposed changes to the workflow."
		if p == nil {
			content = "I have no changes to propose."
		}
	}
	reply.Content, reply.Proposal = content, p
	if err := s.store.AddMessages(ctx, w.ID, p, user, reply); err != nil {
		return Exchange{}, errs.Wrap(op, err)
	}
	return Exchange{UserMessage: user, AssistantMessage: reply}, nil
}

// ProposalResult is the proposal part of the apply and reject responses.
type ProposalResult struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	AppliedAt  *time.Time `json:"appliedAt,omitempty"`
	RejectedAt *time.Time `json:"rejectedAt,omitempty"`
}

// Applied is the response of the apply operation.
type Applied struct {
	Proposal ProposalResult `json:"proposal"`
	Workflow Workflow       `json:"workflow"`
}

// Rejected is the response of the reject operation.
type Rejected struct {
	Proposal ProposalResult `json:"proposal"`
}

// load reads the workflow and the proposal and checks, in order: the
// workflow exists (404), is the caller's (403), the proposal exists (404)
// and is pending (400).
func (s *Service) load(ctx context.Context, op, workflowID, proposalID string) (Workflow, Proposal, error) {
	w, p, found, err := s.store.WorkflowProposal(ctx, workflowID, proposalID)
	if err != nil {
		return w, p, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, w.UserID); err != nil {
		return w, p, err
	}
	if !found {
		return w, p, errs.E(op, errs.NotFound, CodeProposalNotFound, "proposal not found")
	}
	if p.Status != ProposalPending {
		return w, p, errs.E(op, errs.Invalid, CodeProposalNotPending, "proposal is not pending (it was "+p.Status+")")
	}
	return w, p, nil
}

// Apply applies a pending proposal: the changes are validated against the
// current workflow (which may have moved on since the proposal: they
// apply if they still validate) and the proposal and the workflow are
// written in one transaction conditioned on both being as read. A
// concurrent write makes it re-read and retry, at most MaxApplyAttempts
// times. Errors: NotFound, Forbidden, Invalid PROPOSAL_NOT_PENDING,
// Conflict PROPOSAL_CONFLICT.
func (s *Service) Apply(ctx context.Context, workflowID, proposalID string) (Applied, error) {
	const op = "workflow.Apply"
	for attempt := range MaxApplyAttempts {
		if attempt > 0 {
			if err := sleep(ctx, time.Duration(attempt)*(10*time.Millisecond+rand.N(20*time.Millisecond))); err != nil {
				return Applied{}, errs.Wrap(op, err)
			}
		}
		w, p, err := s.load(ctx, op, workflowID, proposalID)
		if err != nil {
			return Applied{}, err
		}
		tools, err := s.catalog.Tools(ctx)
		if err != nil {
			return Applied{}, errs.Wrap(op, err)
		}
		next, probs := ApplyChanges(w, p.Changes, tools)
		if len(probs) > 0 {
			msg := "the proposal no longer fits the workflow"
			if w.Version == p.BaseVersion {
				msg = "the proposal is not valid for the workflow"
			}
			return Applied{}, proposalError(op, CodeProposalConflict, msg, probs)
		}
		now := s.clock()
		if !now.After(w.UpdatedAt) {
			now = w.UpdatedAt.Add(time.Microsecond)
		}
		next.Version, next.UpdatedAt = w.Version+1, now
		err = s.store.ApplyProposal(ctx, next, w.Version, p.ID, now)
		if errs.CodeOf(err) == CodeConcurrentUpdate {
			continue
		}
		if err != nil {
			return Applied{}, errs.Wrap(op, err)
		}
		return Applied{Proposal: ProposalResult{ID: p.ID, Status: ProposalApplied, AppliedAt: &now}, Workflow: next}, nil
	}
	return Applied{}, errs.E(op, errs.Conflict, CodeProposalConflict, "the workflow is being changed concurrently; try again")
}

// Reject rejects a pending proposal. Errors: NotFound, Forbidden, Invalid
// PROPOSAL_NOT_PENDING.
func (s *Service) Reject(ctx context.Context, workflowID, proposalID string) (Rejected, error) {
	const op = "workflow.Reject"
	_, p, err := s.load(ctx, op, workflowID, proposalID)
	if err != nil {
		return Rejected{}, err
	}
	now := s.clock()
	err = s.store.RejectProposal(ctx, workflowID, p.ID, now)
	if errs.CodeOf(err) == CodeConcurrentUpdate {
		return Rejected{}, errs.E(op, errs.Invalid, CodeProposalNotPending, "proposal is not pending")
	}
	if err != nil {
		return Rejected{}, errs.Wrap(op, err)
	}
	return Rejected{Proposal: ProposalResult{ID: p.ID, Status: ProposalRejected, RejectedAt: &now}}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
