package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/workflowchat/service/shared/blob"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/paging"
)

// Chats stores chats and their messages in the Data table: each chat is an
// item collection (PK CHAT#<id>) holding the chat item (SK CHAT) and its
// messages (SK MSG#<time>#<id>), so one Query returns the chat with its
// conversation in order. Per user, GSI1 (GSI1PK USER#<id>#CHATS) lists the
// chats by updatedAt beside the user's chat counter, whose GSI1SK sorts
// after every timestamp: one descending Query returns the total and a page
// (pinned and archived chats are listed from partitions of their own:
// see ListChats).
// It implements chat.Store.
type Chats struct {
	db    *dynamo.DB
	table dynamo.Table
	owned ownedCollection
	// runBlobs keeps the chat's runs' large values (WithRunBlobs).
	runBlobs blob.Backend
}

// WithRunBlobs makes DeleteChat delete, with each of the chat's runs, its
// values kept in b (Runs.WithBlobs).
func (s *Chats) WithRunBlobs(b blob.Backend) *Chats {
	s.runBlobs = b
	return s
}

// NewChats returns a Chats over the named Data table.
func NewChats(db *dynamo.DB, dataTable string) *Chats {
	t := db.Table(dataTable)
	return &Chats{db: db, table: t, owned: ownedCollection{
		db: db, table: t, pk: chatPK, root: chatSK, counter: chatCounterKey, noun: "chat", notFound: errChatNotFound,
		uncount: chatListCounts,
	}}
}

const (
	chatSK       = "CHAT"
	counterGSISK = "~COUNT" // sorts after every RFC 3339 timestamp
	timeKey      = "2006-01-02T15:04:05.000000000Z"
)

func chatPK(id string) string           { return "CHAT#" + id }
func userChatsGSI(userID string) string { return "USER#" + userID + "#CHATS" }
func chatGSISK(c chat.Chat) string      { return c.UpdatedAt.UTC().Format(timeKey) + "#" + c.ID }
func messageSK(m chat.Message) string   { return "MSG#" + m.CreatedAt.UTC().Format(timeKey) + "#" + m.ID }

// messageSKEnd sorts after every message's sort key.
const messageSKEnd = "MSG#~"

func chatCounterKey(userID string) (string, string) {
	return "USER#" + userID, "COUNTER#CHATS"
}

type chatItem struct {
	PK, SK         string
	GSI1PK, GSI1SK string
	Type           string    `dynamo:"type"`
	ID             string    `dynamo:"id"`
	UserID         string    `dynamo:"userId"`
	Title          string    `dynamo:"title"`
	WorkflowID     string    `dynamo:"workflowId,omitempty"`
	CreatedAt      time.Time `dynamo:"createdAt"`
	UpdatedAt      time.Time `dynamo:"updatedAt"`
	Generation     string    `dynamo:"generation,omitempty"`
	LeaseUntil     int64     `dynamo:"leaseUntil,omitempty"`
	Decided        string    `dynamo:"decided,omitempty"`
	Leaf           string    `dynamo:"leaf,omitempty"`
	Rev            int64     `dynamo:"rev,omitempty"`
	Pinned         bool      `dynamo:"pinned,omitempty"`
	Archived       bool      `dynamo:"archived,omitempty"`
	// KnowledgeBaseIDs are the chat's knowledge bases
	// (chat.Chat.KnowledgeBaseIDs).
	KnowledgeBaseIDs []string `dynamo:"knowledgeBaseIds,omitempty"`
}

type messageItem struct {
	PK, SK       string
	Type         string    `dynamo:"type"`
	ID           string    `dynamo:"id"`
	ChatID       string    `dynamo:"chatId"`
	Role         string    `dynamo:"role"`
	Content      string    `dynamo:"content"`
	ModelID      string    `dynamo:"modelId,omitempty"`
	ReplyTo      string    `dynamo:"replyTo,omitempty"`
	ToolCalls    string    `dynamo:"toolCalls,omitempty"` // JSON
	InputTokens  int       `dynamo:"inputTokens,omitempty"`
	OutputTokens int       `dynamo:"outputTokens,omitempty"`
	Truncated    bool      `dynamo:"truncated,omitempty"`
	Status       string    `dynamo:"status,omitempty"`
	CreatedAt    time.Time `dynamo:"createdAt"`
	Pending      string    `dynamo:"pending,omitempty"` // JSON: a paused reply's state
	Decision     string    `dynamo:"decision,omitempty"`
	// PendingKey is the blob key of a paused reply's state too large for
	// the item (chat.Message.PendingKey).
	PendingKey    string   `dynamo:"pendingKey,omitempty"`
	AttachmentIDs []string `dynamo:"attachmentIds,omitempty"`
	// ParentID is the message's parent; Root marks a message without
	// one. A message with neither was stored before messages had
	// parents (chat.Message.Legacy).
	ParentID string `dynamo:"parentId,omitempty"`
	Root     bool   `dynamo:"root,omitempty"`
	// Citations are an assistant message's citations, as JSON.
	Citations string `dynamo:"citations,omitempty"`
}

