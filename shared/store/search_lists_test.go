package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/paging"
)

// TestSearchChatsChangedInEveryList: the chats changed after a position
// are read from the three lists a chat is filed in (pinned, the others,
// archived), merged in position order whatever the limit, each once.
func TestSearchChatsChangedInEveryList(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	ctx := context.Background()
	u := uuid.NewString()
	yes := true
	var want []string
	for i := range 9 {
		c, _ := f.chat(t, f.raw, u, fmt.Sprint("chat ", i), "words")
		var upd chat.ChatUpdate
		switch i % 3 {
		case 0:
			upd.Pinned = &yes
		case 1:
			upd.Archived = &yes
		}
		if upd.Pinned != nil || upd.Archived != nil {
			if _, err := f.raw.UpdateChat(ctx, c.ID, u, upd, f.at); err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, c.ID)
	}
	for _, limit := range []int{1, 2, 4, 100} {
		var got []string
		after := ""
		for range 20 {
			page, err := f.index.ChatsChangedAfter(ctx, u, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit {
				t.Fatalf("limit %d: %d chats", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			for _, c := range page {
				got = append(got, c.ChatID)
			}
			after = page[len(page)-1].Position
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("limit %d: chats %v, want %v (in position order)", limit, got, want)
		}
	}
}

// TestSearchFindsPinnedAndArchivedChats: a new message is found whatever
// its chat's list: pinned, archived, both, a chat indexed then pinned,
// one pinned then unpinned, one archived then unarchived. The chats'
// times are past the settle time, so the user's progress moves over them
// between the searches, as it does in use.
func TestSearchFindsPinnedAndArchivedChats(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	f.at = time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	ctx := context.Background()
	u := uuid.NewString()
	yes, no := true, false
	set := func(c chat.Chat, pinned, archived *bool) chat.Chat {
		t.Helper()
		c, err := f.raw.UpdateChat(ctx, c.ID, u, chat.ChatUpdate{Pinned: pinned, Archived: archived}, f.at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	say := func(c chat.Chat, content string) chat.Message {
		t.Helper()
		f.at = f.at.Add(time.Second)
		m := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: content, Status: chat.StatusCompleted, CreatedAt: f.at}
		if err := f.chats.AddMessages(ctx, c, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	find := func(word string, m chat.Message) {
		t.Helper()
		p, err := f.search(t, u, word, paging.Cursor{})
		if err != nil || len(p.Results) != 1 || p.Results[0].MessageID != m.ID {
			t.Errorf("search %q: %+v %v, want message %s", word, p, err, m.ID)
		}
	}
	pinned, _ := f.chat(t, f.chats, u, "pinned", "first")
	pinned = set(pinned, &yes, nil)
	archived, _ := f.chat(t, f.chats, u, "archived", "first")
	archived = set(archived, nil, &yes)
	both, _ := f.chat(t, f.chats, u, "both", "first")
	both = set(both, &yes, &yes)
	later, _ := f.chat(t, f.chats, u, "pinned later", "first")
	unpinned, _ := f.chat(t, f.chats, u, "unpinned", "first")
	unpinned = set(unpinned, &yes, nil)
	unarchived, _ := f.chat(t, f.chats, u, "unarchived", "first")
	unarchived = set(unarchived, nil, &yes)

	// Every chat indexed, the progress past them all.
	if p, err := f.search(t, u, "first", paging.Cursor{}); err != nil || len(p.Results) != 6 {
		t.Fatalf("search first: %+v %v, want the six chats", p, err)
	}
	if prog, err := f.index.Progress(ctx, u); err != nil || prog.Seen == "" {
		t.Fatalf("progress %+v %v: the chats are settled, it should have moved", prog, err)
	}

	find("apricot", say(pinned, "apricot"))
	find("blueberry", say(archived, "blueberry"))
	find("cherry", say(both, "cherry"))
	later = set(later, &yes, nil)
	find("damson", say(later, "damson"))
	unpinned = set(unpinned, &no, nil)
	find("elderberry", say(unpinned, "elderberry"))
	unarchived = set(unarchived, nil, &no)
	find("fig", say(unarchived, "fig"))
	// Pinned again after a message: the next one is found too.
	unpinned = set(unpinned, &yes, nil)
	find("guava", say(unpinned, "guava"))
}

// TestSearchFindsPinnedChatsThroughTheServices: through the chat service
// (PATCH pinned, archived; a message and its reply) and the search
// service, as the API serves them, a new message of a pinned or an
// archived chat is found by the next search, also in a chat indexed
// before it was pinned.
func TestSearchFindsPinnedChatsThroughTheServices(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	chats := chat.NewService(chat.Options{Store: f.chats, Models: models, DefaultModelID: model.BuiltinID})
	u := uuid.NewString()
	ctx := auth.ActingFor(context.Background(), u)
	yes := true
	send := func(c chat.Chat, content string) chat.Exchange {
		t.Helper()
		ex, err := chats.Send(ctx, c.ID, chat.MessageRequest{Content: content})
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	find := func(word string, want string) {
		t.Helper()
		p, err := f.svc.Search(ctx, u, word, paging.Cursor{})
		if err != nil || len(p.Results) == 0 || p.Results[0].MessageID != want {
			t.Errorf("search %q: %+v %v, want message %s first", word, p, err, want)
		}
	}
	var cs []chat.Chat
	words := []string{"alpha", "bravo", "charlie", "delta"}
	for i, req := range []chat.UpdateRequest{{Pinned: &yes}, {Archived: &yes}, {Pinned: &yes, Archived: &yes}, {}} {
		c, err := chats.Create(ctx, chat.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		find(words[i], send(c, words[i]).ID)
		if req.Pinned != nil || req.Archived != nil {
			if _, err := chats.Update(ctx, c.ID, req); err != nil {
				t.Fatal(err)
			}
		}
		cs = append(cs, c)
	}
	for i, c := range cs {
		word := []string{"echo", "foxtrot", "golf", "hotel"}[i]
		find(word, send(c, word).ID)
	}
}
