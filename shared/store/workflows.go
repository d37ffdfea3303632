package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/workflow"
)

// Workflows stores workflows, their chat messages and proposals in the
// Data table: each workflow is an item collection (PK WF#<id>) holding the
// workflow item (SK WF, steps as JSON, a version attribute for optimistic
// concurrency), its messages (SK MSG#<time>#<id>) and its proposals (SK
// PROP#<id>), so that one Query returns the workflow with its whole chat
// and the proposals' states. Per user, GSI1 (GSI1PK USER#<id>#WORKFLOWS)
// lists the workflows by updatedAt beside the user's workflow counter
// (GSI1SK "~COUNT", sorting after every timestamp): one descending Query
// returns the total and a page. A workflow's toolName is reserved by a
// tool-name item in its owner's partition (PK USER#<id>, SK
// TOOLNAME#<name>), written in the transaction of every write of the
// workflow (a conditional put: the name is unique per user), moved on a
// rename and deleted with the workflow; it holds a copy of what a user's
// MCP server lists (workflow.ToolEntry), so ExposedTools is one Query
// and ExposedTool one GetItem. It implements workflow.Store.
type Workflows struct {
	db    *dynamo.DB
	table dynamo.Table
	owned ownedCollection
}

// NewWorkflows returns a Workflows over the named Data table.
func NewWorkflows(db *dynamo.DB, dataTable string) *Workflows {
	t := db.Table(dataTable)
	w := &Workflows{db: db, table: t}
	w.owned = ownedCollection{
		db: db, table: t, pk: workflowPK, root: workflowSK, counter: workflowCounterKey, noun: "workflow", notFound: errWorkflowNotFound,
		unlink: w.releaseToolName,
	}
	return w
}

const workflowSK = "WF"

func workflowPK(id string) string           { return "WF#" + id }
func userWorkflowsGSI(userID string) string { return "USER#" + userID + "#WORKFLOWS" }
func workflowGSISK(updatedAt time.Time, id string) string {
	return updatedAt.UTC().Format(timeKey) + "#" + id
}
func workflowMessageSK(m workflow.Message) string {
	return "MSG#" + m.CreatedAt.UTC().Format(timeKey) + "#" + m.ID
}
func proposalSK(id string) string { return "PROP#" + id }
func workflowCounterKey(userID string) (string, string) {
	return "USER#" + userID, "COUNTER#WORKFLOWS"
}

const toolNamePrefix = "TOOLNAME#"

func toolNameKey(userID, toolName string) (string, string) {
	return "USER#" + userID, toolNamePrefix + toolName
}

type workflowItem struct {
	PK, SK         string
	GSI1PK, GSI1SK string
	Type           string    `dynamo:"type"`
	ID             string    `dynamo:"id"`
	UserID         string    `dynamo:"userId"`
	Name           string    `dynamo:"name"`
	Description    string    `dynamo:"description"`
	Steps          string    `dynamo:"steps"`                 // JSON array
	InputSchema    string    `dynamo:"inputSchema,omitempty"` // JSON object
	ExposeAsTool   bool      `dynamo:"exposeAsTool,omitempty"`
	ToolName       string    `dynamo:"toolName,omitempty"`
	Version        int       `dynamo:"version"`
	CreatedAt      time.Time `dynamo:"createdAt"`
	UpdatedAt      time.Time `dynamo:"updatedAt"`
	// VersionsFrom is the first version kept as version items (absent on
	// a workflow stored before versions).
	VersionsFrom int `dynamo:"versionsFrom,omitempty"`
}

// toolNameItem reserves a workflow's toolName and carries its
// workflow.ToolEntry.
type toolNameItem struct {
	PK, SK      string
	Type        string    `dynamo:"type"`
	UserID      string    `dynamo:"userId"`
	ToolName    string    `dynamo:"toolName"`
	WorkflowID  string    `dynamo:"workflowId"`
	Exposed     bool      `dynamo:"exposed"`
	Name        string    `dynamo:"name"`
	Description string    `dynamo:"description"`
	InputSchema string    `dynamo:"inputSchema,omitempty"`
	LastStepID  string    `dynamo:"lastStepId,omitempty"`
	LastToolID  string    `dynamo:"lastToolId,omitempty"`
	LastForEach bool      `dynamo:"lastForEach,omitempty"`
	Version     int       `dynamo:"version"`
	UpdatedAt   time.Time `dynamo:"updatedAt"`
}

