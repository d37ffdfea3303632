package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

// listKeys are the index keys of a run, on its list entry (SK LIST) or,
// in the shape runs were stored in before list entries, on its run item.
type listKeys struct {
	PK, SK                         string
	GSI1PK, GSI1SK, GSI2PK, GSI2SK string
}

// toOldShape rewrites run runID as the store wrote runs before list
// entries: its index keys on the run item (SK RUN), no list entry.
func toOldShape(t *testing.T, db *storetest.DB, runID string) {
	t.Helper()
	ctx := context.Background()
	data := db.Table(db.Data())
	var l listKeys
	if err := data.Get("PK", "RUN#"+runID).Range("SK", dynamo.Equal, "LIST").Consistent(true).One(ctx, &l); err != nil {
		t.Fatalf("list entry of %s: %v", runID, err)
	}
	u := data.Update("PK", "RUN#"+runID).Range("SK", "RUN").Set("GSI1PK", l.GSI1PK).Set("GSI1SK", l.GSI1SK)
	if l.GSI2PK != "" {
		u.Set("GSI2PK", l.GSI2PK).Set("GSI2SK", l.GSI2SK)
	}
	if err := db.WriteTx().Update(u).Delete(data.Delete("PK", "RUN#"+runID).Range("SK", "LIST")).Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// keysOf returns the items of run runID that carry its list keys.
func keysOf(t *testing.T, db *storetest.DB, runID string) []listKeys {
	t.Helper()
	var all []listKeys
	if err := db.Table(db.Data()).Get("PK", "RUN#"+runID).Consistent(true).All(context.Background(), &all); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(k listKeys) bool { return !strings.HasPrefix(k.GSI1PK, "WFRUNS#") })
}

// walk lists every page of a chat's or a workflow's runs with the cursors
// the store returns and returns the runs in order and each page's
// DynamoDB calls.
func walk(t *testing.T, db *storetest.DB, page func(ctx context.Context, id string, limit int, cursor string) ([]workflow.Run, string, error),
	id string, limit int) ([]workflow.Run, []int64) {
	t.Helper()
	var (
		runs  []workflow.Run
		calls []int64
	)
	for cursor := ""; ; {
		db.Counter.Reset()
		p, next, err := page(context.Background(), id, limit, cursor)
		if err != nil {
			t.Fatalf("limit %d, page %d: %v", limit, len(calls), err)
		}
		calls = append(calls, db.Counter.Count())
		if len(p) > limit {
			t.Fatalf("limit %d: a page of %d", limit, len(p))
		}
		runs = append(runs, p...)
		if next == "" {
			return runs, calls
		}
		if len(calls) > 20 {
			t.Fatalf("limit %d: no end", limit)
		}
		cursor = next
	}
}

func runIDs(runs []workflow.Run) string {
	var s []string
	for _, r := range runs {
		s = append(s, r.ID)
	}
	return strings.Join(s, ",")
}

