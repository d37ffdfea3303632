package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

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
	name := "renamed"
	w0, err := s.UpdateWorkflow(ctx, ids[0], "u1", &name, nil, t0.Add(time.Hour))
	if err != nil || w0.Name != "renamed" || w0.Version != 2 {
		t.Fatalf("update = %+v, %v", w0, err)
	}
	if _, err := s.UpdateWorkflow(ctx, ids[0], "u2", &name, nil, t0); errs.KindOf(err) != errs.Forbidden {
		t.Errorf("update by another user: %v", err)
	}
	if _, err := s.UpdateWorkflow(ctx, uuid.NewString(), "u1", &name, nil, t0); errs.CodeOf(err) != workflow.CodeWorkflowNotFound {
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
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Now().UTC()
	w := newWorkflow("u1", t0)
	if err := s.CreateWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
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
	if err := s.DeleteWorkflow(ctx, w.ID, "u1", nil); err != nil {
		t.Fatal(err)
	}
	var left []map[string]any
	if err := db.Table(db.Data()).Get("PK", "WF#"+w.ID).All(ctx, &left); err != nil || len(left) != 0 {
		t.Errorf("left behind: %v %v", left, err)
	}
}
