package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

// versionsOf lists every version of workflow id, newest first, following
// the cursors with pages of limit.
func versionsOf(t *testing.T, s *store.Workflows, id string, limit int) []workflow.VersionSummary {
	t.Helper()
	ctx := context.Background()
	w, err := s.Workflow(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var all []workflow.VersionSummary
	cursor := ""
	for range 1000 {
		p, err := s.WorkflowVersions(ctx, w, limit, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Versions) > limit {
			t.Fatalf("a page of %d holds %d", limit, len(p.Versions))
		}
		all = append(all, p.Versions...)
		if p.Next == "" {
			return all
		}
		cursor = p.Next
	}
	t.Fatal("the cursors never end")
	return nil
}

func sources(vs []workflow.VersionSummary) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%d:%s:%d ", v.Version, v.Source, v.StepCount)
	}
	return strings.TrimSpace(b.String())
}

// TestWorkflowVersionsKeptByEveryWrite: the create, a PATCH, a restore
// and an applied proposal each keep their definition as the version of the
// workflow's new number; the list pages newest first; each version reads
// whole; the conversation never reads them; the delete removes them.
func TestWorkflowVersionsKeptByEveryWrite(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	w := newWorkflow("u1", t0)
	if err := s.CreateWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	read := func() workflow.Workflow {
		got, err := s.Workflow(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	step := func(id string) workflow.Step {
		return workflow.Step{ID: id, ToolID: "hash", Inputs: map[string]any{"text": id}, Outputs: []string{"hash"}}
	}
	prev := read()
	v2 := prev
	v2.Version, v2.UpdatedAt, v2.Steps = 2, t0.Add(time.Minute), []workflow.Step{step("a")}
	v2.InputSchema = json.RawMessage(`{"type":"object"}`)
	if err := s.UpdateWorkflow(ctx, v2, prev); err != nil {
		t.Fatal(err)
	}
	prev = read()
	v3 := prev
	v3.Version, v3.UpdatedAt, v3.Steps, v3.InputSchema = 3, t0.Add(2*time.Minute), []workflow.Step{}, nil
	if err := s.RestoreWorkflow(ctx, v3, prev); err != nil {
		t.Fatal(err)
	}
	m := workflow.Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: "assistant", Content: "p", CreatedAt: t0}
	p := workflow.Proposal{ID: uuid.NewString(), WorkflowID: w.ID, MessageID: m.ID, Status: workflow.ProposalPending, BaseVersion: 3, CreatedAt: t0}
	if err := s.AddMessages(ctx, w.ID, &p, m); err != nil {
		t.Fatal(err)
	}
	v4 := read()
	v4.Version, v4.UpdatedAt, v4.Steps = 4, t0.Add(3*time.Minute), []workflow.Step{step("a"), step("b")}
	if err := s.ApplyProposal(ctx, v4, 3, p.ID, v4.UpdatedAt); err != nil {
		t.Fatal(err)
	}
	// A refused write keeps no version.
	stale := v4
	stale.Version = 4
	if err := s.UpdateWorkflow(ctx, stale, v2); errs.CodeOf(err) != workflow.CodeConcurrentUpdate {
		t.Fatalf("stale update: %v", err)
	}

	want := "4:proposal:2 3:restore:0 2:patch:1 1:create:0"
	for _, limit := range []int{1, 2, 3, 100} {
		if got := sources(versionsOf(t, s, w.ID, limit)); got != want {
			t.Errorf("versions by pages of %d = %q, want %q", limit, got, want)
		}
	}
	cur := read()
	got, err := s.WorkflowVersion(ctx, cur, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || got.Source != "patch" || len(got.Steps) != 1 || got.Steps[0].Inputs["text"] != "a" ||
		string(got.InputSchema) != `{"type":"object"}` || !got.CreatedAt.Equal(t0.Add(time.Minute)) || got.WorkflowID != w.ID {
		t.Errorf("version 2 = %+v", got)
	}
	for _, n := range []int{0, 5, 1 << 30} {
		if _, err := s.WorkflowVersion(ctx, cur, n); errs.CodeOf(err) != workflow.CodeVersionNotFound || errs.KindOf(err) != errs.NotFound {
			t.Errorf("version %d: %v", n, err)
		}
	}
	for _, c := range []string{"x", "MTA", "MA", strings.Repeat("A", 200)} {
		if _, err := s.WorkflowVersions(ctx, cur, 10, c); errs.CodeOf(err) != "INVALID_PAGINATION" {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
	_, msgs, err := s.Conversation(ctx, w.ID)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("conversation = %v, %v", msgs, err)
	}
	if err := s.DeleteWorkflow(ctx, w.ID, "u1", nil); err != nil {
		t.Fatal(err)
	}
	var left []struct{ PK, SK string }
	if err := db.DB.Table(db.Data()).Get("PK", "WF#"+w.ID).All(ctx, &left); err != nil || len(left) != 0 {
		t.Errorf("after the delete: %v, %v", left, err)
	}
}

// TestLegacyWorkflowVersions: a workflow stored before versions lists its
// current definition as its one version, reads it, and its next write
// keeps that definition beside the new one; nothing is migrated by hand.
func TestLegacyWorkflowVersions(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	w := newWorkflow("u1", t0)
	w.Version = 3
	w.Steps = []workflow.Step{{ID: "old", ToolID: "hash", Inputs: map[string]any{"text": "x"}, Outputs: []string{"hash"}}}
	if err := s.CreateWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	// Make it as the store wrote it before versions: no versionsFrom, no
	// version items.
	table := db.DB.Table(db.Data())
	if err := table.Update("PK", "WF#"+w.ID).Range("SK", "WF").Remove("versionsFrom").Run(ctx); err != nil {
		t.Fatal(err)
	}
	var keys []struct{ PK, SK string }
	if err := table.Get("PK", "WF#"+w.ID).Range("SK", dynamo.BeginsWith, "!VER#").All(ctx, &keys); err != nil || len(keys) != 2 {
		t.Fatalf("version items = %v, %v", keys, err)
	}
	for _, k := range keys {
		if err := table.Delete("PK", k.PK).Range("SK", k.SK).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := sources(versionsOf(t, s, w.ID, 20)); got != "3:patch:1" {
		t.Errorf("legacy versions = %q", got)
	}
	cur, _ := s.Workflow(ctx, w.ID)
	if v, err := s.WorkflowVersion(ctx, cur, 3); err != nil || len(v.Steps) != 1 || v.Steps[0].ID != "old" {
		t.Errorf("legacy current version = %+v, %v", v, err)
	}
	if _, err := s.WorkflowVersion(ctx, cur, 2); errs.CodeOf(err) != workflow.CodeVersionNotFound {
		t.Errorf("a version before the history: %v", err)
	}
	next := cur
	next.Version, next.UpdatedAt, next.Steps = 4, t0.Add(time.Minute), []workflow.Step{}
	if err := s.UpdateWorkflow(ctx, next, cur); err != nil {
		t.Fatal(err)
	}
	if got := sources(versionsOf(t, s, w.ID, 1)); got != "4:patch:0 3:patch:1" {
		t.Errorf("after the first write = %q", got)
	}
	cur, _ = s.Workflow(ctx, w.ID)
	if v, err := s.WorkflowVersion(ctx, cur, 3); err != nil || len(v.Steps) != 1 || v.Steps[0].ID != "old" {
		t.Errorf("the legacy definition kept = %+v, %v", v, err)
	}
}

// TestLargeWorkflowWithManyVersions: a workflow of 100 versions, those
// the test reads back at the 350 KiB limit, stays within DynamoDB's
// limits (each item under 400 KB, each transaction under 4 MB), each
// version reads whole, and the list of all 100 reads only their
// summaries (one Query: a definition is never in the range listed). The
// versions between are small only to keep the test's time down on the
// embedded engine: their size changes no key or item the test checks.
func TestLargeWorkflowWithManyVersions(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewWorkflows(db.DB, db.Data())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	w := newWorkflow("u1", t0)
	large := map[int]bool{1: true, 2: true, 50: true, 99: true, 100: true}
	filler := func(v int) []workflow.Step {
		st := []workflow.Step{{ID: "s", ToolID: "hash", Inputs: map[string]any{"text": fmt.Sprintf("%d", v)}, Outputs: []string{"hash"}}}
		probe := w
		probe.Steps = st
		pad := 1000
		if large[v] {
			pad = workflow.MaxDefinitionBytes - workflow.DefinitionSize(probe)
		}
		st[0].Inputs["text"] = fmt.Sprintf("%d", v) + strings.Repeat("x", pad)
		return st
	}
	w.Steps = filler(1)
	if n := workflow.DefinitionSize(w); n != workflow.MaxDefinitionBytes {
		t.Fatalf("definition of %d bytes", n)
	}
	if err := s.CreateWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	const versions = 100
	for v := 2; v <= versions; v++ {
		prev, err := s.Workflow(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		next := prev
		next.Version, next.UpdatedAt, next.Steps = v, t0.Add(time.Duration(v)*time.Second), filler(v)
		if err := s.UpdateWorkflow(ctx, next, prev); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	db.Counter.Reset()
	all := versionsOf(t, s, w.ID, 100)
	if len(all) != versions || all[0].Version != versions || all[versions-1].Version != 1 {
		t.Fatalf("listed %d versions: %s", len(all), sources(all[:min(3, len(all))]))
	}
	if n := db.Counter.Count(); n != 2 { // the workflow's GetItem, the summaries' Query
		t.Errorf("listing 100 versions cost %d calls", n)
	}
	cur, _ := s.Workflow(ctx, w.ID)
	for _, n := range []int{1, 50, versions} {
		v, err := s.WorkflowVersion(ctx, cur, n)
		if err != nil {
			t.Fatal(err)
		}
		if text, _ := v.Steps[0].Inputs["text"].(string); !strings.HasPrefix(text, fmt.Sprintf("%dx", n)) || workflow.DefinitionSize(v.Pinned(cur)) != workflow.MaxDefinitionBytes {
			t.Errorf("version %d reads %d bytes", n, workflow.DefinitionSize(v.Pinned(cur)))
		}
	}
	if err := s.DeleteWorkflow(ctx, w.ID, "u1", nil); err != nil {
		t.Fatal(err)
	}
}