// storedToolCall is a tool call as the toolCalls attribute holds it: the
// API's fields but the signed URL, and the key of a result kept in the
// blob store.
type storedToolCall struct {
	ToolName   string          `json:"toolName"`
	ToolArgs   json.RawMessage `json:"toolArgs"`
	Result     json.RawMessage `json:"result"`
	Truncated  bool            `json:"truncated,omitempty"`
	ResultSize int64           `json:"resultSize,omitempty"`
	ResultKey  string          `json:"resultKey,omitempty"`
}

// collectionItem reads any item of a chat collection.
type collectionItem struct {
	chatItem
	ChatID        string   `dynamo:"chatId"`
	Role          string   `dynamo:"role"`
	Content       string   `dynamo:"content"`
	ModelID       string   `dynamo:"modelId"`
	ReplyTo       string   `dynamo:"replyTo"`
	ToolCalls     string   `dynamo:"toolCalls"`
	InputTokens   int      `dynamo:"inputTokens"`
	OutputTokens  int      `dynamo:"outputTokens"`
	Truncated     bool     `dynamo:"truncated"`
	Status        string   `dynamo:"status"`
	Pending       string   `dynamo:"pending"`
	Decision      string   `dynamo:"decision"`
	PendingKey    string   `dynamo:"pendingKey"`
	AttachmentIDs []string `dynamo:"attachmentIds"`
	ParentID      string   `dynamo:"parentId"`
	Root          bool     `dynamo:"root"`
	Citations     string   `dynamo:"citations"`
}

func newChatItem(c chat.Chat) chatItem {
	return chatItem{
		PK: chatPK(c.ID), SK: chatSK, GSI1PK: chatListGSI(c), GSI1SK: chatGSISK(c), Type: "chat",
		ID: c.ID, UserID: c.UserID, Title: c.Title, WorkflowID: c.WorkflowID, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		Pinned: c.Pinned, Archived: c.Archived, KnowledgeBaseIDs: c.KnowledgeBaseIDs,
	}
}

func (it chatItem) chat() chat.Chat {
	c := chat.Chat{ID: it.ID, UserID: it.UserID, Title: it.Title, WorkflowID: it.WorkflowID, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		Generation: it.Generation, Decided: it.Decided, Leaf: it.Leaf, Revision: it.Rev, Pinned: it.Pinned, Archived: it.Archived, KnowledgeBaseIDs: it.KnowledgeBaseIDs}
	if it.LeaseUntil != 0 {
		c.GenerationUntil = time.UnixMilli(it.LeaseUntil).UTC()
	}
	return c
}

func newMessageItem(m chat.Message) (messageItem, error) {
	it := messageItem{
		PK: chatPK(m.ChatID), SK: messageSK(m), Type: "message", ID: m.ID, ChatID: m.ChatID, Role: m.Role, Content: m.Content,
		ModelID: m.ModelID, ReplyTo: m.ReplyTo, InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, Truncated: m.Truncated,
		Status: m.Status, CreatedAt: m.CreatedAt, PendingKey: m.PendingKey, AttachmentIDs: m.AttachmentIDs,
	}
	switch {
	case m.ParentID != nil:
		it.ParentID = *m.ParentID
	case !m.Legacy:
		it.Root = true
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]storedToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			calls[i] = storedToolCall{ToolName: c.ToolName, ToolArgs: c.ToolArgs, Result: c.Result, Truncated: c.Truncated,
				ResultSize: c.ResultSize, ResultKey: c.ResultKey}
		}
		b, err := json.Marshal(calls)
		if err != nil {
			return it, err
		}
		it.ToolCalls = string(b)
	}
	if m.Pending != nil {
		b, err := json.Marshal(m.Pending)
		if err != nil {
			return it, err
		}
		it.Pending = string(b)
	}
	if len(m.Citations) > 0 {
		b, err := json.Marshal(m.Citations)
		if err != nil {
			return it, err
		}
		it.Citations = string(b)
	}
	it.Decision = m.Decision
	return it, nil
}

func (it collectionItem) message() (chat.Message, error) {
	m := chat.Message{ID: it.ID, ChatID: it.ChatID, Role: it.Role, Content: it.Content, ModelID: it.ModelID, ReplyTo: it.ReplyTo,
		InputTokens: it.InputTokens, OutputTokens: it.OutputTokens, Truncated: it.Truncated, Status: it.Status, CreatedAt: it.CreatedAt,
		PendingKey: it.PendingKey, AttachmentIDs: it.AttachmentIDs}
	switch {
	case it.ParentID != "":
		p := it.ParentID
		m.ParentID = &p
	case !it.Root:
		m.Legacy = true
	}
	if m.Status == "" {
		m.Status = chat.StatusCompleted
	}
	if it.ToolCalls != "" {
		var calls []storedToolCall
		if err := decodeAttr(it.PK, it.SK, "toolCalls", it.ToolCalls, &calls); err != nil {
			return chat.Message{}, err
		}
		m.ToolCalls = make([]chat.ToolCall, len(calls))
		for i, c := range calls {
			m.ToolCalls[i] = chat.ToolCall{ToolName: c.ToolName, ToolArgs: c.ToolArgs, Result: c.Result, Truncated: c.Truncated,
				ResultSize: c.ResultSize, ResultKey: c.ResultKey}
		}
	}
	if it.Citations != "" {
		if err := decodeAttr(it.PK, it.SK, "citations", it.Citations, &m.Citations); err != nil {
			return chat.Message{}, err
		}
	}
	if it.Pending != "" {
		m.Pending = &chat.Pending{}
		if err := decodeAttr(it.PK, it.SK, "pending", it.Pending, m.Pending); err != nil {
			return chat.Message{}, err
		}
	}
	m.Decision = it.Decision
	return m, nil
}

