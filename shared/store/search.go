package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
//     #<rank>#<chatId>#<messageId>, rank being search.ImpactMax minus the
//     word's search.Impact in the message in five digits, so that the
//     partition holds the word's best messages first; with the word's
//     count in the message (f), the message's length in words (l) and its
//     sort key in its chat (k). A query word is one Query of the first
//     postings of its partition;
//   - in the same partition, SK # (before every posting): the word's
//     message count (c) when the user's index held at messages, written
//     by CountPostings, so that the Query of a common word also reads its
//     count; beside it, COUNT#<word> in the user's partition names the
//     word for the account's erasure (EraseSearchCounts);
//   - in the user's partition SEARCH#<userId>: STATS (n messages and len
//     words, BM25's totals), PROGRESS (how far the index has caught up
//     with the user's chat list; mig once nothing is in the previous
//     format), CHAT#<chatId> (how far a chat is indexed: through, the
//     sort key of its last indexed message; fmt, its format) and
//     DOC#<chatId>#<messageId> (a message's words and their counts: what
//     removing it deletes).
//
// The previous format (an index written before impact ordering) kept a
// posting at SK <chatId>#<messageId> in the same partition, DOC items
// without counts and CHAT# items without fmt: PreviousPostings reads
// those postings (they sort after the # ones), ResetChat removes a chat's,
// and the catch-up converts chat after chat (search.Indexer).
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

func searchPK(userID string) string     { return "SEARCH#" + userID }
func termPK(userID, term string) string { return "TERM#" + userID + "#" + term }

// postingSK is the sort key of a posting of a word freq times in a
// message of length words: best first.
func postingSK(chatID, messageID string, freq, length int) string {
	return fmt.Sprintf("#%05d#%s#%s", search.ImpactMax-search.Impact(freq, length), chatID, messageID)
}

// previousPostingSK is a posting's sort key in the previous format.
func previousPostingSK(chatID, messageID string) string { return chatID + "#" + messageID }

// Sort keys in a word's partition: its count, and the range of its
// postings (after the count, before the previous format's).
const (
	termCountSK    = "#"
	postingSKFirst = "#0"
	postingSKLast  = "#:"
	previousSKFrom = "$"
)

func searchChatSK(chatID string) string { return "CHAT#" + chatID }
func searchCountSK(term string) string  { return searchCountPrefix + term }

const searchCountPrefix = "COUNT#"

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

// searchDocItem is a message's words; F their counts (absent in the
// previous format, whose postings' keys do not need them).
type searchDocItem struct {
	PK, SK string
	Terms  []string `dynamo:"terms"`
	F      []int    `dynamo:"f,omitempty"`
	L      int      `dynamo:"l"`
}

type progressItem struct {
	Seen    string   `dynamo:"seen"`
	Pending []string `dynamo:"pending"`
	V       int64    `dynamo:"v"`
	Mig     bool     `dynamo:"mig"`
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
	return search.Progress{Seen: it.Seen, Pending: it.Pending, Version: it.V, Migrated: it.Mig}, nil
}