func newToolNameItem(w workflow.Workflow) toolNameItem {
	e := w.Entry()
	pk, sk := toolNameKey(w.UserID, w.ToolName)
	return toolNameItem{PK: pk, SK: sk, Type: "toolname", UserID: e.UserID, ToolName: e.ToolName, WorkflowID: e.WorkflowID,
		Exposed: e.Exposed, Name: e.Name, Description: e.Description, InputSchema: string(e.InputSchema),
		LastStepID: e.LastStepID, LastToolID: e.LastToolID, LastForEach: e.LastForEach, Version: e.Version, UpdatedAt: e.UpdatedAt}
}

func (it toolNameItem) entry() workflow.ToolEntry {
	e := workflow.ToolEntry{UserID: it.UserID, ToolName: it.ToolName, WorkflowID: it.WorkflowID, Exposed: it.Exposed, Name: it.Name,
		Description: it.Description, LastStepID: it.LastStepID, LastToolID: it.LastToolID, LastForEach: it.LastForEach,
		Version: it.Version, UpdatedAt: it.UpdatedAt}
	if it.InputSchema != "" {
		e.InputSchema = json.RawMessage(it.InputSchema)
	}
	return e
}

// claimsToolName is the condition of a tool-name write: the name is free
// or already this workflow's.
const claimsToolName = "attribute_not_exists(PK) OR workflowId = ?"

type wfMessageItem struct {
	PK, SK     string
	Type       string    `dynamo:"type"`
	ID         string    `dynamo:"id"`
	WorkflowID string    `dynamo:"workflowId"`
	Role       string    `dynamo:"role"`
	Content    string    `dynamo:"content"`
	CreatedAt  time.Time `dynamo:"createdAt"`
}

type proposalItem struct {
	PK, SK      string
	Type        string     `dynamo:"type"`
	ID          string     `dynamo:"id"`
	WorkflowID  string     `dynamo:"workflowId"`
	MessageID   string     `dynamo:"messageId"`
	Status      string     `dynamo:"status"`
	Changes     string     `dynamo:"changes"` // JSON array
	BaseVersion int        `dynamo:"baseVersion"`
	CreatedAt   time.Time  `dynamo:"createdAt"`
	AppliedAt   *time.Time `dynamo:"appliedAt,omitempty"`
	RejectedAt  *time.Time `dynamo:"rejectedAt,omitempty"`
}

// wfCollectionItem reads any item of a workflow collection.
type wfCollectionItem struct {
	workflowItem
	WorkflowID  string     `dynamo:"workflowId"`
	Role        string     `dynamo:"role"`
	Content     string     `dynamo:"content"`
	MessageID   string     `dynamo:"messageId"`
	Status      string     `dynamo:"status"`
	Changes     string     `dynamo:"changes"`
	BaseVersion int        `dynamo:"baseVersion"`
	AppliedAt   *time.Time `dynamo:"appliedAt"`
	RejectedAt  *time.Time `dynamo:"rejectedAt"`
}

func newWorkflowItem(w workflow.Workflow) (workflowItem, error) {
	steps := w.Steps
	if steps == nil {
		steps = []workflow.Step{}
	}
	b, err := json.Marshal(steps)
	if err != nil {
		return workflowItem{}, fmt.Errorf("encode steps: %w", err)
	}
	return workflowItem{
		PK: workflowPK(w.ID), SK: workflowSK, GSI1PK: userWorkflowsGSI(w.UserID), GSI1SK: workflowGSISK(w.UpdatedAt, w.ID),
		Type: "workflow", ID: w.ID, UserID: w.UserID, Name: w.Name, Description: w.Description, Steps: string(b),
		InputSchema: string(w.InputSchema), ExposeAsTool: w.ExposeAsTool, ToolName: w.ToolName,
		Version: w.Version, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, VersionsFrom: w.VersionsFrom,
	}, nil
}

