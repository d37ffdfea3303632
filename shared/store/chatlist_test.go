package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

func flag(b bool) *bool { return &b }

// TestChatsPinnedAndArchived lists 9 chats, 2 pinned and 3 archived (one
// of them pinned too), at every offset and page size: pinned first, then
// the others, the archived last and only when asked for, each newest
// first, with the total of what the list holds; a user without pinned
// chats pays one Query per page; deletes keep the counts right.
func TestChatsPinnedAndArchived(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ids := createChats(t, s, "u1", 9, t0)
	// Only the others' order matters before the first pin.
	db.Counter.Reset()
	if _, total, err := s.ListChats(ctx, "u1", paging.Page{Limit: 3}, false); err != nil || total != 9 || db.Counter.Count() != 1 {
		t.Errorf("unpinned list: total %d, %d calls, err %v; want 9, 1", total, db.Counter.Count(), err)
	}
	for _, u := range []struct {
		i                int
		pinned, archived *bool
	}{{1, flag(true), nil}, {4, flag(true), nil}, {2, nil, flag(true)}, {7, flag(true), flag(true)}, {5, nil, flag(true)}} {
		if _, err := s.UpdateChat(ctx, ids[u.i], "u1", chat.ChatUpdate{Pinned: u.pinned, Archived: u.archived}, t0); err != nil {
			t.Fatal(err)
		}
	}
	// Pinning or archiving does not move updatedAt.
	if c, _ := s.Chat(ctx, ids[1]); !c.Pinned || !c.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("pinned chat %+v: want pinned, updatedAt unmoved", c)
	}
	visible := []string{ids[4], ids[1], ids[8], ids[6], ids[3], ids[0]}
	all := append(append([]string{}, visible...), ids[7], ids[5], ids[2])
	for _, archived := range []bool{false, true} {
		want := visible
		if archived {
			want = all
		}
		for limit := 1; limit <= 10; limit++ {
			for offset := 0; offset <= len(want)+1; offset++ {
				chats, total, err := s.ListChats(ctx, "u1", paging.Page{Limit: limit, Offset: offset}, archived)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, c := range chats {
					got = append(got, c.ID)
				}
				exp := want[min(offset, len(want)):min(offset+limit, len(want))]
				if fmt.Sprint(got) != fmt.Sprint(exp) || total != len(want) {
					t.Errorf("archived=%v limit %d offset %d: %v total %d, want %v total %d", archived, limit, offset, got, total, exp, len(want))
				}
			}
		}
	}
	// Unpinning and unarchiving move chats back; a rename of a pinned chat
	// keeps it pinned and moves it to the top of the pinned.
	if _, err := s.UpdateChat(ctx, ids[7], "u1", chat.ChatUpdate{Archived: flag(false)}, t0); err != nil {
		t.Fatal(err)
	}
	title := "renamed"
	if _, err := s.UpdateChat(ctx, ids[1], "u1", chat.ChatUpdate{Title: &title}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateChat(ctx, ids[4], "u1", chat.ChatUpdate{Pinned: flag(false)}, t0); err != nil {
		t.Fatal(err)
	}
	chats, total, _ := s.ListChats(ctx, "u1", paging.Page{Limit: 20}, false)
	var got []string
	for _, c := range chats {
		got = append(got, c.ID)
	}
	if want := []string{ids[1], ids[7], ids[8], ids[6], ids[4], ids[3], ids[0]}; fmt.Sprint(got) != fmt.Sprint(want) || total != 7 {
		t.Errorf("after the moves: %v total %d, want %v total 7", got, total, want)
	}
	// Deleting a pinned and an archived chat keeps the counts right.
	for _, i := range []int{1, 2} {
		if err := s.DeleteChat(ctx, ids[i], "u1", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, total, _ := s.ListChats(ctx, "u1", paging.Page{Limit: 20}, false); total != 6 {
		t.Errorf("after the deletes: total %d, want 6", total)
	}
	if chats, total, _ := s.ListChats(ctx, "u1", paging.Page{Limit: 20}, true); total != 7 || len(chats) != 7 {
		t.Errorf("after the deletes, with the archived: %d chats, total %d, want 7", len(chats), total)
	}
	// Another user's chat, a missing one.
	if _, err := s.UpdateChat(ctx, ids[0], "u2", chat.ChatUpdate{Pinned: flag(true)}, t0); errs.KindOf(err) != errs.Forbidden {
		t.Errorf("pin by another user: %v", err)
	}
	if _, err := s.UpdateChat(ctx, ids[1], "u1", chat.ChatUpdate{Pinned: flag(true)}, t0); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Errorf("pin of a deleted chat: %v", err)
	}
}

// TestChatAutoTitle: the title is set only while it is the default.
func TestChatAutoTitle(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	ctx := context.Background()
	c := newChat("u1", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	c.Title = chat.DefaultTitle
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.AutoTitle(ctx, c.ID, "First words"); err != nil {
		t.Fatal(err)
	}
	if err := s.AutoTitle(ctx, c.ID, "Second words"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Chat(ctx, c.ID)
	if got.Title != "First words" || !got.UpdatedAt.Equal(c.UpdatedAt) {
		t.Errorf("chat %+v: want title %q, updatedAt unmoved", got, "First words")
	}
	if err := s.AutoTitle(ctx, "missing", "x"); err != nil {
		t.Errorf("title of a missing chat: %v", err)
	}
}
