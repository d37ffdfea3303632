package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/blob/s3blob/s3blobtest"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/trigger/eventbridge/schedulertest"
)

// TestSweeperFunctionEvent feeds a scheduled EventBridge event to the
// handler over the real store: a reply whose lease ran out is ended failed
// with error INTERRUPTED and end logged, and its chat is free again.
func TestSweeperFunctionEvent(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	chats := store.NewChats(db.DB, db.Data())
	past := time.Now().Add(-time.Minute).UTC()
	c := chat.Chat{ID: uuid.NewString(), UserID: "u1", Title: "t", CreatedAt: past, UpdatedAt: past}
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	g := chat.Generation{ID: uuid.NewString(), Now: past, Until: past.Add(11 * time.Minute), Lease: job.Lease{Until: past.Add(time.Second), Reserved: 202}}
	user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "count", Status: chat.StatusCompleted, CreatedAt: past}
	reply := chat.Message{ID: g.ID, ChatID: c.ID, Role: "assistant", ReplyTo: user.ID, Status: chat.StatusStreaming, CreatedAt: past.Add(time.Microsecond)}
	start := job.Chain(0, 1, json.RawMessage(`{"type":"start","messageId":"`+g.ID+`"}`), json.RawMessage(`{"type":"content","delta":"1 "}`))
	if err := chats.StartLoggedGeneration(ctx, c, g, start, user, reply); err != nil {
		t.Fatal(err)
	}

	h, err := newHandler(ctx, db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "SweeperFunction", "RUNNER_FUNCTION": "RunnerFunction", "LOG_LEVEL": "error",
		"BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3blobtest.Start(t, "blobs"),
		"SCHEDULE_GROUP": "workflow-chat-triggers", "SCHEDULER_ENDPOINT": schedulertest.Unused(t)}))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/schedule.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.EventBridgeEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if err := h(ctx, ev); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	recs, head, err := store.NewJobs(db.DB, db.Data()).Read(ctx, job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: g.ID}, 2)
	if err != nil || head.Active || len(recs) != 2 {
		t.Fatalf("after the sweep: %d events, active %v (%v)", len(recs), head.Active, err)
	}
	var e1, e2 chat.Event
	_ = json.Unmarshal(recs[0].Data, &e1)
	_ = json.Unmarshal(recs[1].Data, &e2)
	if e1.Type != "error" || e1.Error != chat.CodeInterrupted || e1.Content == nil || *e1.Content != "1 " || e2.Type != "end" || e2.Reason != chat.ReasonInterrupted {
		t.Errorf("logged %+v then %+v, want error INTERRUPTED with the saved content, and end interrupted", e1, e2)
	}
	// The closing events follow every id the reply's process may have
	// handed out (its reservation), never one a client may hold.
	if recs[0].Seq != 203 || recs[0].Prev != 2 || recs[1].Seq != 204 {
		t.Errorf("closing events numbered %d (after %d), %d; want 203 after 2, then 204", recs[0].Seq, recs[0].Prev, recs[1].Seq)
	}
	_, msgs, err := chats.Conversation(ctx, c.ID)
	if err != nil || len(msgs) != 2 || msgs[1].Status != chat.StatusFailed || msgs[1].Content != "1 " {
		t.Errorf("messages %+v (%v), want the reply failed with what was logged", msgs, err)
	}
	// A second sweep finds nothing more to do.
	if err := h(ctx, ev); err != nil {
		t.Errorf("second sweep: %v", err)
	}
	if err := chats.StartGeneration(ctx, c, chat.Generation{ID: uuid.NewString(), Now: time.Now(), Until: time.Now().Add(time.Minute)}); err != nil {
		t.Errorf("the chat is still held: %v", err)
	}
}