func (it workflowItem) workflow() (workflow.Workflow, error) {
	w := workflow.Workflow{ID: it.ID, UserID: it.UserID, Name: it.Name, Description: it.Description,
		ExposeAsTool: it.ExposeAsTool, ToolName: it.ToolName,
		Version: it.Version, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, VersionsFrom: it.VersionsFrom}
	if it.InputSchema != "" {
		w.InputSchema = json.RawMessage(it.InputSchema)
	}
	if it.Steps != "" {
		if err := decodeAttr(it.PK, it.SK, "steps", it.Steps, &w.Steps); err != nil {
			return workflow.Workflow{}, err
		}
	}
	if w.Steps == nil {
		w.Steps = []workflow.Step{}
	}
	for i := range w.Steps {
		if w.Steps[i].Inputs == nil {
			w.Steps[i].Inputs = map[string]any{}
		}
		if w.Steps[i].Outputs == nil {
			w.Steps[i].Outputs = []string{}
		}
	}
	return w, nil
}

func newProposalItem(p workflow.Proposal) (proposalItem, error) {
	changes := p.Changes
	if changes == nil {
		changes = []workflow.Change{}
	}
	b, err := json.Marshal(changes)
	if err != nil {
		return proposalItem{}, fmt.Errorf("encode changes: %w", err)
	}
	return proposalItem{
		PK: workflowPK(p.WorkflowID), SK: proposalSK(p.ID), Type: "proposal", ID: p.ID, WorkflowID: p.WorkflowID,
		MessageID: p.MessageID, Status: p.Status, Changes: string(b), BaseVersion: p.BaseVersion,
		CreatedAt: p.CreatedAt, AppliedAt: p.AppliedAt, RejectedAt: p.RejectedAt,
	}, nil
}

func (it wfCollectionItem) proposal() (workflow.Proposal, error) {
	p := workflow.Proposal{ID: it.ID, WorkflowID: it.WorkflowID, MessageID: it.MessageID, Status: it.Status,
		BaseVersion: it.BaseVersion, CreatedAt: it.CreatedAt, AppliedAt: it.AppliedAt, RejectedAt: it.RejectedAt}
	if it.Changes != "" {
		if err := decodeAttr(it.PK, it.SK, "changes", it.Changes, &p.Changes); err != nil {
			return workflow.Proposal{}, err
		}
	}
	if p.Changes == nil {
		p.Changes = []workflow.Change{}
	}
	return p, nil
}

func (it wfCollectionItem) message() workflow.Message {
	return workflow.Message{ID: it.ID, WorkflowID: it.WorkflowID, Role: it.Role, Content: it.Content, CreatedAt: it.CreatedAt}
}

var errWorkflowNotFound = errs.E("store.Workflows", errs.NotFound, workflow.CodeWorkflowNotFound, "workflow not found")

func toolNameTaken(op, name string, err error) error {
	return errs.E(op, errs.Conflict, workflow.CodeToolNameTaken, fmt.Sprintf("another of your workflows has the toolName %q", name)).WithCause(err)
}

// tooLarge maps DynamoDB's refusal of an item over its size limit to 413
// WORKFLOW_TOO_LARGE (the service refuses definitions over
// workflow.MaxDefinitionBytes before; this keeps any that slip through
// from being a 500).
func tooLarge(op string, err error) error {
	if err != nil && strings.Contains(err.Error(), "Item size") && strings.Contains(err.Error(), "exceeded the maximum allowed size") {
		return errs.E(op, errs.TooLarge, workflow.CodeWorkflowTooLarge, "the workflow is too large to store").WithCause(err)
	}
	return nil
}

func concurrentUpdate(op string, err error) error {
	return errs.E(op, errs.Conflict, workflow.CodeConcurrentUpdate, "the workflow or proposal changed concurrently").WithCause(err)
}

// isTxConflict reports whether a transaction was cancelled because another
// transaction was writing the same items at the same time.
func isTxConflict(err error) bool {
	var conflict *types.TransactionConflictException
	if errors.As(err, &conflict) {
		return true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if r.Code != nil && *r.Code == "TransactionConflict" {
				return true
			}
		}
	}
	return false
}

