package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

func newRun(chatID, wfID, user string, at time.Time, status string) workflow.Run {
	return workflow.Run{ID: uuid.NewString(), ChatID: chatID, WorkflowID: wfID, UserID: user, Status: status, StartedAt: at, Attempt: 1,
		Steps: []workflow.RunStep{{ID: "a", ToolID: "hash", Status: workflow.StepPending}, {ID: "b", ToolID: "hash", Status: workflow.StepPending}},
		Plan:  []workflow.Step{{ID: "a", ToolID: "hash"}, {ID: "b", ToolID: "hash"}}}
}

func runEvent(seq int64, typ string) job.Record {
	return job.Record{Seq: seq, Prev: seq - 1, Data: json.RawMessage(fmt.Sprintf(`{"type":%q}`, typ))}
}

// TestRuns runs a run's life through the real store: created with its log
// (in a chat, or in none), read by id with one call, checkpoints
// conditioned on the status and the attempt, a claim by the sweeper, a
// conditional cancel, and deletes with the workflow or the chat that
// take the run's log with it.
func TestRuns(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	chats := store.NewChats(db.DB, db.Data())
	runs := store.NewRuns(db.DB, db.Data())
	jobs := store.NewJobs(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	c := newChat("u1", t0)
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	wfID := uuid.NewString()
	lease := job.Lease{Until: time.Now().Add(time.Minute)}
	r1 := newRun(c.ID, wfID, "u1", t0.Add(time.Minute), workflow.RunPending)
	r1.Input, r1.Trigger = map[string]any{"n": 3.0}, &workflow.Trigger{Type: workflow.TriggerManual}
	free := newRun("", wfID, "u1", t0.Add(2*time.Minute), workflow.RunPending) // started outside any chat
	free.Trigger = &workflow.Trigger{Type: workflow.TriggerWebhook, TriggerID: "t1"}
	for _, r := range []workflow.Run{r1, free} {
		if err := runs.CreateRun(ctx, r, lease); err != nil {
			t.Fatal(err)
		}
	}
	if err := runs.CreateRun(ctx, r1, lease); errs.CodeOf(err) != "RUN_EXISTS" {
		t.Fatalf("duplicate create = %v", err)
	}
	if err := runs.CreateRun(ctx, newRun(uuid.NewString(), wfID, "u1", t0, workflow.RunPending), lease); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Fatalf("create in a missing chat = %v", err)
	}

	db.Counter.Reset()
	got, err := runs.Run(ctx, free.ID)
	if err != nil || got.ChatID != "" || got.Trigger == nil || got.Trigger.TriggerID != "t1" || len(got.Plan) != 2 || db.Counter.Count() != 1 {
		t.Fatalf("Run = %+v %v (%d calls)", got, err, db.Counter.Count())
	}
	if _, err := runs.Run(ctx, uuid.NewString()); errs.CodeOf(err) != workflow.CodeRunNotFound {
		t.Fatalf("missing run = %v", err)
	}
	db.Counter.Reset()
	got, head, err := runs.LoggedRun(ctx, r1.ID)
	if err != nil || got.Input["n"] != 3.0 || !head.Active || head.LastSeq != 0 || head.Kind != workflow.RunKind || db.Counter.Count() != 1 {
		t.Fatalf("LoggedRun = %+v %+v %v (%d calls)", got, head, err, db.Counter.Count())
	}

	// Checkpoints: conditioned on the status and the attempt.
	r1.Status = workflow.RunRunning
	cp := workflow.Checkpoint{Run: r1, IfStatus: workflow.RunPending, Events: []job.Record{runEvent(1, workflow.EventRunStarted)}, LeaseUntil: lease.Until}
	if err := runs.SaveCheckpoint(ctx, cp); err != nil {
		t.Fatal(err)
	}
	cp.Events = []job.Record{runEvent(2, workflow.EventStepStarted)}
	if err := runs.SaveCheckpoint(ctx, cp); errs.CodeOf(err) != workflow.CodeRunStateChanged {
		t.Fatalf("checkpoint with a stale status = %v", err)
	}
	stale := cp
	stale.IfStatus, stale.Run.Attempt = workflow.RunRunning, 2
	if err := runs.SaveCheckpoint(ctx, stale); errs.CodeOf(err) != workflow.CodeRunStateChanged {
		t.Fatalf("checkpoint of another attempt = %v", err)
	}

	// The sweeper's claim needs an expired lease, and then moves the
	// attempt, which the old attempt's next checkpoint fails on.
	if err := runs.ClaimRun(ctx, r1, time.Now(), time.Now().Add(time.Minute)); errs.CodeOf(err) != workflow.CodeRunStateChanged {
		t.Fatalf("claim of a live lease = %v", err)
	}
	if err := runs.ClaimRun(ctx, r1, time.Now().Add(2*time.Minute), time.Now().Add(3*time.Minute)); err != nil {
		t.Fatalf("claim: %v", err)
	}
	cp.IfStatus = workflow.RunRunning
	if err := runs.SaveCheckpoint(ctx, cp); errs.CodeOf(err) != workflow.CodeRunStateChanged {
		t.Fatalf("checkpoint of the claimed-over attempt = %v", err)
	}
	r1.Attempt = 2
	now := t0.Add(time.Hour)
	r1.Status, r1.CompletedAt = workflow.RunCompleted, &now
	r1.Steps[0].Status, r1.Steps[0].Output = workflow.StepCompleted, map[string]any{"digest": "x", "n": 1.5}
	end := workflow.Checkpoint{Run: r1, IfStatus: workflow.RunRunning, End: true, Events: []job.Record{runEvent(2, workflow.EventRunCompleted)}}
	if err := runs.SaveCheckpoint(ctx, end); err != nil {
		t.Fatalf("final checkpoint: %v", err)
	}
	recs, h, err := jobs.Read(ctx, job.Ref{Kind: workflow.RunKind, Collection: r1.ID, ID: r1.ID}, 0)
	if err != nil || h.Active || len(recs) != 2 || h.Status != workflow.RunCompleted {
		t.Fatalf("the run's log: %v %+v %v", seqs(recs), h, err)
	}

	// Cancel: conditioned on the status read.
	if _, err := runs.CancelRun(ctx, free, now); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := runs.CancelRun(ctx, free, now); errs.CodeOf(err) != workflow.CodeRunStateChanged {
		t.Fatalf("cancel as read before = %v", err)
	}
	if got, _ := runs.Run(ctx, free.ID); got.Status != workflow.RunCancelled || got.Steps[0].Status != workflow.StepCancelled || got.CompletedAt == nil {
		t.Fatalf("cancelled run: %+v", got)
	}
	if o, err := runs.ChatOwner(ctx, c.ID); err != nil || o != "u1" {
		t.Fatalf("ChatOwner = %q, %v", o, err)
	}
	if _, err := runs.ChatOwner(ctx, uuid.NewString()); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Fatalf("ChatOwner missing = %v", err)
	}

	// Deleting the workflow's runs takes their logs; another workflow's
	// run stays; deleting the chat deletes its runs.
	other := newRun(c.ID, uuid.NewString(), "u1", t0.Add(3*time.Minute), workflow.RunPending)
	if err := runs.CreateRun(ctx, other, lease); err != nil {
		t.Fatal(err)
	}
	if err := runs.DeleteWorkflowRuns(ctx, wfID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{r1.ID, free.ID} {
		var left []struct{ PK, SK string }
		if err := db.Table(db.Data()).Get("PK", "RUN#"+id).All(ctx, &left); err != nil || len(left) != 0 {
			t.Fatalf("left of run %s after DeleteWorkflowRuns: %v, %v", id, left, err)
		}
	}
	if _, err := runs.Run(ctx, other.ID); err != nil {
		t.Fatalf("another workflow's run: %v", err)
	}
	if err := chats.DeleteChat(ctx, c.ID, "u1", nil); err != nil {
		t.Fatal(err)
	}
	for _, pk := range []string{"CHAT#" + c.ID, "RUN#" + other.ID} {
		var left []struct{ PK, SK string }
		if err := db.Table(db.Data()).Get("PK", pk).All(ctx, &left); err != nil || len(left) != 0 {
			t.Fatalf("left under %s after DeleteChat: %v, %v", pk, left, err)
		}
	}
}

