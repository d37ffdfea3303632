package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// run_workflow against the dev server binary: a child run started by a
// parent's step, its output the parent's step's, the parent waiting
// meanwhile; definitions refused when saved; a cancel that reaches the
// child.

type childRunJSON struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Error       string `json:"error"`
	WorkflowID  string `json:"workflowId"`
	ParentRunID string `json:"parentRunId"`
	Depth       int    `json:"depth"`
	Trigger     struct {
		Type string `json:"type"`
	} `json:"trigger"`
	Steps []struct {
		ID         string          `json:"id"`
		Status     string          `json:"status"`
		Error      string          `json:"error"`
		Output     json.RawMessage `json:"output"`
		ChildRunID string          `json:"childRunId"`
	} `json:"steps"`
}

func runWorkflowStep(id, workflowID, input string) string {
	if input == "" {
		input = "{}"
	}
	return fmt.Sprintf(`{"id":%q,"toolId":"run_workflow","inputs":{"workflowId":%q,"input":%s}}`, id, workflowID, input)
}

// workflowRun reads run runID of workflow wfID.
func workflowRun(t *testing.T, c *client, wfID, runID string) childRunJSON {
	t.Helper()
	r := c.do("GET", "/api/workflows/"+wfID+"/runs/"+runID, nil)
	if r.Status != 200 {
		t.Fatalf("get run %s: %d %s", runID, r.Status, r.Body)
	}
	var out struct{ Data childRunJSON }
	r.decode(t, &out)
	return out.Data
}

