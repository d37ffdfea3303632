package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/search"
)

// SearchIndex keeps each user's full-text index of chat messages in the
// Data table (it implements search.Index):
//   - a posting per word and message: PK TERM#<userId>#<word>, SK
//     <chatId>#<messageId>, with the word's count in the message (f), the
//     message's length in words (l) and its sort key in its chat (k), so
//     a query word is one Query of its partition;
//   - in the user's partition SEARCH#<userId>: STATS (n messages and len
//     words, BM25's totals), PROGRESS (how far the index has caught up
//     with the user's chat list), CHAT#<chatId> (how far a chat is
//     indexed: through, the sort key of its last indexed message) and
//     DOC#<chatId>#<messageId> (a message's words: what removing it
//     deletes).
//
// A message's postings are put first (idempotent puts); its DOC item, the
// totals and its chat's progress are then written in one transaction, on
// condition that the chat is writable and its progress is still the one
// read. Postings put by an indexer that crashed or lost the race before
// its commit are put again by the next one (same keys, same values); the
// counts are only ever moved by a commit, so nothing is counted twice.
type SearchIndex struct {
	db    *dynamo.DB
	table dynamo.Table
}

// NewSearchIndex returns the SearchIndex over the named Data table.
func NewSearchIndex(db *dynamo.DB, dataTable string) *SearchIndex {
	return &SearchIndex{db: db, table: db.Table(dataTable)}
}

var _ search.Index = (*SearchIndex)(nil)

func searchPK(userID string) string             { return "SEARCH#" + userID }
func termPK(userID, term string) string         { return "TERM#" + userID + "#" + term }
func postingSK(chatID, messageID string) string { return chatID + "#" + messageID }
func searchChatSK(chatID string) string         { return "CHAT#" + chatID }
func searchDocSK(chatID, messageID string) string {
	return "DOC#" + chatID + "#" + messageID
}

const (
	searchStatsSK    = "STATS"
	searchProgressSK = "PROGRESS"
)

type postingItem struct {
	PK, SK string
	F      int    `dynamo:"f"`
	L      int    `dynamo:"l"`
	K      string `dynamo:"k"`
}

type searchDocItem struct {
	PK, SK string
	Terms  []string `dynamo:"terms"`
	L      int      `dynamo:"l"`
}

type progressItem struct {
	Seen    string   `dynamo:"seen"`
	Pending []string `dynamo:"pending"`
	V       int64    `dynamo:"v"`
}

// Progress returns userID's progress; the zero Progress when none.
func (s *SearchIndex) Progress(ctx context.Context, userID string) (search.Progress, error) {
	const op = "store.SearchIndex.Progress"
	var it progressItem
	err := s.table.Get("PK", searchPK(userID)).Range("SK", dynamo.Equal, searchProgressSK).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return search.Progress{}, nil
	}
	if err != nil {
		return search.Progress{}, storeError(op, err)
	}
	return search.Progress{Seen: it.Seen, Pending: it.Pending, Version: it.V}, nil
}

// SetProgress replaces userID's progress old with p, on condition that it
// is still old (its version). Conflict INDEX_CHANGED otherwise.
func (s *SearchIndex) SetProgress(ctx context.Context, userID string, old, p search.Progress) error {
	const op = "store.SearchIndex.SetProgress"
	u := s.table.Update("PK", searchPK(userID)).Range("SK", searchProgressSK).Set("seen", p.Seen).Set("v", p.Version)
	if len(p.Pending) > 0 {
		u.Set("pending", p.Pending)
	} else {
		u.Remove("pending")
	}
	if old.Version == 0 {
		u.If("attribute_not_exists(PK) OR v = ?", 0)
	} else {
		u.If("v = ?", old.Version)
	}
	err := u.Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, search.ErrIndexChanged)
	}
	return storeError(op, err)
}

// ChatsChangedAfter returns up to limit of userID's chats whose position
// in the user's chat list (GSI1SK: updatedAt#chatId) is after after, in
// that order: one Query of GSI1, eventually consistent (a change shows
// within about a second).
func (s *SearchIndex) ChatsChangedAfter(ctx context.Context, userID, after string, limit int) ([]search.ChatChange, error) {
	const op = "store.SearchIndex.ChatsChangedAfter"
	var items []struct {
		GSI1SK string
		ID     string `dynamo:"id"`
		Type   string `dynamo:"type"`
	}
	// "!" sorts before every timestamp, the counter (~COUNT) after them.
	from := after
	if from == "" {
		from = "!"
	}
	err := s.table.Get("GSI1PK", userChatsGSI(userID)).Index("GSI1").Range("GSI1SK", dynamo.Between, from, counterGSISK).
		Project("GSI1SK", "id", "type").Limit(limit+2).All(ctx, &items)
	if err != nil {
		return nil, storeError(op, err)
	}
	out := []search.ChatChange{}
	for _, it := range items {
		if it.Type != "chat" || it.GSI1SK == after || len(out) == limit {
			continue
		}
		at, err := time.Parse(timeKey, strings.SplitN(it.GSI1SK, "#", 2)[0])
		if err != nil {
			return nil, errs.E(op, errs.Internal, "", "internal error").WithCause(fmt.Errorf("chat %s: GSI1SK %q: %w", it.ID, it.GSI1SK, err))
		}
		out = append(out, search.ChatChange{ChatID: it.ID, Position: it.GSI1SK, UpdatedAt: at})
	}
	return out, nil
}

