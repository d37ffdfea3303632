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
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

func records(from, to int64) []job.Record {
	var data []json.RawMessage
	for i := from; i <= to; i++ {
		data = append(data, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
	}
	return job.Chain(from-1, from, data...)
}

func seqs(recs []job.Record) []int64 {
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
	s, jobs, c, now := newLoggedChat(t)
	ctx := context.Background()
	start := func() (chat.Generation, chat.Message) {
		t.Helper()
		return startLogged(t, s, c, now)
	}
	g, reply := start()
	ref := job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: g.ID}
	if err := s.StartLoggedGeneration(ctx, c, chat.Generation{ID: uuid.NewString(), Now: now, Until: now.Add(time.Minute)}, records(1, 1),
		chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", CreatedAt: now}, chat.Message{ID: uuid.NewString(), ChatID: c.ID, CreatedAt: now}); errs.CodeOf(err) != chat.CodeGenerationActive {
		t.Fatalf("second start: %v, want GENERATION_ACTIVE", err)
	}
	lease := job.Lease{Until: now.Add(30 * time.Second)}
	for _, b := range [][2]int64{{2, 21}, {22, 25}} {
		lease.Reserved = b[1] + 200
		if err := jobs.Append(ctx, ref, records(b[0], b[1]), lease); err != nil {
			t.Fatalf("append %v: %v", b, err)
		}
	}
	if err := jobs.Append(ctx, ref, records(22, 23), lease); errs.CodeOf(err) != job.CodeNotActive {
		t.Errorf("a second write after event 21: %v, want NOT_ACTIVE", err)
	}
	if err := jobs.Append(ctx, ref, nil, job.Lease{Until: now.Add(30 * time.Second), Reserved: 300}); err != nil {
		t.Errorf("renew: %v", err)
	}
	if h, err := jobs.Head(ctx, ref); err != nil || h.LastSeq != 25 || h.Reserved != 300 || !h.Active || h.Closing() != 301 {
		t.Errorf("head after the renewal: %+v %v; want lastSeq 25, reserved 300, closing at 301", h, err)
	}
	for _, after := range []int64{0, 1, 20, 21, 24, 25} {
		recs, h, err := jobs.Read(ctx, ref, after)
		if err != nil || !h.Active || len(recs) != int(25-after) || (len(recs) > 0 && (recs[0].Seq != after+1 || recs[0].Prev != after)) {
			t.Errorf("after %d: %v active %v (%v)", after, seqs(recs), h.Active, err)
		}
	}
	if _, _, err := jobs.Read(ctx, job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: uuid.NewString()}, 0); !errs.Is(err, errs.NotFound) {
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
	if ex, err := jobs.Expired(ctx, now, 10); err != nil || len(ex) != 0 {
		t.Errorf("expired now: %+v %v", ex, err)
	}
	ex, err := jobs.Expired(ctx, now.Add(31*time.Second), 10)
	if err != nil || len(ex) != 1 || ex[0].Kind != "generation" || ex[0].Collection != c.ID || ex[0].ID != g.ID {
		t.Errorf("expired later: %+v %v", ex, err)
	}
	// The sweeper's end needs an expired lease.
	if err := s.EndLoggedGeneration(ctx, c, m, records(26, 26), now); errs.CodeOf(err) != chat.CodeGenerationNotActive {
		t.Errorf("sweeper's end before expiry: %v", err)
	}

	// A stop request: the next append fails with STOP_REQUESTED, the end
	// still works, and then the log is inactive.
	if err := jobs.RequestStop(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Append(ctx, ref, records(26, 26), lease); errs.CodeOf(err) != job.CodeStopRequested {
		t.Errorf("append after stop: %v", err)
	}
	// The end may skip ids (an interruption's closing events follow the
	// reservation): its first event names the last one written.
	reply.Status, reply.Content = chat.StatusStopped, "partial"
	closing := job.Chain(25, 301, json.RawMessage(`{"n":301}`), json.RawMessage(`{"n":302}`))
	if err := s.EndLoggedGeneration(ctx, c, reply, closing, time.Time{}); err != nil {
		t.Fatalf("end: %v", err)
	}
	recs, h, err := jobs.Read(ctx, ref, 20)
	if err != nil || h.Active || fmt.Sprint(seqs(recs)) != "[21 22 23 24 25 301 302]" || recs[5].Prev != 25 {
		t.Errorf("after the end: %v active %v (%v)", seqs(recs), h.Active, err)
	}
	if err := jobs.RequestStop(ctx, ref); errs.CodeOf(err) != job.CodeNotActive {
		t.Errorf("stop after the end: %v", err)
	}
	if err := jobs.RequestStop(ctx, job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: uuid.NewString()}); !errs.Is(err, errs.NotFound) {
		t.Errorf("stop of an unknown reply: %v", err)
	}
	if err := s.EndLoggedGeneration(ctx, c, reply, records(303, 303), time.Time{}); errs.CodeOf(err) != chat.CodeGenerationNotActive {
		t.Errorf("second end: %v", err)
	}
	if ex, err := jobs.Expired(ctx, now.Add(time.Hour), 10); err != nil || len(ex) != 0 {
		t.Errorf("expired after the end: %+v %v", ex, err)
	}
	_, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil || len(msgs) != 2 || msgs[1].Status != chat.StatusStopped || msgs[1].Content != "partial" || msgs[0].Status != chat.StatusCompleted {
		t.Fatalf("conversation: %+v (%v)", msgs, err)
	}
	// The chat is free again.
	start()
}