// waitWorkflowRun polls run runID of wfID until done holds.
func waitWorkflowRun(t *testing.T, c *client, wfID, runID string, done func(childRunJSON) bool) childRunJSON {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		run := workflowRun(t, c, wfID, runID)
		if done(run) {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: still %s", runID, run.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func startManual(t *testing.T, c *client, wfID, input string) childRunJSON {
	t.Helper()
	r := c.do("POST", "/api/workflows/"+wfID+"/runs", json.RawMessage(`{"input":`+input+`}`), "Prefer", "respond-async")
	if r.Status != 202 {
		t.Fatalf("start %s: %d %s", wfID, r.Status, r.Body)
	}
	var out struct{ Data childRunJSON }
	r.decode(t, &out)
	return out.Data
}

func TestRunWorkflowSteps(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "subflow@example.com")

	child := createWorkflow(t, c, userID, "child")
	if r := c.do("PATCH", "/api/workflows/"+child.ID, json.RawMessage(`{"inputSchema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},`+
		`"steps":[{"id":"double","toolId":"math_evaluate","inputs":{"expression":"{{input.a}} * 2"}}]}`)); r.Status != 200 {
		t.Fatalf("PATCH child: %d %s", r.Status, r.Body)
	}
	parent := createWorkflow(t, c, userID, "parent")
	if r := c.do("PATCH", "/api/workflows/"+parent.ID, json.RawMessage(`{"inputSchema":{"type":"object","properties":{"a":{"type":"integer"}}},"steps":[`+
		runWorkflowStep("sub", child.ID, `{"a":"{{input.a}}"}`)+`,`+
		`{"id":"plus","toolId":"math_evaluate","inputs":{"expression":"{{sub.value}} + 1"}}]}`)); r.Status != 200 {
		t.Fatalf("PATCH parent: %d %s", r.Status, r.Body)
	}

	t.Run("a child run", func(t *testing.T) {
		run := startManual(t, c, parent.ID, `{"a":20}`)
		run = waitWorkflowRun(t, c, parent.ID, run.ID, func(r childRunJSON) bool { return r.Status == "completed" || r.Status == "failed" })
		if run.Status != "completed" || string(run.Steps[0].Output) != `{"value":40}` || string(run.Steps[1].Output) != `{"value":41}` || run.Steps[0].ChildRunID == "" {
			t.Fatalf("parent run %+v", run)
		}
		kid := workflowRun(t, c, child.ID, run.Steps[0].ChildRunID)
		if kid.ParentRunID != run.ID || kid.Trigger.Type != "workflow" || kid.Depth != 1 || kid.Status != "completed" {
			t.Fatalf("child run %+v", kid)
		}
		t.Logf("closing note: parent run %s (workflow %s) step sub ran child run %s (workflow %s, parentRunId %s, trigger %s, depth %d): output %s",
			run.ID, parent.ID, kid.ID, kid.WorkflowID, kid.ParentRunID, kid.Trigger.Type, kid.Depth, run.Steps[0].Output)
	})

	t.Run("a request waits through the child's run", func(t *testing.T) {
		// Without respond-async the start waits for the run's end: a wait
		// for a child holds no person, so the answer is the finished run.
		r := c.do("POST", "/api/workflows/"+parent.ID+"/runs", json.RawMessage(`{"input":{"a":1}}`))
		var out struct{ Data childRunJSON }
		r.decode(t, &out)
		if r.Status != 201 || out.Data.Status != "completed" || string(out.Data.Steps[1].Output) != `{"value":3}` {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})

	t.Run("refused when saved", func(t *testing.T) {
		other := newClient(t, srv.API)
		otherID := signUpChatUser(t, other, "subflow-other@example.com")
		theirs := createWorkflow(t, other, otherID, "theirs")
		path := "/api/workflows/" + child.ID
		for _, tc := range []struct{ name, body, field string }{
			{"itself", `{"steps":[` + runWorkflowStep("me", child.ID, "") + `]}`, "steps[0].inputs.workflowId"},
			{"a cycle", `{"steps":[` + runWorkflowStep("back", parent.ID, "") + `]}`, "steps[0].inputs.workflowId"},
			{"another user's", `{"steps":[` + runWorkflowStep("x", theirs.ID, "") + `]}`, "steps[0].inputs.workflowId"},
			{"unknown", `{"steps":[` + runWorkflowStep("x", "4f7c0b8e-0000-4000-8000-000000000000", "") + `]}`, "steps[0].inputs.workflowId"},
			{"no workflowId", `{"steps":[{"id":"x","toolId":"run_workflow","inputs":{}}]}`, "steps[0].inputs"},
			{"in a forEach", `{"inputSchema":{"type":"object","properties":{"xs":{"type":"array"}}},"steps":[{"id":"x","toolId":"run_workflow","forEach":"{{input.xs}}","inputs":{"workflowId":"` + theirs.ID + `"}}]}`, "steps[0].forEach"},
		} {
			r := c.do("PATCH", path, json.RawMessage(tc.body))
			e := expectError(t, tc.name, r, 400, "VALIDATION_FAILED")
			found := false
			for _, d := range e.Details {
				found = found || strings.HasPrefix(d.Field, tc.field)
			}
			if !found {
				t.Errorf("%s: details %+v, want %s", tc.name, e.Details, tc.field)
			}
		}
		if got := getWorkflow(t, c, child.ID); len(got.Steps) != 1 {
			t.Errorf("a refused PATCH wrote: %+v", got)
		}
	})

	t.Run("templated, at run time", func(t *testing.T) {
		w := createWorkflow(t, c, userID, "templated")
		if r := c.do("PATCH", "/api/workflows/"+w.ID, json.RawMessage(`{"inputSchema":{"type":"object","properties":{"wf":{"type":"string"}}},"steps":[`+
			runWorkflowStep("sub", "{{input.wf}}", "")+`]}`)); r.Status != 200 {
			t.Fatalf("PATCH: %d %s", r.Status, r.Body)
		}
		for wf, code := range map[string]string{w.ID: "WORKFLOW_CYCLE", "4f7c0b8e-0000-4000-8000-000000000000": "WORKFLOW_NOT_FOUND"} {
			run := startManual(t, c, w.ID, `{"wf":"`+wf+`"}`)
			run = waitWorkflowRun(t, c, w.ID, run.ID, func(r childRunJSON) bool { return r.Status == "completed" || r.Status == "failed" })
			if run.Status != "failed" || !strings.HasPrefix(run.Steps[0].Error, code+": ") {
				t.Errorf("%s: %+v", code, run)
			}
		}
	})

	t.Run("cancel reaches the child", func(t *testing.T) {
		human := createWorkflow(t, c, userID, "human")
		if r := c.do("PATCH", "/api/workflows/"+human.ID, json.RawMessage(`{"steps":[{"id":"ask","toolId":"ask_human","inputs":{"message":"ok?"}}]}`)); r.Status != 200 {
			t.Fatalf("PATCH: %d %s", r.Status, r.Body)
		}
		top := createWorkflow(t, c, userID, "top")
		if r := c.do("PATCH", "/api/workflows/"+top.ID, json.RawMessage(`{"steps":[`+runWorkflowStep("sub", human.ID, "")+`]}`)); r.Status != 200 {
			t.Fatalf("PATCH: %d %s", r.Status, r.Body)
		}
		run := startManual(t, c, top.ID, `{}`)
		run = waitWorkflowRun(t, c, top.ID, run.ID, func(r childRunJSON) bool { return r.Status == "waiting" && r.Steps[0].ChildRunID != "" })
		kidID := run.Steps[0].ChildRunID
		waitWorkflowRun(t, c, human.ID, kidID, func(r childRunJSON) bool { return r.Status == "waiting" })
		if r := c.do("POST", "/api/workflows/"+top.ID+"/runs/"+run.ID+"/cancel", nil); r.Status != 200 {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		waitWorkflowRun(t, c, human.ID, kidID, func(r childRunJSON) bool { return r.Status == "cancelled" })
	})
}