var errChatNotFound = errs.E("store.Chats", errs.NotFound, "CHAT_NOT_FOUND", "chat not found")

// collectionWritable is the condition on a chat's or a workflow's item for
// adding to its collection: it exists and no delete has begun (a delete
// first sets `deleting`, so nothing written concurrently is orphaned).
const collectionWritable = "attribute_exists(PK) AND attribute_not_exists(deleting)"

// CreateChat stores c and increments its owner's chat counter in one
// transaction.
func (s *Chats) CreateChat(ctx context.Context, c chat.Chat) error {
	const op = "store.CreateChat"
	pk, sk := chatCounterKey(c.UserID)
	err := s.db.WriteTx().
		Put(s.table.Put(newChatItem(c)).If("attribute_not_exists(PK)")).
		Update(s.table.Update("PK", pk).Range("SK", sk).Add("n", 1).
			Set("GSI1PK", userChatsGSI(c.UserID)).Set("GSI1SK", counterGSISK).Set("type", "counter")).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, "CHAT_EXISTS", "a chat with this id exists")
	}
	return storeError(op, err)
}

// Chat returns the chat with id. NotFound CHAT_NOT_FOUND.
func (s *Chats) Chat(ctx context.Context, id string) (chat.Chat, error) {
	const op = "store.Chat"
	var it chatItem
	if err := s.table.Get("PK", chatPK(id)).Range("SK", dynamo.Equal, chatSK).Consistent(true).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return chat.Chat{}, errs.Wrap(op, errChatNotFound)
		}
		return chat.Chat{}, storeError(op, err)
	}
	return it.chat(), nil
}

// DeleteChat removes the chat id of userID with its messages and runs (see
// ownedCollection.delete). beyond, when not nil, is called once the owner
// is checked and the chat is marked deleted (nothing can be added to it
// from then on), before any of its items goes: the caller deletes there
// what the chat owns outside the store's items (chat.Service.Delete). A
// failing beyond fails the delete with the chat still in place, so a
// retried delete calls it again. NotFound, Forbidden, or beyond's error.
func (s *Chats) DeleteChat(ctx context.Context, id, userID string, beyond func(context.Context) error) error {
	runs := (&Runs{db: s.db, table: s.table}).WithBlobs(s.runBlobs)
	return s.owned.delete(ctx, "store.DeleteChat", id, userID, func(ctx context.Context) error {
		if beyond != nil {
			if err := beyond(ctx); err != nil {
				return err
			}
		}
		if err := s.deleteChatShares(ctx, id); err != nil {
			return err
		}
		return runs.DeleteChatRuns(ctx, id)
	})
}

// deleteCollection batch-deletes every item of table under pk except the
// ones with sort key keep (the collection's own item, deleted last by the
// caller so that a failure part-way can be retried).
func deleteCollection(ctx context.Context, table dynamo.Table, pk string, keep ...string) error {
	const op = "store.deleteCollection"
	var keys []struct{ PK, SK string }
	if err := table.Get("PK", pk).Project("PK", "SK").Consistent(true).All(ctx, &keys); err != nil {
		return storeError(op, err)
	}
	var del []dynamo.Keyed
	for _, k := range keys {
		if !slices.Contains(keep, k.SK) {
			del = append(del, dynamo.Keys{k.PK, k.SK})
		}
	}
	return batchDelete(ctx, op, table, del)
}

// unprocessedBudget bounds how long one BatchWriteItem of batchDelete
// keeps re-sending the items DynamoDB left unprocessed (guregu re-sends
// them with exponential backoff for up to 15 minutes, then without pause).
const unprocessedBudget = 5 * time.Second

// batchDelete deletes keys of table in batches of 25. A batch whose items
// stay unprocessed past unprocessedBudget fails the delete with
// Unavailable (503, retry after a second): the callers delete the
// collection's own item last, so a retry finishes the job.
func batchDelete(ctx context.Context, op string, table dynamo.Table, keys []dynamo.Keyed) error {
	return inBatches(ctx, op, len(keys), func(ctx context.Context, from, to int) error {
		_, err := table.Batch("PK", "SK").Write().Delete(keys[from:to]...).Run(ctx)
		return err
	})
}

// inBatches calls write with each batch of 25 of n items, [from, to), each
// under unprocessedBudget: a batch whose items stay unprocessed past it
// fails with Unavailable (503, retry after a second).
func inBatches(ctx context.Context, op string, n int, write func(ctx context.Context, from, to int) error) error {
	for from := 0; from < n; from += 25 {
		bctx, cancel := context.WithTimeout(ctx, unprocessedBudget)
		err := write(bctx, from, min(from+25, n))
		budgetSpent := bctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			if budgetSpent {
				e := errs.E(op, errs.Unavailable, "STORAGE_UNAVAILABLE", "storage is temporarily unavailable; retry shortly").
					WithCause(fmt.Errorf("items still unprocessed after %s: %w", unprocessedBudget, err))
				e.RetryAfter = 1
				return e
			}
			return storeError(op, err)
		}
	}
	return nil
}

