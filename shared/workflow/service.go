package workflow

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/paging"
)

// Error codes of the workflow operations.
const (
	CodeWorkflowNotFound   = "WORKFLOW_NOT_FOUND"
	CodeProposalNotFound   = "PROPOSAL_NOT_FOUND"
	CodeProposalNotPending = "PROPOSAL_NOT_PENDING"
	CodeProposalConflict   = "PROPOSAL_CONFLICT"
	// CodeWorkflowTooLarge (413): the definition would pass
	// MaxDefinitionBytes.
	CodeWorkflowTooLarge = "WORKFLOW_TOO_LARGE"
	// CodeToolNameTaken (409): another of the user's workflows has the
	// toolName.
	CodeToolNameTaken = "TOOL_NAME_TAKEN"
	// CodeVersionMismatch (412): If-Match names another version.
	CodeVersionMismatch = "VERSION_MISMATCH"
	// CodeToolNotFound: no workflow of the user is exposed as the tool.
	CodeToolNotFound = "TOOL_NOT_FOUND"
	// CodeConcurrentUpdate is a Conflict the Store reports when a write's
	// condition on the workflow's version or the proposal's status fails;
	// the service re-reads and decides.
	CodeConcurrentUpdate = "CONCURRENT_UPDATE"
)

// Store persists workflows, their chat messages and proposals.
type Store interface {
	// CreateWorkflow stores w (with its tool-name claim) and increments
	// its owner's workflow count, in one transaction. Conflict
	// TOOL_NAME_TAKEN, TooLarge WORKFLOW_TOO_LARGE.
	CreateWorkflow(ctx context.Context, w Workflow) error
	// Workflow returns the workflow id. NotFound WORKFLOW_NOT_FOUND.
	Workflow(ctx context.Context, id string) (Workflow, error)
	// UpdateWorkflow writes next over prev, as read (next.Version is
	// prev.Version+1), with next's tool-name claim (and prev's released
	// when the name changed), in one transaction conditioned on the
	// stored workflow still being prev's version. Conflict
	// CONCURRENT_UPDATE when it is not (changed or gone), Conflict
	// TOOL_NAME_TAKEN, TooLarge WORKFLOW_TOO_LARGE.
	UpdateWorkflow(ctx context.Context, next, prev Workflow) error
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
	// Every write of a workflow (CreateWorkflow, UpdateWorkflow,
	// ApplyProposal, RestoreWorkflow) keeps its new definition as the
	// Version of its new number in the same transaction.
	VersionStore
}

// VersionStore keeps and reads a workflow's versions.
type VersionStore interface {
	// RestoreWorkflow is UpdateWorkflow whose version's source is
	// restore.
	RestoreWorkflow(ctx context.Context, next, prev Workflow) error
	// WorkflowVersions returns a page of w's versions (w as read), newest
	// first. Invalid INVALID_PAGINATION for a cursor it did not give.
	WorkflowVersions(ctx context.Context, w Workflow, limit int, cursor string) (VersionsPage, error)
	// WorkflowVersion returns version n of w (w as read). NotFound
	// VERSION_NOT_FOUND.
	WorkflowVersion(ctx context.Context, w Workflow, n int) (Version, error)
}

// Definitions checks a definition's steps and input schema against the
// tool catalog (proposal.Definitions implements it).
type Definitions interface {
	// CheckDefinition returns w with each step's Outputs set and its
	// input schema compact, and the problems of its steps and
	// inputSchema, named "steps[<index>]...", "inputSchema", "steps".
	// Errors: the catalog's.
	CheckDefinition(ctx context.Context, w Workflow) (Workflow, []errs.FieldError, error)
}

// MaxUpdateAttempts bounds how many times Update re-reads and retries when
// concurrent writes beat it.
const MaxUpdateAttempts = 5

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
// deleting runs (triggers); Definitions nil refuses steps and inputSchema
// in creates and updates; Now nil means time.Now.
type Options struct {
	Store       Store
	Runs        RunDeleter
	Triggers    TriggerDeleter
	Definitions Definitions
	Now         func() time.Time
}

