package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

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
