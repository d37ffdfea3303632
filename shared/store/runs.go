package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/workflow"
)

// Runs stores workflow runs in the Data table, in the collection of the
// chat they ran in: PK CHAT#<chatId>, SK RUN#<startedAt>#<runId> (the
// timestamp fixed-width, so runs sort by start), type "run", the steps as
// JSON, and a version incremented by every write. GSI1 (GSI1PK
// WFRUNS#<workflowId>, GSI1SK <startedAt>#<runId>) finds a workflow's runs,
// so that deleting a workflow deletes them. Deleting a chat deletes its runs
// with the rest of its collection.
//
// A page of a chat's runs is one Query of the chat's collection with SK
// begins_with RUN#, at most the page's size plus one item and one
// DynamoDB page (1 MB), after the chat's owner was read (ChatOwner): its
// cost follows the page, not the chat. The cursor of the next page is the
// last run's sort key, base64url-encoded. It implements runs.RunStore
// and runs.Repository.
type Runs struct {
	db    *dynamo.DB
	table dynamo.Table
}

// NewRuns returns a Runs over the named Data table.
func NewRuns(db *dynamo.DB, dataTable string) *Runs {
	return &Runs{db: db, table: db.Table(dataTable)}
}

const runSKPrefix = "RUN#"

func runSK(r workflow.Run) string {
	return runSKPrefix + r.StartedAt.UTC().Format(timeKey) + "#" + r.ID
}
func workflowRunsGSI(workflowID string) string { return "WFRUNS#" + workflowID }
func runGSISK(r workflow.Run) string           { return r.StartedAt.UTC().Format(timeKey) + "#" + r.ID }

type runItem struct {
	PK, SK         string
	GSI1PK, GSI1SK string
	Type           string     `dynamo:"type"`
	ID             string     `dynamo:"id"`
	ChatID         string     `dynamo:"chatId"`
	WorkflowID     string     `dynamo:"workflowId"`
	UserID         string     `dynamo:"userId"`
	Status         string     `dynamo:"status"`
	Steps          string     `dynamo:"steps"` // JSON
	Error          string     `dynamo:"error,omitempty"`
	StartedAt      time.Time  `dynamo:"startedAt"`
	CompletedAt    *time.Time `dynamo:"completedAt,omitempty"`
	Version        int        `dynamo:"version"`
	Attempt        int        `dynamo:"attempt,omitempty"`
	WFVersion      int        `dynamo:"workflowVersion,omitempty"`
	RetryOf        string     `dynamo:"retryOf,omitempty"`
	Plan           string     `dynamo:"plan,omitempty"` // JSON of the steps' snapshot
}

func newRunItem(r workflow.Run) (runItem, error) {
	steps, err := encodeSteps(r.Steps)
	if err != nil {
		return runItem{}, err
	}
	var plan string
	if r.Plan != nil {
		b, err := json.Marshal(r.Plan)
		if err != nil {
			return runItem{}, fmt.Errorf("encode run plan: %w", err)
		}
		plan = string(b)
	}
	return runItem{
		PK: chatPK(r.ChatID), SK: runSK(r), GSI1PK: workflowRunsGSI(r.WorkflowID), GSI1SK: runGSISK(r), Type: "run",
		ID: r.ID, ChatID: r.ChatID, WorkflowID: r.WorkflowID, UserID: r.UserID, Status: r.Status, Steps: steps,
		Error: r.Error, StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, Version: 1,
		Attempt: r.Attempt, WFVersion: r.WorkflowVersion, RetryOf: r.RetryOf, Plan: plan,
	}, nil
}

func encodeSteps(steps []workflow.RunStep) (string, error) {
	if steps == nil {
		steps = []workflow.RunStep{}
	}
	b, err := json.Marshal(steps)
	if err != nil {
		return "", fmt.Errorf("encode run steps: %w", err)
	}
	return string(b), nil
}

func (it runItem) run() (workflow.Run, error) {
	r := workflow.Run{ID: it.ID, ChatID: it.ChatID, WorkflowID: it.WorkflowID, UserID: it.UserID, Status: it.Status,
		Error: it.Error, StartedAt: it.StartedAt, CompletedAt: it.CompletedAt, Steps: []workflow.RunStep{},
		Attempt: max(it.Attempt, 1), WorkflowVersion: it.WFVersion, RetryOf: it.RetryOf}
	if it.Steps != "" {
		if err := decodeAttr(it.PK, it.SK, "steps", it.Steps, &r.Steps); err != nil {
			return workflow.Run{}, err
		}
	}
	if it.Plan != "" {
		if err := decodeAttr(it.PK, it.SK, "plan", it.Plan, &r.Plan); err != nil {
			return workflow.Run{}, err
		}
	}
	return r, nil
}

