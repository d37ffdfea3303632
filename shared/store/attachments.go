package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/errs"
)

// Attachments stores the attachments of chats in the Data table, in their
// chat's item collection (PK CHAT#<chatId>, SK ATT#<id>), and each user's
// storage counter (PK USER#<userId>, SK COUNTER#STORAGE, attribute
// bytes: the bytes charged by their pending and ready attachments), which
// every write that charges or releases bytes updates in its transaction.
// GSI1 finds an attachment's chat from its id alone (GSI1PK
// ATTACHMENT#<id>), for run inputs that name an attachment without its
// chat. It implements attachment.Store.
type Attachments struct {
	db    *dynamo.DB
	table dynamo.Table
}

// NewAttachments returns the Attachments of the named Data table.
func NewAttachments(db *dynamo.DB, dataTable string) *Attachments {
	return &Attachments{db: db, table: db.Table(dataTable)}
}

func attachmentSK(id string) string                    { return "ATT#" + id }
func attachmentGSI(id string) string                   { return "ATTACHMENT#" + id }
func storageCounterKey(userID string) (string, string) { return "USER#" + userID, "COUNTER#STORAGE" }

const (
	attachmentGSISK = "ATTACHMENT"
	// attachmentSKPrefix starts every attachment's sort key; it sorts
	// before the chat item (CHAT), so a conversation's Query never meets
	// attachments.
	attachmentSKPrefix = "ATT#"
)

type attachmentItem struct {
	PK, SK         string
	GSI1PK, GSI1SK string
	Type           string    `dynamo:"type"`
	ID             string    `dynamo:"id"`
	ChatID         string    `dynamo:"chatId"`
	UserID         string    `dynamo:"userId"`
	Name           string    `dynamo:"name"`
	ContentType    string    `dynamo:"contentType"`
	Size           int64     `dynamo:"size"`
	Status         string    `dynamo:"status"`
	Reason         string    `dynamo:"reason,omitempty"`
	CreatedAt      time.Time `dynamo:"createdAt"`
	UploadExpires  time.Time `dynamo:"uploadExpiresAt"`
	Charged        int64     `dynamo:"charged"`
	ETag           string    `dynamo:"etag,omitempty"`
	Deleting       bool      `dynamo:"deleting,omitempty"`
}

func newAttachmentItem(a attachment.Attachment) attachmentItem {
	return attachmentItem{
		PK: chatPK(a.ChatID), SK: attachmentSK(a.ID), GSI1PK: attachmentGSI(a.ID), GSI1SK: attachmentGSISK, Type: "attachment",
		ID: a.ID, ChatID: a.ChatID, UserID: a.UserID, Name: a.Name, ContentType: a.ContentType, Size: a.Size, Status: string(a.Status),
		Reason: a.Reason, CreatedAt: a.CreatedAt, UploadExpires: a.UploadExpires, Charged: a.Charged, ETag: a.ETag, Deleting: a.Deleting,
	}
}

func (it attachmentItem) attachment() attachment.Attachment {
	return attachment.Attachment{ID: it.ID, ChatID: it.ChatID, UserID: it.UserID, Name: it.Name, ContentType: it.ContentType, Size: it.Size,
		Status: attachment.Status(it.Status), Reason: it.Reason, CreatedAt: it.CreatedAt, UploadExpires: it.UploadExpires,
		Charged: it.Charged, ETag: it.ETag, Deleting: it.Deleting}
}

var (
	errAttachmentNotFound = errs.E("store.Attachments", errs.NotFound, attachment.CodeNotFound, "attachment not found")
	errAttachmentChanged  = errs.E("store.Attachments", errs.Conflict, attachment.CodeChanged,
		"the attachment changed meanwhile; read it again")
)