// CreateWorkflow stores w and increments its owner's workflow counter in
// one transaction.
func (s *Workflows) CreateWorkflow(ctx context.Context, w workflow.Workflow) error {
	const op = "store.CreateWorkflow"
	w.VersionsFrom = w.Version
	versions, err := s.keepVersions(&w, w, workflow.VersionCreate)
	if err != nil {
		return errs.Wrap(op, err)
	}
	it, err := newWorkflowItem(w)
	if err != nil {
		return errs.Wrap(op, err)
	}
	pk, sk := workflowCounterKey(w.UserID)
	tx := s.db.WriteTx().
		Put(s.table.Put(it).If("attribute_not_exists(PK)")).
		Update(s.table.Update("PK", pk).Range("SK", sk).Add("n", 1).
			Set("GSI1PK", userWorkflowsGSI(w.UserID)).Set("GSI1SK", counterGSISK).Set("type", "counter"))
	if w.ToolName != "" {
		tx.Put(s.table.Put(newToolNameItem(w)).If(claimsToolName, w.ID))
	}
	// The version items come last: the conditions' indexes above stay.
	for _, p := range versions {
		tx.Put(p)
	}
	err = tx.Run(ctx)
	switch {
	case w.ToolName != "" && failedCondition(err, 2):
		return toolNameTaken(op, w.ToolName, err)
	case isConditionFailure(err):
		return errs.E(op, errs.Conflict, "WORKFLOW_EXISTS", "a workflow with this id exists")
	}
	if e := tooLarge(op, err); e != nil {
		return e
	}
	return storeError(op, err)
}

// Workflow returns the workflow id. NotFound WORKFLOW_NOT_FOUND.
func (s *Workflows) Workflow(ctx context.Context, id string) (workflow.Workflow, error) {
	const op = "store.Workflow"
	var it workflowItem
	if err := s.table.Get("PK", workflowPK(id)).Range("SK", dynamo.Equal, workflowSK).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return workflow.Workflow{}, errs.Wrap(op, errWorkflowNotFound)
		}
		return workflow.Workflow{}, storeError(op, err)
	}
	w, err := it.workflow()
	return w, errs.Wrap(op, err)
}

// UpdateWorkflow writes next over prev (next.Version is prev.Version+1)
// in one transaction: the workflow item, conditioned on the stored
// version being prev's, the owner being next's and no delete under way;
// the tool-name item of next.ToolName (conditioned on the name being free
// or this workflow's); and, when the name changed, the delete of
// prev.ToolName's. Conflict CONCURRENT_UPDATE when the workflow is not as
// read (changed, or gone: the caller re-reads), Conflict TOOL_NAME_TAKEN,
// TooLarge WORKFLOW_TOO_LARGE.
func (s *Workflows) UpdateWorkflow(ctx context.Context, next, prev workflow.Workflow) error {
	return s.updateWorkflow(ctx, "store.UpdateWorkflow", next, prev, workflow.VersionPatch)
}

// RestoreWorkflow is UpdateWorkflow of a restored version: the version
// next makes has the source restore.
func (s *Workflows) RestoreWorkflow(ctx context.Context, next, prev workflow.Workflow) error {
	return s.updateWorkflow(ctx, "store.RestoreWorkflow", next, prev, workflow.VersionRestore)
}

// updateWorkflow writes next over prev with the version items of next
// (and of prev, stored before versions), made by source.
func (s *Workflows) updateWorkflow(ctx context.Context, op string, next, prev workflow.Workflow, source string) error {
	versions, err := s.keepVersions(&next, prev, source)
	if err != nil {
		return errs.Wrap(op, err)
	}
	it, err := newWorkflowItem(next)
	if err != nil {
		return errs.Wrap(op, err)
	}
	tx := s.db.WriteTx().
		Put(s.table.Put(it).If("$ = ? AND userId = ? AND attribute_not_exists(deleting)", "version", prev.Version, next.UserID))
	n := 1
	if prev.ToolName != "" && prev.ToolName != next.ToolName {
		pk, sk := toolNameKey(prev.UserID, prev.ToolName)
		tx.Delete(s.table.Delete("PK", pk).Range("SK", sk).If(claimsToolName, prev.ID))
		n++
	}
	claim := -1
	if next.ToolName != "" {
		tx.Put(s.table.Put(newToolNameItem(next)).If(claimsToolName, next.ID))
		claim = n
	}
	for _, p := range versions {
		tx.Put(p)
	}
	err = tx.Run(ctx)
	switch {
	case claim >= 0 && failedCondition(err, claim):
		return toolNameTaken(op, next.ToolName, err)
	case isConditionFailure(err) || isTxConflict(err):
		return concurrentUpdate(op, err)
	}
	if e := tooLarge(op, err); e != nil {
		return e
	}
	return storeError(op, err)
}