var errRunNotFound = errs.E("store.Runs", errs.NotFound, workflow.CodeRunNotFound, "workflow run not found")

// CreateRun stores a new run, in one transaction with a check that its
// chat exists and is not being deleted (so a run is never orphaned).
// NotFound CHAT_NOT_FOUND otherwise.
func (s *Runs) CreateRun(ctx context.Context, r workflow.Run) error {
	const op = "store.CreateRun"
	it, err := newRunItem(r)
	if err != nil {
		return errs.Wrap(op, err)
	}
	err = s.db.WriteTx().
		Put(s.table.Put(it).If("attribute_not_exists(PK)")).
		Check(s.table.Check("PK", chatPK(r.ChatID)).Range("SK", chatSK).If(collectionWritable)).
		Run(ctx)
	switch {
	case failedCondition(err, 0):
		return errs.E(op, errs.Conflict, "RUN_EXISTS", "a workflow run with this id exists")
	case isConditionFailure(err):
		return errs.Wrap(op, errChatNotFound)
	}
	return storeError(op, err)
}

// SaveRun writes the run's status, steps, error and completedAt and
// increments its version, conditioned on its stored status being ifStatus:
// Conflict RUN_STATE_CHANGED when it is not (cancelled meanwhile) or the run
// is gone.
func (s *Runs) SaveRun(ctx context.Context, r workflow.Run, ifStatus string) error {
	const op = "store.SaveRun"
	u, err := s.runUpdate(r)
	if err != nil {
		return errs.Wrap(op, err)
	}
	err = u.If("attribute_exists(PK) AND 'status' = ?", ifStatus).Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, workflow.CodeRunStateChanged, "the workflow run changed state")
	}
	return storeError(op, err)
}

// runUpdate returns the update of r's item that writes its status, steps,
// error and completedAt and increments its version, without condition.
func (s *Runs) runUpdate(r workflow.Run) (*dynamo.Update, error) {
	steps, err := encodeSteps(r.Steps)
	if err != nil {
		return nil, err
	}
	u := s.table.Update("PK", chatPK(r.ChatID)).Range("SK", runSK(r)).
		Set("status", r.Status).Set("steps", steps).Add("version", 1)
	if r.Error != "" {
		u.Set("error", r.Error)
	} else {
		u.Remove("error")
	}
	if r.CompletedAt != nil {
		u.Set("completedAt", *r.CompletedAt)
	} else {
		u.Remove("completedAt")
	}
	return u, nil
}

// chatRunsItem reads the chat item and the run items of a collection.
type chatRunsItem struct {
	runItem
	Title string `dynamo:"title"`
}

// ChatRuns returns the owner of chat chatID and its runs, oldest first, from
// one Query of the chat's collection (see Runs). NotFound CHAT_NOT_FOUND.
func (s *Runs) ChatRuns(ctx context.Context, chatID string) (string, []workflow.Run, error) {
	const op = "store.ChatRuns"
	var items []chatRunsItem
	err := s.table.Get("PK", chatPK(chatID)).Filter("'type' <> ?", "message").Consistent(true).All(ctx, &items)
	if err != nil {
		return "", nil, storeError(op, err)
	}
	owner, found := "", false
	runs := []workflow.Run{}
	for _, it := range items {
		switch it.Type {
		case "chat":
			owner, found = it.UserID, true
		case "run":
			r, err := it.run()
			if err != nil {
				return "", nil, errs.Wrap(op, err)
			}
			runs = append(runs, r)
		}
	}
	if !found {
		return "", nil, errs.Wrap(op, errChatNotFound)
	}
	return owner, runs, nil
}

// maxCursorLen bounds a decoded runs cursor: a run's sort key is far
// shorter.
const maxCursorLen = 128

var errBadRunsCursor = func() *errs.Error {
	e := errs.E("store.RunsPage", errs.Invalid, "INVALID_PAGINATION", "cursor is not a cursor of this list")
	e.Details = []errs.FieldError{{Field: "cursor", Message: "must be the nextCursor of an earlier page"}}
	return e
}()

