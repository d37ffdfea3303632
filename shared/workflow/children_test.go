package workflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
)

func runs(id, workflowID string) workflow.Step {
	return workflow.Step{ID: id, ToolID: workflow.RunWorkflowToolID, Inputs: map[string]any{"workflowId": workflowID}}
}

func TestCheckChildren(t *testing.T) {
	db := storetest.New(t)
	ws := store.NewWorkflows(db.DB, db.Data())
	user := uuid.NewString()
	now := time.Now().UTC()
	save := func(id, owner, name string, steps ...workflow.Step) workflow.Workflow {
		w := workflow.Workflow{ID: id, UserID: owner, Name: name, Steps: steps, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := ws.CreateWorkflow(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	// a runs b, b runs c; c is saved next.
	aID, bID, cID := uuid.NewString(), uuid.NewString(), uuid.NewString()
	save(aID, user, "a", runs("tob", bID))
	save(bID, user, "b", runs("toc", cID))
	theirs := save(uuid.NewString(), uuid.NewString(), "theirs")
	c := workflow.Workflow{ID: cID, UserID: user, Name: "c"}
	for _, tc := range []struct {
		name  string
		steps []workflow.Step
		want  string // in the problem of steps[0]; "" for none
	}{
		{"a cycle through two others", []workflow.Step{runs("toa", aID)}, `makes a cycle: this workflow runs "a" runs "b" runs this workflow (WORKFLOW_CYCLE)`},
		{"itself", []workflow.Step{runs("me", cID)}, "a workflow cannot run itself"},
		{"another user's", []workflow.Step{runs("x", theirs.ID)}, "is not one of your workflows (WORKFLOW_NOT_FOUND)"},
		{"unknown", []workflow.Step{runs("x", uuid.NewString())}, "is not one of your workflows (WORKFLOW_NOT_FOUND)"},
		{"templated: checked when it runs", []workflow.Step{runs("x", "{{input.wf}}")}, ""},
		{"no cycle", []workflow.Step{runs("x", save(uuid.NewString(), user, "leaf").ID)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Steps = tc.steps
			probs, err := workflow.CheckChildren(context.Background(), ws, c)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if len(probs) != 0 {
					t.Fatalf("problems %+v", probs)
				}
				return
			}
			if len(probs) != 1 || probs[0].Field != "steps[0].inputs.workflowId" || !strings.Contains(probs[0].Message, tc.want) {
				t.Fatalf("problems %+v, want %q", probs, tc.want)
			}
		})
	}

	// A chain longer than the reads a save may make is walked no
	// further: no problem, no error (the run's depth bound stops it).
	next := uuid.NewString()
	first := next
	for range workflow.MaxChildReads + 2 {
		id := next
		next = uuid.NewString()
		save(id, user, "chain", runs("down", next))
	}
	c.Steps = []workflow.Step{runs("x", first)}
	if probs, err := workflow.CheckChildren(context.Background(), ws, c); err != nil || len(probs) != 0 {
		t.Fatalf("long chain: %+v %v", probs, err)
	}
}
