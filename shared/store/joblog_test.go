package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/eventlog"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

func records(from, to int64) []eventlog.Record {
	var out []eventlog.Record
	for i := from; i <= to; i++ {
		out = append(out, eventlog.Record{Seq: i, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	return out
}

func seqs(recs []eventlog.Record) []int64 {
	out := []int64{}
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

// TestLoggedGeneration runs a streamed reply's log through the real store:
// start, batched appends, reads after any event, a stop request that the
// next append sees, the end that frees the chat, and the sweeper's view of
// expired leases.
func TestLoggedGeneration(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewChats(db.DB, db.Data())
	leases := store.NewLeases(db.DB, db.Data())
	ctx := context.Background()
	now := time.Now().UTC()
	c := newChat("u1", now)
	if err := s.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	start := func() (chat.Generation, chat.Message) {
		t.Helper()
		g := chat.Generation{ID: uuid.NewString(), Now: now, Until: now.Add(time.Minute), LeaseUntil: now.Add(30 * time.Second)}
		user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "hi", Status: chat.StatusCompleted, CreatedAt: now}
		reply := chat.Message{ID: g.ID, ChatID: c.ID, Role: "assistant", ReplyTo: user.ID, Status: chat.StatusStreaming, CreatedAt: now.Add(time.Microsecond)}
		if err := s.StartLoggedGeneration(ctx, c, g, records(1, 1), user, reply); err != nil {
			t.Fatal(err)
		}
		return g, reply
	}
	g, reply := start()
	if err := s.StartLoggedGeneration(ctx, c, chat.Generation{ID: uuid.NewString(), Now: now, Until: now.Add(time.Minute)}, records(1, 1),
		chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", CreatedAt: now}, chat.Message{ID: uuid.NewString(), ChatID: c.ID, CreatedAt: now}); errs.CodeOf(err) != chat.CodeGenerationActive {
		t.Fatalf("second start: %v, want GENERATION_ACTIVE", err)
	}
	for _, b := range [][2]int64{{2, 21}, {22, 25}} {
		if err := s.AppendEvents(ctx, c.ID, g.ID, records(b[0], b[1]), now.Add(30*time.Second)); err != nil {
			t.Fatalf("append %v: %v", b, err)
		}
	}
	if err := s.AppendEvents(ctx, c.ID, g.ID, records(30, 31), now.Add(30*time.Second)); errs.CodeOf(err) != eventlog.CodeNotActive {
		t.Errorf("append with a gap: %v, want NOT_ACTIVE", err)
	}
	if err := s.AppendEvents(ctx, c.ID, g.ID, nil, now.Add(30*time.Second)); err != nil {
		t.Errorf("renew: %v", err)
	}
	for _, after := range []int64{0, 1, 20, 21, 24, 25} {
		recs, active, err := s.GenerationEvents(ctx, c.ID, g.ID, after)
		if err != nil || !active || len(recs) != int(25-after) || (len(recs) > 0 && recs[0].Seq != after+1) {
			t.Errorf("after %d: %v active %v (%v)", after, seqs(recs), active, err)
		}
	}
	if _, _, err := s.GenerationEvents(ctx, c.ID, uuid.NewString(), 0); errs.CodeOf(err) != chat.CodeGenerationNotFound {
		t.Errorf("unknown log: %v", err)
	}
	if _, _, err := s.Conversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	m, active, err := s.GeneratedMessage(ctx, c.ID, g.ID)
	if err != nil || !active || m.Status != chat.StatusStreaming || m.ID != g.ID {
		t.Fatalf("generated message: %+v %v %v", m, active, err)
	}

	// Nothing has expired yet; later, it has.
	if ex, err := leases.Expired(ctx, now, 10); err != nil || len(ex) != 0 {
		t.Errorf("expired now: %+v %v", ex, err)
	}
	ex, err := leases.Expired(ctx, now.Add(31*time.Second), 10)
	if err != nil || len(ex) != 1 || ex[0].Kind != "generation" || ex[0].Collection != c.ID || ex[0].ID != g.ID {
		t.Errorf("expired later: %+v %v", ex, err)
	}
	// The sweeper's end needs an expired lease.
	if err := s.EndLoggedGeneration(ctx, c, m, records(26, 26), now); errs.CodeOf(err) != chat.CodeGenerationNotActive {
		t.Errorf("sweeper's end before expiry: %v", err)
	}

	// A stop request: the next append fails with STOP_REQUESTED, the end
	// still works, and then the log is inactive.
	if err := s.RequestStop(ctx, c.ID, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, c.ID, g.ID, records(26, 26), now.Add(30*time.Second)); errs.CodeOf(err) != eventlog.CodeStopRequested {
		t.Errorf("append after stop: %v", err)
	}
	reply.Status, reply.Content = chat.StatusStopped, "partial"
	if err := s.EndLoggedGeneration(ctx, c, reply, records(26, 27), time.Time{}); err != nil {
		t.Fatalf("end: %v", err)
	}
	recs, active, err := s.GenerationEvents(ctx, c.ID, g.ID, 20)
	if err != nil || active || len(recs) != 7 {
		t.Errorf("after the end: %v active %v (%v)", seqs(recs), active, err)
	}
	if err := s.RequestStop(ctx, c.ID, g.ID); errs.CodeOf(err) != chat.CodeGenerationNotActive {
		t.Errorf("stop after the end: %v", err)
	}
	if err := s.RequestStop(ctx, c.ID, uuid.NewString()); errs.CodeOf(err) != chat.CodeGenerationNotFound {
		t.Errorf("stop of an unknown reply: %v", err)
	}
	if err := s.EndLoggedGeneration(ctx, c, reply, records(28, 28), time.Time{}); errs.CodeOf(err) != chat.CodeGenerationNotActive {
		t.Errorf("second end: %v", err)
	}
	if ex, err := leases.Expired(ctx, now.Add(time.Hour), 10); err != nil || len(ex) != 0 {
		t.Errorf("expired after the end: %+v %v", ex, err)
	}
	_, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil || len(msgs) != 2 || msgs[1].Status != chat.StatusStopped || msgs[1].Content != "partial" || msgs[0].Status != chat.StatusCompleted {
		t.Fatalf("conversation: %+v (%v)", msgs, err)
	}
	// The chat is free again.
	start()
}

// BenchmarkLogWrites feeds an eventlog.Writer over the real store with 2 s
// of events at three rates (a slow model, a fast one, a burst) and counts
// the log's DynamoDB writes: at most one per 100 ms or per 20 events, so
// about 10 a second until the events come faster than 200 a second.
func BenchmarkLogWrites(b *testing.B) {
	for _, every := range []time.Duration{100 * time.Millisecond, 10 * time.Millisecond, time.Millisecond} {
		b.Run(fmt.Sprintf("event_every_%s", every), func(b *testing.B) {
			db := storetest.New(b)
			s := store.NewChats(db.DB, db.Data())
			ctx := context.Background()
			now := time.Now().UTC()
			var writes, events int
			for b.Loop() {
				c := newChat("u1", now)
				if err := s.CreateChat(ctx, c); err != nil {
					b.Fatal(err)
				}
				g := chat.Generation{ID: uuid.NewString(), Now: now, Until: now.Add(time.Minute), LeaseUntil: now.Add(30 * time.Second)}
				user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "hi", CreatedAt: now}
				reply := chat.Message{ID: g.ID, ChatID: c.ID, Role: "assistant", Status: chat.StatusStreaming, CreatedAt: now.Add(time.Microsecond)}
				if err := s.StartLoggedGeneration(ctx, c, g, records(1, 1), user, reply); err != nil {
					b.Fatal(err)
				}
				w := eventlog.NewWriter(ctx, 2, func(ctx context.Context, recs []eventlog.Record, until time.Time) error {
					writes++
					return s.AppendEvents(ctx, c.ID, g.ID, recs, until)
				}, eventlog.Options{})
				t := time.NewTicker(every)
				for end := time.Now().Add(2 * time.Second); time.Now().Before(end); <-t.C {
					w.Add(json.RawMessage(`{"type":"content","delta":"x "}`))
					events++
				}
				t.Stop()
				if _, _, err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(writes)/float64(b.N)/2, "writes/streamed-s")
			b.ReportMetric(float64(events)/float64(b.N)/2, "events/streamed-s")
		})
	}
}
