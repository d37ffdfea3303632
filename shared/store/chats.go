package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/workflowchat/service/shared/blob"
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
// after every timestamp: one descending Query returns the total and a page.
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
}

func newChatItem(c chat.Chat) chatItem {
	return chatItem{
		PK: chatPK(c.ID), SK: chatSK, GSI1PK: userChatsGSI(c.UserID), GSI1SK: chatGSISK(c), Type: "chat",
		ID: c.ID, UserID: c.UserID, Title: c.Title, WorkflowID: c.WorkflowID, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
	}
}

func (it chatItem) chat() chat.Chat {
	c := chat.Chat{ID: it.ID, UserID: it.UserID, Title: it.Title, WorkflowID: it.WorkflowID, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		Generation: it.Generation, Decided: it.Decided}
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
	it.Decision = m.Decision
	return it, nil
}

func (it collectionItem) message() (chat.Message, error) {
	m := chat.Message{ID: it.ID, ChatID: it.ChatID, Role: it.Role, Content: it.Content, ModelID: it.ModelID, ReplyTo: it.ReplyTo,
		InputTokens: it.InputTokens, OutputTokens: it.OutputTokens, Truncated: it.Truncated, Status: it.Status, CreatedAt: it.CreatedAt,
		PendingKey: it.PendingKey, AttachmentIDs: it.AttachmentIDs}
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

// UpdateChat sets the title of the chat id owned by userID. One conditional
// update; NotFound or Forbidden when the condition fails.
func (s *Chats) UpdateChat(ctx context.Context, id, userID, title string, now time.Time) (chat.Chat, error) {
	const op = "store.UpdateChat"
	var it chatItem
	u := s.table.Update("PK", chatPK(id)).Range("SK", chatSK).
		Set("title", title).Set("updatedAt", now).Set("GSI1SK", now.UTC().Format(timeKey)+"#"+id)
	if err := s.owned.update(ctx, op, id, userID, u, &it); err != nil {
		return chat.Chat{}, err
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
		return runs.DeleteChatRuns(ctx, id)
	})
}

// deleteCollection batch-deletes every item of table under pk except the
// one with sort key keep (the collection's own item, deleted last by the
// caller so that a failure part-way can be retried).
func deleteCollection(ctx context.Context, table dynamo.Table, pk, keep string) error {
	const op = "store.deleteCollection"
	var keys []struct{ PK, SK string }
	if err := table.Get("PK", pk).Project("PK", "SK").Consistent(true).All(ctx, &keys); err != nil {
		return storeError(op, err)
	}
	var del []dynamo.Keyed
	for _, k := range keys {
		if k.SK != keep {
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

// ListChats returns a page of the user's chats, most recently updated
// first, and the user's chat count, from one Query of GSI1.
func (s *Chats) ListChats(ctx context.Context, userID string, page paging.Page) ([]chat.Chat, int, error) {
	items, total, err := pageWithTotal[chatItem](ctx, s.table, userChatsGSI(userID), page)
	if err != nil {
		return nil, 0, errs.Wrap("store.ListChats", err)
	}
	chats := make([]chat.Chat, 0, len(items))
	for _, it := range items {
		chats = append(chats, it.chat())
	}
	return chats, total, nil
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
		}
	}
	if c == nil {
		return chat.Chat{}, nil, errs.Wrap(op, errChatNotFound)
	}
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
	tx.Update(s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).
		Set("updatedAt", last).Set("GSI1SK", chatGSISK(c)).If(collectionWritable))
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
// running at g.Now (an expired lease is taken over). On a failed condition
// one read of the chat tells a running generation (Conflict
// GENERATION_ACTIVE) from a missing chat (NotFound CHAT_NOT_FOUND).
func (s *Chats) StartGeneration(ctx context.Context, c chat.Chat, g chat.Generation, msgs ...chat.Message) error {
	return s.startGeneration(ctx, "store.StartGeneration", s.db.WriteTx(), c, g, msgs)
}

func (s *Chats) startGeneration(ctx context.Context, op string, tx *dynamo.WriteTx, c chat.Chat, g chat.Generation, msgs []chat.Message) error {
	upd := s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).
		Set(generationAttr, g.ID).Set(leaseAttr, g.Until.UnixMilli()).Remove(decidedAttr)
	if err := s.putMessages(tx, &c, upd, msgs); err != nil {
		return errs.Wrap(op, err)
	}
	tx.Update(upd.If(collectionWritable+" AND (attribute_not_exists($) OR $ < ?)", leaseAttr, leaseAttr, g.Now.UnixMilli()))
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		if _, gerr := s.Chat(ctx, c.ID); gerr != nil {
			return errs.Wrap(op, gerr)
		}
		return errs.Wrap(op, errGenerationActive)
	}
	return storeError(op, err)
}

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
		upd.Set("updatedAt", c.UpdatedAt).Set("GSI1SK", chatGSISK(*c))
	}
	return nil
}