// TestCreateRetry: a retry records itself as its run's latest retry in
// the transaction that stores it, conditioned on the latest the caller
// read; a retry whose condition fails (another started since, the run is
// gone) leaves nothing behind; in a chat and outside one.
func TestCreateRetry(t *testing.T) {
	t.Parallel()
	_, _, runs, ctx, t0, c := runsInAChat(t)
	lease := job.Lease{Until: time.Now().Add(time.Minute)}
	for _, chatID := range []string{c.ID, ""} {
		orig := newRun(chatID, uuid.NewString(), "u1", t0, workflow.RunFailed)
		if err := runs.CreateRun(ctx, orig, lease); err != nil {
			t.Fatal(err)
		}
		retryOf := func(id string) workflow.Run {
			r := newRun(chatID, orig.WorkflowID, "u1", t0.Add(time.Minute), workflow.RunPending)
			r.RetryOf = id
			return r
		}
		first, second, third := retryOf(orig.ID), retryOf(orig.ID), retryOf(orig.ID)
		if err := runs.CreateRetry(ctx, first, lease, ""); err != nil {
			t.Fatalf("first retry: %v", err)
		}
		if got, err := runs.Run(ctx, orig.ID); err != nil || got.LatestRetry != first.ID || got.Status != workflow.RunFailed {
			t.Fatalf("retried run %+v, %v; want latest retry %s", got, err, first.ID)
		}
		for _, tc := range []struct {
			name  string
			r     workflow.Run
			after string
			code  string
		}{
			{"another from the same reading", second, "", workflow.CodeRunActive},
			{"another from a stale reading", second, uuid.NewString(), workflow.CodeRunActive},
			{"of a run that is gone", retryOf(uuid.NewString()), "", workflow.CodeRunNotFound},
		} {
			if err := runs.CreateRetry(ctx, tc.r, lease, tc.after); errs.CodeOf(err) != tc.code {
				t.Errorf("%s (chat %q): %v, want %s", tc.name, chatID, err, tc.code)
			}
			if _, err := runs.Run(ctx, tc.r.ID); !errs.Is(err, errs.NotFound) {
				t.Errorf("%s (chat %q): the refused retry was stored: %v", tc.name, chatID, err)
			}
		}
		if err := runs.CreateRetry(ctx, third, lease, first.ID); err != nil {
			t.Fatalf("a retry after the first: %v", err)
		}
		if got, _ := runs.Run(ctx, orig.ID); got.LatestRetry != third.ID {
			t.Errorf("latest retry %s, want %s", got.LatestRetry, third.ID)
		}
		// A retry of a retry is recorded on the chain's root.
		chained := retryOf(third.ID)
		chained.RetryRoot = orig.ID
		if err := runs.CreateRetry(ctx, chained, lease, first.ID); errs.CodeOf(err) != workflow.CodeRunActive {
			t.Errorf("a retry in the chain from a stale reading: %v, want RUN_ACTIVE", err)
		}
		if err := runs.CreateRetry(ctx, chained, lease, third.ID); err != nil {
			t.Fatalf("a retry in the chain: %v", err)
		}
		root, _ := runs.Run(ctx, orig.ID)
		if got, _ := runs.Run(ctx, chained.ID); root.LatestRetry != chained.ID || got.RetryRoot != orig.ID || got.RetryOf != third.ID {
			t.Errorf("root's latest retry %s, the chained retry's root %s and retried run %s; want %s, %s, %s", root.LatestRetry, got.RetryRoot, got.RetryOf, chained.ID, orig.ID, third.ID)
		}
		if err := runs.CreateRetry(ctx, newRun(chatID, orig.WorkflowID, "u1", t0, workflow.RunPending), lease, ""); errs.KindOf(err) != errs.Internal {
			t.Errorf("a retry naming no run: %v, want Internal", err)
		}
	}
}