// releaseToolName returns the delete of the tool-name item that the
// workflow item being deleted names, for the delete's last transaction.
func (s *Workflows) releaseToolName(id, userID string, links rootLinks) []*dynamo.Delete {
	if links.ToolName == "" {
		return nil
	}
	pk, sk := toolNameKey(userID, links.ToolName)
	return []*dynamo.Delete{s.table.Delete("PK", pk).Range("SK", sk).If(claimsToolName, id)}
}

// ExposedTools returns the user's workflows exposed as tools, by tool
// name, from one Query of the user's tool-name items (a page per 1 MB).
func (s *Workflows) ExposedTools(ctx context.Context, userID string) ([]workflow.ToolEntry, error) {
	const op = "store.ExposedTools"
	pk, _ := toolNameKey(userID, "")
	var items []toolNameItem
	if err := s.table.Get("PK", pk).Range("SK", dynamo.BeginsWith, toolNamePrefix).All(ctx, &items); err != nil {
		return nil, storeError(op, err)
	}
	out := []workflow.ToolEntry{}
	for _, it := range items {
		if it.Exposed {
			out = append(out, it.entry())
		}
	}
	return out, nil
}

// ExposedTool returns the user's workflow exposed as the tool toolName,
// with one GetItem. NotFound TOOL_NOT_FOUND when no workflow of the user
// has that toolName or it is not exposed.
func (s *Workflows) ExposedTool(ctx context.Context, userID, toolName string) (workflow.ToolEntry, error) {
	const op = "store.ExposedTool"
	pk, sk := toolNameKey(userID, toolName)
	var it toolNameItem
	err := s.table.Get("PK", pk).Range("SK", dynamo.Equal, sk).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound) || (err == nil && !it.Exposed):
		return workflow.ToolEntry{}, errs.E(op, errs.NotFound, workflow.CodeToolNotFound, fmt.Sprintf("no workflow is exposed as the tool %q", toolName))
	case err != nil:
		return workflow.ToolEntry{}, storeError(op, err)
	}
	return it.entry(), nil
}

// DeleteWorkflow removes the workflow id of userID with its messages and
// proposals (see ownedCollection.delete). Its runs live in the chats they
// ran in: deleteRuns, when not nil, deletes them once the owner is
// checked and before the workflow goes (DeleteWorkflowRuns). NotFound,
// Forbidden, or deleteRuns' error.
func (s *Workflows) DeleteWorkflow(ctx context.Context, id, userID string, deleteRuns func(context.Context) error) error {
	return s.owned.delete(ctx, "store.DeleteWorkflow", id, userID, deleteRuns)
}

// ListWorkflows returns a page of the user's workflows, most recently
// updated first, and the user's workflow count, from one Query of GSI1.
func (s *Workflows) ListWorkflows(ctx context.Context, userID string, page paging.Page) ([]workflow.Workflow, int, error) {
	items, total, err := pageWithTotal[workflowItem](ctx, s.table, userWorkflowsGSI(userID), page)
	if err != nil {
		return nil, 0, errs.Wrap("store.ListWorkflows", err)
	}
	ws := make([]workflow.Workflow, 0, len(items))
	for _, it := range items {
		w, err := it.workflow()
		if err != nil {
			return nil, 0, errs.Wrap("store.ListWorkflows", err)
		}
		ws = append(ws, w)
	}
	return ws, total, nil
}

