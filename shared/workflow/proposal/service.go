package proposal

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/usage"
	"github.com/workflowchat/service/shared/workflow"
)

// MaxApplyAttempts bounds how many times Apply re-reads and retries when
// concurrent writes beat it.
const MaxApplyAttempts = 5

// MaxProposalBytes bounds a proposal's changes (their JSON, as stored):
// the proposal is an item of its own, under DynamoDB's 400 KB. A proposal
// whose result would pass workflow.MaxDefinitionBytes is still made; its
// apply is refused.
const MaxProposalBytes = workflow.MaxDefinitionBytes

func changesSize(changes []workflow.Change) int {
	b, err := json.Marshal(changes)
	if err != nil {
		return MaxProposalBytes + 1
	}
	return len(b)
}

// Catalog is the tool catalog proposals are made and validated against
// (toolclient.Catalog).
type Catalog interface {
	// Details returns every tool with its schemas and outputs.
	Details(ctx context.Context) ([]toolclient.ToolDetail, error)
}

// Options are the dependencies of NewService; Now nil means time.Now.
type Options struct {
	Store   workflow.Store
	Models  *model.Registry
	Catalog Catalog
	// Usage reserves the user's budget before each model call and records
	// its usage after (usage.Meter.Generate); nil does neither.
	Usage *usage.Meter
	Now   func() time.Time
}

// Service is the workflow chat: posting a message, whose reply may carry
// a proposal, and applying or rejecting the proposal.
type Service struct {
	store   workflow.Store
	models  *model.Registry
	catalog Catalog
	usage   *usage.Meter
	now     func() time.Time
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{store: o.Store, models: o.Models, catalog: o.Catalog, usage: o.Usage, now: o.Now}
}

func (s *Service) clock() time.Time { return s.now().UTC() }

// Exchange is the result of posting a workflow chat message.
type Exchange struct {
	UserMessage      workflow.Message `json:"userMessage"`
	AssistantMessage workflow.Message `json:"assistantMessage"`
}