// CreateAttachment implements attachment.Store: one transaction of a
// condition check on the chat item (the owner's, writable), the Put of
// the attachment and the counter's ADD conditioned on staying within
// quota. On a failed condition one read tells which: the chat (NotFound
// CHAT_NOT_FOUND, Forbidden) or the quota (TooLarge QUOTA_EXCEEDED, with
// the bytes in use).
func (s *Attachments) CreateAttachment(ctx context.Context, a attachment.Attachment, quota int64) error {
	const op = "store.CreateAttachment"
	if a.Size > quota {
		return errs.E(op, errs.TooLarge, attachment.CodeQuotaExceeded, fmt.Sprintf("this file (%d bytes) is larger than the storage quota of %d bytes", a.Size, quota))
	}
	pk, sk := storageCounterKey(a.UserID)
	err := s.db.WriteTx().
		Check(s.table.Check("PK", chatPK(a.ChatID)).Range("SK", chatSK).If(collectionWritable+" AND "+ownedBy, a.UserID)).
		Put(s.table.Put(newAttachmentItem(a)).If("attribute_not_exists(PK)")).
		Update(s.table.Update("PK", pk).Range("SK", sk).Add("bytes", a.Size).Set("type", "counter").
			If("attribute_not_exists($) OR $ <= ?", "bytes", "bytes", quota-a.Size)).
		Run(ctx)
	switch {
	case failedCondition(err, 0):
		return s.chatFailure(ctx, op, a.ChatID, a.UserID)
	case failedCondition(err, 1):
		return errs.E(op, errs.Conflict, "ATTACHMENT_EXISTS", "an attachment with this id exists")
	case failedCondition(err, 2):
		used, uerr := s.StorageUsed(ctx, a.UserID)
		if uerr != nil {
			return errs.Wrap(op, uerr)
		}
		return errs.E(op, errs.TooLarge, attachment.CodeQuotaExceeded,
			fmt.Sprintf("storage quota exceeded: %d of your %d bytes are in use and this file needs %d; delete attachments or chats to make room", used, quota, a.Size))
	}
	return storeError(op, err)
}

// chatFailure explains a failed condition on chat chatID's item for
// userID: NotFound CHAT_NOT_FOUND when it is gone or being deleted,
// Forbidden when another user owns it.
func (s *Attachments) chatFailure(ctx context.Context, op, chatID, userID string) error {
	var it struct {
		UserID   string `dynamo:"userId"`
		Deleting bool   `dynamo:"deleting"`
	}
	err := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Equal, chatSK).Consistent(true).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return errs.Wrap(op, errChatNotFound)
	case err != nil:
		return storeError(op, err)
	case it.UserID != userID:
		return errs.E(op, errs.Forbidden, "FORBIDDEN", "you do not have access to this chat")
	}
	return errs.Wrap(op, errChatNotFound) // being deleted
}

// Attachment implements attachment.Store: one TransactGetItems of the chat
// item and the attachment item.
func (s *Attachments) Attachment(ctx context.Context, userID, chatID, id string) (attachment.Attachment, error) {
	const op = "store.Attachment"
	var ci struct {
		UserID   string `dynamo:"userId"`
		Deleting bool   `dynamo:"deleting"`
	}
	var ai attachmentItem
	err := s.db.GetTx().
		GetOne(s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Equal, chatSK), &ci).
		GetOne(s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Equal, attachmentSK(id)), &ai).
		Run(ctx)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return attachment.Attachment{}, storeError(op, err)
	}
	switch {
	case ci.UserID == "" || ci.Deleting:
		return attachment.Attachment{}, errs.Wrap(op, errChatNotFound)
	case ci.UserID != userID:
		return attachment.Attachment{}, errs.E(op, errs.Forbidden, "FORBIDDEN", "you do not have access to this chat")
	case ai.ID == "" || ai.Deleting:
		return attachment.Attachment{}, errs.Wrap(op, errAttachmentNotFound)
	}
	return ai.attachment(), nil
}

// AttachmentChat implements attachment.Store: one Query of GSI1.
func (s *Attachments) AttachmentChat(ctx context.Context, id string) (string, error) {
	const op = "store.AttachmentChat"
	var it struct {
		ChatID string `dynamo:"chatId"`
	}
	err := s.table.Get("GSI1PK", attachmentGSI(id)).Index("GSI1").Range("GSI1SK", dynamo.Equal, attachmentGSISK).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return "", errs.Wrap(op, errAttachmentNotFound)
	}
	if err != nil {
		return "", storeError(op, err)
	}
	return it.ChatID, nil
}

// attachmentSettleable is the condition on an attachment that a check may
// settle: still pending, no delete begun.
// Its values: the name "status" (a reserved word) and StatusPending.
const attachmentSettleable = "attribute_exists(PK) AND $ = ? AND attribute_not_exists(deleting)"

// MarkReady implements attachment.Store: the attachment's update and a
// condition check on the chat item, in one transaction.
func (s *Attachments) MarkReady(ctx context.Context, a attachment.Attachment, etag string, now time.Time) error {
	const op = "store.MarkReady"
	err := s.db.WriteTx().
		Update(s.table.Update("PK", chatPK(a.ChatID)).Range("SK", attachmentSK(a.ID)).
			Set("status", string(attachment.StatusReady)).Set("etag", etag).Set("readyAt", now).
			If(attachmentSettleable, "status", string(attachment.StatusPending))).
		Check(s.table.Check("PK", chatPK(a.ChatID)).Range("SK", chatSK).If(collectionWritable)).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, errAttachmentChanged)
	}
	return storeError(op, err)
}