// ChatProgress returns how far chatID of userID is indexed.
func (s *SearchIndex) ChatProgress(ctx context.Context, userID, chatID string) (search.ChatProgress, error) {
	const op = "store.SearchIndex.ChatProgress"
	var it struct {
		Through string `dynamo:"through"`
	}
	err := s.table.Get("PK", searchPK(userID)).Range("SK", dynamo.Equal, searchChatSK(chatID)).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return search.ChatProgress{}, nil
	}
	if err != nil {
		return search.ChatProgress{}, storeError(op, err)
	}
	return search.ChatProgress{Through: it.Through, Exists: true}, nil
}

// MessagesAfter returns up to limit messages of chatID after the one with
// sort key after ("" for all), in order: one consistent Query.
func (s *SearchIndex) MessagesAfter(ctx context.Context, chatID, after string, limit int) ([]search.Message, error) {
	const op = "store.SearchIndex.MessagesAfter"
	from := after
	if from == "" {
		from = "MSG#"
	}
	var items []struct {
		SK      string
		Type    string `dynamo:"type"`
		ID      string `dynamo:"id"`
		Role    string `dynamo:"role"`
		Content string `dynamo:"content"`
		Status  string `dynamo:"status"`
	}
	err := s.table.Get("PK", chatPK(chatID)).Range("SK", dynamo.Between, from, messageSKEnd).Consistent(true).
		Project("SK", "type", "id", "role", "content", "status").Limit(limit+1).All(ctx, &items)
	if err != nil {
		return nil, storeError(op, err)
	}
	out := []search.Message{}
	for _, it := range items {
		if it.SK == after || it.Type != "message" || len(out) == limit {
			continue
		}
		out = append(out, search.Message{ID: it.ID, ChatID: chatID, Key: it.SK, Role: it.Role, Content: it.Content,
			Final: it.Status != chat.StatusStreaming && it.Status != chat.StatusAwaitingApproval})
	}
	return out, nil
}

// Add puts the postings of docs, then commits them (DOC items, the
// totals, the chat's progress from old to p) in one transaction
// conditioned on the chat being writable and its progress being old.
// Conflict INDEX_CHANGED when the condition failed (another indexer
// committed first, or the chat is being deleted).
func (s *SearchIndex) Add(ctx context.Context, userID, chatID string, docs []search.Doc, old, p search.ChatProgress) error {
	const op = "store.SearchIndex.Add"
	if len(docs) > search.MaxDocsPerAdd {
		return errs.E(op, errs.Internal, "", "internal error").WithCause(fmt.Errorf("%d docs in one add", len(docs)))
	}
	var postings []any
	var words int64
	tx := s.db.WriteTx()
	for _, d := range docs {
		terms := make([]string, len(d.Terms))
		for i, t := range d.Terms {
			terms[i] = t.Text
			postings = append(postings, postingItem{PK: termPK(userID, t.Text), SK: postingSK(chatID, d.MessageID), F: t.Freq, L: d.Length, K: d.Key})
		}
		words += int64(d.Length)
		tx.Put(s.table.Put(searchDocItem{PK: searchPK(userID), SK: searchDocSK(chatID, d.MessageID), Terms: terms, L: d.Length}))
	}
	if err := batchPut(ctx, op, s.table, postings); err != nil {
		return err
	}
	if len(docs) > 0 {
		tx.Update(s.table.Update("PK", searchPK(userID)).Range("SK", searchStatsSK).Add("n", len(docs)).Add("len", words))
	}
	prog := s.table.Update("PK", searchPK(userID)).Range("SK", searchChatSK(chatID)).Set("through", p.Through)
	if old.Exists {
		prog.If("through = ?", old.Through)
	} else {
		prog.If("attribute_not_exists(PK)")
	}
	tx.Update(prog)
	tx.Check(s.table.Check("PK", chatPK(chatID)).Range("SK", chatSK).If(collectionWritable))
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, search.ErrIndexChanged)
	}
	return storeError(op, err)
}

// RemoveChat removes chatID's messages from userID's index: per batch of
// its DOC items, their postings are deleted, then the DOC items and the
// totals in one transaction conditioned on the DOC items still being
// there (a concurrent removal that took some first makes this one go
// message by message), and at last the chat's progress. Each step is
// idempotent, so a retry after a failure finishes the job.
func (s *SearchIndex) RemoveChat(ctx context.Context, userID, chatID string) error {
	const op = "store.SearchIndex.RemoveChat"
	var docs []searchDocItem
	err := s.table.Get("PK", searchPK(userID)).Range("SK", dynamo.BeginsWith, "DOC#"+chatID+"#").Consistent(true).All(ctx, &docs)
	if err != nil {
		return storeError(op, err)
	}
	for len(docs) > 0 {
		n := min(len(docs), search.MaxDocsPerAdd)
		if err := s.removeDocs(ctx, userID, chatID, docs[:n]); err != nil {
			return errs.Wrap(op, err)
		}
		docs = docs[n:]
	}
	if err := s.table.Delete("PK", searchPK(userID)).Range("SK", searchChatSK(chatID)).Run(ctx); err != nil {
		return storeError(op, err)
	}
	return nil
}