// TestRunListEntries: a run's index keys live on its list entry, not on
// the run item its checkpoints rewrite; runs stored before (keys on the
// run item) are listed with the others in the same order, with the same
// cursors and their latest steps, in one Query and at most one
// BatchGetItem a page (none for a page of old runs only); LoggedRun of an
// old run whose log is active moves its keys to a list entry (its
// checkpoints then write no index copy), of an ended one leaves it; and
// deleting the workflow or the chat deletes every run of either shape
// whole.
func TestRunListEntries(t *testing.T) {
	t.Parallel()
	db, chats, runs, ctx, t0, c := runsInAChat(t)
	wfID := uuid.NewString()
	lease := job.Lease{Until: time.Now().Add(time.Minute)}
	var (
		all    []workflow.Run // oldest first
		old    = map[string]bool{}
		inChat []workflow.Run
	)
	for i := range 8 {
		chatID := c.ID
		if i%4 == 3 {
			chatID = "" // started elsewhere
		}
		r := newRun(chatID, wfID, "u1", t0.Add(time.Duration(i)*time.Minute), workflow.RunPending)
		if err := runs.CreateRun(ctx, r, lease); err != nil {
			t.Fatal(err)
		}
		if k := keysOf(t, db, r.ID); len(k) != 1 || k[0].SK != "LIST" || (chatID != "") != (k[0].GSI2PK != "") {
			t.Fatalf("a new run's index keys: %+v, want them on its list entry only", k)
		}
		if i%2 == 0 {
			toOldShape(t, db, r.ID)
			old[r.ID] = true
		}
		all = append(all, r)
		if chatID != "" {
			inChat = append(inChat, r)
		}
	}
	// A checkpoint of each shape: the lists show the latest steps.
	for _, r := range all[:2] {
		r.Status = workflow.RunRunning
		r.Steps[0].Status, r.Steps[0].Output = workflow.StepCompleted, map[string]any{"digest": r.ID}
		cp := workflow.Checkpoint{Run: r, IfStatus: workflow.RunPending, Events: []job.Record{runEvent(1, workflow.EventRunStarted)}, LeaseUntil: lease.Until}
		if err := runs.SaveCheckpoint(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	checkLists := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			name string
			page func(ctx context.Context, id string, limit int, cursor string) ([]workflow.Run, string, error)
			id   string
			want []workflow.Run
		}{
			{"chat", runs.ChatRunsPage, c.ID, inChat},
			{"workflow", runs.WorkflowRunsPage, wfID, newest},
		} {
			for _, limit := range []int{1, 2, 3, 20} {
				got, calls := walk(t, db, tc.page, tc.id, limit)
				if runIDs(got) != runIDs(tc.want) {
					t.Errorf("%s: %s, limit %d: runs %v, want %v", when, tc.name, limit, runIDs(got), runIDs(tc.want))
					continue
				}
				for i, r := range got {
					if r.WorkflowID != wfID || r.Status == "" || len(r.Steps) != 2 {
						t.Errorf("%s: %s: listed run %+v", when, tc.name, r)
					}
					if r.ID == all[0].ID || r.ID == all[1].ID {
						if r.Status != workflow.RunRunning || r.Steps[0].Output["digest"] != r.ID {
							t.Errorf("%s: %s: run %s listed without its last checkpoint: %+v", when, tc.name, r.ID, r)
						}
					}
					// One Query a page, and a BatchGetItem when the page
					// holds a run with a list entry.
					page := i / limit
					start := page * limit
					wantCalls := int64(1)
					for _, x := range got[start:min(start+limit, len(got))] {
						if !old[x.ID] {
							wantCalls = 2
						}
					}
					if calls[page] != wantCalls {
						t.Errorf("%s: %s, limit %d: page %d cost %d calls, want %d", when, tc.name, limit, page, calls[page], wantCalls)
					}
				}
			}
		}
	}
	checkLists("mixed shapes")

	// A cursor taken before a run converts goes on after it: the run is
	// listed once.
	p, next, err := runs.WorkflowRunsPage(ctx, wfID, 2, "")
	if err != nil || runIDs(p) != runIDs(newest[:2]) || next == "" {
		t.Fatalf("first page: %v %q %v", runIDs(p), next, err)
	}
	convert := newest[3] // on the second page, old shape
	if !old[convert.ID] {
		t.Fatalf("run %s is not of the old shape", convert.ID)
	}
	before := keysOf(t, db, convert.ID)
	db.Counter.Reset()
	got, head, err := runs.LoggedRun(ctx, convert.ID)
	if err != nil || got.ID != convert.ID || !head.Active {
		t.Fatalf("LoggedRun of an old run: %+v %+v %v", got, head, err)
	}
	if n := db.Counter.Count(); n != 2 {
		t.Errorf("LoggedRun of an active old run: %d calls, want 2 (the read, the move)", n)
	}
	after := keysOf(t, db, convert.ID)
	if len(before) != 1 || len(after) != 1 || after[0].SK != "LIST" || before[0].SK != "RUN" ||
		after[0].GSI1SK != before[0].GSI1SK || after[0].GSI2SK != before[0].GSI2SK || after[0].GSI2PK != before[0].GSI2PK {
		t.Fatalf("keys before LoggedRun %+v, after %+v: want them moved as they were to the list entry", before, after)
	}
	delete(old, convert.ID)
	db.Counter.Reset()
	if _, _, err := runs.LoggedRun(ctx, convert.ID); err != nil || db.Counter.Count() != 1 {
		t.Fatalf("LoggedRun of a converted run: %v, %d calls, want 1", err, db.Counter.Count())
	}
	rest, _ := walk(t, db, func(ctx context.Context, id string, limit int, cursor string) ([]workflow.Run, string, error) {
		if cursor == "" {
			cursor = next
		}
		return runs.WorkflowRunsPage(ctx, id, limit, cursor)
	}, wfID, 2)
	if runIDs(rest) != runIDs(newest[2:]) {
		t.Errorf("after the conversion: %v, want %v", runIDs(rest), runIDs(newest[2:]))
	}

	// An old run whose log ended stays as it is: nothing will write it.
	ended := all[6]
	now := t0.Add(time.Hour)
	ended.Status, ended.CompletedAt = workflow.RunCompleted, &now
	if err := runs.SaveCheckpoint(ctx, workflow.Checkpoint{Run: ended, IfStatus: workflow.RunPending, End: true, Events: []job.Record{runEvent(1, workflow.EventRunCompleted)}}); err != nil {
		t.Fatal(err)
	}
	db.Counter.Reset()
	if _, h, err := runs.LoggedRun(ctx, ended.ID); err != nil || h.Active || db.Counter.Count() != 1 {
		t.Fatalf("LoggedRun of an ended old run: %+v %v, %d calls, want 1", h, err, db.Counter.Count())
	}
	if k := keysOf(t, db, ended.ID); len(k) != 1 || k[0].SK != "RUN" {
		t.Fatalf("an ended old run's keys: %+v, want them left on its run item", k)
	}
	checkLists("after conversions")

	// Deleting the workflow deletes its runs of both shapes whole; the
	// chat's then has none left; a run of another workflow in the chat,
	// of the old shape, goes with the chat.
	other := newRun(c.ID, uuid.NewString(), "u1", t0.Add(time.Hour), workflow.RunPending)
	if err := runs.CreateRun(ctx, other, lease); err != nil {
		t.Fatal(err)
	}
	toOldShape(t, db, other.ID)
	if err := runs.DeleteWorkflowRuns(ctx, wfID); err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		var left []listKeys
		if err := db.Table(db.Data()).Get("PK", "RUN#"+r.ID).Consistent(true).All(ctx, &left); err != nil || len(left) != 0 {
			t.Fatalf("left of run %s after DeleteWorkflowRuns: %+v, %v", r.ID, left, err)
		}
	}
	if p, _, err := runs.ChatRunsPage(ctx, c.ID, 20, ""); err != nil || runIDs(p) != other.ID {
		t.Fatalf("the chat's runs after the workflow's deletion: %v %v, want %s", runIDs(p), err, other.ID)
	}
	if err := chats.DeleteChat(ctx, c.ID, "u1", nil); err != nil {
		t.Fatal(err)
	}
	var left []listKeys
	if err := db.Table(db.Data()).Get("PK", "RUN#"+other.ID).Consistent(true).All(ctx, &left); err != nil || len(left) != 0 {
		t.Fatalf("left of an old run after DeleteChat: %+v, %v", left, err)
	}
}

