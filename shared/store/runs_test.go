package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

func newRun(chatID, wfID, user string, at time.Time, status string) workflow.Run {
	return workflow.Run{ID: uuid.NewString(), ChatID: chatID, WorkflowID: wfID, UserID: user, Status: status, StartedAt: at,
		Steps: []workflow.RunStep{{ID: "a", ToolID: "hash", Status: workflow.StepPending}, {ID: "b", ToolID: "hash", Status: workflow.StepPending}}}
}

func TestRuns(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	chats := store.NewChats(db.DB, db.Data())
	runs := store.NewRuns(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	c := newChat("u1", t0)
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := chats.AddMessages(ctx, c, chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "hi", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	wfID := uuid.NewString()
	r2 := newRun(c.ID, wfID, "u1", t0.Add(2*time.Minute), workflow.RunPending)
	r1 := newRun(c.ID, wfID, "u1", t0.Add(time.Minute), workflow.RunPending)
	for _, r := range []workflow.Run{r2, r1} {
		if err := runs.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := runs.CreateRun(ctx, r1); errs.KindOf(err) != errs.Conflict {
		t.Fatalf("duplicate create = %v", err)
	}

	// Conditional saves.
	r1.Status = workflow.RunRunning
	if err := runs.SaveRun(ctx, r1, workflow.RunPending); err != nil {
		t.Fatal(err)
	}
	if err := runs.SaveRun(ctx, r1, workflow.RunPending); errs.CodeOf(err) != workflow.CodeRunStateChanged {
		t.Fatalf("save with a stale status = %v", err)
	}
	now := t0.Add(time.Hour)
	r1.Status, r1.CompletedAt, r1.Error = workflow.RunCompleted, &now, ""
	r1.Steps[0].Status, r1.Steps[0].Output = workflow.StepCompleted, map[string]any{"digest": "x", "n": 1.5}
	if err := runs.SaveRun(ctx, r1, workflow.RunRunning); err != nil {
		t.Fatal(err)
	}

	// Listing: one call, oldest first, messages left out.
	db.Counter.Reset()
	owner, list, err := runs.ChatRuns(ctx, c.ID)
	if err != nil || owner != "u1" || len(list) != 2 || db.Counter.Count() != 1 {
		t.Fatalf("ChatRuns = %q %v %v (%d calls)", owner, list, err, db.Counter.Count())
	}
	if list[0].ID != r1.ID || list[1].ID != r2.ID || list[0].Status != workflow.RunCompleted || list[0].Steps[0].Output["n"] != 1.5 ||
		list[0].CompletedAt == nil || !list[0].CompletedAt.Equal(now) || list[1].CompletedAt != nil || list[1].WorkflowID != wfID {
		t.Fatalf("runs = %+v", list)
	}
	if _, _, err := runs.ChatRuns(ctx, uuid.NewString()); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Fatalf("missing chat = %v", err)
	}
	if o, err := runs.ChatOwner(ctx, c.ID); err != nil || o != "u1" {
		t.Fatalf("ChatOwner = %q, %v", o, err)
	}
	if _, err := runs.ChatOwner(ctx, uuid.NewString()); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Fatalf("ChatOwner missing = %v", err)
	}
	// The conversation still holds only messages.
	if _, msgs, err := chats.Conversation(ctx, c.ID); err != nil || len(msgs) != 1 {
		t.Fatalf("Conversation = %v, %v", msgs, err)
	}

	// Cancel.
	if _, err := runs.CancelRun(ctx, c.ID, r2.ID, "u2", now); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("cancel another's = %v", err)
	}
	if _, err := runs.CancelRun(ctx, c.ID, uuid.NewString(), "u1", now); errs.CodeOf(err) != workflow.CodeRunNotFound {
		t.Fatalf("cancel missing run = %v", err)
	}
	if _, err := runs.CancelRun(ctx, uuid.NewString(), r2.ID, "u1", now); errs.CodeOf(err) != "CHAT_NOT_FOUND" {
		t.Fatalf("cancel in missing chat = %v", err)
	}
	if _, err := runs.CancelRun(ctx, c.ID, r1.ID, "u1", now); errs.CodeOf(err) != workflow.CodeRunNotActive || !errs.Is(err, errs.Invalid) {
		t.Fatalf("cancel finished = %v", err)
	}
	got, err := runs.CancelRun(ctx, c.ID, r2.ID, "u1", now)
	if err != nil || got.Status != workflow.RunCancelled || got.Steps[0].Status != workflow.StepCancelled || got.CompletedAt == nil {
		t.Fatalf("cancel = %+v, %v", got, err)
	}
	// The executor's next conditional write fails.
	r2.Status = workflow.RunRunning
	if err := runs.SaveRun(ctx, r2, workflow.RunPending); errs.CodeOf(err) != workflow.CodeRunStateChanged {
		t.Fatalf("save after cancel = %v", err)
	}

	// Deleting the workflow's runs; another workflow's run stays.
	other := newRun(c.ID, uuid.NewString(), "u1", t0.Add(3*time.Minute), workflow.RunPending)
	if err := runs.CreateRun(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := runs.DeleteWorkflowRuns(ctx, wfID); err != nil {
		t.Fatal(err)
	}
	if _, list, _ := runs.ChatRuns(ctx, c.ID); len(list) != 1 || list[0].ID != other.ID {
		t.Fatalf("after DeleteWorkflowRuns: %+v", list)
	}
	if err := runs.DeleteWorkflowRuns(ctx, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	// Deleting the chat deletes its runs.
	if err := chats.DeleteChat(ctx, c.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	var left []struct{ PK, SK string }
	if err := db.Table(db.Data()).Get("PK", "CHAT#"+c.ID).All(ctx, &left); err != nil || len(left) != 0 {
		t.Fatalf("left after DeleteChat: %v, %v", left, err)
	}
}

// TestRunsPage walks a chat's runs page by page with the cursors RunsPage
// returns: every run once, oldest first, messages left out, one call per
// page; a cursor that is not one of its own is refused.
func TestRunsPage(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	chats := store.NewChats(db.DB, db.Data())
	runs := store.NewRuns(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	c := newChat("u1", t0)
	if err := chats.CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 7 {
		r := newRun(c.ID, uuid.NewString(), "u1", t0.Add(time.Duration(i)*time.Minute), workflow.RunCompleted)
		if err := runs.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID)
		if err := chats.AddMessages(ctx, c, chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: "hi", CreatedAt: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1, 3, 7, 20} {
		var got []string
		cursor, pages := "", 0
		for {
			db.Counter.Reset()
			page, next, err := runs.RunsPage(ctx, c.ID, limit, cursor)
			if err != nil {
				t.Fatalf("limit %d, page %d: %v", limit, pages, err)
			}
			if n := db.Counter.Count(); n != 1 {
				t.Errorf("limit %d: a page cost %d calls, want 1", limit, n)
			}
			if len(page) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(page))
			}
			for _, r := range page {
				got = append(got, r.ID)
			}
			pages++
			if next == "" {
				break
			}
			if pages > 10 {
				t.Fatalf("limit %d: no end", limit)
			}
			cursor = next
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("limit %d: runs %v, want %v", limit, got, want)
		}
		if wantPages := (7 + limit - 1) / limit; pages != wantPages {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
	for _, bad := range []string{"not base64!", "TVNHIzIwMjY", "UlVOIw" + strings.Repeat("A", 200)} {
		if _, _, err := runs.RunsPage(ctx, c.ID, 5, bad); errs.CodeOf(err) != "INVALID_PAGINATION" {
			t.Errorf("cursor %q: %v, want INVALID_PAGINATION", bad, err)
		}
	}
}