// Conversation returns the workflow and its messages in order, assistant
// messages with their proposals, from one Query of the collection.
func (s *Workflows) Conversation(ctx context.Context, id string) (workflow.Workflow, []workflow.Message, error) {
	const op = "store.WorkflowConversation"
	var items []wfCollectionItem
	// The range skips the versions (see workflowversions.go).
	if err := s.table.Get("PK", workflowPK(id)).Range("SK", dynamo.Greater, afterVersions).All(ctx, &items); err != nil {
		return workflow.Workflow{}, nil, storeError(op, err)
	}
	var w *workflow.Workflow
	msgs := []workflow.Message{}
	proposals := map[string]*workflow.Proposal{}
	for _, it := range items {
		switch it.Type {
		case "workflow":
			ww, err := it.workflow()
			if err != nil {
				return workflow.Workflow{}, nil, errs.Wrap(op, err)
			}
			w = &ww
		case "message":
			msgs = append(msgs, it.message())
		case "proposal":
			p, err := it.proposal()
			if err != nil {
				return workflow.Workflow{}, nil, errs.Wrap(op, err)
			}
			proposals[p.MessageID] = &p
		}
	}
	if w == nil {
		return workflow.Workflow{}, nil, errs.Wrap(op, errWorkflowNotFound)
	}
	for i := range msgs {
		msgs[i].Proposal = proposals[msgs[i].ID]
	}
	return *w, msgs, nil
}

// chatBytesSK is the item of a workflow's collection that counts what its
// chat holds (n: bytes as workflow.ChatBytes weighs them). It sorts
// before the versions, outside the range Conversation reads, and goes
// with the collection when the workflow is deleted.
const chatBytesSK = "!CHATBYTES"

// AddMessages stores msgs and p (when not nil) in one transaction
// conditioned on the workflow existing and on its chat having room for
// the user messages among msgs (workflow.MaxChatBytes: the count, in the
// same transaction, holds what the chat held before them; replies and
// proposals are counted, never refused). NotFound WORKFLOW_NOT_FOUND,
// Conflict CHAT_FULL.
func (s *Workflows) AddMessages(ctx context.Context, workflowID string, p *workflow.Proposal, msgs ...workflow.Message) error {
	const op = "store.AddWorkflowMessages"
	tx := s.db.WriteTx()
	added := 0
	for _, m := range msgs {
		tx.Put(s.table.Put(wfMessageItem{PK: workflowPK(workflowID), SK: workflowMessageSK(m), Type: "message",
			ID: m.ID, WorkflowID: workflowID, Role: m.Role, Content: m.Content, CreatedAt: m.CreatedAt}))
		added += workflow.MessageWeight(m)
	}
	var prop *dynamo.Put
	if p != nil {
		it, err := newProposalItem(*p)
		if err != nil {
			return errs.Wrap(op, err)
		}
		prop = s.table.Put(it).If("attribute_not_exists(PK)")
		added += workflow.ProposalWeight(len(it.Changes))
	}
	tx.Check(s.table.Check("PK", workflowPK(workflowID)).Range("SK", workflowSK).If(collectionWritable))
	counted := len(msgs) + 1 // the messages, the check, then the count (the proposal last)
	tx.Update(s.table.Update("PK", workflowPK(workflowID)).Range("SK", chatBytesSK).Add("n", added).
		If("attribute_not_exists(n) OR n <= ?", workflow.MaxChatBytes-workflow.RoomAsked(msgs)))
	if prop != nil {
		tx.Put(prop)
	}
	err := tx.Run(ctx)
	if failedCondition(err, counted) {
		return errs.E(op, errs.Conflict, workflow.CodeChatFull, "the workflow's chat holds the most it may hold")
	}
	if isConditionFailure(err) {
		return errs.Wrap(op, errWorkflowNotFound)
	}
	return storeError(op, err)
}