// pageWithTotal reads one page of the GSI1 collection gsiPK, most recently
// updated first, and the total from the collection's counter item (whose
// GSI1SK sorts after every timestamp, so a descending Query meets it
// first): one Query for a page and its total.
func pageWithTotal[T any](ctx context.Context, table dynamo.Table, gsiPK string, page paging.Page) ([]T, int, error) {
	const op = "store.pageWithTotal"
	var raw []dynamo.Item
	err := table.Get("GSI1PK", gsiPK).Index("GSI1").Order(dynamo.Descending).
		Limit(page.End()+1).All(ctx, &raw)
	if err != nil {
		return nil, 0, storeError(op, err)
	}
	total, skipped := 0, 0
	var out []T
	for _, it := range raw {
		if sk, ok := it["GSI1SK"].(*types.AttributeValueMemberS); ok && sk.Value == counterGSISK {
			var c struct {
				N int `dynamo:"n"`
			}
			if err := dynamo.UnmarshalItem(it, &c); err != nil {
				return nil, 0, errs.Wrap(op, err)
			}
			total = c.N
			continue
		}
		if skipped < page.Offset {
			skipped++
			continue
		}
		if len(out) < page.Limit {
			var v T
			if err := dynamo.UnmarshalItem(it, &v); err != nil {
				return nil, 0, errs.Wrap(op, err)
			}
			out = append(out, v)
		}
	}
	return out, total, nil
}

// Conversation returns the chat and its messages in order, from one Query
// of the chat's collection.
func (s *Chats) Conversation(ctx context.Context, chatID string) (chat.Chat, []chat.Message, error) {
	const op = "store.Conversation"
	var items []collectionItem
	// The chat item and the messages (CHAT < MSG#...), not the event logs
	// and runs that sort after them.
	if err := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Between, chatSK, messageSKEnd).Consistent(true).All(ctx, &items); err != nil {
		return chat.Chat{}, nil, storeError(op, err)
	}
	var c *chat.Chat
	msgs := []chat.Message{}
	held := 0
	for _, it := range items {
		switch it.Type {
		case "chat":
			cc := it.chat()
			c = &cc
		case "message":
			m, err := it.message()
			if err != nil {
				return chat.Chat{}, nil, errs.Wrap(op, err)
			}
			msgs = append(msgs, m)
			held += chat.StoredWeight(len(it.Content), len(it.ToolCalls), len(it.Pending), len(it.Citations), len(it.AttachmentIDs))
		}
	}
	if c == nil {
		return chat.Chat{}, nil, errs.Wrap(op, errChatNotFound)
	}
	c.Held = held
	return *c, msgs, nil
}

// AddMessages stores msgs and moves the chat's updatedAt to the last
// message's time, in one transaction conditioned on the chat existing.
func (s *Chats) AddMessages(ctx context.Context, c chat.Chat, msgs ...chat.Message) error {
	const op = "store.AddMessages"
	if len(msgs) == 0 {
		return nil
	}
	tx := s.db.WriteTx()
	for _, m := range msgs {
		it, err := newMessageItem(m)
		if err != nil {
			return errs.Wrap(op, fmt.Errorf("encode tool calls: %w", err))
		}
		tx.Put(s.table.Put(it))
	}
	last := msgs[len(msgs)-1].CreatedAt
	c.UpdatedAt = last
	upd := s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).
		Set("updatedAt", last).Set("GSI1SK", chatGSISK(c)).Add(revAttr, 1)
	setLeaf(upd, msgs)
	tx.Update(upd.If(collectionWritable))
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, errChatNotFound)
	}
	return storeError(op, err)
}

var errGenerationActive = errs.E("store.Chats", errs.Conflict, "GENERATION_ACTIVE",
	"this chat is already generating a reply; wait for it to finish")

// Chat item attributes of the generation running in the chat (see
// chat.Generation): its id, and when its lease ends, in Unix milliseconds.
const (
	generationAttr = "generation"
	leaseAttr      = "leaseUntil"
	// decidedAttr names the reply whose tool call was decided and waits
	// for its continuation (chat.Chat.Decided).
	decidedAttr = "decided"
)

// StartGeneration stores msgs and marks generation g active on chat c, in
// one transaction conditioned on the chat being writable and no lease
// running at g.Now (an expired lease is taken over), and with g.Guard on
// its tree being as c was read (guardCond). On a failed condition one
// read of the chat tells a running generation (Conflict
// GENERATION_ACTIVE) from a missing chat (NotFound CHAT_NOT_FOUND) and a
// changed tree (Conflict CHAT_CHANGED).
func (s *Chats) StartGeneration(ctx context.Context, c chat.Chat, g chat.Generation, msgs ...chat.Message) error {
	return s.startGeneration(ctx, "store.StartGeneration", s.db.WriteTx(), c, g, msgs, nil)
}

