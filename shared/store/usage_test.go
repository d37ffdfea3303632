package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/usage"
)

// TestUsageAddsAtomically: concurrent additions to the same counters all
// count (ADD, no read-modify-write), per model id of any spelling, per
// user and per month; one addition is one DynamoDB call.
func TestUsageAddsAtomically(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	u := store.NewUsage(db.DB, db.Users())
	ctx := context.Background()
	const n = 16
	models := []string{"builtin", "anthropic.claude-3-5-sonnet-20240620-v1:0", "gpt-4o [eu].x"}
	var wg sync.WaitGroup
	errc := make(chan error, n*len(models))
	for i := range n {
		for _, m := range models {
			wg.Go(func() {
				errc <- u.AddUsage(ctx, "u1", "2026-06", m, usage.Counts{Requests: 1, InputTokens: int64(i), OutputTokens: 2})
			})
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := u.MonthUsage(ctx, "u1", "2026-06")
	if err != nil {
		t.Fatal(err)
	}
	want := usage.Counts{Requests: n, InputTokens: n * (n - 1) / 2, OutputTokens: 2 * n}
	if len(got) != len(models) {
		t.Fatalf("models = %v, want %v", got, models)
	}
	for _, m := range models {
		if got[m] != want {
			t.Errorf("%s = %+v, want %+v", m, got[m], want)
		}
	}
	for _, other := range []struct{ user, month string }{{"u2", "2026-06"}, {"u1", "2026-07"}} {
		if got, err := u.MonthUsage(ctx, other.user, other.month); err != nil || len(got) != 0 {
			t.Errorf("%s %s = %v, %v; want empty", other.user, other.month, got, err)
		}
	}
	db.Counter.Reset()
	if err := u.AddUsage(ctx, "u1", "2026-06", "builtin", usage.Counts{Requests: 1}); err != nil {
		t.Fatal(err)
	}
	if c := db.Counter.Count(); c != 1 {
		t.Errorf("one addition made %d DynamoDB calls, want 1", c)
	}
}

// TestReplyUsageRidesItsTransaction: storing an assistant message that
// called a model adds its tokens to the owner's usage in the same
// transaction (no extra call); a message without model calls adds
// nothing.
func TestReplyUsageRidesItsTransaction(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data()).WithUsage(db.Users())
	u := store.NewUsage(db.DB, db.Users())
	ctx := context.Background()
	t0 := time.Date(2026, 6, 30, 23, 59, 0, 0, time.UTC)
	c := newChat("u1", t0)
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	g := chat.Generation{ID: uuid.NewString(), Now: t0, Until: t0.Add(time.Minute)}
	if err := s.StartGeneration(ctx, c, g); err != nil {
		t.Fatal(err)
	}
	user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "hi", CreatedAt: t0}
	reply := chat.Message{ID: g.ID, ChatID: c.ID, Role: "assistant", Content: "hello", ModelID: "builtin", ReplyTo: user.ID,
		InputTokens: 70, OutputTokens: 30, Spent: &chat.Spent{Calls: 2, InputTokens: 7, OutputTokens: 3}, Status: chat.StatusCompleted, CreatedAt: t0.Add(time.Second)}
	db.Counter.Reset()
	if err := s.FinishGeneration(ctx, c, g.ID, user, reply); err != nil {
		t.Fatal(err)
	}
	if c := db.Counter.Count(); c != 1 {
		t.Errorf("storing the exchange with its usage made %d DynamoDB calls, want 1", c)
	}
	got, err := u.MonthUsage(ctx, "u1", "2026-06")
	if err != nil {
		t.Fatal(err)
	}
	if want := (usage.Counts{Requests: 2, InputTokens: 7, OutputTokens: 3}); len(got) != 1 || got["builtin"] != want {
		t.Errorf("usage = %+v, want builtin %+v", got, want)
	}
}