var (
	errGenerationNotFound = errs.E("store.Chats", errs.NotFound, chat.CodeGenerationNotFound,
		"no reply with this id in this chat")
	errGenerationNotActive = errs.E("store.Chats", errs.Conflict, chat.CodeGenerationNotActive,
		"the reply has already finished")
)

// logs returns the event logs of the Data table.
func (s *Chats) logs() eventLogs { return eventLogs{db: s.db, table: s.table} }

// StartLoggedGeneration stores user and reply (status streaming), marks
// generation g active on chat c as StartGeneration does, and creates the
// reply's event log holding first, active with a lease until g.LeaseUntil,
// in one transaction. Conflict GENERATION_ACTIVE, NotFound CHAT_NOT_FOUND.
func (s *Chats) StartLoggedGeneration(ctx context.Context, c chat.Chat, g chat.Generation, first []job.Record, user, reply chat.Message) error {
	const op = "store.StartLoggedGeneration"
	tx := s.db.WriteTx()
	rit, err := newMessageItem(reply)
	if err != nil {
		return errs.Wrap(op, err)
	}
	if err := s.logs().start(tx, logStart{PK: chatPK(c.ID), Kind: chat.GenerationKind, ID: g.ID, Status: reply.Status, Target: rit.SK,
		First: first, Lease: g.Lease}); err != nil {
		return errs.Wrap(op, err)
	}
	return s.startGeneration(ctx, op, tx, c, g, []chat.Message{user, reply})
}