// startGeneration adds to tx the chat's mark of generation g (and, with
// mark, what mark sets on it), conditioned on the chat being writable and
// no lease running, and runs tx (a transaction of nothing but the mark
// runs as one UpdateItem).
func (s *Chats) startGeneration(ctx context.Context, op string, tx *dynamo.WriteTx, c chat.Chat, g chat.Generation, msgs []chat.Message,
	mark func(*dynamo.Update)) error {
	upd := s.generationMark(c, g)
	if err := s.putMessages(tx, &c, upd, msgs); err != nil {
		return errs.Wrap(op, err)
	}
	if mark != nil {
		mark(upd)
	}
	tx.Update(guarded(upd.If(generationFree, leaseAttr, leaseAttr, g.Now.UnixMilli()), c, g))
	return s.generationStarted(ctx, op, c, g, tx.Run(ctx))
}

// generationFree is the condition of a chat's mark of a new generation:
// writable, no lease running at the time given.
const generationFree = collectionWritable + " AND (attribute_not_exists($) OR $ < ?)"

// revAttr is the chat item's count of the writes that stored new
// messages in it (chat.Chat.Revision): every such write adds one, in the
// same update as its leaf.
const revAttr = "rev"

// guarded adds to upd, a mark of generation g on chat c, g.Guard's
// condition: the chat's revision and leaf are still c's (absent when c
// has none), so that no message was stored and the current path did not
// move since c was read.
func guarded(upd *dynamo.Update, c chat.Chat, g chat.Generation) *dynamo.Update {
	if !g.Guard {
		return upd
	}
	if c.Revision == 0 {
		upd.If("attribute_not_exists($)", revAttr)
	} else {
		upd.If("$ = ?", revAttr, c.Revision)
	}
	if c.Leaf == "" {
		return upd.If("attribute_not_exists($)", leafAttr)
	}
	return upd.If("$ = ?", leafAttr, c.Leaf)
}

// generationMark returns the update of chat c's item marking generation g.
func (s *Chats) generationMark(c chat.Chat, g chat.Generation) *dynamo.Update {
	return s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).
		Set(generationAttr, g.ID).Set(leaseAttr, g.Until.UnixMilli()).Remove(decidedAttr)
}

// generationStarted returns the error of the write of g's mark on chat c:
// on a failed condition, one read of the chat tells a missing chat
// (NotFound) from a running generation (Conflict GENERATION_ACTIVE) and,
// for a guarded mark with no lease running, a tree changed since c was
// read (Conflict CHAT_CHANGED).
func (s *Chats) generationStarted(ctx context.Context, op string, c chat.Chat, g chat.Generation, err error) error {
	if isConditionFailure(err) {
		cur, gerr := s.Chat(ctx, c.ID)
		if gerr != nil {
			return errs.Wrap(op, gerr)
		}
		leased := !cur.GenerationUntil.IsZero() && cur.GenerationUntil.UnixMilli() >= g.Now.UnixMilli()
		if g.Guard && !leased && (cur.Revision != c.Revision || cur.Leaf != c.Leaf) {
			return errs.Wrap(op, errChatChanged)
		}
		return errs.Wrap(op, errGenerationActive)
	}
	return storeError(op, err)
}

var errChatChanged = errs.E("store.Chats", errs.Conflict, chat.CodeChatChanged,
	"the chat got another message meanwhile; read it again")

// FinishGeneration stores msgs and ends generation id on chat c, in one
// transaction conditioned on the chat being writable and id being its
// generation. When another generation took the lease over (id's had
// expired), msgs are stored without touching it. NotFound CHAT_NOT_FOUND.
func (s *Chats) FinishGeneration(ctx context.Context, c chat.Chat, id string, msgs ...chat.Message) error {
	const op = "store.FinishGeneration"
	tx := s.db.WriteTx()
	upd := s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).Remove(generationAttr, leaseAttr)
	if err := s.putMessages(tx, &c, upd, msgs); err != nil {
		return errs.Wrap(op, err)
	}
	tx.Update(upd.If(collectionWritable+" AND $ = ?", generationAttr, id))
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		if _, gerr := s.Chat(ctx, c.ID); gerr != nil {
			return errs.Wrap(op, gerr)
		}
		return errs.Wrap(op, s.AddMessages(ctx, c, msgs...))
	}
	return storeError(op, err)
}

// putMessages adds a Put of each of msgs to tx and, when there are any,
// moves the chat's updatedAt (upd) to the last one's time.
func (s *Chats) putMessages(tx *dynamo.WriteTx, c *chat.Chat, upd *dynamo.Update, msgs []chat.Message) error {
	for _, m := range msgs {
		it, err := newMessageItem(m)
		if err != nil {
			return fmt.Errorf("encode tool calls: %w", err)
		}
		tx.Put(s.table.Put(it))
	}
	if len(msgs) > 0 {
		c.UpdatedAt = msgs[len(msgs)-1].CreatedAt
		upd.Set("updatedAt", c.UpdatedAt).Set("GSI1SK", chatGSISK(*c)).Add(revAttr, 1)
		setLeaf(upd, msgs)
	}
	return nil
}

