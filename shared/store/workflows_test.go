package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

// storedWorkflow is a store over a new embedded engine holding one
// workflow of user u1.
func storedWorkflow(t *testing.T) (*storetest.DB, *store.Workflows, workflow.Workflow) {
	t.Helper()
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	w := newWorkflow("u1", time.Now().UTC())
	if err := s.CreateWorkflow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return db, s, w
}

// deletedWhole deletes w and checks that nothing of its collection is
// left.
func deletedWhole(t *testing.T, db *storetest.DB, s *store.Workflows, w workflow.Workflow) {
	t.Helper()
	ctx := context.Background()
	if err := s.DeleteWorkflow(ctx, w.ID, w.UserID, nil); err != nil {
		t.Fatal(err)
	}
	var left []map[string]any
	if err := db.Table(db.Data()).Get("PK", "WF#"+w.ID).All(ctx, &left); err != nil || len(left) != 0 {
		t.Errorf("left behind: %d items %v, %v", len(left), left, err)
	}
}

func newWorkflow(user string, at time.Time) workflow.Workflow {
	return workflow.Workflow{ID: uuid.NewString(), UserID: user, Name: "w", Steps: []workflow.Step{}, Version: 1, CreatedAt: at, UpdatedAt: at}
}

func TestWorkflowsListCounterAndDelete(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 5 {
		w := newWorkflow("u1", t0.Add(time.Duration(i)*time.Minute))
		if err := s.CreateWorkflow(ctx, w); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	if err := s.CreateWorkflow(ctx, newWorkflow("u2", t0)); err != nil {
		t.Fatal(err)
	}
	// An update moves workflow 0 to the top and bumps its version.
	prev, err := s.Workflow(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	next := prev
	next.Name, next.Version, next.UpdatedAt = "renamed", 2, t0.Add(time.Hour)
	if err := s.UpdateWorkflow(ctx, next, prev); err != nil {
		t.Fatal(err)
	}
	if w0, err := s.Workflow(ctx, ids[0]); err != nil || w0.Name != "renamed" || w0.Version != 2 {
		t.Fatalf("after update = %+v, %v", w0, err)
	}
	// The same write again: the version moved on.
	if err := s.UpdateWorkflow(ctx, next, prev); errs.CodeOf(err) != workflow.CodeConcurrentUpdate {
		t.Errorf("stale update: %v", err)
	}
	other := next
	other.UserID, other.Version = "u2", 3
	if err := s.UpdateWorkflow(ctx, other, next); errs.CodeOf(err) != workflow.CodeConcurrentUpdate {
		t.Errorf("update as another owner: %v", err)
	}
	missing := next
	missing.ID = uuid.NewString()
	if err := s.UpdateWorkflow(ctx, missing, prev); errs.CodeOf(err) != workflow.CodeConcurrentUpdate {
		t.Errorf("update missing: %v", err)
	}
	want := []string{ids[0], ids[4], ids[3], ids[2], ids[1]}
	for _, tt := range []struct{ limit, offset, from, to int }{{20, 0, 0, 5}, {2, 0, 0, 2}, {2, 2, 2, 4}, {2, 4, 4, 5}, {3, 9, 5, 5}} {
		db.Counter.Reset()
		ws, total, err := s.ListWorkflows(ctx, "u1", paging.Page{Limit: tt.limit, Offset: tt.offset})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range ws {
			got = append(got, w.ID)
		}
		if total != 5 || fmt.Sprint(got) != fmt.Sprint(want[tt.from:tt.to]) && !(len(got) == 0 && tt.from == tt.to) {
			t.Errorf("limit %d offset %d: total %d ids %v, want %v", tt.limit, tt.offset, total, got, want[tt.from:tt.to])
		}
		if n := db.Counter.Count(); n != 1 {
			t.Errorf("ListWorkflows cost %d calls", n)
		}
	}

	// Messages and a proposal in one transaction; Conversation in one read.
	msgs := []workflow.Message{
		{ID: uuid.NewString(), WorkflowID: ids[1], Role: "user", Content: "add", CreatedAt: t0.Add(time.Second)},
		{ID: uuid.NewString(), WorkflowID: ids[1], Role: "assistant", Content: "ok", CreatedAt: t0.Add(2 * time.Second)},
	}
	p := workflow.Proposal{ID: uuid.NewString(), WorkflowID: ids[1], MessageID: msgs[1].ID, Status: workflow.ProposalPending,
		Changes: []workflow.Change{{Type: workflow.ChangeRemoveStep, StepID: "x"}}, BaseVersion: 1, CreatedAt: msgs[1].CreatedAt}
	db.Counter.Reset()
	if err := s.AddMessages(ctx, ids[1], &p, msgs...); err != nil {
		t.Fatal(err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("AddMessages cost %d calls", n)
	}
	if err := s.AddMessages(ctx, uuid.NewString(), nil, msgs[0]); errs.KindOf(err) != errs.NotFound {
		t.Errorf("add to missing workflow: %v", err)
	}
	db.Counter.Reset()
	w, got, err := s.Conversation(ctx, ids[1])
	if err != nil || w.ID != ids[1] || len(got) != 2 || got[0].Role != "user" || got[1].Proposal == nil ||
		got[1].Proposal.Changes[0].StepID != "x" || got[1].Proposal.Status != "pending" || got[0].Proposal != nil {
		t.Fatalf("conversation = %+v %+v %v", w, got, err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("Conversation cost %d calls", n)
	}

	// Delete: nothing of the collection left, counter decremented.
	if err := s.DeleteWorkflow(ctx, ids[1], "u2", nil); errs.KindOf(err) != errs.Forbidden {
		t.Errorf("delete by another user: %v", err)
	}
	if err := s.DeleteWorkflow(ctx, ids[1], "u1", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWorkflow(ctx, ids[1], "u1", nil); errs.KindOf(err) != errs.NotFound {
		t.Errorf("second delete: %v", err)
	}
	var left []struct{ PK, SK string }
	if err := db.Table(db.Data()).Get("PK", "WF#"+ids[1]).All(ctx, &left); err != nil || len(left) != 0 {
		t.Errorf("left behind: %v %v", left, err)
	}
	if _, total, _ := s.ListWorkflows(ctx, "u1", paging.Page{Limit: 20}); total != 4 {
		t.Errorf("total after delete = %d", total)
	}
	if _, total, _ := s.ListWorkflows(ctx, "u2", paging.Page{Limit: 20}); total != 1 {
		t.Errorf("u2 total = %d", total)
	}
}

func TestWorkflowsApplyAndReject(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	w := newWorkflow("u1", t0)
	if err := s.CreateWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	var props []workflow.Proposal
	for range 3 {
		m := workflow.Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: "assistant", Content: "p", CreatedAt: t0}
		p := workflow.Proposal{ID: uuid.NewString(), WorkflowID: w.ID, MessageID: m.ID, Status: workflow.ProposalPending, BaseVersion: 1, CreatedAt: t0}
		if err := s.AddMessages(ctx, w.ID, &p, m); err != nil {
			t.Fatal(err)
		}
		props = append(props, p)
	}
	db.Counter.Reset()
	gotW, gotP, found, err := s.WorkflowProposal(ctx, w.ID, props[0].ID)
	if err != nil || !found || gotW.Version != 1 || gotP.Status != "pending" || gotP.ID != props[0].ID {
		t.Fatalf("WorkflowProposal = %+v %+v %v %v", gotW, gotP, found, err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("WorkflowProposal cost %d calls", n)
	}
	if _, _, found, err := s.WorkflowProposal(ctx, w.ID, uuid.NewString()); err != nil || found {
		t.Errorf("missing proposal: %v %v", found, err)
	}
	if _, _, _, err := s.WorkflowProposal(ctx, uuid.NewString(), props[0].ID); errs.CodeOf(err) != workflow.CodeWorkflowNotFound {
		t.Errorf("missing workflow: %v", err)
	}

	next := gotW
	next.Version, next.UpdatedAt, next.Name = 2, t0.Add(time.Minute), "applied"
	next.Steps = []workflow.Step{{ID: "a", ToolID: "datetime_now", Inputs: map[string]any{"timezone": "UTC"}, Outputs: []string{"iso", "unix"}}}
	db.Counter.Reset()
	if err := s.ApplyProposal(ctx, next, 1, props[0].ID, next.UpdatedAt); err != nil {
		t.Fatal(err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("ApplyProposal cost %d calls", n)
	}
	// Stale version, or a proposal no longer pending: CONCURRENT_UPDATE, nothing written.
	if err := s.ApplyProposal(ctx, next, 1, props[1].ID, next.UpdatedAt); errs.CodeOf(err) != workflow.CodeConcurrentUpdate {
		t.Errorf("stale version: %v", err)
	}
	next.Version = 3
	if err := s.ApplyProposal(ctx, next, 2, props[0].ID, next.UpdatedAt); errs.CodeOf(err) != workflow.CodeConcurrentUpdate {
		t.Errorf("applied twice: %v", err)
	}
	gotW, gotP, _, _ = s.WorkflowProposal(ctx, w.ID, props[0].ID)
	if gotW.Version != 2 || gotW.Name != "applied" || len(gotW.Steps) != 1 || gotW.Steps[0].Inputs["timezone"] != "UTC" ||
		gotP.Status != "applied" || gotP.AppliedAt == nil {
		t.Errorf("after apply: %+v %+v", gotW, gotP)
	}
	if _, p1, _, _ := s.WorkflowProposal(ctx, w.ID, props[1].ID); p1.Status != "pending" {
		t.Errorf("failed apply changed proposal: %+v", p1)
	}
	if ws, _, _ := s.ListWorkflows(ctx, "u1", paging.Page{Limit: 1}); len(ws) != 1 || !ws[0].UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("GSI not moved: %+v", ws)
	}

	if err := s.RejectProposal(ctx, w.ID, props[1].ID, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.RejectProposal(ctx, w.ID, props[1].ID, t0); errs.CodeOf(err) != workflow.CodeConcurrentUpdate {
		t.Errorf("reject twice: %v", err)
	}
	if err := s.RejectProposal(ctx, w.ID, props[0].ID, t0); errs.CodeOf(err) != workflow.CodeConcurrentUpdate {
		t.Errorf("reject applied: %v", err)
	}
	if _, p1, _, _ := s.WorkflowProposal(ctx, w.ID, props[1].ID); p1.Status != "rejected" || p1.RejectedAt == nil {
		t.Errorf("rejected = %+v", p1)
	}

	// Two transactions on the same version: exactly one wins.
	var wg sync.WaitGroup
	results := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := next
			n.Version, n.Name = 3, fmt.Sprint("racer", i)
			pid := props[2].ID
			if i == 1 {
				pid = props[1].ID // rejected: its condition fails anyway
			}
			results[i] = s.ApplyProposal(ctx, n, 2, pid, t0.Add(2*time.Minute))
		}()
	}
	wg.Wait()
	if results[0] != nil || errs.CodeOf(results[1]) != workflow.CodeConcurrentUpdate {
		t.Errorf("race results = %v", results)
	}
}

// TestNothingJoinsAWorkflowBeingDeleted: once a delete has begun, a
// message or an apply written concurrently is refused, and the interrupted
// delete can be retried to the end.
func TestNothingJoinsAWorkflowBeingDeleted(t *testing.T) {
	t.Parallel()
	db, s, w := storedWorkflow(t)
	ctx, t0 := context.Background(), w.CreatedAt
	p := &workflow.Proposal{ID: uuid.NewString(), WorkflowID: w.ID, MessageID: uuid.NewString(), Status: workflow.ProposalPending,
		Changes: []workflow.Change{}, BaseVersion: w.Version, CreatedAt: t0}
	a := workflow.Message{ID: p.MessageID, WorkflowID: w.ID, Role: "assistant", Content: "proposal", Proposal: p, CreatedAt: t0}
	if err := s.AddMessages(ctx, w.ID, p, a); err != nil {
		t.Fatal(err)
	}
	next := w
	next.Version++
	// The first step of DeleteWorkflow, as a concurrent request would see it.
	if err := db.Table(db.Data()).Update("PK", "WF#"+w.ID).Range("SK", "WF").Set("deleting", true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	m := workflow.Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: "user", Content: "late", CreatedAt: t0}
	if err := s.AddMessages(ctx, w.ID, nil, m); err == nil {
		t.Error("a message joined a workflow being deleted")
	}
	if err := s.ApplyProposal(ctx, next, w.Version, p.ID, t0); err == nil {
		t.Error("an apply rewrote a workflow being deleted")
	}
	deletedWhole(t, db, s, w)
}

// TestWorkflowToolNames: a toolName is claimed in the transaction of the
// workflow's write, unique per user (409 TOOL_NAME_TAKEN, nothing
// written), moved on a rename, kept in step by applies, released by a
// rename to none and by the delete; ExposedTools is one Query of the
// exposed ones and ExposedTool one GetItem.
func TestWorkflowToolNames(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	schema := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)

	a := newWorkflow("u1", t0)
	a.ToolName, a.ExposeAsTool, a.InputSchema, a.Description = "search", true, schema, "Searches."
	a.Steps = []workflow.Step{{ID: "s", ToolID: "hash", Inputs: map[string]any{"text": "{{input.q}}"}, Outputs: []string{"digest"}}}
	if err := s.CreateWorkflow(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Workflow(ctx, a.ID); err != nil || got.ToolName != "search" || !got.ExposeAsTool || string(got.InputSchema) != string(schema) {
		t.Fatalf("stored = %+v, %v", got, err)
	}
	// The same name for another workflow of the user: refused, nothing written.
	b := newWorkflow("u1", t0)
	b.ToolName = "search"
	if err := s.CreateWorkflow(ctx, b); errs.CodeOf(err) != workflow.CodeToolNameTaken || errs.KindOf(err) != errs.Conflict {
		t.Fatalf("duplicate name on create: %v", err)
	}
	if _, err := s.Workflow(ctx, b.ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("the refused workflow was written: %v", err)
	}
	if _, total, _ := s.ListWorkflows(ctx, "u1", paging.Page{Limit: 20}); total != 1 {
		t.Errorf("count after a refused create = %d", total)
	}
	// Another user may use the name.
	c := newWorkflow("u2", t0)
	c.ToolName, c.ExposeAsTool = "search", true
	if err := s.CreateWorkflow(ctx, c); err != nil {
		t.Fatal(err)
	}
	b.ToolName = "other"
	if err := s.CreateWorkflow(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Renaming b to a's name: refused, b unchanged.
	bNext := b
	bNext.ToolName, bNext.Version = "search", 2
	if err := s.UpdateWorkflow(ctx, bNext, b); errs.CodeOf(err) != workflow.CodeToolNameTaken {
		t.Fatalf("rename to a taken name: %v", err)
	}
	if got, _ := s.Workflow(ctx, b.ID); got.Version != 1 || got.ToolName != "other" {
		t.Errorf("b after a refused rename: %+v", got)
	}

	db.Counter.Reset()
	exposed, err := s.ExposedTools(ctx, "u1")
	if err != nil || len(exposed) != 1 || exposed[0].WorkflowID != a.ID || exposed[0].ToolName != "search" || exposed[0].Description != "Searches." ||
		string(exposed[0].InputSchema) != string(schema) || exposed[0].LastStepID != "s" || exposed[0].LastToolID != "hash" {
		t.Fatalf("ExposedTools = %+v, %v", exposed, err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("ExposedTools cost %d calls", n)
	}
	db.Counter.Reset()
	if e, err := s.ExposedTool(ctx, "u1", "search"); err != nil || e.WorkflowID != a.ID || !e.Exposed {
		t.Fatalf("ExposedTool = %+v, %v", e, err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("ExposedTool cost %d calls", n)
	}
	for _, name := range []string{"other", "nope"} { // not exposed; no such name
		if _, err := s.ExposedTool(ctx, "u1", name); errs.CodeOf(err) != workflow.CodeToolNotFound || errs.KindOf(err) != errs.NotFound {
			t.Errorf("ExposedTool(%s) = %v", name, err)
		}
	}

	// Rename a: the old name is free again, the entry follows.
	aNext := a
	aNext.ToolName, aNext.Version, aNext.Description = "find", 2, "Finds."
	if err := s.UpdateWorkflow(ctx, aNext, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ExposedTool(ctx, "u1", "search"); errs.KindOf(err) != errs.NotFound {
		t.Errorf("old name still exposed: %v", err)
	}
	if e, err := s.ExposedTool(ctx, "u1", "find"); err != nil || e.Description != "Finds." || e.Version != 2 {
		t.Errorf("renamed entry = %+v, %v", e, err)
	}
	bNext.Version = 2
	if err := s.UpdateWorkflow(ctx, bNext, b); err != nil {
		t.Fatalf("taking the freed name: %v", err)
	}

	// An apply keeps the entry in step.
	p := &workflow.Proposal{ID: uuid.NewString(), WorkflowID: a.ID, MessageID: uuid.NewString(), Status: workflow.ProposalPending, Changes: []workflow.Change{}, BaseVersion: 2, CreatedAt: t0}
	if err := s.AddMessages(ctx, a.ID, p, workflow.Message{ID: p.MessageID, WorkflowID: a.ID, Role: "assistant", Content: "p", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	applied := aNext
	applied.Version, applied.Name = 3, "Applied name"
	applied.Steps = append(applied.Steps, workflow.Step{ID: "each", ToolID: "json_query", ForEach: "{{s.digest}}", Outputs: []string{"results"}})
	if err := s.ApplyProposal(ctx, applied, 2, p.ID, t0); err != nil {
		t.Fatal(err)
	}
	if e, err := s.ExposedTool(ctx, "u1", "find"); err != nil || e.Name != "Applied name" || e.Version != 3 || e.LastStepID != "each" || !e.LastForEach {
		t.Errorf("entry after apply = %+v, %v", e, err)
	}

	// Hiding and unnaming.
	hidden := applied
	hidden.ExposeAsTool, hidden.Version = false, 4
	if err := s.UpdateWorkflow(ctx, hidden, applied); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ExposedTools(ctx, "u1"); len(list) != 0 {
		t.Errorf("hidden workflow listed: %+v", list)
	}
	unnamed := hidden
	unnamed.ToolName, unnamed.Version = "", 5
	if err := s.UpdateWorkflow(ctx, unnamed, hidden); err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	if err := db.Table(db.Data()).Get("PK", "USER#u1").Range("SK", dynamo.BeginsWith, "TOOLNAME#").All(ctx, &items); err != nil || len(items) != 1 {
		t.Errorf("tool-name items of u1 = %v, %v; want b's only", items, err)
	}

	// Deleting b releases its name.
	if err := s.DeleteWorkflow(ctx, b.ID, "u1", nil); err != nil {
		t.Fatal(err)
	}
	items = nil
	if err := db.Table(db.Data()).Get("PK", "USER#u1").Range("SK", dynamo.BeginsWith, "TOOLNAME#").All(ctx, &items); err != nil || len(items) != 0 {
		t.Errorf("tool-name items after the delete = %v, %v", items, err)
	}
	d := newWorkflow("u1", t0)
	d.ToolName = "search"
	if err := s.CreateWorkflow(ctx, d); err != nil {
		t.Errorf("the deleted workflow's name is not free: %v", err)
	}
	if list, err := s.ExposedTools(ctx, "u2"); err != nil || len(list) != 1 || list[0].WorkflowID != c.ID {
		t.Errorf("u2's tools = %+v, %v", list, err)
	}
}

// TestWorkflowTooLargeForAnItem: a write DynamoDB refuses for its size is
// 413 WORKFLOW_TOO_LARGE, not a 500 (the service refuses such definitions
// before; this is the store's own guard), and nothing is written.
func TestWorkflowTooLargeForAnItem(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	w := newWorkflow("u1", t0)
	if err := s.CreateWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	big := w
	big.Version = 2
	big.Steps = []workflow.Step{{ID: "s", ToolID: "hash", Inputs: map[string]any{"text": strings.Repeat("x", 420_000)}}}
	if err := s.UpdateWorkflow(ctx, big, w); errs.CodeOf(err) != workflow.CodeWorkflowTooLarge || errs.KindOf(err) != errs.TooLarge {
		t.Errorf("update over 400 KB: %v", err)
	}
	big.ID, big.Version = uuid.NewString(), 1
	if err := s.CreateWorkflow(ctx, big); errs.CodeOf(err) != workflow.CodeWorkflowTooLarge {
		t.Errorf("create over 400 KB: %v", err)
	}
	if got, _ := s.Workflow(ctx, w.ID); got.Version != 1 || len(got.Steps) != 0 {
		t.Errorf("after the refused update: %+v", got)
	}
	if _, total, _ := s.ListWorkflows(ctx, "u1", paging.Page{Limit: 20}); total != 1 {
		t.Errorf("count after the refused create = %d", total)
	}
}

// TestWorkflowChatHoldsAtMostMaxChatBytes fills a workflow chat to its
// bound: a user message is stored while the chat, with it, holds at most
// workflow.MaxChatBytes, one byte more is Conflict CHAT_FULL with nothing
// written, and the reply to an accepted message is stored whatever room
// is left.
func TestWorkflowChatHoldsAtMostMaxChatBytes(t *testing.T) {
	t.Parallel()
	db, s, w := storedWorkflow(t)
	ctx, t0 := context.Background(), w.CreatedAt
	i := 0
	msg := func(role string, weight int) workflow.Message {
		i++
		m := workflow.Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: role, CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}
		m.Content = strings.Repeat("x", weight-workflow.MessageWeight(m))
		return m
	}
	const big = 300_000 // under an item's 400 KB
	held := 0
	for held < workflow.MaxChatBytes-50_000 {
		n := min(big, workflow.MaxChatBytes-50_000-held)
		if err := s.AddMessages(ctx, w.ID, nil, msg("user", n)); err != nil {
			t.Fatalf("at %d bytes: %v", held, err)
		}
		held += n
	}
	// A reply and its proposal are counted, never refused.
	name := strings.Repeat("n", 1000)
	p := &workflow.Proposal{ID: uuid.NewString(), WorkflowID: w.ID, MessageID: uuid.NewString(), Status: workflow.ProposalPending,
		Changes: []workflow.Change{{Type: "update_workflow", Name: &name}}, BaseVersion: w.Version, CreatedAt: t0}
	changes, _ := json.Marshal(p.Changes)
	reply := msg("assistant", 1000)
	reply.ID = p.MessageID
	if err := s.AddMessages(ctx, w.ID, p, reply); err != nil {
		t.Fatal(err)
	}
	held += 1000 + workflow.ProposalWeight(len(changes))
	room := workflow.MaxChatBytes - held
	stored := func() int {
		_, msgs, err := s.Conversation(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}
	before := stored()
	over := msg("user", room+1)
	err := s.AddMessages(ctx, w.ID, nil, over, msg("assistant", 500))
	if !errs.Is(err, errs.Conflict) || errs.CodeOf(err) != workflow.CodeChatFull {
		t.Fatalf("one byte over: %v, want Conflict %s", err, workflow.CodeChatFull)
	}
	if n := stored(); n != before {
		t.Errorf("a refused exchange left %d messages", n-before)
	}
	// At the bound exactly: stored, with a reply that goes past it.
	if err := s.AddMessages(ctx, w.ID, nil, msg("user", room), msg("assistant", 20_000)); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	if err := s.AddMessages(ctx, w.ID, nil, msg("user", workflow.MessageWeight(workflow.Message{})+1)); errs.CodeOf(err) != workflow.CodeChatFull {
		t.Errorf("past the bound: %v, want %s", err, workflow.CodeChatFull)
	}
	if _, msgs, err := s.Conversation(ctx, w.ID); err != nil || workflow.ChatBytes(msgs) != workflow.MaxChatBytes+20_000 {
		t.Errorf("the chat weighs %d (%v), want %d", workflow.ChatBytes(msgs), err, workflow.MaxChatBytes+20_000)
	}
	// The count goes with the workflow.
	deletedWhole(t, db, s, w)
}
