package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestGuardedGenerationStart: a guarded start (Generation.Guard) takes the
// chat only while its tree is as the caller read it: any write that
// stored messages (AddMessages, a finished generation, a streamed start)
// or moved the current leaf (SetLeaf) since the read makes it Conflict
// CHAT_CHANGED, storing nothing; a running lease is still
// GENERATION_ACTIVE; an unguarded start ignores the tree.
func TestGuardedGenerationStart(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).UTC()
	c := newChat("u1", t0)
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	at := t0
	msg := func(role string, parent *string) chat.Message {
		at = at.Add(time.Second)
		return chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: role, Content: role, CreatedAt: at, ParentID: parent, Status: chat.StatusCompleted}
	}
	gen := func(guard bool) chat.Generation {
		return chat.Generation{ID: uuid.NewString(), Now: at, Until: at.Add(time.Minute), Guard: guard}
	}
	read := func() chat.Chat {
		t.Helper()
		c, _, err := s.Conversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	wantChanged := func(what string, stale chat.Chat) {
		t.Helper()
		g := gen(true)
		if err := s.StartGeneration(ctx, stale, g); errs.CodeOf(err) != chat.CodeChatChanged {
			t.Fatalf("%s: guarded start on a stale read: %v, want %s", what, err, chat.CodeChatChanged)
		}
		if now := read(); now.Generation != "" {
			t.Fatalf("%s: the refused start marked the chat (%s)", what, now.Generation)
		}
	}
	// A fresh read, with no message yet.
	fresh := read()
	if fresh.Revision != 0 || fresh.Leaf != "" {
		t.Fatalf("a new chat: revision %d, leaf %q", fresh.Revision, fresh.Leaf)
	}
	u := msg("user", nil)
	uid := u.ID
	r := msg("assistant", &uid)
	if err := s.AddMessages(ctx, c, u, r); err != nil {
		t.Fatal(err)
	}
	wantChanged("after AddMessages", fresh)

	// A finished generation's messages.
	stale := read()
	if stale.Revision != 1 || stale.Leaf != r.ID {
		t.Fatalf("after one write: revision %d, leaf %q", stale.Revision, stale.Leaf)
	}
	g := gen(true)
	if err := s.StartGeneration(ctx, stale, g); err != nil {
		t.Fatalf("guarded start on a fresh read: %v", err)
	}
	// While g runs, a stale read is told the generation is active.
	if err := s.StartGeneration(ctx, fresh, gen(true)); errs.CodeOf(err) != chat.CodeGenerationActive {
		t.Fatalf("while a generation runs: %v, want %s", err, chat.CodeGenerationActive)
	}
	rid := r.ID
	u2 := msg("user", &rid)
	u2id := u2.ID
	if err := s.FinishGeneration(ctx, stale, g.ID, u2, msg("assistant", &u2id)); err != nil {
		t.Fatal(err)
	}
	wantChanged("after a finished generation", stale)

	// The current leaf moved (GET ?leaf=), nothing stored.
	stale = read()
	if err := s.SetLeaf(ctx, stale, r.ID); err != nil {
		t.Fatal(err)
	}
	wantChanged("after SetLeaf", stale)

	// A streamed start stores its messages under its mark.
	stale = read()
	lg := gen(true)
	lg.Lease = job.Lease{Until: time.Now().Add(time.Minute), Reserved: 100}
	u3 := msg("user", &rid)
	u3id := u3.ID
	reply := chat.Message{ID: lg.ID, ChatID: c.ID, Role: "assistant", Status: chat.StatusStreaming, CreatedAt: u3.CreatedAt.Add(time.Microsecond), ParentID: &u3id}
	if err := s.StartLoggedGeneration(ctx, stale, lg, nil, u3, reply); err != nil {
		t.Fatalf("guarded streamed start on a fresh read: %v", err)
	}
	reply.Content, reply.Status = "done", chat.StatusCompleted
	if err := s.EndLoggedGeneration(ctx, stale, reply, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	wantChanged("after a streamed reply", stale)
	streamed := gen(true)
	streamed.Lease = lg.Lease
	if err := s.StartLoggedGeneration(ctx, stale, streamed, nil, msg("user", &rid), chat.Message{ID: streamed.ID, ChatID: c.ID, Role: "assistant",
		Status: chat.StatusStreaming, CreatedAt: at.Add(time.Microsecond)}); errs.CodeOf(err) != chat.CodeChatChanged {
		t.Fatalf("guarded streamed start on a stale read: %v, want %s", err, chat.CodeChatChanged)
	}
	if _, msgs, err := s.Conversation(ctx, c.ID); err != nil || len(msgs) != 6 {
		t.Fatalf("%d messages (%v), want 6: the refused starts stored nothing", len(msgs), err)
	}

	// Unguarded, a stale read starts.
	if err := s.StartGeneration(ctx, fresh, gen(false)); err != nil {
		t.Fatalf("unguarded start: %v", err)
	}
}
