package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/workflowchat/service/infra/cost/costmodel"
	"github.com/workflowchat/service/shared/store"
)

// The kinds of unit MeasureIndex measures: the search index's share of a
// stored message, for the messages of each reply length's exchanges (the
// user's message and the reply).
const (
	KindIndexShort = "index of a short exchange"
	KindIndexLong  = "index of a long exchange"
)

// IndexQuery is the word MeasureIndex searches for: one of every reply's
// words (ReplyText), so that the search answers hits.
const IndexQuery = "reply"

// MeasureIndex measures, in process, the DynamoDB capacity the search
// index adds to a stored message: for each reply length, w.Samples'
// exchanges are stored (a user message and the stand-in model's reply,
// streamed as the workload streams them), then one search catches the
// index up with them (the index is written on read: the next search
// indexes what was stored since the last). It returns, per kind, that
// search's capacity divided by the messages it indexed: its write units
// are the index's alone (the postings, one per distinct word of a
// message, the message's DOC item and the commit of the totals and the
// chat's progress); its reads include the query's own (the session, the
// postings read, the page's messages). The model answers at once: the
// index's cost does not depend on its pace. It fails as MeasureCapacity
// does, and when the search finds nothing.
func MeasureIndex(ctx context.Context, w Workload) (map[string]costmodel.DynamoDB, error) {
	w.Pace = Pace{TokensPerSecond: 1e6}
	model := StartModel(w)
	defer model.Close()
	// The search's rate limit (one write a search) is the request's, not
	// the index's: off.
	env := Env(model.URL)
	env["RATE_LIMIT_SEARCH"] = "0"
	p, err := NewInProcess(ctx, env)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	rec := &capacityRecorder{meter: p.meter, sums: map[string]store.Capacity{}, byKind: map[string]map[string]store.Capacity{}, units: map[string]int{}}
	c, err := signUp(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	// The first search starts the user's index: its progress and totals
	// are written once per user, not per message.
	if _, err := c.search(ctx); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	for _, k := range []struct {
		kind, model  string
		tokens, runs int
	}{{KindIndexShort, ShortModel, w.Short, w.Samples.Short}, {KindIndexLong, LongModel, w.Long, w.Samples.Long}} {
		chat, err := c.id(ctx, "chats", "POST", "/api/chats", map[string]any{"title": k.kind}, http.StatusCreated)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.kind, err)
		}
		for range k.runs {
			if err := c.reply(ctx, chat, k.model, k.tokens); err != nil {
				return nil, fmt.Errorf("%s: %w", k.kind, err)
			}
		}
		rec.Begin(k.kind)
		hits, err := c.search(ctx)
		rec.End(k.kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.kind, err)
		}
		if hits == 0 {
			return nil, fmt.Errorf("%s: the search after %d exchanges found nothing", k.kind, k.runs)
		}
		// Averages per message: two a run.
		rec.units[k.kind] = 2 * k.runs
	}
	return rec.averages()
}

// search searches the user's chats for IndexQuery and returns how many
// chats it found.
func (c *client) search(ctx context.Context) (int, error) {
	resp, err := c.do(ctx, "chats", "GET", "/api/users/"+c.userID+"/chats/search?q="+url.QueryEscape(IndexQuery), nil, http.StatusOK)
	if err != nil {
		return 0, err
	}
	var out struct {
		Data struct {
			Results []json.RawMessage `json:"results"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return 0, fmt.Errorf("search: %w", err)
	}
	return len(out.Data.Results), nil
}