// RunsPage returns up to limit runs of chat chatID, oldest first, after
// the run the cursor names (empty: from the first), and the cursor of the
// next page, empty on the last. It reads at most limit+1 runs and one
// DynamoDB page (1 MB). It does not check the chat: callers check its
// owner first (ChatOwner). Invalid INVALID_PAGINATION for a cursor that is
// not one RunsPage returned.
func (s *Runs) RunsPage(ctx context.Context, chatID string, limit int, cursor string) ([]workflow.Run, string, error) {
	const op = "store.RunsPage"
	q := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.BeginsWith, runSKPrefix).SearchLimit(limit + 1).Consistent(true)
	if cursor != "" {
		sk, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(sk) > maxCursorLen || !strings.HasPrefix(string(sk), runSKPrefix) {
			return nil, "", errBadRunsCursor
		}
		q = q.StartFrom(dynamo.PagingKey{"PK": &types.AttributeValueMemberS{Value: chatPK(chatID)}, "SK": &types.AttributeValueMemberS{Value: string(sk)}})
	}
	var items []runItem
	lek, err := q.AllWithLastEvaluatedKey(ctx, &items)
	if err != nil {
		return nil, "", storeError(op, err)
	}
	var next string
	switch {
	case len(items) > limit:
		items = items[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(items[limit-1].SK))
	case lek != nil && len(items) > 0:
		// DynamoDB's 1 MB page ended first.
		next = base64.RawURLEncoding.EncodeToString([]byte(items[len(items)-1].SK))
	}
	runs := make([]workflow.Run, len(items))
	for i, it := range items {
		if runs[i], err = it.run(); err != nil {
			return nil, "", errs.Wrap(op, err)
		}
	}
	return runs, next, nil
}

// ChatOwner returns the owner of chat chatID with one GetItem. NotFound
// CHAT_NOT_FOUND.
func (s *Runs) ChatOwner(ctx context.Context, chatID string) (string, error) {
	const op = "store.ChatOwner"
	var it chatItem
	err := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Equal, chatSK).Project("userId").One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return "", errs.Wrap(op, errChatNotFound)
	}
	if err != nil {
		return "", storeError(op, err)
	}
	return it.UserID, nil
}

// CancelRun cancels run runID of chat chatID for userID at now: one read of
// the chat's runs (ChatRuns) to check the chat (NotFound CHAT_NOT_FOUND,
// Forbidden) and find the run (NotFound RUN_NOT_FOUND; Invalid
// RUN_NOT_ACTIVE when it is finished), then one update conditioned on the
// run still being pending or running, which sets it cancelled and its
// unfinished steps cancelled. A running executor notices before its next
// step: its own conditional write fails.
func (s *Runs) CancelRun(ctx context.Context, chatID, runID, userID string, now time.Time) (workflow.Run, error) {
	const op = "store.CancelRun"
	owner, runs, err := s.ChatRuns(ctx, chatID)
	if err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	if owner != userID {
		return workflow.Run{}, errs.E(op, errs.Forbidden, "FORBIDDEN", "you do not have access to this chat")
	}
	i := slices.IndexFunc(runs, func(r workflow.Run) bool { return r.ID == runID })
	if i < 0 {
		return workflow.Run{}, errs.Wrap(op, errRunNotFound)
	}
	r := runs[i]
	if !workflow.Active(r.Status) {
		return workflow.Run{}, errNotActive(op, r)
	}
	prev := r.Status
	workflow.CancelRun(&r, now)
	err = s.SaveRun(ctx, r, prev)
	if errs.CodeOf(err) == workflow.CodeRunStateChanged {
		// It moved on meanwhile: started running, or finished. Look again.
		_, runs, err2 := s.ChatRuns(ctx, chatID)
		if err2 != nil {
			return workflow.Run{}, errs.Wrap(op, err2)
		}
		if i := slices.IndexFunc(runs, func(x workflow.Run) bool { return x.ID == runID }); i >= 0 {
			r = runs[i]
			if !workflow.Active(r.Status) {
				return workflow.Run{}, errNotActive(op, r)
			}
			prev = r.Status
			workflow.CancelRun(&r, now)
			err = s.SaveRun(ctx, r, prev)
		}
	}
	if err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	return r, nil
}

func errNotActive(op string, r workflow.Run) error {
	return errs.E(op, errs.Invalid, workflow.CodeRunNotActive, "the workflow run is already "+strings.ToLower(r.Status))
}

// DeleteWorkflowRuns batch-deletes every run of workflow workflowID, found
// with a Query of GSI1 (keys only).
func (s *Runs) DeleteWorkflowRuns(ctx context.Context, workflowID string) error {
	const op = "store.DeleteWorkflowRuns"
	var keys []struct{ PK, SK string }
	if err := s.table.Get("GSI1PK", workflowRunsGSI(workflowID)).Index("GSI1").Project("PK", "SK").All(ctx, &keys); err != nil {
		return storeError(op, err)
	}
	del := make([]dynamo.Keyed, 0, len(keys))
	for _, k := range keys {
		del = append(del, dynamo.Keys{k.PK, k.SK})
	}
	return batchDelete(ctx, op, s.table, del)
}