// EndLoggedGeneration stores reply (with its final status), appends recs
// to its log and ends the log, and frees chat c of the generation, in one
// transaction conditioned on the log being active and recs following its
// last event; with expiredBefore set, also on its lease having ended
// before then (the sweeper). When another generation holds the chat (this
// one's chat lease ran out), the chat is left alone. Conflict
// GENERATION_NOT_ACTIVE when the generation has already ended; NotFound
// GENERATION_NOT_FOUND.
//
// A write of the generation's own log whose answer was lost (a deadline
// cut it after DynamoDB applied it) leaves the log ahead of what its
// writer believes written: when the active log's last event is one of
// recs, the events up to it are taken as stored and the rest appended, so
// the generation still ends here with its status, not as already ended.
// Only the generation's writer hands out ids within its reservation, so
// such an event can only be its own.
func (s *Chats) EndLoggedGeneration(ctx context.Context, c chat.Chat, reply chat.Message, recs []job.Record, expiredBefore time.Time) error {
	const op = "store.EndLoggedGeneration"
	run := func(freeChat bool) error {
		it, err := newMessageItem(reply)
		if err != nil {
			return errs.Wrap(op, err)
		}
		tx := s.db.WriteTx().Put(s.table.Put(it))
		if err := s.logs().end(tx, chatPK(c.ID), reply.ID, reply.Status, recs, expiredBefore, time.Now()); err != nil {
			return errs.Wrap(op, err)
		}
		if freeChat {
			tx.Update(s.table.Update("PK", chatPK(c.ID)).Range("SK", chatSK).Remove(generationAttr, leaseAttr).
				If(collectionWritable+" AND $ = ?", generationAttr, reply.ID))
		}
		return tx.Run(ctx)
	}
	err := run(true)
	if isConditionFailure(err) {
		// latest, not head: the head's lastSeq lags the slots written
		// since the last renewal.
		h, herr := s.logs().latest(ctx, chatPK(c.ID), reply.ID)
		switch {
		case errs.Is(herr, errs.NotFound):
			return errs.Wrap(op, errGenerationNotFound)
		case herr != nil:
			return errs.Wrap(op, herr)
		case !h.Active:
			return errs.Wrap(op, errGenerationNotActive)
		}
		if rest, ok := unwritten(recs, h.LastSeq); ok {
			recs = rest
			if err = run(true); !isConditionFailure(err) {
				return storeError(op, err)
			}
		}
		err = run(false)
		if isConditionFailure(err) {
			return errs.Wrap(op, errGenerationNotActive)
		}
	}
	return storeError(op, err)
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
// chatID, as stored now, and whether the generation is still active.
// NotFound GENERATION_NOT_FOUND.
func (s *Chats) GeneratedMessage(ctx context.Context, chatID, id string) (chat.Message, bool, error) {
	const op = "store.GeneratedMessage"
	h, err := s.logs().head(ctx, chatPK(chatID), id)
	if errs.Is(err, errs.NotFound) {
		return chat.Message{}, false, errs.Wrap(op, errGenerationNotFound)
	}
	if err != nil {
		return chat.Message{}, false, errs.Wrap(op, err)
	}
	var it collectionItem
	err = s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Equal, h.Target).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return chat.Message{}, false, errs.Wrap(op, errGenerationNotFound)
	}
	if err != nil {
		return chat.Message{}, false, storeError(op, err)
	}
	m, err := it.message()
	return m, h.Active, errs.Wrap(op, err)
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
// marked as StartGeneration does, reply is stored as given (status
// streaming, no decision) on condition that it still awaits approval with
// decision, and its event log is reopened after event last, active with a
// lease until g.LeaseUntil; with first, a reply that had no log (it was
// not streamed) gets a new one holding first. Conflict GENERATION_ACTIVE when the chat is
// generating, Conflict TOOL_CALL_NOT_PENDING when another request
// continued the reply first; NotFound CHAT_NOT_FOUND.
func (s *Chats) ContinueGeneration(ctx context.Context, c chat.Chat, g chat.Generation, reply chat.Message, decision string, last int64, first []job.Record) error {
	const op = "store.ContinueGeneration"
	it, err := newMessageItem(reply)
	if err != nil {
		return errs.Wrap(op, err)
	}
	now := time.Now()
	tx := s.db.WriteTx()
	tx.Put(s.table.Put(it).If("$ = ? AND decision = ?", "status", chat.StatusAwaitingApproval, decision))
	if first != nil {
		if err := s.logs().start(tx, logStart{PK: chatPK(c.ID), Kind: chat.GenerationKind, ID: reply.ID, Status: reply.Status, Target: it.SK,
			First: first, Lease: g.Lease}); err != nil {
			return errs.Wrap(op, err)
		}
	} else {
		tx.Update(s.table.Update("PK", chatPK(c.ID)).Range("SK", logHeadSK(reply.ID)).
			Set("status", reply.Status).Set("active", true).Set("GSI1PK", activeGSI(reply.ID)).Set("GSI1SK", leaseGSISK(g.Lease.Until)).
			Set("leaseUntil", g.Lease.Until.UnixMilli()).Set("reserved", g.Lease.Reserved).
			Set("expiresAt", now.Add(LogRetention).Unix()).Remove("stopRequested").
			If("attribute_exists(PK) AND attribute_not_exists(active) AND lastSeq = ?", last))
	}
	err = s.startGeneration(ctx, op, tx, c, g, nil)
	if errs.Is(err, errs.Conflict) && errs.CodeOf(err) == chat.CodeGenerationActive {
		// The chat's lease is free unless another generation runs; tell
		// a lost race on the reply from a busy chat.
		if m, _, gerr := s.GeneratedMessage(ctx, c.ID, reply.ID); gerr == nil && m.Decision != decision {
			return errs.Wrap(op, errToolCallNotPending)
		}
	}
	return err
}
