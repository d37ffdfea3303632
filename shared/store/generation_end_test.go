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
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestEndLoggedGenerationAfterALostAnswer: the reply's writer saw a write
// fail that DynamoDB applied (a deadline cut its answer), so it hands the
// end events it believes unwritten. The end stores each event once, ends
// the log with the reply's status and frees the chat; end events that the
// log already holds still answer GENERATION_NOT_ACTIVE. (A gap cannot be
// handed over: a log's slots are keyed by the event they follow, and its
// writer numbers events consecutively from the last one it wrote.)
func TestEndLoggedGenerationAfterALostAnswer(t *testing.T) {
	t.Parallel()
	s, jobs, c, now := newLoggedChat(t)
	ctx := context.Background()
	start := func() (job.Ref, chat.Message) {
		t.Helper()
		g, reply := startLogged(t, s, c, now)
		return job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: g.ID}, reply
	}
	lease := job.Lease{Until: now.Add(30 * time.Second), Reserved: 400}

	ref, reply := start()
	for _, b := range [][2]int64{{2, 3}, {4, 5}} { // 4-5: the write whose answer was lost
		if err := jobs.Append(ctx, ref, records(b[0], b[1]), lease); err != nil {
			t.Fatal(err)
		}
	}
	reply.Status, reply.Content = chat.StatusFailed, "partial"
	if err := s.EndLoggedGeneration(ctx, c, reply, records(4, 7), time.Time{}); err != nil {
		t.Fatalf("end after a lost answer: %v", err)
	}
	recs, h, err := jobs.Read(ctx, ref, 0)
	if err != nil || h.Active || fmt.Sprint(seqs(recs)) != "[1 2 3 4 5 6 7]" || recs[5].Prev != 5 {
		t.Fatalf("log after the end: %v %+v (%v)", seqs(recs), h, err)
	}
	if m, active, err := s.GeneratedMessage(ctx, c.ID, ref.ID); err != nil || active || m.Status != chat.StatusFailed || m.Content != "partial" {
		t.Fatalf("reply after the end: %+v active %v (%v)", m, active, err)
	}

	ref, reply = start() // the chat was freed
	if err := jobs.Append(ctx, ref, records(2, 3), lease); err != nil {
		t.Fatal(err)
	}
	reply.Status = chat.StatusFailed
	for _, recs := range [][]job.Record{records(1, 2)} {
		if err := s.EndLoggedGeneration(ctx, c, reply, recs, time.Time{}); errs.CodeOf(err) != chat.CodeGenerationNotActive {
			t.Errorf("end with %v after event 3: %v, want GENERATION_NOT_ACTIVE", seqs(recs), err)
		}
	}
	if h, err := jobs.Head(ctx, ref); err != nil || !h.Active || h.LastSeq != 3 {
		t.Errorf("head after refused ends: %+v (%v), want active at 3", h, err)
	}
}

// startLogged starts a streamed reply in chat c at now, its log holding
// event 1 and reserving up to 201, and returns its generation and reply.
func startLogged(t *testing.T, s *store.Chats, c chat.Chat, now time.Time) (chat.Generation, chat.Message) {
	t.Helper()
	g := chat.Generation{ID: uuid.NewString(), Now: now, Until: now.Add(time.Minute), Lease: job.Lease{Until: now.Add(30 * time.Second), Reserved: 201}}
	user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "hi", Status: chat.StatusCompleted, CreatedAt: now}
	reply := chat.Message{ID: g.ID, ChatID: c.ID, Role: "assistant", ReplyTo: user.ID, Status: chat.StatusStreaming, CreatedAt: now.Add(time.Microsecond)}
	if err := s.StartLoggedGeneration(context.Background(), c, g, records(1, 1), user, reply); err != nil {
		t.Fatal(err)
	}
	return g, reply
}

// newLoggedChat returns the chat and job-log stores over a fresh engine,
// and a chat stored in it at now.
func newLoggedChat(t *testing.T) (*store.Chats, *store.Jobs, chat.Chat, time.Time) {
	t.Helper()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	now := time.Now().UTC()
	c := newChat("u1", now)
	if err := s.CreateChat(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return s, store.NewJobs(db.DB, db.Data()), c, now
}

// TestAppendRetriedAfterALostAnswer: a log write applied though its
// answer was lost is retried (the SDK retries a 5xx or a dropped
// connection): the retry finds its slot holding exactly its own events
// and succeeds, writing nothing twice; other events in that slot still
// answer NOT_ACTIVE.
func TestAppendRetriedAfterALostAnswer(t *testing.T) {
	t.Parallel()
	s, jobs, c, now := newLoggedChat(t)
	ctx := context.Background()
	g, _ := startLogged(t, s, c, now)
	ref := job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: g.ID}
	lease := job.Lease{Until: now.Add(30 * time.Second), Reserved: 400}
	for range 2 { // the write, then its retry
		if err := jobs.Append(ctx, ref, records(2, 4), lease); err != nil {
			t.Fatalf("append 2-4: %v", err)
		}
	}
	for _, recs := range [][]job.Record{records(2, 3), records(2, 5)} {
		if err := jobs.Append(ctx, ref, recs, lease); errs.CodeOf(err) != job.CodeNotActive {
			t.Errorf("append %v over 2-4: %v, want NOT_ACTIVE", seqs(recs), err)
		}
	}
	recs, h, err := jobs.Read(ctx, ref, 0)
	if err != nil || !h.Active || fmt.Sprint(seqs(recs)) != "[1 2 3 4]" {
		t.Fatalf("log %v %+v (%v), want events 1-4 once", seqs(recs), h, err)
	}
}