// SetProgress replaces userID's progress old with p, on condition that it
// is still old (its version). Conflict INDEX_CHANGED otherwise.
func (s *SearchIndex) SetProgress(ctx context.Context, userID string, old, p search.Progress) error {
	const op = "store.SearchIndex.SetProgress"
	u := s.table.Update("PK", searchPK(userID)).Range("SK", searchProgressSK).Set("seen", p.Seen).Set("v", p.Version).Set("mig", p.Migrated)
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
// in the user's chat lists (GSI1SK: updatedAt#chatId) is after after, in
// that order. A chat is listed in one of three GSI1 partitions (the
// pinned, the others, the archived: chatListGSI) and a message moves its
// position within its partition, so each is read: one Query of GSI1
// each, eventually consistent (a change shows within about a second),
// merged by position. A chat met twice (read while a PATCH moved it
// between partitions) is answered once.
func (s *SearchIndex) ChatsChangedAfter(ctx context.Context, userID, after string, limit int) ([]search.ChatChange, error) {
	const op = "store.SearchIndex.ChatsChangedAfter"
	type listed struct {
		GSI1SK string
		ID     string `dynamo:"id"`
		Type   string `dynamo:"type"`
	}
	// "!" sorts before every timestamp, the counter (~COUNT) after them.
	from := after
	if from == "" {
		from = "!"
	}
	var (
		all []listed
		// cut is the last position every partition was read through: a
		// partition whose Query filled its limit may hold more after its
		// last item, so nothing after that item is answered.
		cut = counterGSISK
	)
	for _, gsi := range []string{pinnedChatsGSI(userID), userChatsGSI(userID), archivedChatsGSI(userID)} {
		var items []listed
		err := s.table.Get("GSI1PK", gsi).Index("GSI1").Range("GSI1SK", dynamo.Between, from, counterGSISK).
			Project("GSI1SK", "id", "type").Limit(limit+2).All(ctx, &items)
		if err != nil {
			return nil, storeError(op, err)
		}
		if len(items) == limit+2 && items[len(items)-1].GSI1SK < cut {
			cut = items[len(items)-1].GSI1SK
		}
		all = append(all, items...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].GSI1SK < all[j].GSI1SK })
	out := []search.ChatChange{}
	seen := map[string]bool{}
	for _, it := range all {
		if it.Type != "chat" || it.GSI1SK == after || seen[it.ID] {
			continue
		}
		if it.GSI1SK > cut || len(out) == limit {
			break
		}
		seen[it.ID] = true
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
		Fmt     int    `dynamo:"fmt"`
		Prev    string `dynamo:"prev"`
	}
	err := s.table.Get("PK", searchPK(userID)).Range("SK", dynamo.Equal, searchChatSK(chatID)).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return search.ChatProgress{}, nil
	}
	if err != nil {
		return search.ChatProgress{}, storeError(op, err)
	}
	return search.ChatProgress{Through: it.Through, Exists: true, Format: it.Fmt, Previous: it.Prev}, nil
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
	// Add writes the impact format: a progress of the previous format (a
	// caller's zero value) is that format's.
	if p.Format == search.FormatPrevious {
		p.Format = search.FormatImpact
	}
	var postings []any
	var previous []dynamo.Keyed
	var counted, words int64
	tx := s.db.WriteTx()
	for _, d := range docs {
		// A message the previous format indexed: its postings there go
		// (the analysis is the same, so are its words), its DOC item is
		// replaced, and it is in the totals already.
		replaces := old.Format == search.FormatConverting && d.Key <= old.Previous
		terms := make([]string, len(d.Terms))
		freqs := make([]int, len(d.Terms))
		for i, t := range d.Terms {
			terms[i], freqs[i] = t.Text, t.Freq
			postings = append(postings, postingItem{PK: termPK(userID, t.Text), SK: postingSK(chatID, d.MessageID, t.Freq, d.Length), F: t.Freq, L: d.Length, K: d.Key})
			if replaces {
				previous = append(previous, dynamo.Keys{termPK(userID, t.Text), previousPostingSK(chatID, d.MessageID)})
			}
		}
		if !replaces {
			counted++
			words += int64(d.Length)
		}
		tx.Put(s.table.Put(searchDocItem{PK: searchPK(userID), SK: searchDocSK(chatID, d.MessageID), Terms: terms, F: freqs, L: d.Length}))
	}
	// The new postings before the previous ones go: a search meanwhile
	// finds a message in both (and counts it once), never in neither.
	if err := batchPut(ctx, op, s.table, postings); err != nil {
		return err
	}
	if err := batchDelete(ctx, op, s.table, previous); err != nil {
		return err
	}
	if counted > 0 {
		tx.Update(s.table.Update("PK", searchPK(userID)).Range("SK", searchStatsSK).Add("n", counted).Add("len", words))
	}
	prog := s.table.Update("PK", searchPK(userID)).Range("SK", searchChatSK(chatID)).Set("through", p.Through).Set("fmt", p.Format)
	if p.Format == search.FormatImpact {
		prog.Remove("prev")
	}
	// A chat being converted has indexed nothing again at first: no
	// through (the store writes no empty strings).
	through := func() (string, []any) {
		if old.Through == "" {
			return "attribute_not_exists(through)", nil
		}
		return "through = ?", []any{old.Through}
	}
	switch cond, args := through(); {
	case old.Exists && old.Format == search.FormatPrevious:
		prog.If(cond+" AND (attribute_not_exists(fmt) OR fmt = ?)", append(args, search.FormatPrevious)...)
	case old.Exists:
		prog.If(cond+" AND fmt = ?", append(args, old.Format)...)
	default:
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
		for i, t := range d.Terms {
			if len(d.F) == len(d.Terms) {
				keys = append(keys, dynamo.Keys{termPK(userID, t), postingSK(chatID, id, d.F[i], d.L)})
			} else {
				keys = append(keys, dynamo.Keys{termPK(userID, t), previousPostingSK(chatID, id)})
			}
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

// Postings returns the first limit postings of term in userID's index,
// best first, with the word's count when one is recorded: one eventually
// consistent Query of the first limit + 2 items of the term's partition
// (the count, the postings, and one more to tell whether there are).
func (s *SearchIndex) Postings(ctx context.Context, userID, term string, limit int) (search.Postings, error) {
	const op = "store.SearchIndex.Postings"
	var items []struct {
		postingItem
		C  int64 `dynamo:"c"`
		At int64 `dynamo:"at"`
	}
	err := s.table.Get("PK", termPK(userID, term)).Range("SK", dynamo.BeginsWith, termCountSK).Limit(limit+2).All(ctx, &items)
	if err != nil {
		return search.Postings{}, storeError(op, err)
	}
	out := search.Postings{List: make([]search.Posting, 0, min(len(items), limit))}
	for _, it := range items {
		if it.SK == termCountSK {
			out.Count, out.CountedAt = it.C, it.At
			continue
		}
		if len(out.List) == limit {
			out.More = true
			break
		}
		// #<rank>#<chatId>#<messageId>
		parts := strings.SplitN(it.SK, "#", 4)
		if len(parts) != 4 {
			continue
		}
		out.List = append(out.List, search.Posting{ChatID: parts[2], MessageID: parts[3], Key: it.K, Freq: it.F, Length: it.L})
	}
	return out, nil
}

// CountPostings counts term's postings in userID's index (a Query with
// Select COUNT over the postings' range: its reads are those of every
// posting) and records the count, at docs, where Postings reads it.
func (s *SearchIndex) CountPostings(ctx context.Context, userID, term string, docs int64) (int64, error) {
	const op = "store.SearchIndex.CountPostings"
	n, err := s.table.Get("PK", termPK(userID, term)).Range("SK", dynamo.Between, postingSKFirst, postingSKLast).Count(ctx)
	if err != nil {
		return 0, storeError(op, err)
	}
	// The marker first: a count is never left that the erasure cannot
	// find.
	if err := s.table.Put(struct{ PK, SK string }{searchPK(userID), searchCountSK(term)}).Run(ctx); err != nil {
		return 0, storeError(op, err)
	}
	err = s.table.Put(struct {
		PK, SK string
		C      int64 `dynamo:"c"`
		At     int64 `dynamo:"at"`
	}{termPK(userID, term), termCountSK, int64(n), docs}).Run(ctx)
	if err != nil {
		return 0, storeError(op, err)
	}
	return int64(n), nil
}

// eraseSearchCounts deletes the words' counts CountPostings recorded for
// userID (the postings go with the chats; the markers with the user's
// search partition, after this).
func eraseSearchCounts(ctx context.Context, op string, table dynamo.Table, userID string) error {
	var markers []struct{ SK string }
	if err := table.Get("PK", searchPK(userID)).Range("SK", dynamo.BeginsWith, searchCountPrefix).Project("SK").Consistent(true).All(ctx, &markers); err != nil {
		return storeError(op, err)
	}
	keys := make([]dynamo.Keyed, 0, len(markers))
	for _, m := range markers {
		keys = append(keys, dynamo.Keys{termPK(userID, strings.TrimPrefix(m.SK, searchCountPrefix)), termCountSK})
	}
	return batchDelete(ctx, op, table, keys)
}

// PreviousPostings returns up to limit postings of term in userID's index
// in the previous format: one eventually consistent Query of the keys
// after the # ones (pages of 1 MB).
func (s *SearchIndex) PreviousPostings(ctx context.Context, userID, term string, limit int) ([]search.Posting, error) {
	const op = "store.SearchIndex.PreviousPostings"
	var items []postingItem
	if err := s.table.Get("PK", termPK(userID, term)).Range("SK", dynamo.Greater, previousSKFrom).Limit(limit).All(ctx, &items); err != nil {
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

// UnconvertedChats returns up to limit chats of userID whose progress is
// not search.FormatImpact: one consistent Query of the user's CHAT#
// items, filtered.
func (s *SearchIndex) UnconvertedChats(ctx context.Context, userID string, limit int) ([]string, error) {
	const op = "store.SearchIndex.UnconvertedChats"
	var items []struct{ SK string }
	err := s.table.Get("PK", searchPK(userID)).Range("SK", dynamo.BeginsWith, "CHAT#").Filter("attribute_not_exists(fmt) OR fmt <> ?", search.FormatImpact).
		Project("SK").Consistent(true).Limit(limit).All(ctx, &items)
	if err != nil {
		return nil, storeError(op, err)
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, strings.TrimPrefix(it.SK, "CHAT#"))
	}
	return out, nil
}

// ResetChat moves chatID's progress old, of the previous format, to
// search.FormatConverting with nothing indexed again and prev, the last
// message the previous format indexed, on condition that it is still old:
// one conditional UpdateItem. Conflict INDEX_CHANGED otherwise.
func (s *SearchIndex) ResetChat(ctx context.Context, userID, chatID string, old search.ChatProgress) error {
	const op = "store.SearchIndex.ResetChat"
	err := s.table.Update("PK", searchPK(userID)).Range("SK", searchChatSK(chatID)).Remove("through").Set("fmt", search.FormatConverting).
		Set("prev", old.Through).If("through = ? AND (attribute_not_exists(fmt) OR fmt = ?)", old.Through, search.FormatPrevious).Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, search.ErrIndexChanged)
	}
	return storeError(op, err)
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