// TestRunsPageBytes: a page of large runs ends at about 1 MB, as the
// Query of the runs themselves did, and the next page starts after it.
func TestRunsPageBytes(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	runs := store.NewRuns(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	wfID := uuid.NewString()
	var want []workflow.Run
	for i := range 5 {
		r := newRun("", wfID, "u1", t0.Add(time.Duration(i)*time.Minute), workflow.RunCompleted)
		r.Steps[0].Output = map[string]any{"text": strings.Repeat("x", 300<<10)}
		if err := runs.CreateRun(ctx, r, job.Lease{Until: t0}); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	slices.Reverse(want)
	first, next, err := runs.WorkflowRunsPage(ctx, wfID, 5, "")
	if err != nil || len(first) != 4 || next == "" {
		t.Fatalf("first page of 300 KB runs: %d runs, next %q, %v; want 4 (1 MB) and a cursor", len(first), next, err)
	}
	got, _ := walk(t, db, runs.WorkflowRunsPage, wfID, 5)
	if runIDs(got) != runIDs(want) {
		t.Errorf("runs %v, want %v", runIDs(got), runIDs(want))
	}
}

// TestCheckpointWriteUnits: a checkpoint writes the run item and its
// events, and no index copy of the run item, which a run of the old shape
// (its index keys on the run item, in GSI1 and GSI2) wrote twice more
// until LoggedRun converted it.
// The units are the embedded engine's, by DynamoDB's rules: a run item
// between 2 and 3 KB (3 units, and so are its index copies), an events
// slot of 1, doubled in a transaction.
func TestCheckpointWriteUnits(t *testing.T) {
	t.Parallel()
	tables := storetest.New(t)
	meter := &store.CapacityMeter{}
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{Region: "us-east-1", Endpoint: storetest.Engine(t).URL, Capacity: meter})
	if err != nil {
		t.Fatal(err)
	}
	chats := store.NewChats(db, tables.Data())
	runs := store.NewRuns(db, tables.Data())
	c := newChat("u1", time.Now())
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	lease := job.Lease{Until: time.Now().Add(time.Minute)}
	for _, tc := range []struct {
		name           string
		old, converted bool
		writeUnits     float64
	}{
		{"list entry", false, false, 2*3 + 2*1},
		{"old shape", true, false, 2*3*3 + 2*1},
		// LoggedRun, as the runner reads the run before it goes on, moved
		// the keys to a list entry.
		{"old shape, converted", true, true, 2*3 + 2*1},
	} {
		r := newRun(c.ID, uuid.NewString(), "u1", time.Now(), workflow.RunPending)
		if err := runs.CreateRun(ctx, r, lease); err != nil {
			t.Fatal(err)
		}
		if tc.old {
			toOldShape(t, tables, r.ID)
		}
		if tc.converted {
			if _, _, err := runs.LoggedRun(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}
		r.Status = workflow.RunRunning
		r.Steps[0].Status, r.Steps[0].Output = workflow.StepCompleted, map[string]any{"text": strings.Repeat("x", 2000)}
		meter.Reset()
		// Events that leave the lease as it is: the run item and a slot.
		cp := workflow.Checkpoint{Run: r, IfStatus: workflow.RunPending, Events: []job.Record{runEvent(1, workflow.EventRunStarted)}}
		if err := runs.SaveCheckpoint(ctx, cp); err != nil {
			t.Fatal(err)
		}
		if got := meter.Snapshot().WriteUnits; got != tc.writeUnits {
			t.Errorf("%s: a checkpoint cost %v write units, want %v", tc.name, got, tc.writeUnits)
		}
	}
}
