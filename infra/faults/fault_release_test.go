package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
)

// TestFaultReplyRelease fails the last of a streamed reply's three end
// writes, the release of the chat's generation mark (the chat item's
// UpdateItem), after the reply and its last events were saved: the reply
// still ends completed for its client (a failed release is not the
// reply's failure) and the chat stays held by the mark until its lease
// runs out, when a sweep releases it without touching the saved reply or
// appending to its log (its end is there). Then the chat takes messages
// again.
func TestFaultReplyRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	chatID := e.createChat()
	// The start's UpdateItem (the mark) passes; every later UpdateItem of
	// the Data table (the release) fails.
	e.proxy.add(rule{op: "UpdateItem", table: e.cfg.DataTable, skip: 1, times: -1, fault: internal})
	resp, evs, body := e.stream(e.api, chatID, streamBody(e, "count to 5 slowly", ""), streamDeadline)
	e.proxy.clear()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	requireEvents(t, evs, chat.EventStart, chat.EventEnd)
	if end := evs[len(evs)-1]; end.Reason != chat.ReasonCompleted {
		t.Fatalf("end %+v, want completed", end)
	}
	msgs := e.messages(chatID)
	if len(msgs) != 2 || msgs[1].Status != chat.StatusCompleted || msgs[1].Content == "" {
		t.Fatalf("messages %+v, want the reply saved completed", msgs)
	}
	if r, b := e.as(e.api, "POST", "/api/chats/"+chatID+"/messages", `{"content":"hello"}`); r.StatusCode != 409 {
		t.Fatalf("a message while the mark holds: %d %s, want 409", r.StatusCode, b)
	}
	jobs := store.NewJobs(e.stack.DB, e.cfg.DataTable)
	ref := job.Ref{Kind: chat.GenerationKind, Collection: chatID, ID: msgs[1].ID}
	before, _, err := jobs.Read(context.Background(), ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(time.Minute) }
	chats := chat.NewService(chat.Options{Store: store.NewChats(e.stack.DB, e.cfg.DataTable), Jobs: jobs, Now: later})
	sw := job.NewSweeper(jobs, map[string]job.Handler{chat.GenerationKind: chats.InterruptExpired}, later, nil)
	if n, err := sw.Sweep(context.Background()); err != nil || n < 1 {
		t.Fatalf("sweep: %d ended, %v", n, err)
	}
	after, h, err := jobs.Read(context.Background(), ref, 0)
	if err != nil || h.Active || len(after) != len(before) {
		t.Fatalf("log after the sweep: %d events (%d before), head %+v (%v): want it released, nothing appended", len(after), len(before), h, err)
	}
	if m := e.messages(chatID); len(m) != 2 || m[1].Status != chat.StatusCompleted || m[1].Content != msgs[1].Content {
		t.Fatalf("messages after the sweep %+v, want the reply as saved", m)
	}
	e.postMessage(chatID) // the chat is free again
}