// MarkFailed implements attachment.Store: the attachment's update (charged
// 0), a condition check on the chat item and the counter's release, in
// one transaction.
func (s *Attachments) MarkFailed(ctx context.Context, a attachment.Attachment, reason string, now time.Time) error {
	const op = "store.MarkFailed"
	tx := s.db.WriteTx().
		Update(s.table.Update("PK", chatPK(a.ChatID)).Range("SK", attachmentSK(a.ID)).
			Set("status", string(attachment.StatusFailed)).Set("reason", reason).Set("charged", 0).Set("failedAt", now).
			If(attachmentSettleable+" AND charged = ?", "status", string(attachment.StatusPending), a.Charged)).
		Check(s.table.Check("PK", chatPK(a.ChatID)).Range("SK", chatSK).If(collectionWritable))
	if a.Charged > 0 {
		pk, sk := storageCounterKey(a.UserID)
		tx.Update(s.table.Update("PK", pk).Range("SK", sk).Add("bytes", -a.Charged))
	}
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, errAttachmentChanged)
	}
	return storeError(op, err)
}

// BeginDelete implements attachment.Store: one conditional UpdateItem.
func (s *Attachments) BeginDelete(ctx context.Context, a attachment.Attachment) (attachment.Attachment, error) {
	const op = "store.BeginDelete"
	var it attachmentItem
	err := s.table.Update("PK", chatPK(a.ChatID)).Range("SK", attachmentSK(a.ID)).Set("deleting", true).
		If("attribute_exists(PK) AND userId = ?", a.UserID).Value(ctx, &it)
	if isConditionFailure(err) {
		return attachment.Attachment{}, errs.Wrap(op, errAttachmentNotFound)
	}
	if err != nil {
		return attachment.Attachment{}, storeError(op, err)
	}
	return it.attachment(), nil
}

// maxTxAttachments is how many attachments one delete transaction takes
// (DynamoDB's 100 items, one of which is the counter).
const maxTxAttachments = 99

// DeleteAttachments implements attachment.Store.
func (s *Attachments) DeleteAttachments(ctx context.Context, atts []attachment.Attachment) error {
	const op = "store.DeleteAttachments"
	for len(atts) > 0 {
		n := min(len(atts), maxTxAttachments)
		tx := s.db.WriteTx()
		release := map[string]int64{}
		for _, a := range atts[:n] {
			tx.Delete(s.table.Delete("PK", chatPK(a.ChatID)).Range("SK", attachmentSK(a.ID)).
				If("attribute_exists(PK) AND charged = ?", a.Charged))
			release[a.UserID] += a.Charged
		}
		for userID, bytes := range release {
			if bytes > 0 {
				pk, sk := storageCounterKey(userID)
				tx.Update(s.table.Update("PK", pk).Range("SK", sk).Add("bytes", -bytes))
			}
		}
		err := tx.Run(ctx)
		if isConditionFailure(err) {
			return errs.Wrap(op, errAttachmentChanged)
		}
		if err != nil {
			return storeError(op, err)
		}
		atts = atts[n:]
	}
	return nil
}

// ChatAttachments implements attachment.Store: one consistent Query of the
// chat's ATT# items.
func (s *Attachments) ChatAttachments(ctx context.Context, chatID string) ([]attachment.Attachment, error) {
	const op = "store.ChatAttachments"
	var items []attachmentItem
	if err := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.BeginsWith, attachmentSKPrefix).Consistent(true).All(ctx, &items); err != nil {
		return nil, storeError(op, err)
	}
	out := make([]attachment.Attachment, 0, len(items))
	for _, it := range items {
		out = append(out, it.attachment())
	}
	return out, nil
}

// StorageUsed implements attachment.Store: one GetItem of the counter.
func (s *Attachments) StorageUsed(ctx context.Context, userID string) (int64, error) {
	const op = "store.StorageUsed"
	pk, sk := storageCounterKey(userID)
	var it struct {
		Bytes int64 `dynamo:"bytes"`
	}
	err := s.table.Get("PK", pk).Range("SK", dynamo.Equal, sk).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, storeError(op, err)
	}
	return it.Bytes, nil
}

var _ attachment.Store = (*Attachments)(nil)