// removeDocs deletes docs of chatID (at most MaxDocsPerAdd) with their
// postings and takes them off the totals.
func (s *SearchIndex) removeDocs(ctx context.Context, userID, chatID string, docs []searchDocItem) error {
	const op = "store.SearchIndex.removeDocs"
	var keys []dynamo.Keyed
	for _, d := range docs {
		id := strings.TrimPrefix(d.SK, "DOC#"+chatID+"#")
		for _, t := range d.Terms {
			keys = append(keys, dynamo.Keys{termPK(userID, t), postingSK(chatID, id)})
		}
	}
	if err := batchDelete(ctx, op, s.table, keys); err != nil {
		return err
	}
	commit := func(docs []searchDocItem) error {
		tx := s.db.WriteTx()
		var words int64
		for _, d := range docs {
			words += int64(d.L)
			tx.Delete(s.table.Delete("PK", d.PK).Range("SK", d.SK).If("attribute_exists(PK)"))
		}
		tx.Update(s.table.Update("PK", searchPK(userID)).Range("SK", searchStatsSK).Add("n", -len(docs)).Add("len", -words))
		return tx.Run(ctx)
	}
	err := commit(docs)
	if !isConditionFailure(err) {
		return storeError(op, err)
	}
	for _, d := range docs {
		if err := commit([]searchDocItem{d}); err != nil && !isConditionFailure(err) {
			return storeError(op, err)
		}
	}
	return nil
}

// Stats returns userID's totals (zero for an empty index).
func (s *SearchIndex) Stats(ctx context.Context, userID string) (search.Stats, error) {
	const op = "store.SearchIndex.Stats"
	var it struct {
		N   int64 `dynamo:"n"`
		Len int64 `dynamo:"len"`
	}
	err := s.table.Get("PK", searchPK(userID)).Range("SK", dynamo.Equal, searchStatsSK).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return search.Stats{}, nil
	}
	if err != nil {
		return search.Stats{}, storeError(op, err)
	}
	return search.Stats{Docs: it.N, Length: it.Len}, nil
}

// Postings returns up to limit postings of term in userID's index: one
// eventually consistent Query of the term's partition (pages of 1 MB).
func (s *SearchIndex) Postings(ctx context.Context, userID, term string, limit int) ([]search.Posting, error) {
	const op = "store.SearchIndex.Postings"
	var items []postingItem
	if err := s.table.Get("PK", termPK(userID, term)).Limit(limit).All(ctx, &items); err != nil {
		return nil, storeError(op, err)
	}
	out := make([]search.Posting, 0, len(items))
	for _, it := range items {
		chatID, msgID, ok := strings.Cut(it.SK, "#")
		if !ok {
			continue
		}
		out = append(out, search.Posting{ChatID: chatID, MessageID: msgID, Key: it.K, Freq: it.F, Length: it.L})
	}
	return out, nil
}

// Find reads back the chats and messages of hits: BatchGetItem, 100 keys
// a call.
func (s *SearchIndex) Find(ctx context.Context, hits []search.Hit) (search.Found, error) {
	const op = "store.SearchIndex.Find"
	found := search.Found{Chats: map[string]search.FoundChat{}, Messages: map[string]string{}}
	seen := map[string]bool{}
	var keys []dynamo.Keyed
	for _, h := range hits {
		if !seen[h.ChatID] {
			seen[h.ChatID] = true
			keys = append(keys, dynamo.Keys{chatPK(h.ChatID), chatSK})
		}
		keys = append(keys, dynamo.Keys{chatPK(h.ChatID), h.Key})
	}
	for len(keys) > 0 {
		n := min(len(keys), 100)
		var items []struct {
			Type    string `dynamo:"type"`
			ID      string `dynamo:"id"`
			UserID  string `dynamo:"userId"`
			Title   string `dynamo:"title"`
			Content string `dynamo:"content"`
		}
		err := s.table.Batch("PK", "SK").Get(keys[:n]...).Project("type", "id", "userId", "title", "content").All(ctx, &items)
		if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
			return search.Found{}, storeError(op, err)
		}
		for _, it := range items {
			switch it.Type {
			case "chat":
				found.Chats[it.ID] = search.FoundChat{UserID: it.UserID, Title: it.Title}
			case "message":
				found.Messages[it.ID] = it.Content
			}
		}
		keys = keys[n:]
	}
	return found, nil
}

// batchPut puts items of table in batches of 25, as batchDelete deletes.
func batchPut(ctx context.Context, op string, table dynamo.Table, items []any) error {
	return inBatches(ctx, op, len(items), func(ctx context.Context, from, to int) error {
		_, err := table.Batch("PK", "SK").Write().Put(items[from:to]...).Run(ctx)
		return err
	})
}