// BenchmarkLogWrites feeds a job.Writer over the real store with 2 s
// of events at three rates (a slow model, a fast one, a burst) and counts
// the log's DynamoDB writes: one when the events fill just under 1 KB
// (job.BatchFill) or the oldest has waited 400 ms, so 2.5 a second until
// the events pass about 2 KB a second, then one per KB of events.
func BenchmarkLogWrites(b *testing.B) {
	for _, every := range []time.Duration{100 * time.Millisecond, 10 * time.Millisecond, time.Millisecond} {
		b.Run(fmt.Sprintf("event_every_%s", every), func(b *testing.B) {
			db := storetest.New(b)
			s := store.NewChats(db.DB, db.Data())
			jobs := store.NewJobs(db.DB, db.Data())
			ctx := context.Background()
			now := time.Now().UTC()
			var writes, events int
			for b.Loop() {
				c := newChat("u1", now)
				if err := s.CreateChat(ctx, c); err != nil {
					b.Fatal(err)
				}
				g := chat.Generation{ID: uuid.NewString(), Now: now, Until: now.Add(time.Minute), Lease: job.Lease{Until: now.Add(30 * time.Second), Reserved: 201}}
				user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "hi", CreatedAt: now}
				reply := chat.Message{ID: g.ID, ChatID: c.ID, Role: "assistant", Status: chat.StatusStreaming, CreatedAt: now.Add(time.Microsecond)}
				if err := s.StartLoggedGeneration(ctx, c, g, records(1, 1), user, reply); err != nil {
					b.Fatal(err)
				}
				ref := job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: g.ID}
				w := job.NewWriter(ctx, 2, g.Lease.Reserved, func(ctx context.Context, recs []job.Record, l job.Lease) error {
					writes++
					return jobs.Append(ctx, ref, recs, l)
				}, job.Options{})
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

// TestLogSlots: each write of a log takes the slot after the event it
// follows, once. A heartbeat holds the slot until the next write replaces
// it; a stop request takes the slot after the last write (over a
// heartbeat), so the writer's next write there fails with STOP_REQUESTED
// whether or not it renews the lease; the end replaces the stop; an
// interruption's closing events, numbered after the reservation, are read
// from any id the dead writer may have handed out; and the head reports
// the last write's event and reservation, not the start's.
func TestLogSlots(t *testing.T) {
	t.Parallel()
	s, jobs, c, g, now := startedReply(t, nil, 200)
	ctx := context.Background()
	ref := job.Ref{Kind: chat.GenerationKind, Collection: c.ID, ID: g.ID}
	if h, err := jobs.Head(ctx, ref); err != nil || h.LastSeq != 0 || h.Reserved != 200 || !h.Active {
		t.Fatalf("head of an empty log: %+v %v", h, err)
	}
	// A heartbeat before any event, then the first events over it.
	if err := jobs.Append(ctx, ref, nil, job.Lease{Reserved: 200}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := jobs.Append(ctx, ref, records(1, 10), job.Lease{Reserved: 210}); err != nil {
		t.Fatalf("first write over the heartbeat: %v", err)
	}
	if err := jobs.Append(ctx, ref, records(1, 3), job.Lease{Reserved: 203}); errs.CodeOf(err) != job.CodeNotActive {
		t.Errorf("a second write to slot 1: %v, want NOT_ACTIVE", err)
	}
	if err := jobs.Append(ctx, ref, nil, job.Lease{Reserved: 210, Last: 10}); err != nil {
		t.Fatalf("heartbeat after event 10: %v", err)
	}
	if err := jobs.Append(ctx, ref, records(11, 12), job.Lease{Reserved: 212, Last: 10}); err != nil {
		t.Fatalf("write over the heartbeat: %v", err)
	}
	if h, err := jobs.Head(ctx, ref); err != nil || h.LastSeq != 12 || h.Reserved != 212 || h.Closing() != 213 {
		t.Errorf("head after the writes: %+v %v; want lastSeq 12, reserved 212", h, err)
	}
	if err := jobs.Append(ctx, ref, nil, job.Lease{Reserved: 212, Last: 12}); err != nil {
		t.Fatalf("heartbeat after event 12: %v", err)
	}

	// The stop takes slot 13 over the heartbeat; a second request is a
	// no-op; every later write fails with STOP_REQUESTED.
	for range 2 {
		if err := jobs.RequestStop(ctx, ref); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	for _, l := range []job.Lease{{Reserved: 213, Last: 12}, {Reserved: 213, Last: 12, Until: now.Add(30 * time.Second)}} {
		if err := jobs.Append(ctx, ref, records(13, 13), l); errs.CodeOf(err) != job.CodeStopRequested {
			t.Errorf("write after the stop (renewing %v): %v, want STOP_REQUESTED", !l.Until.IsZero(), err)
		}
	}
	if err := jobs.Append(ctx, ref, nil, job.Lease{Reserved: 212, Last: 12}); errs.CodeOf(err) != job.CodeStopRequested {
		t.Errorf("heartbeat after the stop: %v, want STOP_REQUESTED", err)
	}
	recs, h, err := jobs.Read(ctx, ref, 0)
	if err != nil || fmt.Sprint(seqs(recs)) != "[1 2 3 4 5 6 7 8 9 10 11 12]" || !h.StopRequested || h.LastSeq != 12 {
		t.Fatalf("read after the stop: %v %+v %v", seqs(recs), h, err)
	}

	// The sweeper's end replaces the stop: its closing events follow the
	// reservation (213), read from any id up to it.
	m, _, err := s.GeneratedMessage(ctx, c.ID, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	m.Status = chat.StatusFailed
	closing := job.Chain(12, h.Closing(), json.RawMessage(`{"n":"error"}`), json.RawMessage(`{"n":"end"}`))
	if err := s.EndLoggedGeneration(ctx, c, m, closing, now.Add(time.Minute)); err != nil {
		t.Fatalf("the sweeper's end: %v", err)
	}
	for _, after := range []int64{12, 13, 100, 212, 213} {
		recs, h, err := jobs.Read(ctx, ref, after)
		want := "[213 214]"
		if after == 213 {
			want = "[214]"
		}
		if err != nil || h.Active || fmt.Sprint(seqs(recs)) != want || recs[0].Prev > after && recs[0].Prev != 12 {
			t.Errorf("read after %d: %v %+v %v, want %s", after, seqs(recs), h, err, want)
		}
	}
	if h, err := jobs.Head(ctx, ref); err != nil || h.LastSeq != 214 || h.Active {
		t.Errorf("head after the end: %+v %v", h, err)
	}
	if err := jobs.Append(ctx, ref, records(13, 13), job.Lease{Reserved: 213, Last: 12}); errs.CodeOf(err) != job.CodeNotActive {
		t.Errorf("write after the end: %v, want NOT_ACTIVE", err)
	}
}

// startedReply starts a streamed reply in a new chat on a fresh store: its
// log holds first and reserves up to reserved.
func startedReply(t *testing.T, first []job.Record, reserved int64) (*store.Chats, *store.Jobs, chat.Chat, chat.Generation, time.Time) {
	t.Helper()
	s, jobs, c, now := newLoggedChat(t)
	ctx := context.Background()
	g := chat.Generation{ID: uuid.NewString(), Now: now, Until: now.Add(time.Minute), Lease: job.Lease{Until: now.Add(30 * time.Second), Reserved: reserved}}
	user := chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "hi", Status: chat.StatusCompleted, CreatedAt: now}
	reply := chat.Message{ID: g.ID, ChatID: c.ID, Role: "assistant", ReplyTo: user.ID, Status: chat.StatusStreaming, CreatedAt: now.Add(time.Microsecond)}
	if err := s.StartLoggedGeneration(ctx, c, g, first, user, reply); err != nil {
		t.Fatal(err)
	}
	return s, jobs, c, g, now
}
