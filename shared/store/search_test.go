package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/account"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/search"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// searchFixture is the chats store watched by the search index, on fresh
// tables.
type searchFixture struct {
	db    *storetest.DB
	raw   *store.Chats
	chats chat.Store
	index *store.SearchIndex
	svc   *search.Service
	at    time.Time
}

func newSearchFixture(t *testing.T) *searchFixture {
	t.Helper()
	db := storetest.New(t)
	raw := store.NewChats(db.DB, db.Data())
	index := store.NewSearchIndex(db.DB, db.Data())
	svc := search.NewService(index, nil)
	return &searchFixture{db: db, raw: raw, chats: search.Watch(raw, svc.Indexer()), index: index, svc: svc,
		at: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
}

// chat creates a chat of user titled title holding contents as messages
// (user and assistant in turn), stored through s (watched or not).
func (f *searchFixture) chat(t *testing.T, s chat.Store, user, title string, contents ...string) (chat.Chat, []chat.Message) {
	t.Helper()
	ctx := context.Background()
	f.at = f.at.Add(time.Minute)
	c := chat.Chat{ID: uuid.NewString(), UserID: user, Title: title, CreatedAt: f.at, UpdatedAt: f.at}
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	var msgs []chat.Message
	for i, content := range contents {
		f.at = f.at.Add(time.Second)
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		m := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: role, Content: content, Status: chat.StatusCompleted, CreatedAt: f.at}
		if err := s.AddMessages(ctx, c, m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	return c, msgs
}

func (f *searchFixture) search(t *testing.T, user, q string, page paging.Cursor) (search.Page, error) {
	t.Helper()
	return f.svc.Search(auth.ActingFor(context.Background(), user), user, q, page)
}

func ids(p search.Page) []string {
	var out []string
	for _, r := range p.Results {
		out = append(out, r.ChatID)
	}
	return out
}

func TestSearchRanksFoldsAndMarks(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	u1, u2 := uuid.NewString(), uuid.NewString()
	once, _ := f.chat(t, f.chats, u1, "dessert", "how do I make a crème brûlée at home with a long list of other words around it")
	often, msgs := f.chat(t, f.chats, u1, "recipes", "unrelated words", "Crème, CREME and creme: three times cream in French")
	both, _ := f.chat(t, f.chats, u1, "paris", "creme and Paris")
	f.chat(t, f.chats, u1, "nothing", "the weather today")
	f.chat(t, f.chats, u2, "another user's", "crème crème crème crème")

	p, err := f.search(t, u1, "CRÈME", paging.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	// Three occurrences in a short message, then one in a shorter message,
	// then one in a long message; never another user's.
	if got, want := ids(p), []string{often.ID, both.ID, once.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	r := p.Results[0]
	if r.Title != "recipes" || r.MessageID != msgs[1].ID || r.Snippet != "<mark>Crème</mark>, <mark>CREME</mark> and <mark>creme</mark>: three times cream in French" {
		t.Errorf("first result %+v", r)
	}
	if p.NextCursor != "" {
		t.Errorf("one page: nextCursor %q", p.NextCursor)
	}

	// Two words: the chat with both ranks first.
	p, err = f.search(t, u1, "paris creme", paging.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(p); len(got) != 3 || got[0] != both.ID {
		t.Errorf("paris creme: %v, want %s first", got, both.ID)
	}

	// No match, and a query of stop words only: no results, not an error.
	for _, q := range []string{"zebra", "the and"} {
		p, err = f.search(t, u1, q, paging.Cursor{})
		if err != nil || len(p.Results) != 0 || p.Results == nil {
			t.Errorf("%q: %v %v", q, p, err)
		}
	}

	// Another user's path is refused.
	_, err = f.svc.Search(auth.ActingFor(context.Background(), u2), u1, "creme", paging.Cursor{})
	if errs.KindOf(err) != errs.Forbidden {
		t.Errorf("another user's search: %v", err)
	}
}

func TestSearchQueryBounds(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	u := uuid.NewString()
	f.chat(t, f.chats, u, "t", "ab "+strings.Repeat("é", 200))
	tests := []struct {
		q    string
		want string // error code, "" for none
		hits int
	}{
		{"a", "INVALID_QUERY", 0},
		{"", "INVALID_QUERY", 0},
		{"   a   ", "INVALID_QUERY", 0},
		{"ab", "", 1},
		{strings.Repeat("é", 200), "", 0}, // 200 characters (400 bytes), one word too long to index
		{strings.Repeat("é", 201), "INVALID_QUERY", 0},
		{strings.Repeat("x", 100000), "INVALID_QUERY", 0},
		{strings.Repeat("ab ", 66) + "ab", "", 1}, // 200 characters, one word
	}
	for _, tt := range tests {
		p, err := f.search(t, u, tt.q, paging.Cursor{})
		code := ""
		if err != nil {
			code = errs.CodeOf(err)
		}
		if code != tt.want || tt.want == "" && len(p.Results) != tt.hits {
			t.Errorf("q of %d characters: %v (code %q), %d results; want code %q, %d results",
				len([]rune(tt.q)), err, code, len(p.Results), tt.want, tt.hits)
		}
		if tt.want != "" && errs.KindOf(err) != errs.Invalid {
			t.Errorf("q of %d characters: kind %v, want Invalid", len([]rune(tt.q)), errs.KindOf(err))
		}
	}
}

func TestSearchPages(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	u := uuid.NewString()
	want := map[string]bool{}
	for i := range 25 {
		c, _ := f.chat(t, f.chats, u, fmt.Sprint(i), "needle "+strings.Repeat("hay ", i))
		want[c.ID] = true
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more pages than 25 results in tens make")
		}
		p, err := f.search(t, u, "needle", paging.Cursor{Limit: 10, After: cursor})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(p)...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(got) != 25 {
		t.Fatalf("%d results over the pages, want 25", len(got))
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("result %s twice or unknown", id)
		}
		delete(want, id)
	}
	for _, bad := range []string{"nope", "czE6MA", "czE6LTE", "czE6MTAwMDE", "eHg6MTA"} { // not base64, 0, -1, 10001, another prefix
		if _, err := f.search(t, u, "needle", paging.Cursor{Limit: 10, After: bad}); errs.CodeOf(err) != "INVALID_PAGINATION" {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
}

// scanKeys returns the PK#SK of every item of the Data table whose PK
// starts with one of prefixes.
func scanKeys(t *testing.T, db *storetest.DB, prefixes ...string) []string {
	t.Helper()
	var out []string
	p := dynamodb.NewScanPaginator(db.Client(), &dynamodb.ScanInput{TableName: aws.String(db.Data())})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			pk := it["PK"].(*types.AttributeValueMemberS).Value
			for _, pre := range prefixes {
				if strings.HasPrefix(pk, pre) {
					out = append(out, pk+" "+it["SK"].(*types.AttributeValueMemberS).Value)
				}
			}
		}
	}
	return out
}

func TestSearchHugeMessages(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	u := uuid.NewString()
	// 100 KB of one paragraph repeated, and 10,000 distinct words.
	big := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 1800)[:100_000]
	var b strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&b, "word%d ", i)
	}
	bigChat, _ := f.chat(t, f.chats, u, "big", big)
	wideChat, _ := f.chat(t, f.chats, u, "wide", b.String())

	p, err := f.search(t, u, "consectetur", paging.Cursor{})
	if err != nil || fmt.Sprint(ids(p)) != fmt.Sprint([]string{bigChat.ID}) {
		t.Fatalf("consectetur: %v %v", ids(p), err)
	}
	if s := p.Results[0].Snippet; !strings.Contains(s, "<mark>consectetur</mark>") || len([]rune(s)) > 260 {
		t.Errorf("snippet of a 100 KB message: %d characters: %q", len([]rune(s)), s)
	}
	// The wide message keeps its first MaxTermsPerMessage words (all
	// occur once).
	p, err = f.search(t, u, "word0 word10", paging.Cursor{})
	if err != nil || fmt.Sprint(ids(p)) != fmt.Sprint([]string{wideChat.ID}) {
		t.Fatalf("word0: %v %v", ids(p), err)
	}
	p, err = f.search(t, u, "word9999", paging.Cursor{})
	if err != nil || len(p.Results) != 0 {
		t.Errorf("a word past the bound: %v %v", ids(p), err)
	}
	postings := scanKeys(t, f.db, "TERM#"+u+"#")
	if want := 8 + search.MaxTermsPerMessage; len(postings) != want { // lorem ipsum dolor sit amet consectetur adipiscing elit
		t.Errorf("%d postings, want %d", len(postings), want)
	}
	st, err := f.index.Stats(context.Background(), u)
	if err != nil || st.Docs != 2 || st.Length != 10000+int64(search.Analyze(big).Length) {
		t.Errorf("stats %+v %v", st, err)
	}
}

func TestSearchDeletedChatLeavesTheIndex(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	ctx := context.Background()
	u := uuid.NewString()
	gone, _ := f.chat(t, f.chats, u, "gone", "shared word alpha", "alpha again")
	kept, _ := f.chat(t, f.chats, u, "kept", "shared word beta")
	if p, err := f.search(t, u, "shared", paging.Cursor{}); err != nil || len(p.Results) != 2 {
		t.Fatalf("before the delete: %v %v", ids(p), err)
	}
	if err := f.chats.DeleteChat(ctx, gone.ID, u, nil); err != nil {
		t.Fatal(err)
	}
	p, err := f.search(t, u, "shared alpha", paging.Cursor{})
	if err != nil || fmt.Sprint(ids(p)) != fmt.Sprint([]string{kept.ID}) {
		t.Fatalf("after the delete: %v %v", ids(p), err)
	}
	if left := scanKeys(t, f.db, "TERM#"+u+"#alpha", "SEARCH#"+u); strings.Contains(fmt.Sprint(left), gone.ID) || strings.Contains(fmt.Sprint(left), "alpha") {
		t.Errorf("the deleted chat's index items remain: %v", left)
	}
	st, err := f.index.Stats(ctx, u)
	if err != nil || st.Docs != 1 || st.Length != 3 {
		t.Errorf("stats after the delete %+v %v, want 1 message of 3 words", st, err)
	}
	// Removing again (a retried delete) changes nothing.
	if err := f.index.RemoveChat(ctx, u, gone.ID); err != nil {
		t.Fatal(err)
	}
	if st2, _ := f.index.Stats(ctx, u); st2 != st {
		t.Errorf("a second removal moved the stats: %+v", st2)
	}
}

// TestSearchCatchesUp: messages stored with no indexing at all (the eager
// indexing lost) are found by the next search; a reply still streaming is
// indexed once it ends.
func TestSearchCatchesUp(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	ctx := context.Background()
	u := uuid.NewString()
	c, _ := f.chat(t, f.raw, u, "unwatched", "kiwi first")
	p, err := f.search(t, u, "kiwi", paging.Cursor{})
	if err != nil || fmt.Sprint(ids(p)) != fmt.Sprint([]string{c.ID}) {
		t.Fatalf("unindexed message: %v %v", ids(p), err)
	}

	// A streamed exchange: the user's message at once, the reply when it
	// ends.
	f.at = f.at.Add(time.Minute)
	user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "mango question", Status: chat.StatusCompleted, CreatedAt: f.at}
	reply := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "assistant", Status: chat.StatusStreaming, CreatedAt: f.at.Add(time.Millisecond)}
	g := chat.Generation{ID: reply.ID, Now: f.at, Until: f.at.Add(time.Minute), Lease: job.Lease{Until: time.Now().Add(time.Minute), Reserved: 201}}
	if err := f.raw.StartLoggedGeneration(ctx, c, g, records(1, 1), user, reply); err != nil {
		t.Fatal(err)
	}
	if p, err := f.search(t, u, "mango", paging.Cursor{}); err != nil || len(p.Results) != 1 || p.Results[0].MessageID != user.ID {
		t.Fatalf("the user's message while the reply streams: %+v %v", p, err)
	}
	reply.Content, reply.Status = "papaya answer", chat.StatusCompleted
	if err := f.raw.EndLoggedGeneration(ctx, c, reply, records(2, 2), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if p, err := f.search(t, u, "papaya", paging.Cursor{}); err != nil || len(p.Results) != 1 || p.Results[0].MessageID != reply.ID {
		t.Fatalf("the reply once ended: %+v %v", p, err)
	}
	st, err := f.index.Stats(ctx, u)
	if err != nil || st.Docs != 3 {
		t.Errorf("stats %+v %v, want 3 messages", st, err)
	}
}