// leafAttr is the chat item's current leaf (chat.Chat.Leaf).
const leafAttr = "leaf"

// setLeaf makes the last of msgs the chat's current leaf in upd, unless
// it is DeferLeaf (a regenerated reply, made the leaf when it ends).
func setLeaf(upd *dynamo.Update, msgs []chat.Message) {
	if m := msgs[len(msgs)-1]; !m.DeferLeaf {
		upd.Set(leafAttr, m.ID)
	}
}

// SetLeaf makes message leaf the current leaf of chat c, with one
// conditional update. NotFound CHAT_NOT_FOUND when the chat is gone.
func (s *Chats) SetLeaf(ctx context.Context, c chat.Chat, leaf string) error {
	const op = "store.SetLeaf"
	err := s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).Set(leafAttr, leaf).If(collectionWritable).Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, errChatNotFound)
	}
	return storeError(op, err)
}

var (
	errGenerationNotFound = errs.E("store.Chats", errs.NotFound, chat.CodeGenerationNotFound,
		"no reply with this id in this chat")
	errGenerationNotActive = errs.E("store.Chats", errs.Conflict, chat.CodeGenerationNotActive,
		"the reply has already finished")
)

// logs returns the event logs of the Data table.
func (s *Chats) logs() replyLogs { return replyLogs{eventLogs{db: s.db, table: s.table}} }

// StartLoggedGeneration marks generation g active on chat c with its
// event log's live state (replylog.go: the mark is the log's head, with a
// lease until g.Lease.Until), with one conditional UpdateItem as
// StartGeneration's condition, then stores user and reply (status
// streaming), and first in the log when given, in one transaction. When
// that transaction fails, the mark is released (its lease would free the
// chat anyway if the release fails too, and the sweeper the mark).
// Conflict GENERATION_ACTIVE, NotFound CHAT_NOT_FOUND.
func (s *Chats) StartLoggedGeneration(ctx context.Context, c chat.Chat, g chat.Generation, first []job.Record, user, reply chat.Message) error {
	const op = "store.StartLoggedGeneration"
	uit, err := newMessageItem(user)
	if err != nil {
		return errs.Wrap(op, err)
	}
	rit, err := newMessageItem(reply)
	if err != nil {
		return errs.Wrap(op, err)
	}
	pk := chatPK(c.ID)
	tx := s.db.WriteTx()
	msgs := []chat.Message{user, reply}
	if user.ID == "" { // a regenerated reply answers a stored message
		msgs = msgs[1:]
	} else {
		tx.Put(s.table.Put(uit).If("attribute_not_exists(PK)"))
	}
	tx.Put(s.table.Put(rit).If("attribute_not_exists(PK)"))
	var last int64
	if len(first) > 0 {
		b, err := newLogBatch(pk, g.ID, first, g.Lease.Reserved, time.Now())
		if err != nil {
			return errs.Wrap(op, err)
		}
		tx.Put(s.table.Put(b).If("attribute_not_exists(PK)"))
		last = b.Last
	}
	mark := s.generationMark(c, g)
	c.UpdatedAt = reply.CreatedAt
	mark.Set("updatedAt", c.UpdatedAt).Set("GSI1SK", chatGSISK(c)).Add(revAttr, 1)
	setMark(mark, g, rit.SK, last)
	setLeaf(mark, msgs)
	mark = guarded(mark.If(generationFree, leaseAttr, leaseAttr, g.Now.UnixMilli()), c, g)
	if err := s.generationStarted(ctx, op, c, g, mark.Run(ctx)); err != nil {
		return err
	}
	if err := tx.Run(ctx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		release := s.releaseMark(pk)
		if c.Leaf != "" { // the leaf the mark moved goes back
			release.Set(leafAttr, c.Leaf)
		}
		_ = release.If(markCond, markArgs(g.ID)...).Run(rctx)
		cancel()
		return storeError(op, err)
	}
	// A delete of the chat that began after the mark may have listed the
	// collection before the messages went in. A delete marks the chat
	// (deleting) before it lists, so a strongly consistent read now that
	// finds the chat unmarked means any delete lists after the messages;
	// else they are deleted here. (A read, not a condition check in the
	// transaction, which DynamoDB bills as a write, twice.)
	var cur struct {
		Deleting bool `dynamo:"deleting"`
	}
	err = s.table.Get("PK", pk).Range("SK", dynamo.Equal, chatSK).Consistent(true).One(ctx, &cur)
	if err == nil && !cur.Deleting {
		return nil
	}
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return storeError(op, err) // the sweeper ends the reply from its mark
	}
	if err := batchDelete(ctx, op, s.table, []dynamo.Keyed{dynamo.Keys{pk, uit.SK}, dynamo.Keys{pk, rit.SK}}); err != nil {
		return err
	}
	return errs.Wrap(op, errChatNotFound)
}

// releaseTimeout bounds the release of a mark whose generation could not
// start.
const releaseTimeout = 5 * time.Second

