package search

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/ratelimit"
)

// The bounds of a query: q is 2 to 200 characters (Unicode code points,
// surrounding spaces not counted).
const (
	MinQuery = 2
	MaxQuery = 200
)

// TopPostings is how many postings of a query word a search reads: its
// best ones (by Impact; the index keeps them in that order). A word in
// more of the user's messages is ranked over those (its count, for its
// idf, is recorded by the index: see countStale), so a common word costs
// a bounded read. MaxPostingsPerTerm bounds the postings read of a word
// in the previous format (in message order, read whole while an index
// written before is converted).
const (
	TopPostings        = 1000
	MaxPostingsPerTerm = 20000
)

// countStale reports whether a word's count recorded when the index held
// at messages is too old to weigh the word by now that it holds docs:
// when the index grew or shrank by more than a tenth since. The count
// moves the word's idf only, which moves little for a word that common.
func countStale(at, docs int64) bool {
	d := docs - at
	return at <= 0 || 10*max(d, -d) > at
}

// Result is one chat of a search's answer: its best matching message and a
// snippet of it with the matching words marked.
type Result struct {
	ChatID    string `json:"chatId"`
	Title     string `json:"title"`
	MessageID string `json:"messageId"`
	// Snippet is HTML-escaped text with each matching word wrapped in
	// <mark>...</mark>.
	Snippet string `json:"snippet"`
}

// Page is a page of results.
type Page struct {
	Results    []Result `json:"results"`
	NextCursor string   `json:"nextCursor,omitempty"`
}

// Service answers searches over the users' chats.
type Service struct {
	index   Index
	indexer *Indexer
}

// NewService returns a Service over index on the clock now (nil:
// time.Now), catching the index up before each search.
func NewService(index Index, now func() time.Time) *Service {
	return &Service{index: index, indexer: NewIndexer(index, now)}
}

// Indexer returns the indexer of the service's index (for Watch).
func (s *Service) Indexer() *Indexer { return s.indexer }

// Search returns a page of userID's chats whose messages match q, best
// first (BM25 over the folded words of q). Forbidden unless userID is the
// signed-in user; Invalid INVALID_QUERY for a q of fewer than MinQuery or
// more than MaxQuery characters, INVALID_PAGINATION for a cursor this
// search did not give; storage errors.
func (s *Service) Search(ctx context.Context, userID, q string, page paging.Cursor) (Page, error) {
	const op = "search.Search"
	if err := auth.Authorize(ctx, op, userID); err != nil {
		return Page{}, err
	}
	q = strings.TrimSpace(q)
	if n := utf8.RuneCountInString(q); n < MinQuery || n > MaxQuery {
		e := errs.E(op, errs.Invalid, "INVALID_QUERY", "q must be 2 to 200 characters")
		e.Details = []errs.FieldError{{Field: "q", Message: "must be 2 to 200 characters"}}
		return Page{}, e
	}
	offset, err := decodeCursor(page.After)
	if err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	limit := page.Limit
	if limit <= 0 {
		limit = paging.DefaultLimit
	}
	migrated, err := s.indexer.catchUp(ctx, userID)
	if err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	terms := QueryTerms(q)
	if len(terms) == 0 {
		return Page{Results: []Result{}}, nil
	}
	var stats Stats
	read := make([]Postings, len(terms))
	previous := make([][]Posting, len(terms))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		stats, err = s.index.Stats(gctx, userID)
		return err
	})
	for i, t := range terms {
		g.Go(func() (err error) {
			read[i], err = s.index.Postings(gctx, userID, t, TopPostings)
			return err
		})
		if !migrated {
			g.Go(func() (err error) {
				previous[i], err = s.index.PreviousPostings(gctx, userID, t, MaxPostingsPerTerm)
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	lists := make([]termList, len(terms))
	g, gctx = errgroup.WithContext(ctx)
	for i, t := range terms {
		r := read[i]
		lists[i] = termList{postings: r.List, df: int64(len(r.List))}
		if r.More {
			lists[i].df = r.Count
			if countStale(r.CountedAt, stats.Docs) {
				g.Go(func() (err error) {
					lists[i].df, err = s.index.CountPostings(gctx, userID, t, stats.Docs)
					return err
				})
			}
		}
	}
	if err := g.Wait(); err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	for i := range lists {
		lists[i] = withPrevious(lists[i], previous[i])
	}
	ranked := rank(stats, lists)
	out := Page{Results: []Result{}}
	if offset >= len(ranked) {
		return out, nil
	}
	end := min(offset+limit, len(ranked))
	hits := make([]Hit, 0, end-offset)
	for _, r := range ranked[offset:end] {
		hits = append(hits, r.Hit)
	}
	found, err := s.index.Find(ctx, hits)
	if err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	for _, h := range hits {
		c, ok := found.Chats[h.ChatID]
		content, mok := found.Messages[h.MessageID]
		// A chat deleted since (its postings going with it) or another
		// user's (never: postings are per user) is left out.
		if !ok || !mok || c.UserID != userID {
			continue
		}
		out.Results = append(out.Results, Result{ChatID: h.ChatID, Title: c.Title, MessageID: h.MessageID, Snippet: Snippet(content, terms)})
	}
	if end < len(ranked) && end < paging.MaxOffset {
		out.NextCursor = encodeCursor(end)
	}
	return out, nil
}

// withPrevious adds to l the postings of the previous format not already
// in it (a chat converted while the search read both holds a message in
// each format for a moment).
func withPrevious(l termList, previous []Posting) termList {
	if len(previous) == 0 {
		return l
	}
	seen := make(map[string]bool, len(l.postings))
	for _, p := range l.postings {
		seen[p.MessageID] = true
	}
	for _, p := range previous {
		if !seen[p.MessageID] {
			seen[p.MessageID] = true
			l.postings = append(l.postings, p)
			l.df++
		}
	}
	return l
}

// A cursor is the offset of the page's first result in the ranking,
// base64url-encoded after a prefix that tells it from other lists' cursors.
const cursorPrefix = "s1:"

func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(offset)))
}

func decodeCursor(c string) (int, error) {
	if c == "" {
		return 0, nil
	}
	bad := errs.Fields("search.decodeCursor", errs.FieldError{Field: "cursor", Message: "is not a cursor of this search"})
	bad.Code = "INVALID_PAGINATION"
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, bad
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), cursorPrefix))
	if err != nil || n <= 0 || n > paging.MaxOffset {
		return 0, bad
	}
	return n, nil
}

// Limits are the search route's per-user rate limit; the zero value limits
// nothing.
type Limits struct {
	Limiter *ratelimit.Limiter
	Search  ratelimit.Rule
}

// Routes returns the search route (ChatsFunction): GET
// /api/users/{userId}/chats/search?q=...&limit=&cursor=, behind a session,
// the path's user checked (400 INVALID_ID, 403 FORBIDDEN) and then the
// Search rule of l.
func Routes(s *Service, authn *auth.Service, l Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("GET /api/users/{userId}/chats/search", authn.Require(auth.SelfPath(l.Limiter.Limit(l.Search)(handleSearch(s)))))
	return r
}

func handleSearch(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Page, error) {
		page, err := httpapi.ParseCursorPage(r)
		if err != nil {
			return Page{}, err
		}
		return s.Search(r.Context(), r.PathValue("userId"), r.URL.Query().Get("q"), page)
	})
}
