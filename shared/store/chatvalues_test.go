package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestLargeReplyEnd: a reply's end whose pending events hold more than an
// item (what a job.Writer may hand back: up to MaxPendingBytes and one
// more event) is written in several batches in its one transaction, and
// read back whole and in order.
func TestLargeReplyEnd(t *testing.T) {
	t.Parallel()
	s, jobs, c, g, now := startedReply(t, records(1, 1), 201)
	ctx := context.Background()
	reply := chat.Message{ID: g.ID, ChatID: c.ID, Role: "assistant", Status: chat.StatusStreaming, CreatedAt: now.Add(time.Microsecond)}
	event := func(i int) json.RawMessage {
		b, _ := json.Marshal(chat.Event{Type: chat.EventContent, Delta: strings.Repeat(string(rune('a'+i%26)), 100<<10)})
		return b
	}
	var data []json.RawMessage
	total := 0
	for i := 0; total <= job.MaxPendingBytes; i++ {
		data = append(data, event(i))
		total += len(data[i])
	}
	recs := job.Chain(1, 2, data...)
	reply.Status = chat.StatusCompleted
	if err := s.EndLoggedGeneration(ctx, c, reply, recs, time.Time{}); err != nil {
		t.Fatalf("end with %d bytes of events: %v", total, err)
	}
	got, head, err := jobs.Read(ctx, job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: g.ID}, 1)
	if err != nil || head.Active || len(got) != len(data) || head.LastSeq != int64(len(data)+1) {
		t.Fatalf("read back: %d events, head %+v, %v", len(got), head, err)
	}
	for i, r := range got {
		if r.Seq != int64(i+2) || string(r.Data) != string(data[i]) {
			t.Fatalf("event %d: seq %d", i, r.Seq)
		}
	}
}

// TestMessageValuesRoundTrip: what a message keeps of its large values
// comes back as stored: each tool call's result key and size (never a
// signed URL), a paused state's key, a user message's attachment ids.
func TestMessageValuesRoundTrip(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	ctx := context.Background()
	now := time.Now().UTC()
	c := newChat("u1", now)
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "look", Status: chat.StatusCompleted, CreatedAt: now,
		AttachmentIDs: []string{uuid.NewString(), uuid.NewString()}}
	reply := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "assistant", ReplyTo: user.ID, Status: chat.StatusAwaitingApproval,
		CreatedAt: now.Add(time.Microsecond), PendingKey: chat.PendingKey(c.ID, "m"),
		ToolCalls: []chat.ToolCall{{ToolName: "t", ToolArgs: json.RawMessage(`{}`), Result: json.RawMessage(`{"truncated":true,"preview":"x"}`),
			Truncated: true, ResultSize: 40000, ResultKey: chat.ResultKey(c.ID, "m", 0), ResultURL: "https://signed.example/never-stored"}}}
	if err := s.AddMessages(ctx, c, user, reply); err != nil {
		t.Fatal(err)
	}
	_, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("conversation: %d, %v", len(msgs), err)
	}
	if got := msgs[0].AttachmentIDs; len(got) != 2 || got[0] != user.AttachmentIDs[0] || got[1] != user.AttachmentIDs[1] {
		t.Errorf("attachment ids %v, want %v", got, user.AttachmentIDs)
	}
	r := msgs[1]
	tc := r.ToolCalls[0]
	if r.PendingKey != reply.PendingKey || r.Pending != nil || tc.ResultKey != reply.ToolCalls[0].ResultKey || tc.ResultSize != 40000 ||
		!tc.Truncated || tc.ResultURL != "" || msgs[0].PendingKey != "" || msgs[1].AttachmentIDs != nil {
		t.Errorf("reply read back: %+v", r)
	}
}
