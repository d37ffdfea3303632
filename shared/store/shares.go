package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
)

// Shares of chats live in the Data table twice: the snapshot under its
// own partition (PK SHARE#<id>, SK SHARE), which the public read gets
// with one consistent GetItem by the id alone, and an entry in the chat's
// collection (SK SHARE#<createdAt>#<id>) that lists the chat's shares and
// goes with the chat's other items when it is deleted. The chat item
// counts them (shares). Every write of a share changes the three in one
// transaction.
func sharePK(id string) string { return "SHARE#" + id }

const (
	shareSK         = "SHARE"
	shareEntryStart = "SHARE#"
	shareCountAttr  = "shares"
)

func shareEntrySK(createdAt time.Time, id string) string {
	return shareEntryStart + createdAt.UTC().Format(timeKey) + "#" + id
}

type shareItem struct {
	PK, SK    string
	Type      string    `dynamo:"type"`
	ID        string    `dynamo:"id"`
	ChatID    string    `dynamo:"chatId"`
	UserID    string    `dynamo:"userId"`
	Title     string    `dynamo:"title"`
	Messages  string    `dynamo:"messages"` // JSON
	CreatedAt time.Time `dynamo:"createdAt"`
}

type shareEntry struct {
	PK, SK    string
	Type      string    `dynamo:"type"`
	ID        string    `dynamo:"id"`
	CreatedAt time.Time `dynamo:"createdAt"`
}

var (
	errShareNotFound  = errs.E("store.Shares", errs.NotFound, chat.CodeShareNotFound, "no such share")
	errShareLimit     = errs.E("store.Shares", errs.Conflict, chat.CodeShareLimit, "this chat has the most shares a chat may have; delete one first")
	errBadShareCursor = func() *errs.Error {
		e := errs.E("store.Shares", errs.Invalid, "INVALID_PAGINATION", "cursor: must be the nextCursor of an earlier page")
		e.Details = []errs.FieldError{{Field: "cursor", Message: "must be the nextCursor of an earlier page"}}
		return e
	}()
)

// CreateShare stores sh with its entry in chat c's collection and counts
// it on the chat, in one transaction conditioned on the chat being
// writable, c's owner's and under chat.MaxShares. Conflict SHARE_LIMIT,
// NotFound CHAT_NOT_FOUND (also while the chat is being deleted).
func (s *Chats) CreateShare(ctx context.Context, c chat.Chat, sh chat.Share) error {
	const op = "store.CreateShare"
	msgs, err := json.Marshal(sh.Messages)
	if err != nil {
		return errs.Wrap(op, err)
	}
	err = s.db.WriteTx().
		Put(s.table.Put(shareItem{PK: sharePK(sh.ID), SK: shareSK, Type: "share", ID: sh.ID, ChatID: c.ID, UserID: c.UserID, Title: sh.Title,
			Messages: string(msgs), CreatedAt: sh.CreatedAt}).If("attribute_not_exists(PK)")).
		Put(s.table.Put(shareEntry{PK: chatPK(c.ID), SK: shareEntrySK(sh.CreatedAt, sh.ID), Type: "shareEntry", ID: sh.ID, CreatedAt: sh.CreatedAt})).
		Update(s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).Add(shareCountAttr, 1).
			If(collectionWritable+" AND userId = ? AND (attribute_not_exists($) OR $ < ?)", c.UserID, shareCountAttr, shareCountAttr, chat.MaxShares)).
		Run(ctx)
	if isConditionFailure(err) {
		// Which condition: the chat gone or being deleted (NotFound), or
		// at its limit.
		var cur struct {
			Deleting bool `dynamo:"deleting"`
		}
		gerr := s.table.Get("PK", chatPK(c.ID)).Range("SK", dynamo.Equal, chatSK).Consistent(true).One(ctx, &cur)
		switch {
		case errors.Is(gerr, dynamo.ErrNotFound) || gerr == nil && cur.Deleting:
			return errs.Wrap(op, errChatNotFound)
		case gerr != nil:
			return storeError(op, gerr)
		}
		return errs.Wrap(op, errShareLimit)
	}
	return storeError(op, err)
}

