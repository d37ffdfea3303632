package search

import (
	"context"
	"slices"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Doc is one message as the index keeps it.
type Doc struct {
	ChatID    string
	MessageID string
	// Key is where the store keeps the message (opaque here), to read it
	// back for a snippet.
	Key string
	Analysis
}

// Posting is one message a word occurs in.
type Posting struct {
	ChatID    string
	MessageID string
	Key       string
	Freq      int
	Length    int
}

// Postings is a word's postings as the index reads them: the first ones in
// the index's order, its messages best first (by Impact), and what it
// knows of the rest.
type Postings struct {
	List []Posting
	// More is true when the word has postings past List.
	More bool
	// Count is the word's message count as the index recorded it when
	// the user's index held CountedAt messages (CountedAt 0: none
	// recorded; Index.CountPostings records one).
	Count, CountedAt int64
}

// Stats are the totals BM25 needs of a user's index: how many messages it
// holds and their length in words.
type Stats struct {
	Docs   int64
	Length int64
}

// Progress is how far a user's index has caught up with the user's chats:
// every chat whose place in the user's chat list (ChatChange.Position) is
// at or before Seen is indexed, but the Pending ones, which had a reply
// still being written. Version orders the writes of Progress.
// Migrated is true once no chat of the user is indexed in the previous
// format (postings in message order, read whole): until then a search
// reads those postings too, and each catch-up converts some chats.
type Progress struct {
	Seen     string
	Pending  []string
	Version  int64
	Migrated bool
}

// ChatChange is a chat whose place in its owner's list moved: it took a
// message or was renamed, at UpdatedAt.
type ChatChange struct {
	ChatID    string
	Position  string
	UpdatedAt time.Time
}

// ChatProgress is how far a chat is indexed: every message up to the one
// at Through (a store position, opaque here; "" for none).
// Format is how its messages are indexed: FormatPrevious (0, what an
// index written before impact ordering holds), FormatConverting (being
// indexed again from its start; the messages through Previous, the last
// one the previous format indexed, are still in the previous format past
// Through, and each Add replaces their items) or FormatImpact.
type ChatProgress struct {
	Through  string
	Exists   bool
	Format   int
	Previous string
}

// The formats of a chat's index items (ChatProgress.Format).
const (
	FormatPrevious   = 0
	FormatConverting = 1
	FormatImpact     = 2
)

// Message is a stored message as the indexer reads it.
type Message struct {
	ID      string
	ChatID  string
	Key     string
	Role    string
	Content string
	// Final is false for a reply still being written (streaming, or
	// paused for a tool approval): it is indexed once it ends.
	Final bool
}

// Hit is a message of a result with its chat, read back for the answer.
type Hit struct {
	ChatID    string
	MessageID string
	Key       string
}

// Found is what the store reads back for a page of results: each chat's
// owner and title and each message's content, by id. A chat or message
// deleted meanwhile is absent.
type Found struct {
	Chats    map[string]FoundChat
	Messages map[string]string
}

// FoundChat is a chat of a result.
type FoundChat struct {
	UserID string
	Title  string
}

// Index is the storage of the users' indexes (store.SearchIndex). Every
// method fails only with storage errors but where it says.
type Index interface {
	// Progress returns userID's progress, the zero Progress when none.
	Progress(ctx context.Context, userID string) (Progress, error)
	// SetProgress replaces userID's progress old (as Progress returned it)
	// with p. Conflict INDEX_CHANGED when another writer changed it first.
	SetProgress(ctx context.Context, userID string, old, p Progress) error
	// ChatsChangedAfter returns up to limit of userID's chats whose
	// position is after after ("" for all), in position order.
	ChatsChangedAfter(ctx context.Context, userID, after string, limit int) ([]ChatChange, error)
	// ChatProgress returns how far chatID of userID is indexed.
	ChatProgress(ctx context.Context, userID, chatID string) (ChatProgress, error)
	// MessagesAfter returns up to limit messages of chatID after position
	// after ("" for all), in conversation order.
	MessagesAfter(ctx context.Context, chatID, after string, limit int) ([]Message, error)
	// Add puts the postings of docs (at most MaxDocsPerAdd) and commits
	// them with chatID's progress moved from old to p: the commit is one
	// transaction, conditioned on the chat being writable and its progress
	// still old, so a crash or a concurrent indexer never counts a message
	// twice. Conflict INDEX_CHANGED when the condition failed. For a chat
	// FormatConverting, the docs through old.Previous replace their items
	// of the previous format (counted in the totals already).
	Add(ctx context.Context, userID, chatID string, docs []Doc, old, p ChatProgress) error
	// RemoveChat removes chatID's messages from userID's index. It is
	// idempotent: a retry after a failure finishes the job.
	RemoveChat(ctx context.Context, userID, chatID string) error
	// Stats returns userID's totals.
	Stats(ctx context.Context, userID string) (Stats, error)
	// Postings returns the first limit postings of term in userID's
	// index, best first (by Impact), with the word's recorded count.
	Postings(ctx context.Context, userID, term string, limit int) (Postings, error)
	// CountPostings counts the postings of term in userID's index (all of
	// them: its reads grow with the word's messages) and records the
	// count, taken when the index held docs messages, for Postings.
	CountPostings(ctx context.Context, userID, term string, docs int64) (int64, error)
	// PreviousPostings returns up to limit postings of term in userID's
	// index written in the previous format (in no useful order).
	PreviousPostings(ctx context.Context, userID, term string, limit int) ([]Posting, error)
	// UnconvertedChats returns up to limit chats of userID whose index
	// items are not FormatImpact.
	UnconvertedChats(ctx context.Context, userID string, limit int) ([]string, error)
	// ResetChat sets the progress of userID's chat chatID, old (of the
	// previous format), to FormatConverting with none indexed again
	// (Previous: old.Through), on condition that it is still old:
	// Conflict INDEX_CHANGED otherwise. It removes nothing: the messages
	// stay found in the previous format until Add replaces them.
	ResetChat(ctx context.Context, userID, chatID string, old ChatProgress) error
	// Find reads back the chats and messages of hits.
	Find(ctx context.Context, hits []Hit) (Found, error)
}

// MaxDocsPerAdd bounds the messages of one Index.Add (its commit is one
// transaction of at most 100 items).
const MaxDocsPerAdd = 50

// codeIndexChanged is the Conflict code of a progress written by another
// indexer first.
const codeIndexChanged = "INDEX_CHANGED"

// ErrIndexChanged is the error an Index answers when another indexer
// moved a progress first.
var ErrIndexChanged = errs.E("search.Index", errs.Conflict, codeIndexChanged, "the index was changed by another writer")

// Bounds of catching up, per call: the postings written (a message writes
// one per word it keeps, at most MaxTermsPerMessage) and the chats looked
// at, so that a search after a long silence (or the first one over chats
// that predate the index) answers in bounded time: 5,000 postings are 200
// BatchWriteItem calls. What is left is indexed by the next call. The
// pending chats are bounded too: beyond MaxPending, Seen stops before the
// next pending chat.
const (
	CatchUpPostings = 5000
	CatchUpChats    = 100
	MaxPending      = 20
)

// Settle is how long after a chat's change CatchUp keeps looking at it
// (Progress.Seen stays before it): longer than the user's chat list (an
// eventually consistent index) takes to show a change, and than a write
// takes to store a message after taking its time (a reply's createdAt is
// taken when it is complete, just before it is stored).
const Settle = 30 * time.Second

// Indexer keeps users' indexes current with their chats.
type Indexer struct {
	index Index
	now   func() time.Time
}

// NewIndexer returns an Indexer over index on the clock now (nil:
// time.Now).
func NewIndexer(index Index, now func() time.Time) *Indexer {
	if now == nil {
		now = time.Now
	}
	return &Indexer{index: index, now: now}
}

// chatState is how far indexChat got with a chat.
type chatState int

const (
	chatDone       chatState = iota // every message is indexed
	chatPending                     // a reply still being written stops it
	chatIncomplete                  // the budget ran out, or another indexer moved it
)

// indexChat indexes the messages of userID's chat chatID not yet indexed,
// in conversation order up to the first reply still being written, within
// budget postings (one message at least). A chat indexed in the previous
// format is indexed again from its start, its messages found in that
// format until replaced (its progress stays FormatConverting until every
// message is). It returns the state reached and the postings written.
// Storage errors.
func (x *Indexer) indexChat(ctx context.Context, userID, chatID string, budget int) (chatState, int, error) {
	const op = "search.indexChat"
	used := 0
	for {
		if used >= budget {
			return chatIncomplete, used, nil
		}
		p, err := x.index.ChatProgress(ctx, userID, chatID)
		if err != nil {
			return 0, used, errs.Wrap(op, err)
		}
		if p.Exists && p.Format == FormatPrevious {
			err := x.index.ResetChat(ctx, userID, chatID, p)
			if errs.CodeOf(err) == codeIndexChanged {
				return chatIncomplete, used, nil
			}
			if err != nil {
				return 0, used, errs.Wrap(op, err)
			}
			continue
		}
		msgs, err := x.index.MessagesAfter(ctx, chatID, p.Through, MaxDocsPerAdd)
		if err != nil {
			return 0, used, errs.Wrap(op, err)
		}
		next, state := p, chatDone
		next.Exists = true
		var docs []Doc
		cost := 0
		for i, m := range msgs {
			if !m.Final {
				state = chatPending
				break
			}
			a := Analyze(m.Content)
			if used+cost+len(a.Terms) > budget && (i > 0 || used > 0) {
				state = chatIncomplete
				break
			}
			next.Through = m.Key
			if len(a.Terms) > 0 {
				docs = append(docs, Doc{ChatID: chatID, MessageID: m.ID, Key: m.Key, Analysis: a})
				cost += len(a.Terms)
			}
		}
		// A chat being converted is FormatImpact once every message it
		// holds is indexed; a new one is from its first commit.
		next.Format = FormatImpact
		if p.Exists && p.Format == FormatConverting && (state != chatDone || len(msgs) == MaxDocsPerAdd) {
			next.Format = FormatConverting
		}
		if next.Through != p.Through || p.Exists && next.Format != p.Format {
			err := x.index.Add(ctx, userID, chatID, docs, p, next)
			if errs.CodeOf(err) == codeIndexChanged {
				return chatIncomplete, used, nil
			}
			if err != nil {
				return 0, used, errs.Wrap(op, err)
			}
			used += cost
		}
		if state != chatDone || len(msgs) < MaxDocsPerAdd {
			return state, used, nil
		}
	}
}

// CatchUp indexes what userID's chats hold and the index does not: the
// pending chats and the chats changed since the user's progress, oldest
// change first, at most CatchUpPostings postings. A search calls it
// first, so a stored message is found by the next search. Progress.Seen
// moves over the chats done, and stops before the first one changed less
// than Settle ago, left incomplete, or pending when MaxPending are
// already: the next call looks at those again. Storage errors.
func (x *Indexer) CatchUp(ctx context.Context, userID string) error {
	_, err := x.catchUp(ctx, userID)
	return err
}

// catchUp is CatchUp, answering whether the user's index holds nothing of
// the previous format (Progress.Migrated). Until it does, the catch-up
// converts the chats indexed in that format, with what is left of its
// budget once the changed chats are indexed: an index written before
// impact ordering keeps answering (a search reads both formats) while it
// is rebuilt, and nothing is migrated by hand.
func (x *Indexer) catchUp(ctx context.Context, userID string) (bool, error) {
	const op = "search.CatchUp"
	prog, err := x.index.Progress(ctx, userID)
	if err != nil {
		return false, errs.Wrap(op, err)
	}
	changed, err := x.index.ChatsChangedAfter(ctx, userID, prog.Seen, CatchUpChats)
	if err != nil {
		return false, errs.Wrap(op, err)
	}
	next := Progress{Seen: prog.Seen, Version: prog.Version + 1, Migrated: prog.Migrated}
	budget := CatchUpPostings
	states := map[string]chatState{}
	index := func(id string) (chatState, error) {
		if st, ok := states[id]; ok {
			return st, nil
		}
		st, n, err := x.indexChat(ctx, userID, id, budget)
		budget -= n
		states[id] = st
		return st, err
	}
	for _, id := range prog.Pending {
		st, err := index(id)
		if err != nil {
			return false, errs.Wrap(op, err)
		}
		if st != chatDone {
			next.Pending = append(next.Pending, id)
		}
	}
	settled := x.now().Add(-Settle)
	frozen := false
	for _, c := range changed {
		if budget <= 0 {
			break
		}
		st, err := index(c.ChatID)
		if err != nil {
			return false, errs.Wrap(op, err)
		}
		switch {
		case st == chatIncomplete || c.UpdatedAt.After(settled):
			frozen = true
		case st == chatPending && !slices.Contains(next.Pending, c.ChatID):
			if len(next.Pending) < MaxPending {
				next.Pending = append(next.Pending, c.ChatID)
			} else {
				frozen = true
			}
		}
		if !frozen {
			next.Seen = c.Position
		}
	}
	if !prog.Migrated && budget > 0 {
		ids, err := x.index.UnconvertedChats(ctx, userID, CatchUpChats)
		if err != nil {
			return false, errs.Wrap(op, err)
		}
		// The index is migrated once every chat the look found (all
		// there are) is done: a chat done is FormatImpact.
		next.Migrated = len(ids) < CatchUpChats
		for _, id := range ids {
			st := chatIncomplete
			if budget > 0 {
				if st, err = index(id); err != nil {
					return false, errs.Wrap(op, err)
				}
			}
			next.Migrated = next.Migrated && st == chatDone
		}
	}
	if next.Seen == prog.Seen && slices.Equal(next.Pending, prog.Pending) && next.Migrated == prog.Migrated {
		return prog.Migrated, nil
	}
	err = x.index.SetProgress(ctx, userID, prog, next)
	if errs.CodeOf(err) == codeIndexChanged {
		return prog.Migrated, nil // another search caught up meanwhile
	}
	if err != nil {
		return false, errs.Wrap(op, err)
	}
	return next.Migrated, nil
}