// WorkflowProposal reads the workflow and one of its proposals in one
// consistent transactional read.
func (s *Workflows) WorkflowProposal(ctx context.Context, workflowID, proposalID string) (workflow.Workflow, workflow.Proposal, bool, error) {
	const op = "store.WorkflowProposal"
	var wi workflowItem
	var pi wfCollectionItem
	err := s.db.GetTx().
		GetOne(s.table.Get("PK", workflowPK(workflowID)).Range("SK", dynamo.Equal, workflowSK), &wi).
		GetOne(s.table.Get("PK", workflowPK(workflowID)).Range("SK", dynamo.Equal, proposalSK(proposalID)), &pi).
		Run(ctx)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return workflow.Workflow{}, workflow.Proposal{}, false, storeError(op, err)
	}
	if wi.ID == "" {
		return workflow.Workflow{}, workflow.Proposal{}, false, errs.Wrap(op, errWorkflowNotFound)
	}
	w, err := wi.workflow()
	if err != nil {
		return workflow.Workflow{}, workflow.Proposal{}, false, errs.Wrap(op, err)
	}
	if pi.ID == "" {
		return w, workflow.Proposal{}, false, nil
	}
	p, err := pi.proposal()
	if err != nil {
		return workflow.Workflow{}, workflow.Proposal{}, false, errs.Wrap(op, err)
	}
	return w, p, true, nil
}

// ApplyProposal writes next (with its tool-name item, when it has a
// toolName) and marks the proposal applied in one transaction conditioned
// on the proposal being pending and the workflow's version being
// readVersion. Conflict CONCURRENT_UPDATE when either condition fails or
// another transaction got in the way; TooLarge WORKFLOW_TOO_LARGE.
func (s *Workflows) ApplyProposal(ctx context.Context, next workflow.Workflow, readVersion int, proposalID string, at time.Time) error {
	const op = "store.ApplyProposal"
	prev := next
	if next.VersionsFrom == 0 {
		// Stored before versions: its current definition is kept too, as
		// read now (the write below is conditioned on that version).
		var pit workflowItem
		err := s.table.Get("PK", workflowPK(next.ID)).Range("SK", dynamo.Equal, workflowSK).Consistent(true).One(ctx, &pit)
		if errors.Is(err, dynamo.ErrNotFound) || (err == nil && pit.Version != readVersion) {
			return concurrentUpdate(op, err)
		}
		if err != nil {
			return storeError(op, err)
		}
		if prev, err = pit.workflow(); err != nil {
			return errs.Wrap(op, err)
		}
	}
	versions, err := s.keepVersions(&next, prev, workflow.VersionProposal)
	if err != nil {
		return errs.Wrap(op, err)
	}
	it, err := newWorkflowItem(next)
	if err != nil {
		return errs.Wrap(op, err)
	}
	tx := s.db.WriteTx().
		Update(s.table.Update("PK", workflowPK(next.ID)).Range("SK", proposalSK(proposalID)).
			Set("status", workflow.ProposalApplied).Set("appliedAt", at).
			If("$ = ?", "status", workflow.ProposalPending)).
		Put(s.table.Put(it).If("$ = ? AND userId = ? AND attribute_not_exists(deleting)", "version", readVersion, next.UserID))
	if next.ToolName != "" { // keep the tool entry in step
		tx.Put(s.table.Put(newToolNameItem(next)).If(claimsToolName, next.ID))
	}
	for _, p := range versions {
		tx.Put(p)
	}
	err = tx.Run(ctx)
	if isConditionFailure(err) || isTxConflict(err) {
		return concurrentUpdate(op, err)
	}
	if e := tooLarge(op, err); e != nil {
		return e
	}
	return storeError(op, err)
}

// RejectProposal marks the proposal rejected, conditioned on it being
// pending; Conflict CONCURRENT_UPDATE otherwise.
func (s *Workflows) RejectProposal(ctx context.Context, workflowID, proposalID string, at time.Time) error {
	const op = "store.RejectProposal"
	err := s.table.Update("PK", workflowPK(workflowID)).Range("SK", proposalSK(proposalID)).
		Set("status", workflow.ProposalRejected).Set("rejectedAt", at).
		If("attribute_exists(PK) AND $ = ?", "status", workflow.ProposalPending).Run(ctx)
	if isConditionFailure(err) {
		return concurrentUpdate(op, err)
	}
	return storeError(op, err)
}