// Send posts a user message to the chat of workflow id and returns it with
// the assistant's reply, which may carry a pending proposal. The messages
// and the proposal are stored in one transaction. Errors: Invalid
// (INVALID_MODEL), NotFound, Forbidden, RateLimited BUDGET_EXCEEDED (the
// user's monthly token budget has no room for the model call, which is
// then not made), Conflict CHAT_FULL (the chat has no room left for the
// message: workflow.MaxChatBytes; the model is not called), the model's
// and the catalog's. The model call reserves
// the budget with one conditional write before and settles its usage with
// one write after.
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
	if !workflow.HasRoomFor(workflow.ChatBytes(history), workflow.Message{Content: req.Content}) {
		return Exchange{}, errChatFull(op)
	}
	tools, err := s.catalog.Details(ctx)
	if err != nil {
		return Exchange{}, errs.Wrap(op, err)
	}
	now := s.clock()
	user := workflow.Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: model.RoleUser, Content: req.Content, CreatedAt: now}
	content, changes, proposed, err := s.assist(ctx, req.ModelID, w, history, user, tools)
	if err != nil {
		return Exchange{}, errs.Wrap(op, err)
	}
	replyAt := s.clock()
	if !replyAt.After(now) {
		replyAt = now.Add(time.Microsecond)
	}
	reply := workflow.Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: model.RoleAssistant, CreatedAt: replyAt}
	var p *workflow.Proposal
	if proposed {
		if changes == nil {
			changes = []workflow.Change{}
		}
		if _, probs := ApplyChanges(w, changes, tools); len(probs) > 0 {
			content = strings.TrimSpace(content + "\n\nI could not propose these changes, because they are not valid for this workflow: " + errs.Summarize(probs))
		} else if n := changesSize(changes); n > MaxProposalBytes {
			content = strings.TrimSpace(content + fmt.Sprintf("\n\nI could not propose these changes: they take %d bytes, and a proposal holds at most %d.", n, MaxProposalBytes))
		} else {
			p = &workflow.Proposal{ID: uuid.NewString(), WorkflowID: w.ID, MessageID: reply.ID, Status: workflow.ProposalPending,
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

// errChatFull is the Conflict CHAT_FULL of a message to a workflow chat
// that has no room left for it.
func errChatFull(op string) error {
	return errs.E(op, errs.Conflict, workflow.CodeChatFull, fmt.Sprintf(
		"this workflow's chat holds %d MiB of messages, the most it may hold: it takes no more messages (the account export keeps them)", workflow.MaxChatBytes>>20))
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
	Proposal ProposalResult    `json:"proposal"`
	Workflow workflow.Workflow `json:"workflow"`
}

// Rejected is the response of the reject operation.
type Rejected struct {
	Proposal ProposalResult `json:"proposal"`
}

// load reads the workflow and the proposal and checks, in order: the
// workflow exists (404), is the caller's (403), the proposal exists (404)
// and is pending (400).
func (s *Service) load(ctx context.Context, op, workflowID, proposalID string) (workflow.Workflow, workflow.Proposal, error) {
	w, p, found, err := s.store.WorkflowProposal(ctx, workflowID, proposalID)
	if err != nil {
		return w, p, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, w.UserID); err != nil {
		return w, p, err
	}
	if !found {
		return w, p, errs.E(op, errs.NotFound, workflow.CodeProposalNotFound, "proposal not found")
	}
	if p.Status != workflow.ProposalPending {
		return w, p, errs.E(op, errs.Invalid, workflow.CodeProposalNotPending, "proposal is not pending (it was "+p.Status+")")
	}
	return w, p, nil
}

// Apply applies a pending proposal: the changes are validated against the
// current workflow (which may have moved on since the proposal: they
// apply if they still validate) and the proposal and the workflow are
// written in one transaction conditioned on both being as read. A
// concurrent write makes it re-read and retry, at most MaxApplyAttempts
// times. Errors: NotFound, Forbidden, Invalid PROPOSAL_NOT_PENDING,
// Conflict PROPOSAL_CONFLICT, TooLarge WORKFLOW_TOO_LARGE (the workflow
// would pass workflow.MaxDefinitionBytes; the proposal stays pending).
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
		tools, err := s.catalog.Details(ctx)
		if err != nil {
			return Applied{}, errs.Wrap(op, err)
		}
		next, probs := ApplyChanges(w, p.Changes, tools)
		if len(probs) > 0 {
			msg := "the proposal no longer fits the workflow"
			if w.Version == p.BaseVersion {
				msg = "the proposal is not valid for the workflow"
			}
			return Applied{}, proposalError(op, workflow.CodeProposalConflict, msg, probs)
		}
		if n := workflow.DefinitionSize(next); n > workflow.MaxDefinitionBytes {
			return Applied{}, workflow.TooLarge(op, n)
		}
		// A run_workflow step of another user's or unknown workflow, or
		// one making a cycle, is refused as a direct edit's is: 400
		// VALIDATION_FAILED naming the step.
		probs, err = workflow.CheckChildren(ctx, s.store, next)
		if err != nil {
			return Applied{}, errs.Wrap(op, err)
		}
		if len(probs) > 0 {
			e := errs.Fields(op, probs...)
			e.Message = "the proposal's workflow is not valid: " + errs.Summarize(probs)
			return Applied{}, e
		}
		now := s.clock()
		if !now.After(w.UpdatedAt) {
			now = w.UpdatedAt.Add(time.Microsecond)
		}
		next.Version, next.UpdatedAt = w.Version+1, now
		err = s.store.ApplyProposal(ctx, next, w.Version, p.ID, now)
		if errs.CodeOf(err) == workflow.CodeConcurrentUpdate {
			continue
		}
		if err != nil {
			return Applied{}, errs.Wrap(op, err)
		}
		return Applied{Proposal: ProposalResult{ID: p.ID, Status: workflow.ProposalApplied, AppliedAt: &now}, Workflow: next}, nil
	}
	return Applied{}, errs.E(op, errs.Conflict, workflow.CodeProposalConflict, "the workflow is being changed concurrently; try again")
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
	if errs.CodeOf(err) == workflow.CodeConcurrentUpdate {
		return Rejected{}, errs.E(op, errs.Invalid, workflow.CodeProposalNotPending, "proposal is not pending")
	}
	if err != nil {
		return Rejected{}, errs.Wrap(op, err)
	}
	return Rejected{Proposal: ProposalResult{ID: p.ID, Status: workflow.ProposalRejected, RejectedAt: &now}}, nil
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