// TestRunsPage walks a chat's runs (oldest first) and a workflow's (newest
// first) page by page with the cursors the store returns: every run once,
// two calls per page; a cursor that is not one of its own is refused.
func TestRunsPage(t *testing.T) {
	t.Parallel()
	db, _, runs, ctx, t0, c := runsInAChat(t)
	wfID := uuid.NewString()
	var inChat, ofWorkflow []string
	for i := range 7 {
		chatID := c.ID
		if i%3 == 2 {
			chatID = "" // a run of the workflow started elsewhere
		}
		r := newRun(chatID, wfID, "u1", t0.Add(time.Duration(i)*time.Minute), workflow.RunCompleted)
		if err := runs.CreateRun(ctx, r, job.Lease{Until: t0}); err != nil {
			t.Fatal(err)
		}
		if chatID != "" {
			inChat = append(inChat, r.ID)
		}
		ofWorkflow = append(ofWorkflow, r.ID)
	}
	slices.Reverse(ofWorkflow)
	type pager func(ctx context.Context, id string, limit int, cursor string) ([]workflow.Run, string, error)
	for _, tc := range []struct {
		name string
		page pager
		id   string
		want []string
	}{
		{"chat", runs.ChatRunsPage, c.ID, inChat},
		{"workflow", runs.WorkflowRunsPage, wfID, ofWorkflow},
	} {
		for _, limit := range []int{1, 3, 7, 20} {
			var got []string
			cursor, pages := "", 0
			for {
				db.Counter.Reset()
				page, next, err := tc.page(ctx, tc.id, limit, cursor)
				if err != nil {
					t.Fatalf("%s, limit %d, page %d: %v", tc.name, limit, pages, err)
				}
				// The Query of the list entries, the BatchGetItem of
				// their runs.
				if n := db.Counter.Count(); n != 2 {
					t.Errorf("%s, limit %d: a page cost %d calls, want 2", tc.name, limit, n)
				}
				if len(page) > limit {
					t.Fatalf("%s, limit %d: a page of %d", tc.name, limit, len(page))
				}
				for _, r := range page {
					got = append(got, r.ID)
				}
				pages++
				if next == "" {
					break
				}
				if pages > 10 {
					t.Fatalf("%s, limit %d: no end", tc.name, limit)
				}
				cursor = next
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%s, limit %d: runs %v, want %v", tc.name, limit, got, tc.want)
			}
		}
		for _, bad := range []string{"not base64!", "TVNHIzIwMjY", "UlVOIw" + strings.Repeat("A", 200)} {
			if _, _, err := tc.page(ctx, tc.id, 5, bad); errs.CodeOf(err) != "INVALID_PAGINATION" {
				t.Errorf("%s: cursor %q: %v, want INVALID_PAGINATION", tc.name, bad, err)
			}
		}
	}
}

// runsInAChat is the store of the runs tests: the embedded engine's
// tables, the chats and runs over them, and a chat of u1 created at t0
// (2026-04-01).
func runsInAChat(t *testing.T) (*storetest.DB, *store.Chats, *store.Runs, context.Context, time.Time, chat.Chat) {
	t.Helper()
	db := storetest.New(t)
	chats := store.NewChats(db.DB, db.Data())
	runs := store.NewRuns(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	c := newChat("u1", t0)
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	return db, chats, runs, ctx, t0, c
}