// Service implements the workflow operations: create, read, update,
// delete, list, and read the workflow chat. Posting to the chat and the
// proposals it makes are package proposal's; runs are package run's.
type Service struct {
	store    Store
	runs     RunDeleter
	triggers TriggerDeleter
	defs     Definitions
	now      func() time.Time
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{store: o.Store, runs: o.Runs, triggers: o.Triggers, defs: o.Definitions, now: o.Now}
}

func (s *Service) clock() time.Time { return s.now().UTC() }

// Create creates a workflow for the signed-in user, who must be
// req.UserID (Forbidden otherwise), with the definition fields it gives
// checked as Update checks them. Errors: Forbidden, Invalid
// VALIDATION_FAILED naming the field, Conflict TOOL_NAME_TAKEN, TooLarge
// WORKFLOW_TOO_LARGE, the catalog's.
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
	w, err := s.define(ctx, op, w, UpdateRequest{InputSchema: req.InputSchema, Steps: req.Steps, ExposeAsTool: req.ExposeAsTool, ToolName: req.ToolName})
	if err != nil {
		return Workflow{}, err
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

// Update changes workflow id as req says, when pre holds for its version:
// it reads the workflow, applies the fields given, checks the definition
// (the steps and the inputSchema against the tool catalog when either is
// given, exposeAsTool needing a toolName, the size) and writes it with
// one transaction conditioned on the version read; a concurrent write
// makes it read again (and check pre again), at most MaxUpdateAttempts
// times. Errors: NotFound, Forbidden, PreconditionFailed
// VERSION_MISMATCH, Invalid VALIDATION_FAILED naming the field, Conflict
// TOOL_NAME_TAKEN, TooLarge WORKFLOW_TOO_LARGE, the catalog's.
func (s *Service) Update(ctx context.Context, id string, req UpdateRequest, pre Precondition) (Workflow, error) {
	return s.change(ctx, "workflow.Update", id, req, pre, s.store.UpdateWorkflow)
}

// change is Update writing with write (the store's UpdateWorkflow or
// RestoreWorkflow).
func (s *Service) change(ctx context.Context, op, id string, req UpdateRequest, pre Precondition, write func(ctx context.Context, next, prev Workflow) error) (Workflow, error) {
	for range MaxUpdateAttempts {
		w, err := s.Get(ctx, id)
		if err != nil {
			return Workflow{}, errs.Wrap(op, err)
		}
		if !pre.Matches(w.Version) {
			return Workflow{}, mismatch(op, w.Version)
		}
		next := w
		if req.Name != nil {
			next.Name = strings.TrimSpace(*req.Name)
		}
		if req.Description != nil {
			next.Description = *req.Description
		}
		next, err = s.define(ctx, op, next, req)
		if err != nil {
			return Workflow{}, err
		}
		now := s.clock()
		if !now.After(w.UpdatedAt) {
			now = w.UpdatedAt.Add(time.Microsecond)
		}
		next.Version, next.UpdatedAt = w.Version+1, now
		err = write(ctx, next, w)
		if errs.CodeOf(err) == CodeConcurrentUpdate {
			continue
		}
		if err != nil {
			return Workflow{}, errs.Wrap(op, err)
		}
		return next, nil
	}
	return Workflow{}, errs.E(op, errs.Conflict, CodeConcurrentUpdate, "the workflow is being changed concurrently; try again")
}

// define applies the definition fields of req (inputSchema, steps,
// exposeAsTool, toolName) to w and checks the result: the steps and the
// input schema through Definitions when either is given, a toolName when
// exposed, and the size.
func (s *Service) define(ctx context.Context, op string, w Workflow, req UpdateRequest) (Workflow, error) {
	if req.InputSchema != nil {
		w.InputSchema = nil
		if t := bytes.TrimSpace(req.InputSchema); string(t) != "null" {
			w.InputSchema = slices.Clone(t)
		}
	}
	if req.Steps != nil {
		w.Steps = slices.Clone(*req.Steps)
	}
	if req.ExposeAsTool != nil {
		w.ExposeAsTool = *req.ExposeAsTool
	}
	if req.ToolName != nil {
		w.ToolName = *req.ToolName
	}
	if w.Steps == nil {
		w.Steps = []Step{}
	}
	if req.InputSchema != nil || req.Steps != nil {
		if s.defs == nil {
			return Workflow{}, errs.E(op, errs.Internal, "", "workflow definitions cannot be checked here")
		}
		checked, probs, err := s.defs.CheckDefinition(ctx, w)
		if err != nil {
			return Workflow{}, errs.Wrap(op, err)
		}
		if len(probs) > 0 {
			return Workflow{}, definitionError(op, probs)
		}
		w = checked
		// run_workflow steps run the user's other workflows, never in a
		// cycle (children.go).
		if probs, err = CheckChildren(ctx, s.store, w); err != nil {
			return Workflow{}, errs.Wrap(op, err)
		}
		if len(probs) > 0 {
			return Workflow{}, definitionError(op, probs)
		}
	}
	if w.ExposeAsTool && w.ToolName == "" {
		return Workflow{}, errs.Fields(op, errs.FieldError{Field: "exposeAsTool", Message: "a workflow exposed as a tool needs a toolName"})
	}
	if n := DefinitionSize(w); n > MaxDefinitionBytes {
		return Workflow{}, TooLarge(op, n)
	}
	return w, nil
}

// TooLarge is the error of a definition of n bytes (DefinitionSize), over
// MaxDefinitionBytes: 413 WORKFLOW_TOO_LARGE naming the limit.
func TooLarge(op string, n int) error {
	return errs.E(op, errs.TooLarge, CodeWorkflowTooLarge,
		fmt.Sprintf("the workflow definition would be %d bytes; the limit is %d bytes (350 KiB) of JSON for its name, description, inputSchema, steps, exposeAsTool and toolName", n, MaxDefinitionBytes))
}

// definitionError is the VALIDATION_FAILED error of a definition's
// problems, its message naming the first ones.
func definitionError(op string, probs []errs.FieldError) error {
	e := errs.Fields(op, probs...)
	e.Message = "the workflow definition is not valid: " + errs.Summarize(probs)
	return e
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

// CodeMessageNotFound: the message named by a list's before is not in
// this workflow's chat.
const CodeMessageNotFound = "MESSAGE_NOT_FOUND"

// MessageList is what GET /api/workflows/{id}/messages answers.
type MessageList struct {
	// Messages are the chat's messages, oldest first: all of them (older
	// than Before, when set), or the newest of those within
	// httpapi.MaxListBytes.
	Messages []Message `json:"messages"`
	// Omitted counts the older messages left out (absent when none): a
	// list with before set to the first message's id answers them.
	Omitted int `json:"omitted,omitempty"`
}

// Messages returns the workflow chat of id in conversation order: with
// before set, only the messages older than message before; bounded to
// httpapi.MaxListBytes of JSON (proposals carry whole definitions, up to
// 350 KiB each): the newest messages that fit, and how many older ones
// were left out. NotFound (WORKFLOW_NOT_FOUND, or MESSAGE_NOT_FOUND for a
// before not in this chat), Forbidden.
func (s *Service) Messages(ctx context.Context, id, before string) (MessageList, error) {
	const op = "workflow.Messages"
	w, msgs, err := s.store.Conversation(ctx, id)
	if err != nil {
		return MessageList{}, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, w.UserID); err != nil {
		return MessageList{}, err
	}
	if before != "" {
		i := slices.IndexFunc(msgs, func(m Message) bool { return m.ID == before })
		if i < 0 {
			return MessageList{}, errs.NotFoundf(op, CodeMessageNotFound, "no message %s in this workflow's chat", before)
		}
		msgs = msgs[:i]
	}
	keep, err := httpapi.NewestWithin(msgs, httpapi.MaxListBytes)
	if err != nil {
		return MessageList{}, errs.Wrap(op, err)
	}
	return MessageList{Messages: msgs[len(msgs)-keep:], Omitted: len(msgs) - keep}, nil
}