// Share returns share id with its snapshot, from one consistent GetItem.
// NotFound SHARE_NOT_FOUND.
func (s *Chats) Share(ctx context.Context, id string) (chat.Share, error) {
	const op = "store.Share"
	var it shareItem
	err := s.table.Get("PK", sharePK(id)).Range("SK", dynamo.Equal, shareSK).Consistent(true).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return chat.Share{}, errs.Wrap(op, errShareNotFound)
	case err != nil:
		return chat.Share{}, storeError(op, err)
	}
	sh := chat.Share{ID: it.ID, CreatedAt: it.CreatedAt, ChatID: it.ChatID, UserID: it.UserID, Title: it.Title}
	if err := decodeAttr(it.PK, it.SK, "messages", it.Messages, &sh.Messages); err != nil {
		return chat.Share{}, errs.Wrap(op, err)
	}
	return sh, nil
}

// ChatShares returns up to page.Limit shares of chat chatID (without their
// snapshots), newest first, after the one page.After names, from one
// Query of the chat's collection.
func (s *Chats) ChatShares(ctx context.Context, chatID string, page paging.Cursor) ([]chat.Share, string, error) {
	const op = "store.ChatShares"
	q := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.BeginsWith, shareEntryStart).Order(dynamo.Descending).
		SearchLimit(page.Limit + 1).Consistent(true)
	if page.After != "" {
		raw, err := base64.RawURLEncoding.DecodeString(page.After)
		if err != nil || !strings.HasPrefix(string(raw), shareEntryStart) {
			return nil, "", errs.Wrap(op, errBadShareCursor)
		}
		q = q.StartFrom(dynamo.PagingKey{
			"PK": &types.AttributeValueMemberS{Value: chatPK(chatID)},
			"SK": &types.AttributeValueMemberS{Value: string(raw)},
		})
	}
	var items []shareEntry
	lek, err := q.AllWithLastEvaluatedKey(ctx, &items)
	if err != nil {
		return nil, "", storeError(op, err)
	}
	var next string
	switch {
	case len(items) > page.Limit:
		items = items[:page.Limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(items[page.Limit-1].SK))
	case lek != nil && len(items) > 0:
		next = base64.RawURLEncoding.EncodeToString([]byte(items[len(items)-1].SK))
	}
	out := make([]chat.Share, len(items))
	for i, it := range items {
		out[i] = chat.Share{ID: it.ID, CreatedAt: it.CreatedAt, ChatID: chatID}
	}
	return out, next, nil
}

// DeleteShare deletes share id of chat c with its entry and count, in one
// transaction conditioned on the share being c's. NotFound
// SHARE_NOT_FOUND (also a share of another chat).
func (s *Chats) DeleteShare(ctx context.Context, c chat.Chat, id string) error {
	const op = "store.DeleteShare"
	sh, err := s.Share(ctx, id)
	if err != nil {
		return errs.Wrap(op, err)
	}
	if sh.ChatID != c.ID {
		return errs.Wrap(op, errShareNotFound)
	}
	err = s.db.WriteTx().
		Delete(s.table.Delete("PK", sharePK(id)).Range("SK", shareSK).If("chatId = ?", c.ID)).
		Delete(s.table.Delete("PK", chatPK(c.ID)).Range("SK", shareEntrySK(sh.CreatedAt, id))).
		Update(s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).Add(shareCountAttr, -1).If("attribute_exists(PK)")).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, errShareNotFound)
	}
	return storeError(op, err)
}

// deleteChatShares deletes the snapshots of chat chatID's shares (their
// entries go with the chat's collection); part of DeleteChat, once the
// chat is marked deleted, so no share is added meanwhile. Idempotent.
func (s *Chats) deleteChatShares(ctx context.Context, chatID string) error {
	const op = "store.deleteChatShares"
	var entries []shareEntry
	if err := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.BeginsWith, shareEntryStart).Consistent(true).All(ctx, &entries); err != nil {
		return storeError(op, err)
	}
	keys := make([]dynamo.Keyed, len(entries))
	for i, e := range entries {
		keys[i] = dynamo.Keys{sharePK(e.ID), shareSK}
	}
	return batchDelete(ctx, op, s.table, keys)
}
