package store

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/export"
	"github.com/workflowchat/service/shared/workflow"
)

// Exports keeps the users' data exports in the Data table: each export is
// the item EXPORT#<userId> / <exportId>, sparse in GSI1 under EXPORTS
// while it is queued (pending or running); the user's export in progress
// is marked by the item USER#<userId> / EXPORTING (the user's collection,
// erased with it), put only where none is: one export at a time, decided
// by that condition. A finished export keeps its item for
// export.Retention (its TTL, expiresAt), as long as its zip. It
// implements export.Store.
type Exports struct {
	db   *dynamo.DB
	data dynamo.Table
}

// NewExports returns an Exports over the Data table.
func NewExports(db *dynamo.DB, dataTable string) *Exports {
	return &Exports{db: db, data: db.Table(dataTable)}
}

func exportPK(userID string) string { return "EXPORT#" + userID }

const (
	exportingSK = "EXPORTING"
	exportsGSI  = "EXPORTS"
)

type exportItem struct {
	PK          string
	SK          string
	GSI1PK      string     `dynamo:",omitempty"`
	GSI1SK      string     `dynamo:",omitempty"`
	UserID      string     `dynamo:"userId"`
	Status      string     `dynamo:"status"`
	CreatedAt   time.Time  `dynamo:"createdAt"`
	CompletedAt *time.Time `dynamo:"completedAt,omitempty"`
	Error       string     `dynamo:"error,omitempty"`
	Attempts    int        `dynamo:"attempts"`
	LeaseUntil  time.Time  `dynamo:"leaseUntil,omitempty"`
	Size        int64      `dynamo:"size,omitempty"`
	ExpiresAt   int64      `dynamo:"expiresAt,omitempty"`
}

type exportingItem struct {
	PK       string
	SK       string
	ExportID string `dynamo:"exportId"`
}

func (it exportItem) export() export.Export {
	return export.Export{ID: it.SK, UserID: it.UserID, Status: export.Status(it.Status), CreatedAt: it.CreatedAt,
		CompletedAt: it.CompletedAt, Error: it.Error, Attempts: it.Attempts, LeaseUntil: it.LeaseUntil, Size: it.Size}
}

// CreateExport implements export.Store: the export and the user's marker
// in one transaction, the marker conditioned on there being none.
func (s *Exports) CreateExport(ctx context.Context, e export.Export) error {
	const op = "store.CreateExport"
	it := exportItem{PK: exportPK(e.UserID), SK: e.ID, GSI1PK: exportsGSI, GSI1SK: e.CreatedAt.UTC().Format(time.RFC3339Nano) + "#" + e.ID,
		UserID: e.UserID, Status: string(export.Pending), CreatedAt: e.CreatedAt.UTC()}
	err := s.db.WriteTx().
		Put(s.data.Put(exportingItem{PK: userKey(e.UserID), SK: exportingSK, ExportID: e.ID}).If("attribute_not_exists(PK)")).
		Put(s.data.Put(it).If("attribute_not_exists(PK)")).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, export.CodeInProgress, "an export of this account is already pending or running; wait for it to finish")
	}
	return storeError(op, err)
}

// ExportInProgress implements export.Store: one strongly consistent read of
// the user's marker.
func (s *Exports) ExportInProgress(ctx context.Context, userID string) (bool, error) {
	var it exportingItem
	err := s.data.Get("PK", userKey(userID)).Range("SK", dynamo.Equal, exportingSK).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, storeError("store.ExportInProgress", err)
	}
	return true, nil
}

// Export implements export.Store: one strongly consistent read.
func (s *Exports) Export(ctx context.Context, userID, id string) (export.Export, error) {
	const op = "store.Export"
	var it exportItem
	if err := s.data.Get("PK", exportPK(userID)).Range("SK", dynamo.Equal, id).Consistent(true).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return export.Export{}, errs.E(op, errs.NotFound, "EXPORT_NOT_FOUND", "no such export")
		}
		return export.Export{}, storeError(op, err)
	}
	return it.export(), nil
}

// QueuedExports implements export.Store: one Query of GSI1.
func (s *Exports) QueuedExports(ctx context.Context, limit int) ([]export.Export, error) {
	var items []exportItem
	if err := s.data.Get("GSI1PK", exportsGSI).Index("GSI1").SearchLimit(limit).Limit(limit).All(ctx, &items); err != nil {
		return nil, storeError("store.QueuedExports", err)
	}
	out := make([]export.Export, len(items))
	for i, it := range items {
		out[i] = it.export()
	}
	return out, nil
}

// ClaimExport implements export.Store: one conditional update.
func (s *Exports) ClaimExport(ctx context.Context, e export.Export, now, until time.Time) error {
	const op = "store.ClaimExport"
	err := s.data.Update("PK", exportPK(e.UserID)).Range("SK", e.ID).
		Set("status", string(export.Running)).Set("leaseUntil", until.UTC()).Set("attempts", e.Attempts+1).
		If("attempts = ? AND GSI1PK = ? AND ('status' = ? OR leaseUntil < ?)", e.Attempts, exportsGSI, string(export.Pending), now.UTC()).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, "EXPORT_CLAIMED", "the export was claimed by another sweep")
	}
	return storeError(op, err)
}

