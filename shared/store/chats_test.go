package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

func newChat(user string, at time.Time) chat.Chat {
	return chat.Chat{ID: uuid.NewString(), UserID: user, Title: "t", CreatedAt: at, UpdatedAt: at}
}

// createChats stores n chats of user, a minute apart from t0, and returns
// their ids, oldest first.
func createChats(t *testing.T, s *store.Chats, user string, n int, t0 time.Time) []string {
	t.Helper()
	var ids []string
	for i := range n {
		c := newChat(user, t0.Add(time.Duration(i)*time.Minute))
		if err := s.CreateChat(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	return ids
}

func TestChatsListAndCounter(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ids := createChats(t, s, "u1", 7, t0)
	if err := s.CreateChat(ctx, newChat("u2", t0)); err != nil {
		t.Fatal(err)
	}

	// A message moves chat 0 to the top.
	c0, _ := s.Chat(ctx, ids[0])
	msg := chat.Message{ID: uuid.NewString(), ChatID: ids[0], Role: "user", Content: "hi", CreatedAt: t0.Add(time.Hour)}
	if err := s.AddMessages(ctx, c0, msg); err != nil {
		t.Fatal(err)
	}
	want := []string{ids[0], ids[6], ids[5], ids[4], ids[3], ids[2], ids[1]}
	tests := []struct{ limit, offset, from, to int }{{20, 0, 0, 7}, {3, 0, 0, 3}, {3, 3, 3, 6}, {3, 6, 6, 7}, {5, 7, 7, 7}, {1, 100, 7, 7}}
	for _, tt := range tests {
		db.Counter.Reset()
		chats, total, err := s.ListChats(ctx, "u1", paging.Page{Limit: tt.limit, Offset: tt.offset}, false)
		if err != nil {
			t.Fatal(err)
		}
		if total != 7 {
			t.Errorf("limit %d offset %d: total = %d, want 7", tt.limit, tt.offset, total)
		}
		var got []string
		for _, c := range chats {
			got = append(got, c.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want[tt.from:tt.to]) && !(len(got) == 0 && tt.from == tt.to) {
			t.Errorf("limit %d offset %d: ids = %v, want %v", tt.limit, tt.offset, got, want[tt.from:tt.to])
		}
		if n := db.Counter.Count(); n != 1 {
			t.Errorf("ListChats cost %d calls, want 1", n)
		}
	}

	// Delete keeps the counter right and leaves nothing of the chat behind.
	if err := s.DeleteChat(ctx, ids[0], "u2", nil); errs.KindOf(err) != errs.Forbidden {
		t.Errorf("delete by another user: %v", err)
	}
	if err := s.DeleteChat(ctx, ids[0], "u1", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteChat(ctx, ids[0], "u1", nil); errs.KindOf(err) != errs.NotFound {
		t.Errorf("second delete: %v", err)
	}
	_, total, _ := s.ListChats(ctx, "u1", paging.Page{Limit: 20}, false)
	if total != 6 {
		t.Errorf("total after delete = %d", total)
	}
	var left []map[string]any
	if err := db.Table(db.Data()).Get("PK", "CHAT#"+ids[0]).All(ctx, &left); err != nil || len(left) != 0 {
		t.Errorf("items left after delete: %v %v", left, err)
	}
	if _, total, _ := s.ListChats(ctx, "nobody", paging.Page{Limit: 20}, false); total != 0 {
		t.Errorf("total of a user without chats = %d", total)
	}
}

func TestConversationOrderAndUpdate(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	c := newChat("u1", t0)
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 12 {
		role := []string{"user", "assistant"}[i%2]
		m := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: role, Content: fmt.Sprint(i), CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}
		if role == "assistant" {
			m.InputTokens, m.OutputTokens, m.ModelID = 10, 3, "builtin"
			m.ToolCalls = []chat.ToolCall{{ToolName: "hash", ToolArgs: []byte(`{"text":"a"}`), Result: []byte(`{"digest":"x"}`)}}
		}
		if err := s.AddMessages(ctx, c, m); err != nil {
			t.Fatal(err)
		}
		want = append(want, m.Content)
	}
	db.Counter.Reset()
	got, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil || got.ID != c.ID {
		t.Fatal(got, err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("Conversation cost %d calls", n)
	}
	var order []string
	for _, m := range msgs {
		order = append(order, m.Content)
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("order = %v", order)
	}
	if a := msgs[1]; a.InputTokens != 10 || a.OutputTokens != 3 || len(a.ToolCalls) != 1 || string(a.ToolCalls[0].Result) != `{"digest":"x"}` {
		t.Errorf("assistant message = %+v", a)
	}
	if got.UpdatedAt.Equal(t0) {
		// Conversation read the chat item written at creation; AddMessages moved updatedAt.
		t.Errorf("chat updatedAt not moved by messages: %v", got.UpdatedAt)
	}

	title := func(s string) chat.ChatUpdate { return chat.ChatUpdate{Title: &s} }
	if _, err := s.UpdateChat(ctx, c.ID, "u2", title("x"), t0); errs.KindOf(err) != errs.Forbidden {
		t.Errorf("update by another user: %v", err)
	}
	if _, err := s.UpdateChat(ctx, uuid.NewString(), "u1", title("x"), t0); errs.KindOf(err) != errs.NotFound {
		t.Errorf("update of a missing chat: %v", err)
	}
	up, err := s.UpdateChat(ctx, c.ID, "u1", title("renamed"), t0.Add(time.Hour))
	if err != nil || up.Title != "renamed" || !up.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("update = %+v, %v", up, err)
	}
	if err := s.AddMessages(ctx, chat.Chat{ID: uuid.NewString(), UserID: "u1"}, chat.Message{ID: "m", ChatID: "x", CreatedAt: t0}); errs.KindOf(err) != errs.NotFound {
		t.Errorf("message into a missing chat: %v", err)
	}
	if _, _, err := s.Conversation(ctx, uuid.NewString()); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Errorf("missing conversation: %v", err)
	}
}

// TestNothingJoinsAChatBeingDeleted: once a delete has begun (the chat is
// marked), a message or a run written concurrently is refused instead of
// being orphaned when the delete completes.
func TestNothingJoinsAChatBeingDeleted(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	runs := store.NewRuns(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Now().UTC()
	c := newChat("u1", t0)
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The first step of DeleteChat, as a concurrent request would see it.
	if err := db.Table(db.Data()).Update("PK", "CHAT#"+c.ID).Range("SK", "CHAT").Set("deleting", true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	m := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "late", CreatedAt: t0}
	if err := s.AddMessages(ctx, c, m); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Errorf("message into a chat being deleted: %v", err)
	}
	r := workflow.Run{ID: uuid.NewString(), ChatID: c.ID, WorkflowID: uuid.NewString(), UserID: "u1", Status: workflow.RunPending, StartedAt: t0}
	if err := runs.CreateRun(ctx, r, job.Lease{Until: time.Now()}); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Errorf("run in a chat being deleted: %v", err)
	}
	sh := chat.Share{ID: "OMXcz3ObM_yszltTMpGKzA", Title: "t", CreatedAt: t0}
	if err := s.CreateShare(ctx, c, sh); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Errorf("share of a chat being deleted: %v, want CHAT_NOT_FOUND (not SHARE_LIMIT)", err)
	}
	if _, err := s.Share(ctx, sh.ID); errs.CodeOf(err) != chat.CodeShareNotFound {
		t.Errorf("the refused share was stored: %v", err)
	}
	r.ChatID = uuid.NewString()
	if err := runs.CreateRun(ctx, r, job.Lease{Until: time.Now()}); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Errorf("run in a missing chat: %v", err)
	}
	// The interrupted delete can be retried and finishes.
	if err := s.DeleteChat(ctx, c.ID, "u1", nil); err != nil {
		t.Fatal(err)
	}
	var left []map[string]any
	if err := db.Table(db.Data()).Get("PK", "CHAT#"+c.ID).All(ctx, &left); err != nil || len(left) != 0 {
		t.Errorf("left behind: %v %v", left, err)
	}
}