// TestSearchConcurrentIndexers: searches and eager indexing of the same
// user at once, over many users, count each message once and never show
// another user's chats.
func TestSearchConcurrentIndexers(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	const users, chats, workers = 4, 6, 5
	type userChats struct {
		id    string
		chats map[string]bool
	}
	all := make([]userChats, users)
	for i := range all {
		all[i] = userChats{id: uuid.NewString(), chats: map[string]bool{}}
		for j := range chats {
			c, _ := f.chat(t, f.raw, all[i].id, "c", fmt.Sprintf("common words of chat %d", j), "common reply")
			all[i].chats[c.ID] = true
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, users*workers)
	for _, u := range all {
		for range workers {
			wg.Go(func() {
				p, err := f.search(t, u.id, "common", paging.Cursor{Limit: 100})
				if err != nil {
					errc <- err
					return
				}
				for _, id := range ids(p) {
					if !u.chats[id] {
						errc <- fmt.Errorf("user %s got chat %s", u.id, id)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	for _, u := range all {
		p, err := f.search(t, u.id, "common", paging.Cursor{Limit: 100})
		if err != nil || len(p.Results) != chats {
			t.Errorf("user %s: %d results %v", u.id, len(p.Results), err)
		}
		st, err := f.index.Stats(context.Background(), u.id)
		if err != nil || st.Docs != 2*chats {
			t.Errorf("user %s: stats %+v %v, want %d messages counted once", u.id, st, err, 2*chats)
		}
	}
}

// TestSearchCatchUpIsBounded: a backlog larger than one search's budget
// of postings is indexed over the following searches, nothing skipped.
func TestSearchCatchUpIsBounded(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	u := uuid.NewString()
	const msgs, words = 30, 300 // 9,000 postings
	contents := make([]string, msgs)
	for i := range contents {
		var b strings.Builder
		for j := range words {
			fmt.Fprintf(&b, "m%dw%d ", i, j)
		}
		contents[i] = b.String()
	}
	c, stored := f.chat(t, f.raw, u, "backlog", contents...)
	last := fmt.Sprintf("m%dw0", msgs-1)
	p, err := f.search(t, u, last, paging.Cursor{})
	if err != nil || len(p.Results) != 0 {
		t.Fatalf("first search: %v %v, want nothing yet", ids(p), err)
	}
	st, _ := f.index.Stats(context.Background(), u)
	if st.Docs == 0 || st.Docs*words > search.CatchUpPostings {
		t.Errorf("after one search: %d messages indexed, want some within %d postings", st.Docs, search.CatchUpPostings)
	}
	p, err = f.search(t, u, last, paging.Cursor{})
	if err != nil || fmt.Sprint(ids(p)) != fmt.Sprint([]string{c.ID}) || p.Results[0].MessageID != stored[msgs-1].ID {
		t.Fatalf("second search: %v %v", ids(p), err)
	}
	if st, _ := f.index.Stats(context.Background(), u); st.Docs != msgs {
		t.Errorf("after two searches: %d messages indexed, want %d", st.Docs, msgs)
	}
}

// TestSearchReadsTheBestPostings: a word in more messages than a search
// reads (search.TopPostings) ranks its chats by their best messages from
// the postings read first, and its count (for its idf) is recorded in its
// partition, taken again once the index grew by more than a tenth.
func TestSearchReadsTheBestPostings(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	ctx := context.Background()
	u := uuid.NewString()
	// chat i's messages hold "common" once among i+1 to i+100 words: its
	// best message is its shortest, so the chats rank in order.
	const chats, perChat = 11, 100
	var want []string
	storeMsgs := func(c chat.Chat, from, n int) {
		msgs := make([]chat.Message, n)
		for j := range msgs {
			f.at = f.at.Add(time.Millisecond)
			msgs[j] = chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Status: chat.StatusCompleted, CreatedAt: f.at,
				Content: "common" + strings.Repeat(" filler", from+j)}
		}
		for len(msgs) > 0 {
			k := min(len(msgs), 25)
			if err := f.raw.AddMessages(ctx, c, msgs[:k]...); err != nil {
				t.Fatal(err)
			}
			msgs = msgs[k:]
		}
	}
	var all []chat.Chat
	for i := range chats {
		c, _ := f.chat(t, f.raw, u, fmt.Sprint("chat ", i), fmt.Sprint("title of ", i))
		storeMsgs(c, i, perChat)
		want = append(want, c.ID)
		all = append(all, c)
	}
	if chats*perChat <= search.TopPostings {
		t.Fatal("the test needs more messages than a search reads")
	}
	p, err := f.search(t, u, "common", paging.Cursor{Limit: 100})
	if err != nil || fmt.Sprint(ids(p)) != fmt.Sprint(want) {
		t.Fatalf("common: %v %v, want %v", ids(p), err, want)
	}
	if s := p.Results[0].Snippet; s != "<mark>common</mark>" {
		t.Errorf("snippet %q", s)
	}
	// Half the messages: "filler" is in every message but the shortest
	// of chat 0, so its postings are read up to TopPostings too.
	count := func(term string) (int64, int64) {
		l, err := f.index.Postings(ctx, u, term, 1)
		if err != nil || !l.More {
			t.Fatalf("postings of %s: %+v %v", term, l, err)
		}
		return l.Count, l.CountedAt
	}
	docs := int64(chats*perChat + chats) // and the titles' messages
	if c, at := count("common"); c != chats*perChat || at != docs {
		t.Errorf("count of common %d at %d, want %d at %d", c, at, chats*perChat, docs)
	}
	// A few more messages leave the count; more than a tenth take it
	// again.
	storeMsgs(all[0], 0, 10)
	if _, err := f.search(t, u, "common", paging.Cursor{}); err != nil {
		t.Fatal(err)
	}
	if c, _ := count("common"); c != chats*perChat {
		t.Errorf("count of common %d after 10 more messages, want the one recorded", c)
	}
	storeMsgs(all[0], 0, 150)
	if _, err := f.search(t, u, "common", paging.Cursor{}); err != nil {
		t.Fatal(err)
	}
	if c, at := count("common"); c != chats*perChat+160 || at != docs+160 {
		t.Errorf("count of common %d at %d after 160 more messages, want %d at %d", c, at, chats*perChat+160, docs+160)
	}
	// A word with fewer postings than a search reads records no count.
	if l, err := f.index.Postings(ctx, u, "title", search.TopPostings); err != nil || l.More || l.CountedAt != 0 || len(l.List) != chats {
		t.Errorf("postings of title: %d more %v count at %d, %v", len(l.List), l.More, l.CountedAt, err)
	}
	// The account's erasure removes the counts (the postings go with the
	// chats, erased by the chats' part).
	if c := scanKeys(t, f.db, "TERM#"+u+"#common"); !slices.Contains(c, "TERM#"+u+"#common #") {
		t.Fatal("no count of common stored")
	}
	accounts := store.NewAccounts(f.db.DB, f.db.Users(), f.db.Sessions(), f.db.Data(), f.db.OAuth())
	if err := accounts.EraseUserItems(ctx, account.Deletion{UserID: u, RequestedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, k := range scanKeys(t, f.db, "TERM#"+u+"#", "SEARCH#"+u) {
		if pk, sk, _ := strings.Cut(k, " "); sk == "#" || strings.HasPrefix(pk, "SEARCH#") {
			t.Errorf("left by the erasure: %s", k)
		}
	}
}

// previousFormat writes userID's index of chats as the previous format
// did (postings at <chatId>#<messageId>, DOC items without counts, CHAT#
// items without fmt, PROGRESS without mig), as a deployment finds it.
func (f *searchFixture) previousFormat(t *testing.T, userID string, chats ...chat.Chat) {
	t.Helper()
	ctx := context.Background()
	table := f.db.DB.Table(f.db.Data())
	var n, words int64
	for _, c := range chats {
		msgs, err := f.index.MessagesAfter(ctx, c.ID, "", search.MaxDocsPerAdd)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("messages of %s: %d %v", c.ID, len(msgs), err)
		}
		for _, m := range msgs {
			a := search.Analyze(m.Content)
			var terms []string
			for _, term := range a.Terms {
				terms = append(terms, term.Text)
				if err := table.Put(map[string]any{"PK": "TERM#" + userID + "#" + term.Text, "SK": c.ID + "#" + m.ID, "f": term.Freq, "l": a.Length, "k": m.Key}).Run(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := table.Put(map[string]any{"PK": "SEARCH#" + userID, "SK": "DOC#" + c.ID + "#" + m.ID, "terms": terms, "l": a.Length}).Run(ctx); err != nil {
				t.Fatal(err)
			}
			n++
			words += int64(a.Length)
		}
		if err := table.Put(map[string]any{"PK": "SEARCH#" + userID, "SK": "CHAT#" + c.ID, "through": msgs[len(msgs)-1].Key}).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	changed, err := f.index.ChatsChangedAfter(ctx, userID, "", 100)
	if err != nil || len(changed) != len(chats) {
		t.Fatalf("%d chats changed, %v", len(changed), err)
	}
	for _, it := range []map[string]any{
		{"PK": "SEARCH#" + userID, "SK": "STATS", "n": n, "len": words},
		{"PK": "SEARCH#" + userID, "SK": "PROGRESS", "seen": changed[len(changed)-1].Position, "v": 1},
	} {
		if err := table.Put(it).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSearchConvertsThePreviousFormat: an index written before impact
// ordering answers as before while the searches convert it, chat after
// chat, with no message counted twice or lost; once converted, nothing of
// the previous format is left and searches read only the new postings.
func TestSearchConvertsThePreviousFormat(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	ctx := context.Background()
	u := uuid.NewString()
	a, _ := f.chat(t, f.raw, u, "a", "apple pie recipe", "apple crumble and apple tart")
	b, _ := f.chat(t, f.raw, u, "b", "banana bread", "apple juice")
	f.previousFormat(t, u, a, b)
	before, err := f.index.Stats(ctx, u)
	if err != nil || before.Docs != 4 {
		t.Fatalf("stats %+v %v", before, err)
	}
	// The previous format's postings are found as they are.
	if l, err := f.index.PreviousPostings(ctx, u, "apple", 100); err != nil || len(l) != 3 {
		t.Fatalf("previous postings of apple: %v %v", l, err)
	}
	// A chat half converted (its first message again, the second still
	// in the previous format) is found whole, each message once.
	p, err := f.index.ChatProgress(ctx, u, a.ID)
	if err != nil || !p.Exists || p.Format != search.FormatPrevious {
		t.Fatalf("progress of a: %+v %v", p, err)
	}
	if err := f.index.ResetChat(ctx, u, a.ID, p); err != nil {
		t.Fatal(err)
	}
	if err := f.index.ResetChat(ctx, u, a.ID, p); errs.CodeOf(err) != "INDEX_CHANGED" {
		t.Errorf("a second reset: %v, want INDEX_CHANGED", err)
	}
	conv, _ := f.index.ChatProgress(ctx, u, a.ID)
	msgs, _ := f.index.MessagesAfter(ctx, a.ID, "", 1)
	half := conv
	half.Through = msgs[0].Key
	if err := f.index.Add(ctx, u, a.ID, []search.Doc{{ChatID: a.ID, MessageID: msgs[0].ID, Key: msgs[0].Key, Analysis: search.Analyze(msgs[0].Content)}}, conv, half); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.index.Stats(ctx, u); st != before {
		t.Errorf("stats moved by a replaced message: %+v, want %+v", st, before)
	}
	if l, _ := f.index.PreviousPostings(ctx, u, "apple", 100); len(l) != 2 {
		t.Errorf("previous postings of apple after one replaced: %v", l)
	}

	// The search: the same answer, and the rest converted.
	pg, err := f.search(t, u, "apple", paging.Cursor{})
	if err != nil || fmt.Sprint(ids(pg)) != fmt.Sprint([]string{a.ID, b.ID}) || !strings.Contains(pg.Results[0].Snippet, "<mark>apple</mark>") {
		t.Fatalf("apple: %+v %v", pg, err)
	}
	if st, _ := f.index.Stats(ctx, u); st != before {
		t.Errorf("stats after the conversion %+v, want %+v", st, before)
	}
	for _, c := range []chat.Chat{a, b} {
		if p, err := f.index.ChatProgress(ctx, u, c.ID); err != nil || p.Format != search.FormatImpact {
			t.Errorf("progress of %s: %+v %v", c.Title, p, err)
		}
	}
	if prog, err := f.index.Progress(ctx, u); err != nil || !prog.Migrated {
		t.Errorf("progress %+v %v, want migrated", prog, err)
	}
	for _, k := range scanKeys(t, f.db, "TERM#"+u+"#") {
		if _, sk, _ := strings.Cut(k, " "); !strings.HasPrefix(sk, "#") {
			t.Errorf("a posting of the previous format is left: %s", k)
		}
	}
	if l, _ := f.index.PreviousPostings(ctx, u, "apple", 100); len(l) != 0 {
		t.Errorf("previous postings of apple after the conversion: %v", l)
	}
	if l, err := f.index.Postings(ctx, u, "apple", 100); err != nil || len(l.List) != 3 || l.List[0].ChatID != a.ID {
		t.Errorf("postings of apple: %+v %v, want 3, the best (twice in a message) first", l, err)
	}
	// A new message is found; a deleted chat leaves nothing.
	c, _ := f.chat(t, f.raw, u, "c", "cherry apple")
	if pg, err := f.search(t, u, "cherry", paging.Cursor{}); err != nil || fmt.Sprint(ids(pg)) != fmt.Sprint([]string{c.ID}) {
		t.Errorf("cherry: %v %v", ids(pg), err)
	}
	if err := f.chats.DeleteChat(ctx, a.ID, u, nil); err != nil {
		t.Fatal(err)
	}
	if left := scanKeys(t, f.db, "TERM#"+u+"#", "SEARCH#"+u); strings.Contains(fmt.Sprint(left), a.ID) {
		t.Errorf("the deleted chat's index items remain: %v", left)
	}
}

// TestSearchDeletesAChatHalfConverted: a chat deleted while converted
// leaves no item of either format.
func TestSearchDeletesAChatHalfConverted(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	ctx := context.Background()
	u := uuid.NewString()
	a, _ := f.chat(t, f.raw, u, "a", "apple pie recipe", "apple crumble and apple tart")
	f.previousFormat(t, u, a)
	p, _ := f.index.ChatProgress(ctx, u, a.ID)
	if err := f.index.ResetChat(ctx, u, a.ID, p); err != nil {
		t.Fatal(err)
	}
	conv, _ := f.index.ChatProgress(ctx, u, a.ID)
	msgs, _ := f.index.MessagesAfter(ctx, a.ID, "", 1)
	half := conv
	half.Through = msgs[0].Key
	if err := f.index.Add(ctx, u, a.ID, []search.Doc{{ChatID: a.ID, MessageID: msgs[0].ID, Key: msgs[0].Key, Analysis: search.Analyze(msgs[0].Content)}}, conv, half); err != nil {
		t.Fatal(err)
	}
	if err := f.chats.DeleteChat(ctx, a.ID, u, nil); err != nil {
		t.Fatal(err)
	}
	if left := scanKeys(t, f.db, "TERM#"+u+"#", "SEARCH#"+u+"#"); len(left) != 0 {
		for _, k := range left {
			if !strings.HasSuffix(k, " STATS") && !strings.HasSuffix(k, " PROGRESS") {
				t.Errorf("left after the delete: %s", k)
			}
		}
	}
	if st, err := f.index.Stats(ctx, u); err != nil || st.Docs != 0 || st.Length != 0 {
		t.Errorf("stats %+v %v, want none", st, err)
	}
}

// TestSearchAddWritesTheImpactFormat: Add given a progress of no format
// (a caller's zero value) records the impact format, which it writes, so
// that no search takes the chat for one to convert.
func TestSearchAddWritesTheImpactFormat(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	ctx := context.Background()
	u := uuid.NewString()
	c, _ := f.chat(t, f.raw, u, "a", "apple pie")
	msgs, err := f.index.MessagesAfter(ctx, c.ID, "", 1)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("messages %v %v", msgs, err)
	}
	doc := search.Doc{ChatID: c.ID, MessageID: msgs[0].ID, Key: msgs[0].Key, Analysis: search.Analyze(msgs[0].Content)}
	if err := f.index.Add(ctx, u, c.ID, []search.Doc{doc}, search.ChatProgress{}, search.ChatProgress{Through: msgs[0].Key, Exists: true}); err != nil {
		t.Fatal(err)
	}
	if p, err := f.index.ChatProgress(ctx, u, c.ID); err != nil || p.Format != search.FormatImpact {
		t.Errorf("progress %+v %v, want the impact format", p, err)
	}
	if ids, err := f.index.UnconvertedChats(ctx, u, 10); err != nil || len(ids) != 0 {
		t.Errorf("unconverted %v %v", ids, err)
	}
}
