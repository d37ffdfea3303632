package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestGenerationLease: one generation at a time per chat. Of concurrent
// starts exactly one wins and the others are Conflict GENERATION_ACTIVE,
// storing nothing; finishing frees the chat; an expired lease is taken
// over, and the generation that lost it still stores its reply without
// ending its successor's lease.
func TestGenerationLease(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	c := newChat("u1", t0)
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	msg := func(role, replyTo string, at time.Time) chat.Message {
		return chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: role, Content: role, ReplyTo: replyTo, CreatedAt: at}
	}
	gen := func(at time.Time) chat.Generation {
		return chat.Generation{ID: uuid.NewString(), Now: at, Until: at.Add(time.Minute)}
	}

	// Eight concurrent starts, each with its user message.
	var wg sync.WaitGroup
	results := make([]error, 8)
	gens := make([]chat.Generation, 8)
	for i := range results {
		gens[i] = gen(t0)
		wg.Go(func() {
			results[i] = s.StartGeneration(ctx, c, gens[i], msg("user", "", t0.Add(time.Duration(i)*time.Millisecond)))
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range results {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("starts %d and %d both won", winner, i)
		case errs.KindOf(err) != errs.Conflict || errs.CodeOf(err) != chat.CodeGenerationActive:
			t.Fatalf("start %d: %v, want Conflict GENERATION_ACTIVE", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no start won")
	}
	if _, msgs, err := s.Conversation(ctx, c.ID); err != nil || len(msgs) != 1 {
		t.Fatalf("after the starts: %d messages (%v), want only the winner's", len(msgs), err)
	}

	// Finishing stores the reply and frees the chat.
	user := msg("user", "", t0)
	reply := msg("assistant", user.ID, t0.Add(time.Second))
	if err := s.FinishGeneration(ctx, c, gens[winner].ID, reply); err != nil {
		t.Fatal(err)
	}
	g2 := gen(t0.Add(2 * time.Second))
	if err := s.StartGeneration(ctx, c, g2); err != nil {
		t.Fatalf("start after finish: %v", err)
	}
	if err := s.StartGeneration(ctx, c, gen(t0.Add(59*time.Second))); errs.CodeOf(err) != chat.CodeGenerationActive {
		t.Fatalf("start within the lease: %v", err)
	}

	// g2's lease runs out (its process died): g3 takes over; g2's late
	// finish stores its reply and leaves g3's lease alone.
	g3 := gen(t0.Add(2 * time.Minute))
	if err := s.StartGeneration(ctx, c, g3); err != nil {
		t.Fatalf("start after the lease ran out: %v", err)
	}
	late := msg("assistant", "", t0.Add(2*time.Minute+time.Second))
	if err := s.FinishGeneration(ctx, c, g2.ID, late); err != nil {
		t.Fatalf("late finish: %v", err)
	}
	if err := s.StartGeneration(ctx, c, gen(t0.Add(2*time.Minute+2*time.Second))); errs.CodeOf(err) != chat.CodeGenerationActive {
		t.Fatalf("the late finish ended its successor's lease: %v", err)
	}
	_, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil || len(msgs) != 3 || msgs[1].ReplyTo != user.ID || msgs[2].ID != late.ID {
		t.Fatalf("conversation: %+v (%v)", msgs, err)
	}

	if err := s.StartGeneration(ctx, newChat("u1", t0), gen(t0)); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Errorf("start in a missing chat: %v", err)
	}
	if err := s.FinishGeneration(ctx, newChat("u1", t0), "x"); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Errorf("finish in a missing chat: %v", err)
	}
}
