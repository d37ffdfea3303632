package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/infra/latency"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/search"
	"github.com/workflowchat/service/shared/store"
)

// searchCorpus is the benchmark's user data: chats of messages of words
// drawn from a Zipf distribution over a vocabulary (as words are in
// text), with a few planted ones.
const (
	searchChats        = 500
	searchChatMessages = 20 // 10,000 messages in all
	searchMessageWords = 12
	searchVocabulary   = 5000
)

// searchWords returns a message of n words from rng: v<rank> by Zipf, and
// extra.
func searchWords(rng *rand.Rand, zipf *rand.Zipf, n int, extra ...string) string {
	words := make([]string, 0, n+len(extra))
	for range n {
		words = append(words, fmt.Sprintf("v%d", zipf.Uint64()))
	}
	return strings.Join(append(words, extra...), " ")
}

// BenchmarkSearch10000 measures GET /api/users/{id}/chats/search in
// process (the dev server's stack, the embedded DynamoDB over loopback
// HTTP) over a user's 10,000 messages in 500 chats, indexed before the
// timing: a rare word (in one message), a word in 1% of the messages, the
// most common word (in about half) and three words. Each query is asked
// once before its timing: the first search of a word in more messages
// than a search reads (search.TopPostings) counts its postings and records
// the count, which count_most_common_word measures alone. Floor:
// GET /api/users/{id}/chats?limit=20 on the same store, the cheapest
// authenticated list. index_a_message stores one more 12-word message and
// has the next search index it (`ddbwriteunits/op` is the index's write
// cost per message beside store_a_message's, the message alone).
func BenchmarkSearch10000(b *testing.B) {
	f := newFixture(b, "RATE_LIMIT_SEARCH", "1000000/m")
	ctx := context.Background()
	chats := store.NewChats(f.stack.DB, "data")
	index := store.NewSearchIndex(f.stack.DB, "data")
	indexer := search.NewIndexer(index, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 2, searchVocabulary-1)
	// Older than search.Settle, so that the catch-up's progress moves
	// past every chat.
	at := time.Now().UTC().Add(-time.Hour)
	var last chat.Chat
	var chatIDs []string
	for i := range searchChats {
		c := chat.Chat{ID: uuid.NewString(), UserID: f.userID, Title: fmt.Sprint("chat ", i), CreatedAt: at, UpdatedAt: at}
		if err := chats.CreateChat(ctx, c); err != nil {
			b.Fatal(err)
		}
		msgs := make([]chat.Message, searchChatMessages)
		for j := range msgs {
			at = at.Add(time.Millisecond)
			var extra []string
			if n := i*searchChatMessages + j; n == 4321 {
				extra = append(extra, "needle")
			} else if n%100 == 7 {
				extra = append(extra, "onepercent")
			}
			msgs[j] = chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: []string{"user", "assistant"}[j%2],
				Content: searchWords(rng, zipf, searchMessageWords, extra...), Status: chat.StatusCompleted, CreatedAt: at}
		}
		if err := chats.AddMessages(ctx, c, msgs...); err != nil {
			b.Fatal(err)
		}
		last = c
		chatIDs = append(chatIDs, c.ID)
	}
	// The index, built as the catch-up builds it (Add per chat), by four
	// workers: the machine is shared, and the setup is not measured.
	var wg sync.WaitGroup
	work := make(chan string)
	for range 4 {
		wg.Go(func() {
			for id := range work {
				msgs, err := index.MessagesAfter(ctx, id, "", searchChatMessages)
				if err != nil {
					b.Error(err)
					continue
				}
				docs := make([]search.Doc, len(msgs))
				for i, m := range msgs {
					docs[i] = search.Doc{ChatID: id, MessageID: m.ID, Key: m.Key, Analysis: search.Analyze(m.Content)}
				}
				for try := 0; ; try++ {
					err = index.Add(ctx, f.userID, id, docs, search.ChatProgress{}, search.ChatProgress{Through: msgs[len(msgs)-1].Key, Exists: true, Format: search.FormatImpact})
					if errs.KindOf(err) != errs.Unavailable || try == 5 {
						break
					}
				}
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, id := range chatIDs {
		work <- id
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	// The fixture's own chat (created now, empty) is the last changed:
	// the progress moves past it too, so that no search looks at it again
	// (whether 30 s have passed since, search.Settle, would change the
	// searches' calls).
	changed, err := index.ChatsChangedAfter(ctx, f.userID, "", searchChats+1)
	if err != nil || len(changed) != searchChats+1 {
		b.Fatalf("%d chats changed, %v", len(changed), err)
	}
	if err := index.SetProgress(ctx, f.userID, search.Progress{}, search.Progress{Seen: changed[len(changed)-1].Position, Version: 1, Migrated: true}); err != nil {
		b.Fatal(err)
	}
	if st, err := index.Stats(ctx, f.userID); err != nil || st.Docs != searchChats*searchChatMessages {
		b.Fatalf("stats %+v %v", st, err)
	}
	get := func(b *testing.B, path string, check func(body string) bool) {
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request("GET", path, ""))
		if rec.Code != 200 || !check(rec.Body.String()) {
			b.Fatalf("GET %s: %d %.300s", path, rec.Code, rec.Body)
		}
		f.counter.Reset()
		f.meter.Reset()
		var d []time.Duration
		b.ReportAllocs()
		cpu0 := processCPU()
		for b.Loop() {
			start := time.Now()
			rec := httptest.NewRecorder()
			f.stack.API.ServeHTTP(rec, f.request("GET", path, ""))
			d = append(d, time.Since(start))
			if rec.Code != 200 || !check(rec.Body.String()) {
				b.Fatalf("GET %s: %d %.300s", path, rec.Code, rec.Body)
			}
		}
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		latency.Report(b, d)
		b.ReportMetric(float64(f.counter.Count())/float64(b.N), "ddbcalls/op")
		b.ReportMetric(f.meter.Snapshot().ReadUnits/float64(b.N), "ddbreadunits/op")
	}
	b.Run("list_chats_(floor)", func(b *testing.B) {
		get(b, "/api/users/"+f.userID+"/chats?limit=20", func(body string) bool { return strings.Count(body, `"userId"`) == 20 })
	})
	for _, q := range []struct{ name, q string }{
		{"rare_word", "needle"}, {"word_in_1%", "onepercent"}, {"most_common_word", "v1"}, {"three_words", "v1 v40 onepercent"},
	} {
		b.Run("search_"+q.name, func(b *testing.B) {
			get(b, "/api/users/"+f.userID+"/chats/search?q="+url.QueryEscape(q.q), func(body string) bool {
				// The JSON encoder writes < and > as \u003c and \u003e.
				var page struct {
					Data search.Page `json:"data"`
				}
				return json.Unmarshal([]byte(body), &page) == nil && len(page.Data.Results) > 0 && strings.Contains(page.Data.Results[0].Snippet, "<mark>")
			})
		})
	}

	b.Run("count_most_common_word", func(b *testing.B) {
		f.counter.Reset()
		f.meter.Reset()
		for b.Loop() {
			if _, err := index.CountPostings(ctx, f.userID, "v1", searchChats*searchChatMessages); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(f.counter.Count())/float64(b.N), "ddbcalls/op")
		b.ReportMetric(f.meter.Snapshot().ReadUnits/float64(b.N), "ddbreadunits/op")
		b.ReportMetric(f.meter.Snapshot().WriteUnits/float64(b.N), "ddbwriteunits/op")
	})

	// One more message, alone and then indexed by the next search.
	store1 := func(b *testing.B, n int) chat.Message {
		// Now, not an hour ago: a chat takes its place in the user's list
		// from its last message, and the index's progress is past the
		// fixture's chat, made now.
		at = at.Add(time.Millisecond)
		if now := time.Now().UTC(); now.After(at) {
			at = now
		}
		m := chat.Message{ID: uuid.NewString(), ChatID: last.ID, Role: "user", Content: searchWords(rng, zipf, searchMessageWords, fmt.Sprint("fresh", n)),
			Status: chat.StatusCompleted, CreatedAt: at}
		if err := chats.AddMessages(ctx, last, m); err != nil {
			b.Fatal(err)
		}
		return m
	}
	b.Run("store_a_message", func(b *testing.B) {
		f.counter.Reset()
		f.meter.Reset()
		n := 0
		for b.Loop() {
			n++
			store1(b, n)
		}
		b.ReportMetric(float64(f.counter.Count())/float64(b.N), "ddbcalls/op")
		b.ReportMetric(f.meter.Snapshot().WriteUnits/float64(b.N), "ddbwriteunits/op")
	})
	b.Run("index_a_message", func(b *testing.B) {
		// What store_a_message left is indexed first.
		if err := indexer.CatchUp(ctx, f.userID); err != nil {
			b.Fatal(err)
		}
		var calls int64
		var units float64
		n := 0
		for b.Loop() {
			n++
			b.StopTimer()
			store1(b, 1_000_000+n)
			f.counter.Reset()
			f.meter.Reset()
			b.StartTimer()
			if err := indexer.CatchUp(ctx, f.userID); err != nil {
				b.Fatal(err)
			}
			calls += f.counter.Count()
			units += f.meter.Snapshot().WriteUnits
		}
		b.ReportMetric(float64(calls)/float64(b.N), "ddbcalls/op")
		b.ReportMetric(units/float64(b.N), "ddbwriteunits/op")
	})
}