// FinishExport implements export.Store: the export's end and the removal
// of the user's marker in one transaction, conditioned on the claim.
func (s *Exports) FinishExport(ctx context.Context, e export.Export) error {
	const op = "store.FinishExport"
	u := s.data.Update("PK", exportPK(e.UserID)).Range("SK", e.ID).
		Set("status", string(e.Status)).Remove("GSI1PK", "GSI1SK").
		Set("expiresAt", e.CreatedAt.Add(export.Retention).Unix()).
		If("attempts = ? AND GSI1PK = ?", e.Attempts, exportsGSI)
	if e.CompletedAt != nil {
		u = u.Set("completedAt", e.CompletedAt.UTC()).Set("size", e.Size)
	}
	if e.Error != "" {
		u = u.Set("error", e.Error)
	}
	err := s.db.WriteTx().Update(u).
		Delete(s.data.Delete("PK", userKey(e.UserID)).Range("SK", exportingSK).If("attribute_not_exists(PK) OR exportId = ?", e.ID)).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, "EXPORT_CLAIMED", "the export is no longer this attempt's")
	}
	return storeError(op, err)
}

// DeleteExports deletes every export item of userID (the account's
// erasure; the user's marker goes with the user's collection).
func (s *Exports) DeleteExports(ctx context.Context, userID string) error {
	return errs.Wrap("store.DeleteExports", deleteCollection(ctx, s.data, exportPK(userID), ""))
}

// EachChat calls fn with each of userID's chats, a DynamoDB page at a
// time (none held beyond its page), until fn fails.
func (s *Chats) EachChat(ctx context.Context, userID string, fn func(chat.Chat) error) error {
	return eachInGSI1(ctx, "store.EachChat", s.table, userChatsGSI(userID), func(it chatItem) error { return fn(it.chat()) })
}

// EachWorkflow calls fn with each of userID's workflows, a DynamoDB page
// at a time, until fn fails.
func (s *Workflows) EachWorkflow(ctx context.Context, userID string, fn func(workflow.Workflow) error) error {
	return eachInGSI1(ctx, "store.EachWorkflow", s.table, userWorkflowsGSI(userID), func(it workflowItem) error {
		w, err := it.workflow()
		if err != nil {
			return err
		}
		return fn(w)
	})
}

// eachInGSI1 calls fn with each item of a GSI1 partition but its counter.
func eachInGSI1[T any](ctx context.Context, op string, table dynamo.Table, pk string, fn func(T) error) error {
	it := table.Get("GSI1PK", pk).Index("GSI1").Iter()
	var raw dynamo.Item
	for it.Next(ctx, &raw) {
		if sk, ok := raw["GSI1SK"].(*types.AttributeValueMemberS); ok && sk.Value == counterGSISK {
			continue
		}
		var v T
		if err := dynamo.UnmarshalItem(raw, &v); err != nil {
			return errs.Wrap(op, err)
		}
		if err := fn(v); err != nil {
			return errs.Wrap(op, err)
		}
		raw = nil
	}
	return storeError(op, it.Err())
}

// Profile returns userID's profile and model preference (empty when
// none). NotFound USER_NOT_FOUND.
func (u *Users) Profile(ctx context.Context, userID string) (auth.User, string, error) {
	const op = "store.Profile"
	var it profileItem
	if err := u.users.Get("PK", userKey(userID)).Consistent(true).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return auth.User{}, "", errs.E(op, errs.NotFound, "USER_NOT_FOUND", "no such user")
		}
		return auth.User{}, "", storeError(op, err)
	}
	return auth.User{ID: it.ID, Email: it.Email, Name: it.Name, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}, it.ModelID, nil
}

// EachMessage calls fn with each message of chatID in order (every
// branch), a DynamoDB page at a time, until fn fails.
func (s *Chats) EachMessage(ctx context.Context, chatID string, fn func(chat.Message) error) error {
	const op = "store.EachMessage"
	it := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Between, "MSG#", messageSKEnd).Consistent(true).Iter()
	var item collectionItem
	for it.Next(ctx, &item) {
		if item.Type == "message" {
			m, err := item.message()
			if err != nil {
				return errs.Wrap(op, err)
			}
			if err := fn(m); err != nil {
				return errs.Wrap(op, err)
			}
		}
		item = collectionItem{}
	}
	return storeError(op, it.Err())
}

// EachWorkflowMessage calls fn with each message of workflow id's
// conversation in order, and EachProposal with each of its proposals
// (the message that made it is Proposal.MessageID), a DynamoDB page at a
// time, until fn fails.
func (s *Workflows) EachWorkflowMessage(ctx context.Context, id string, fn func(workflow.Message) error) error {
	const op = "store.EachWorkflowMessage"
	it := s.table.Get("PK", workflowPK(id)).Range("SK", dynamo.BeginsWith, "MSG#").Iter()
	var item wfCollectionItem
	for it.Next(ctx, &item) {
		if item.Type == "message" {
			if err := fn(item.message()); err != nil {
				return errs.Wrap(op, err)
			}
		}
		item = wfCollectionItem{}
	}
	return storeError(op, it.Err())
}

// EachProposal: see EachWorkflowMessage.
func (s *Workflows) EachProposal(ctx context.Context, id string, fn func(workflow.Proposal) error) error {
	const op = "store.EachProposal"
	it := s.table.Get("PK", workflowPK(id)).Range("SK", dynamo.BeginsWith, "PROP#").Iter()
	var item wfCollectionItem
	for it.Next(ctx, &item) {
		if item.Type == "proposal" {
			p, err := item.proposal()
			if err != nil {
				return errs.Wrap(op, err)
			}
			if err := fn(p); err != nil {
				return errs.Wrap(op, err)
			}
		}
		item = wfCollectionItem{}
	}
	return storeError(op, it.Err())
}

// DeleteChatLeftovers deletes every item left under chat chatID's key
// after the chat was deleted (what a reply under way wrote after it: its
// log's later events), page by page. A chat never deleted must not be
// passed: its collection goes whole.
func (s *Chats) DeleteChatLeftovers(ctx context.Context, chatID string) error {
	return errs.Wrap("store.DeleteChatLeftovers", deleteCollection(ctx, s.table, chatPK(chatID), ""))
}