// EndLoggedGeneration stores reply (with its final status), appends recs
// to its log and frees chat c of the generation (replylog.go). The
// generator's end (expiredBefore zero) is three writes in this order: the
// reply, conditioned on it still streaming (Conflict
// GENERATION_NOT_ACTIVE when the sweeper ended it, NotFound
// GENERATION_NOT_FOUND when it is gone), recs after the event they follow
// (a heartbeat or a stop there is replaced), the release of the mark
// (left alone when another generation holds the chat; a failed release
// is left to the sweeper and does not fail the end). The sweeper's end
// (expiredBefore set) is one transaction of the three, conditioned also
// on the mark's lease having ended before expiredBefore: Conflict
// GENERATION_NOT_ACTIVE when it was renewed or the reply ended.
//
// A write of the generation's own log whose answer was lost (a deadline
// cut it after DynamoDB applied it) leaves the log ahead of what its
// writer believes written: when the log's last event is one of recs, the
// events up to it are taken as stored and the rest appended. Only the
// generation's writer hands out ids within its reservation, so such an
// event can only be its own.
func (s *Chats) EndLoggedGeneration(ctx context.Context, c chat.Chat, reply chat.Message, recs []job.Record, expiredBefore time.Time) error {
	const op = "store.EndLoggedGeneration"
	it, err := newMessageItem(reply)
	if err != nil {
		return errs.Wrap(op, err)
	}
	pk, now := chatPK(c.ID), time.Now()
	put := s.table.Put(it).If(streamingGuard, "status", chat.StatusStreaming)
	if !expiredBefore.IsZero() {
		tx := s.db.WriteTx().Put(put)
		if err := s.sweeperEnd(tx, pk, reply, recs, expiredBefore, now); err != nil {
			return errs.Wrap(op, err)
		}
		return s.endFailed(ctx, op, pk, it.SK, tx.Run(ctx))
	}
	if err := s.endFailed(ctx, op, pk, it.SK, put.Run(ctx)); err != nil {
		return err
	}
	if err := s.logs().putEnd(ctx, pk, reply.ID, recs, now); err != nil {
		if errs.Is(err, errs.Conflict) {
			// Something else wrote the log after its writer: the mark
			// stays for the sweeper (ReleaseGeneration).
			return errs.Wrap(op, errGenerationNotActive.WithCause(err))
		}
		return errs.Wrap(op, err)
	}
	// The reply is saved and its log ended: a release that fails (or
	// finds another generation holding the chat) does not fail the
	// reply; the sweeper releases the mark once its lease has passed
	// (chat.Service.Interrupt).
	_ = s.endRelease(pk, reply).If(markCond, markArgs(reply.ID)...).Run(ctx)
	return nil
}

// endRelease returns the release of reply's mark at its end: a
// regenerated reply (DeferLeaf) that did not fail becomes the chat's
// current leaf with it.
func (s *Chats) endRelease(pk string, reply chat.Message) *dynamo.Update {
	upd := s.releaseMark(pk)
	if reply.DeferLeaf && reply.Status != chat.StatusFailed {
		upd.Set(leafAttr, reply.ID)
	}
	return upd
}

// ReleaseGeneration ends the log of generation id in chat c whose message
// is already saved (or was never stored: a crash between the mark and the
// messages): recs appended, the mark released, in one transaction
// conditioned on the mark being id's with its lease ended before
// expiredBefore. Conflict GENERATION_NOT_ACTIVE otherwise; NotFound
// GENERATION_NOT_FOUND when the chat is gone.
func (s *Chats) ReleaseGeneration(ctx context.Context, c chat.Chat, id string, recs []job.Record, expiredBefore time.Time) error {
	const op = "store.ReleaseGeneration"
	pk := chatPK(c.ID)
	tx := s.db.WriteTx()
	if err := s.sweeperEnd(tx, pk, chat.Message{ID: id}, recs, expiredBefore, time.Now()); err != nil {
		return errs.Wrap(op, err)
	}
	return s.endFailed(ctx, op, pk, "", tx.Run(ctx))
}

// sweeperEnd adds to tx the release of generation id's mark, conditioned
// on its lease having ended before expiredBefore, and recs in its log.
func (s *Chats) sweeperEnd(tx *dynamo.WriteTx, pk string, reply chat.Message, recs []job.Record, expiredBefore, now time.Time) error {
	id := reply.ID
	tx.Update(s.endRelease(pk, reply).If(markCond+" AND $ < ?", append(markArgs(id), logLeaseAttr, expiredBefore.UnixMilli())...))
	if len(recs) > 0 {
		return s.logs().putSlots(tx, pk, id, recs, 0, slotEndable, now)
	}
	return nil
}

// endFailed returns the error of an end's write: on a failed condition,
// NotFound GENERATION_NOT_FOUND when the chat (or, with sk, the message)
// is gone, else Conflict GENERATION_NOT_ACTIVE.
func (s *Chats) endFailed(ctx context.Context, op, pk, sk string, err error) error {
	if !isConditionFailure(err) {
		return storeError(op, err)
	}
	if _, merr := s.logs().mark(ctx, pk); errs.Is(merr, errs.NotFound) {
		return errs.Wrap(op, errGenerationNotFound)
	}
	if sk != "" {
		var m struct{ PK string }
		gerr := s.table.Get("PK", pk).Range("SK", dynamo.Equal, sk).Consistent(true).One(ctx, &m)
		if errors.Is(gerr, dynamo.ErrNotFound) {
			return errs.Wrap(op, errGenerationNotFound)
		}
	}
	return errs.Wrap(op, errGenerationNotActive)
}

// unwritten returns the records of recs after last and true when last,
// the log's last stored event, is one of recs (a write of them was
// applied though its writer saw it fail).
func unwritten(recs []job.Record, last int64) ([]job.Record, bool) {
	for i, r := range recs {
		if r.Seq == last {
			return recs[i+1:], true
		}
	}
	return nil, false
}

// GeneratedMessage returns the assistant message of generation id in chat
// chatID, as stored now, and whether the generation is still active (the
// chat's mark is its). The mark names the message of the chat's last
// streamed reply; an older one is looked for in the conversation.
// NotFound GENERATION_NOT_FOUND.
func (s *Chats) GeneratedMessage(ctx context.Context, chatID, id string) (chat.Message, bool, error) {
	const op = "store.GeneratedMessage"
	pk := chatPK(chatID)
	m, err := s.logs().mark(ctx, pk)
	if errs.Is(err, errs.NotFound) {
		return chat.Message{}, false, errs.Wrap(op, errGenerationNotFound)
	}
	if err != nil {
		return chat.Message{}, false, errs.Wrap(op, err)
	}
	var it collectionItem
	if sk, ok := m.target(id); ok {
		err = s.table.Get("PK", pk).Range("SK", dynamo.Equal, sk).Consistent(true).One(ctx, &it)
	} else {
		err = s.table.Get("PK", pk).Range("SK", dynamo.Between, "MSG#", messageSKEnd).Filter("$ = ? AND $ = ?", "type", "message", "id", id).
			Consistent(true).One(ctx, &it)
	}
	if errors.Is(err, dynamo.ErrNotFound) {
		return chat.Message{}, false, errs.Wrap(op, errGenerationNotFound)
	}
	if err != nil {
		return chat.Message{}, false, storeError(op, err)
	}
	msg, err := it.message()
	return msg, m.holds(id), errs.Wrap(op, err)
}

var errToolCallNotPending = errs.E("store.Chats", errs.Conflict, chat.CodeToolCallNotPending,
	"this tool call is not waiting for a decision")

// DecideToolCall records decision on reply m of chat c, a reply paused for
// a tool approval, and marks the chat as having a decided reply to
// continue (chat.Chat.Decided), in one transaction conditioned on the
// reply still awaiting approval with no decision (and the chat existing).
// Conflict TOOL_CALL_NOT_PENDING otherwise.
func (s *Chats) DecideToolCall(ctx context.Context, c chat.Chat, m chat.Message, decision string) error {
	const op = "store.DecideToolCall"
	err := s.db.WriteTx().
		Update(s.table.Update("PK", chatPK(c.ID)).Range("SK", messageSK(m)).Set("decision", decision).
			If("$ = ? AND attribute_not_exists(decision)", "status", chat.StatusAwaitingApproval)).
		Update(s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).Set(decidedAttr, m.ID).If(collectionWritable)).
		Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, errToolCallNotPending)
	}
	return storeError(op, err)
}

// ContinueGeneration starts generation g again on reply, a reply paused
// for a tool approval that was decided, in one transaction: the chat is
// marked as StartLoggedGeneration does (the log goes on after event last),
// and reply is stored as given (status streaming, no decision) on
// condition that it still awaits approval with decision; with first, a
// reply that had no log (it was not streamed) gets one holding first.
// Conflict GENERATION_ACTIVE when the chat is generating, Conflict
// TOOL_CALL_NOT_PENDING when another request continued the reply first;
// NotFound CHAT_NOT_FOUND.
func (s *Chats) ContinueGeneration(ctx context.Context, c chat.Chat, g chat.Generation, reply chat.Message, decision string, last int64, first []job.Record) error {
	const op = "store.ContinueGeneration"
	it, err := newMessageItem(reply)
	if err != nil {
		return errs.Wrap(op, err)
	}
	tx := s.db.WriteTx()
	tx.Put(s.table.Put(it).If("$ = ? AND decision = ?", "status", chat.StatusAwaitingApproval, decision))
	if len(first) > 0 {
		b, err := newLogBatch(chatPK(c.ID), reply.ID, first, g.Lease.Reserved, time.Now())
		if err != nil {
			return errs.Wrap(op, err)
		}
		tx.Put(s.table.Put(b).If("attribute_not_exists(PK)"))
		last = max(last, b.Last)
	}
	err = s.startGeneration(ctx, op, tx, c, g, nil, func(u *dynamo.Update) { setMark(u, g, it.SK, last) })
	if errs.Is(err, errs.Conflict) && errs.CodeOf(err) == chat.CodeGenerationActive {
		// The chat's lease is free unless another generation runs; tell
		// a lost race on the reply from a busy chat.
		if m, _, gerr := s.GeneratedMessage(ctx, c.ID, reply.ID); gerr == nil && m.Decision != decision {
			return errs.Wrap(op, errToolCallNotPending)
		}
	}
	return err
}
