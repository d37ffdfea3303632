package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// workflowJSON is a workflow as the API returns it.
type workflowJSON struct {
	ID          string     `json:"id"`
	UserID      string     `json:"userId"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Steps       []stepJSON `json:"steps"`
	Version     int        `json:"version"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
}

type stepJSON struct {
	ID      string          `json:"id"`
	ToolID  string          `json:"toolId"`
	Inputs  json.RawMessage `json:"inputs"`
	Outputs []string        `json:"outputs"`
}

type changeJSON struct {
	Type string `json:"type"`
	Step *struct {
		ID     string          `json:"id"`
		ToolID string          `json:"toolId"`
		Inputs json.RawMessage `json:"inputs"`
	} `json:"step"`
	StepID string  `json:"stepId"`
	Name   *string `json:"name"`
}

type proposalJSON struct {
	ID          string       `json:"id"`
	WorkflowID  string       `json:"workflowId"`
	MessageID   string       `json:"messageId"`
	Status      string       `json:"status"`
	Changes     []changeJSON `json:"changes"`
	BaseVersion int          `json:"baseVersion"`
	CreatedAt   time.Time    `json:"createdAt"`
	AppliedAt   *time.Time   `json:"appliedAt"`
	RejectedAt  *time.Time   `json:"rejectedAt"`
}

type workflowMessageJSON struct {
	ID         string        `json:"id"`
	WorkflowID string        `json:"workflowId"`
	Role       string        `json:"role"`
	Content    string        `json:"content"`
	Proposal   *proposalJSON `json:"proposal"`
	CreatedAt  time.Time     `json:"createdAt"`
}

// appliedJSON is the answer of the apply and reject operations.
type appliedJSON struct {
	Proposal struct {
		ID         string     `json:"id"`
		Status     string     `json:"status"`
		AppliedAt  *time.Time `json:"appliedAt"`
		RejectedAt *time.Time `json:"rejectedAt"`
	} `json:"proposal"`
	Workflow *workflowJSON `json:"workflow"`
}

type runJSON struct {
	ID          string        `json:"id"`
	ChatID      string        `json:"chatId"`
	WorkflowID  string        `json:"workflowId"`
	UserID      string        `json:"userId"`
	Status      string        `json:"status"`
	Steps       []runStepJSON `json:"steps"`
	Error       string        `json:"error"`
	StartedAt   time.Time     `json:"startedAt"`
	CompletedAt *time.Time    `json:"completedAt"`
}

type runStepJSON struct {
	ID          string          `json:"id"`
	ToolID      string          `json:"toolId"`
	Status      string          `json:"status"`
	StartedAt   *time.Time      `json:"startedAt"`
	CompletedAt *time.Time      `json:"completedAt"`
	Input       json.RawMessage `json:"input"`
	Output      json.RawMessage `json:"output"`
	Error       string          `json:"error"`
	Truncated   bool            `json:"truncated"`
}

// createWorkflow creates a workflow named name for userID.
func createWorkflow(t *testing.T, c *client, userID, name string) workflowJSON {
	t.Helper()
	r := c.do("POST", "/api/workflows", map[string]string{"userId": userID, "name": name})
	if r.Status != 201 {
		t.Fatalf("create workflow %q: %d %s", name, r.Status, r.Body)
	}
	var out struct{ Data workflowJSON }
	r.decode(t, &out)
	return out.Data
}

// sendWorkflowMessage posts content to the workflow chat of wfID with the
// built-in model and returns the assistant's reply.
func sendWorkflowMessage(t *testing.T, c *client, wfID, content string) workflowMessageJSON {
	t.Helper()
	r := c.do("POST", "/api/workflows/"+wfID+"/messages", map[string]string{"content": content, "modelId": "builtin"})
	if r.Status != 201 {
		t.Fatalf("workflow message %q: %d %s", content, r.Status, r.Body)
	}
	var out struct {
		Data struct {
			UserMessage      workflowMessageJSON `json:"userMessage"`
			AssistantMessage workflowMessageJSON `json:"assistantMessage"`
		}
	}
	r.decode(t, &out)
	u, a := out.Data.UserMessage, out.Data.AssistantMessage
	if u.Role != "user" || u.Content != content || u.WorkflowID != wfID || u.Proposal != nil ||
		a.Role != "assistant" || a.WorkflowID != wfID || a.Content == "" || !a.CreatedAt.After(u.CreatedAt) {
		t.Errorf("workflow message %q: %s", content, r.Body)
	}
	return a
}

// propose sends content and returns the pending proposal of the reply.
func propose(t *testing.T, c *client, wf workflowJSON, content string) proposalJSON {
	t.Helper()
	a := sendWorkflowMessage(t, c, wf.ID, content)
	p := a.Proposal
	if p == nil || p.Status != "pending" || p.MessageID != a.ID || p.WorkflowID != wf.ID || p.AppliedAt != nil || p.RejectedAt != nil {
		t.Fatalf("propose %q: want a pending proposal, got %+v (%q)", content, p, a.Content)
	}
	return *p
}

// applyProposal applies proposal id of workflow wfID, expecting 200.
func applyProposal(t *testing.T, c *client, wfID, id string) workflowJSON {
	t.Helper()
	r := c.do("POST", "/api/workflows/"+wfID+"/messages/apply", map[string]string{"proposalId": id})
	if r.Status != 200 {
		t.Fatalf("apply %s: %d %s", id, r.Status, r.Body)
	}
	var out struct{ Data appliedJSON }
	r.decode(t, &out)
	if p := out.Data.Proposal; p.ID != id || p.Status != "applied" || p.AppliedAt == nil || out.Data.Workflow == nil {
		t.Fatalf("apply %s: %s", id, r.Body)
	}
	return *out.Data.Workflow
}

func getWorkflow(t *testing.T, c *client, id string) workflowJSON {
	t.Helper()
	r := c.do("GET", "/api/workflows/"+id, nil)
	if r.Status != 200 {
		t.Fatalf("get workflow: %d %s", r.Status, r.Body)
	}
	var out struct{ Data workflowJSON }
	r.decode(t, &out)
	return out.Data
}

func workflowMessages(t *testing.T, c *client, id string) []workflowMessageJSON {
	t.Helper()
	r := c.do("GET", "/api/workflows/"+id+"/messages", nil)
	if r.Status != 200 {
		t.Fatalf("workflow messages: %d %s", r.Status, r.Body)
	}
	var out struct {
		Data struct{ Messages []workflowMessageJSON }
	}
	r.decode(t, &out)
	return out.Data.Messages
}

func listRuns(t *testing.T, c *client, chatID string) []runJSON {
	t.Helper()
	r := c.do("GET", "/api/chats/"+chatID+"/workflow-runs", nil)
	if r.Status != 200 {
		t.Fatalf("list runs: %d %s", r.Status, r.Body)
	}
	var out struct {
		Data struct {
			WorkflowRuns []runJSON `json:"workflowRuns"`
		}
	}
	r.decode(t, &out)
	return out.Data.WorkflowRuns
}

func stepIDs(steps []stepJSON) string {
	ids := make([]string, len(steps))
	for i, s := range steps {
		ids[i] = s.ID + ":" + s.ToolID
	}
	return strings.Join(ids, ",")
}

// TestWorkflowJourney builds a two-step workflow through two proposals
// (json_query, then text_template using {{step1.result}}), runs it from the
// chat stream and reads the run back, then exercises the other workflow
// and run operations against the dev server binary. Every response is
// checked against docs/openapi.yaml by the client's transport; every
// stream event against its event schema.
func TestWorkflowJourney(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada := newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "wf.ada@example.com")

	// Create.
	r := ada.do("POST", "/api/workflows", map[string]string{"userId": adaID, "name": "  Digest ", "description": "daily"})
	var created struct{ Data workflowJSON }
	r.decode(t, &created)
	wf := created.Data
	if r.Status != 201 || wf.Name != "Digest" || wf.Description != "daily" || wf.UserID != adaID || wf.Version != 1 ||
		wf.Steps == nil || len(wf.Steps) != 0 || !wf.CreatedAt.Equal(wf.UpdatedAt) {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}

	// First proposal: a json_query step with the given inputs.
	p1 := propose(t, ada, wf, `add a step using json_query with {"input": {"a": 1}, "query": ".a"}`)
	if len(p1.Changes) != 1 || p1.Changes[0].Type != "add_step" || p1.Changes[0].Step == nil || p1.BaseVersion != 1 {
		t.Fatalf("proposal 1: %+v", p1)
	}
	if s := p1.Changes[0].Step; s.ID != "step1" || s.ToolID != "json_query" || !jsonEqual(t, s.Inputs, []byte(`{"input":{"a":1},"query":".a"}`)) {
		t.Errorf("proposal 1 step: %+v %s", s, s.Inputs)
	}
	if got := getWorkflow(t, ada, wf.ID); got.Version != 1 || len(got.Steps) != 0 {
		t.Errorf("a pending proposal changed the workflow: %+v", got)
	}
	wf1 := applyProposal(t, ada, wf.ID, p1.ID)
	if wf1.Version != 2 || len(wf1.Steps) != 1 || wf1.Steps[0].ID != "step1" || wf1.Steps[0].ToolID != "json_query" ||
		strings.Join(wf1.Steps[0].Outputs, ",") != "result" || !wf1.UpdatedAt.After(wf.UpdatedAt) || !wf1.CreatedAt.Equal(wf.CreatedAt) {
		t.Fatalf("after apply 1: %+v", wf1)
	}

	// Second proposal: text_template using step1's result, type-preserved.
	p2 := propose(t, ada, wf1, `add a step using text_template with {"template": "value={{.v}}", "values": {"v": "{{step1.result}}"}}`)
	if len(p2.Changes) != 1 || p2.Changes[0].Step == nil || p2.Changes[0].Step.ID != "step2" || p2.Changes[0].Step.ToolID != "text_template" || p2.BaseVersion != 2 ||
		!jsonEqual(t, p2.Changes[0].Step.Inputs, []byte(`{"template":"value={{.v}}","values":{"v":"{{step1.result}}"}}`)) {
		t.Fatalf("proposal 2: %+v", p2)
	}
	wf2 := applyProposal(t, ada, wf.ID, p2.ID)
	if wf2.Version != 3 || stepIDs(wf2.Steps) != "step1:json_query,step2:text_template" || strings.Join(wf2.Steps[1].Outputs, ",") != "text" {
		t.Fatalf("after apply 2: %+v", wf2)
	}
	if got := getWorkflow(t, ada, wf.ID); got.Version != 3 || stepIDs(got.Steps) != stepIDs(wf2.Steps) || !got.UpdatedAt.Equal(wf2.UpdatedAt) {
		t.Errorf("get after apply: %+v, want %+v", got, wf2)
	}
	msgs := workflowMessages(t, ada, wf.ID)
	if len(msgs) != 4 || msgs[0].Role != "user" || msgs[1].Proposal == nil || msgs[1].Proposal.ID != p1.ID || msgs[1].Proposal.Status != "applied" ||
		msgs[1].Proposal.AppliedAt == nil || msgs[3].Proposal == nil || msgs[3].Proposal.ID != p2.ID || msgs[3].Proposal.Status != "applied" {
		t.Errorf("workflow messages: %+v", msgs)
	}

	// A chat attached to the workflow runs it from the stream.
	chat := newChat(t, ada, map[string]any{"title": "runs", "workflowId": wf.ID})
	if chat.WorkflowID != wf.ID {
		t.Errorf("chat %+v: want workflowId %s", chat, wf.ID)
	}
	res := ada.stream(chat.ID, map[string]any{"content": "run it", "modelId": "builtin", "userId": adaID, "workflowId": wf.ID})
	if res.Status != 200 {
		t.Fatalf("stream: %d %s", res.Status, res.Body)
	}
	replyID, summary := checkOrder(t, res.Events)
	var kinds []string
	for _, e := range res.Events {
		kinds = append(kinds, e.Type)
	}
	if got := strings.Join(kinds, ","); got != "start,tool_call,tool_result,tool_call,tool_result,content,end" {
		t.Fatalf("events %s, want start, a call and result per step, the summary, end", got)
	}
	ev := res.Events
	if ev[1].ToolName != "json_query" || !jsonEqual(t, ev[1].ToolArgs, []byte(`{"input":{"a":1},"query":".a"}`)) {
		t.Errorf("step1 tool_call: %+v", ev[1])
	}
	if ev[2].ToolName != "json_query" || !jsonEqual(t, ev[2].Result, []byte(`{"result":1}`)) {
		t.Errorf("step1 tool_result: %+v", ev[2])
	}
	var args struct {
		Template string
		Values   map[string]any
	}
	if err := json.Unmarshal(ev[3].ToolArgs, &args); err != nil || ev[3].ToolName != "text_template" || args.Template != "value={{.v}}" {
		t.Errorf("step2 tool_call: %+v (%v)", ev[3], err)
	}
	if v, ok := args.Values["v"].(float64); !ok || v != 1 {
		t.Errorf("step2 values.v = %#v (%s), want the number 1: a whole-string template keeps its type", args.Values["v"], ev[3].ToolArgs)
	}
	if ev[4].ToolName != "text_template" || !jsonEqual(t, ev[4].Result, []byte(`{"text":"value=1"}`)) {
		t.Errorf("step2 tool_result: %+v", ev[4])
	}
	if !strings.Contains(summary, `"Digest"`) || !strings.Contains(summary, "completed") || !strings.Contains(summary, "value=1") {
		t.Errorf("summary %q", summary)
	}
	chatMsgs := getMessages(t, ada, chat.ID)
	if len(chatMsgs) != 2 || chatMsgs[1].ID != replyID || chatMsgs[1].Content != summary || len(chatMsgs[1].ToolCalls) != 2 ||
		!jsonEqual(t, chatMsgs[1].ToolCalls[1].Result, []byte(`{"text":"value=1"}`)) {
		t.Errorf("chat messages after the run: %+v", chatMsgs)
	}

	// The run is recorded in the chat.
	runs := listRuns(t, ada, chat.ID)
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1: %+v", len(runs), runs)
	}
	run := runs[0]
	if run.ChatID != chat.ID || run.WorkflowID != wf.ID || run.UserID != adaID || run.Status != "completed" || run.Error != "" ||
		run.CompletedAt == nil || run.CompletedAt.Before(run.StartedAt) || len(run.Steps) != 2 {
		t.Fatalf("run: %+v", run)
	}
	for i, want := range []struct{ id, tool, input, output string }{
		{"step1", "json_query", `{"input":{"a":1},"query":".a"}`, `{"result":1}`},
		{"step2", "text_template", `{"template":"value={{.v}}","values":{"v":1}}`, `{"text":"value=1"}`},
	} {
		st := run.Steps[i]
		if st.ID != want.id || st.ToolID != want.tool || st.Status != "completed" || st.StartedAt == nil || st.CompletedAt == nil || st.Error != "" ||
			!jsonEqual(t, st.Input, []byte(want.input)) || !jsonEqual(t, st.Output, []byte(want.output)) {
			t.Errorf("run step %d: %+v input %s output %s", i, st, st.Input, st.Output)
		}
	}

	// Started without a stream: 201 with the finished run.
	r = ada.do("POST", "/api/chats/"+chat.ID+"/workflow-runs", map[string]string{"workflowId": wf.ID})
	var started struct{ Data runJSON }
	r.decode(t, &started)
	run2 := started.Data
	if r.Status != 201 || run2.Status != "completed" || run2.ID == run.ID || len(run2.Steps) != 2 || run2.Steps[1].Status != "completed" ||
		!jsonEqual(t, run2.Steps[1].Output, []byte(`{"text":"value=1"}`)) || run2.CompletedAt == nil {
		t.Fatalf("start run: %d %s", r.Status, r.Body)
	}
	if runs := listRuns(t, ada, chat.ID); len(runs) != 2 || runs[0].ID != run.ID || runs[1].ID != run2.ID {
		t.Errorf("runs after the second run: %+v, want oldest first", runs)
	}
	// A run in another chat of the same user, of a chat not attached to
	// the workflow.
	plain := newChat(t, ada, map[string]any{"title": "plain"})
	if r := ada.do("POST", "/api/chats/"+plain.ID+"/workflow-runs", map[string]string{"workflowId": wf.ID}); r.Status != 201 {
		t.Errorf("run in a plain chat: %d %s", r.Status, r.Body)
	}

	// Cancel: a finished run is not active.
	cancelPath := "/api/chats/" + chat.ID + "/workflow-runs/"
	expectError(t, "cancel a finished run", ada.do("POST", cancelPath+run.ID+"/cancel", nil), 400, "RUN_NOT_ACTIVE")
	expectError(t, "cancel an unknown run", ada.do("POST", cancelPath+unknownUUID+"/cancel", nil), 404, "RUN_NOT_FOUND")
	expectError(t, "cancel in an unknown chat", ada.do("POST", "/api/chats/"+unknownUUID+"/workflow-runs/"+run.ID+"/cancel", nil), 404, "CHAT_NOT_FOUND")
	expectField(t, "cancel a malformed run id", expectError(t, "cancel a malformed run id", ada.do("POST", cancelPath+"nope/cancel", nil), 400, "INVALID_ID"), "runId")
	if runs := listRuns(t, ada, chat.ID); runs[0].Status != "completed" {
		t.Errorf("a refused cancel changed the run: %+v", runs[0])
	}

	// Run errors.
	runsPath := "/api/chats/" + chat.ID + "/workflow-runs"
	expectError(t, "run an unknown workflow", ada.do("POST", runsPath, map[string]string{"workflowId": unknownUUID}), 404, "WORKFLOW_NOT_FOUND")
	expectError(t, "run in an unknown chat", ada.do("POST", "/api/chats/"+unknownUUID+"/workflow-runs", map[string]string{"workflowId": wf.ID}), 404, "CHAT_NOT_FOUND")
	expectField(t, "run without workflowId", expectError(t, "run without workflowId", ada.do("POST", runsPath, map[string]string{}), 400, "VALIDATION_FAILED"), "workflowId")
	expectField(t, "run with a malformed workflowId", expectError(t, "run with a malformed workflowId", ada.do("POST", runsPath, map[string]string{"workflowId": "x"}), 400, "VALIDATION_FAILED"), "workflowId")
	expectError(t, "run with malformed JSON", ada.do("POST", runsPath, `{"workflowId":`), 400, "INVALID_JSON")
	expectError(t, "run in a malformed chat id", ada.do("POST", "/api/chats/nope/workflow-runs", map[string]string{"workflowId": wf.ID}), 400, "INVALID_ID")
	expectError(t, "runs of a malformed chat id", ada.do("GET", "/api/chats/nope/workflow-runs", nil), 400, "INVALID_ID")
	expectError(t, "runs of an unknown chat", ada.do("GET", "/api/chats/"+unknownUUID+"/workflow-runs", nil), 404, "CHAT_NOT_FOUND")
	expectError(t, "chat with an unknown workflow", ada.do("POST", "/api/chats", map[string]any{"workflowId": unknownUUID}), 404, "WORKFLOW_NOT_FOUND")

	t.Run("group", func(t *testing.T) {
		t.Run("reject", func(t *testing.T) {
			t.Parallel()
			c := newClient(t, srv.API)
			uid := signUpChatUser(t, c, "wf.reject@example.com")
			w := createWorkflow(t, c, uid, "Keep")
			base := "/api/workflows/" + w.ID + "/messages/"

			// A message the built-in model has no rule for: help, no proposal.
			if a := sendWorkflowMessage(t, c, w.ID, "what can you do?"); a.Proposal != nil || !strings.Contains(a.Content, "add a step using") {
				t.Errorf("help reply: %+v", a)
			}
			// A proposal that is not valid when made is not proposed.
			if a := sendWorkflowMessage(t, c, w.ID, "remove step nosuch"); a.Proposal != nil || !strings.Contains(a.Content, "nosuch") {
				t.Errorf("invalid proposal: %+v", a)
			}
			if a := sendWorkflowMessage(t, c, w.ID, "add a step using no_such_tool"); a.Proposal != nil {
				t.Errorf("unknown tool proposal: %+v", a)
			}

			p := propose(t, c, w, "rename workflow to Never")
			if len(p.Changes) != 1 || p.Changes[0].Type != "update_workflow" || p.Changes[0].Name == nil || *p.Changes[0].Name != "Never" {
				t.Errorf("rename proposal: %+v", p)
			}
			r := c.do("POST", base+"reject", map[string]string{"proposalId": p.ID})
			var rej struct{ Data appliedJSON }
			r.decode(t, &rej)
			if r.Status != 200 || rej.Data.Proposal.ID != p.ID || rej.Data.Proposal.Status != "rejected" || rej.Data.Proposal.RejectedAt == nil || rej.Data.Workflow != nil {
				t.Fatalf("reject: %d %s", r.Status, r.Body)
			}
			expectError(t, "apply a rejected proposal", c.do("POST", base+"apply", map[string]string{"proposalId": p.ID}), 400, "PROPOSAL_NOT_PENDING")
			expectError(t, "reject twice", c.do("POST", base+"reject", map[string]string{"proposalId": p.ID}), 400, "PROPOSAL_NOT_PENDING")
			expectError(t, "apply an unknown proposal", c.do("POST", base+"apply", map[string]string{"proposalId": unknownUUID}), 404, "PROPOSAL_NOT_FOUND")
			expectError(t, "reject an unknown proposal", c.do("POST", base+"reject", map[string]string{"proposalId": unknownUUID}), 404, "PROPOSAL_NOT_FOUND")
			expectField(t, "malformed proposal id", expectError(t, "malformed proposal id", c.do("POST", base+"apply", map[string]string{"proposalId": "x"}), 400, "VALIDATION_FAILED"), "proposalId")
			expectField(t, "missing proposal id", expectError(t, "missing proposal id", c.do("POST", base+"reject", map[string]string{}), 400, "VALIDATION_FAILED"), "proposalId")
			expectError(t, "apply with malformed JSON", c.do("POST", base+"apply", `[`), 400, "INVALID_JSON")
			expectError(t, "apply in an unknown workflow", c.do("POST", "/api/workflows/"+unknownUUID+"/messages/apply", map[string]string{"proposalId": p.ID}), 404, "WORKFLOW_NOT_FOUND")
			expectField(t, "apply in a malformed workflow id", expectError(t, "apply in a malformed workflow id",
				c.do("POST", "/api/workflows/nope/messages/apply", map[string]string{"proposalId": p.ID}), 400, "INVALID_ID"), "workflowId")
			// A proposal of another workflow is not found in this one.
			other := createWorkflow(t, c, uid, "Other")
			expectError(t, "proposal of another workflow", c.do("POST", "/api/workflows/"+other.ID+"/messages/apply", map[string]string{"proposalId": p.ID}), 404, "PROPOSAL_NOT_FOUND")

			if got := getWorkflow(t, c, w.ID); got.Name != "Keep" || got.Version != 1 {
				t.Errorf("a rejected proposal changed the workflow: %+v", got)
			}
			msgs := workflowMessages(t, c, w.ID)
			if n := len(msgs); n != 8 || msgs[7].Proposal == nil || msgs[7].Proposal.Status != "rejected" || msgs[7].Proposal.RejectedAt == nil || msgs[7].Proposal.AppliedAt != nil {
				t.Errorf("messages after reject: %+v", msgs)
			}

			// Message validation.
			mp := "/api/workflows/" + w.ID + "/messages"
			expectField(t, "blank content", expectError(t, "blank content", c.do("POST", mp, map[string]string{"content": "  ", "modelId": "builtin"}), 400, "VALIDATION_FAILED"), "content")
			expectField(t, "missing modelId", expectError(t, "missing modelId", c.do("POST", mp, map[string]string{"content": "hi"}), 400, "VALIDATION_FAILED"), "modelId")
			expectError(t, "unknown model", c.do("POST", mp, map[string]string{"content": "hi", "modelId": "nope"}), 400, "INVALID_MODEL")
			expectError(t, "content over 32000", c.do("POST", mp, map[string]string{"content": strings.Repeat("x", 32001), "modelId": "builtin"}), 400, "VALIDATION_FAILED")
			expectError(t, "message body over 1 MiB", c.do("POST", mp, map[string]string{"content": strings.Repeat("x", 1<<20), "modelId": "builtin"}), 413, "PAYLOAD_TOO_LARGE")
			expectError(t, "message to an unknown workflow", c.do("POST", "/api/workflows/"+unknownUUID+"/messages", map[string]string{"content": "hi", "modelId": "builtin"}), 404, "WORKFLOW_NOT_FOUND")
			expectError(t, "messages of an unknown workflow", c.do("GET", "/api/workflows/"+unknownUUID+"/messages", nil), 404, "WORKFLOW_NOT_FOUND")
			expectError(t, "messages of a malformed workflow id", c.do("GET", "/api/workflows/nope/messages", nil), 400, "INVALID_ID")
			expectField(t, "before not a uuid", expectError(t, "before not a uuid", c.do("GET", mp+"?before=nope", nil), 400, "VALIDATION_FAILED"), "before")
			expectError(t, "before an unknown message", c.do("GET", mp+"?before="+unknownUUID, nil), 404, "MESSAGE_NOT_FOUND")
			if msgs := workflowMessages(t, c, w.ID); len(msgs) > 1 {
				r := c.do("GET", mp+"?before="+msgs[1].ID, nil)
				var page struct {
					Data struct {
						Messages []workflowMessageJSON
						Omitted  int
					}
				}
				if r.Status != 200 {
					t.Fatalf("before the second message: %d %s", r.Status, r.Body)
				}
				r.decode(t, &page)
				if len(page.Data.Messages) != 1 || page.Data.Messages[0].ID != msgs[0].ID || page.Data.Omitted != 0 {
					t.Errorf("before the second message: %+v", page.Data)
				}
			} else {
				t.Errorf("the workflow chat has %d messages, want more than one", len(msgs))
			}
		})

		t.Run("rebase and conflict", func(t *testing.T) {
			t.Parallel()
			c := newClient(t, srv.API)
			uid := signUpChatUser(t, c, "wf.rebase@example.com")
			w := createWorkflow(t, c, uid, "Rebase")
			w = applyProposal(t, c, w.ID, propose(t, c, w, `add a step using json_query with {"input": {"a": 1}, "query": ".a"}`).ID)

			// Three proposals made against version 2. Pending proposals
			// reserve their step ids, so the two new steps do not collide.
			pa := propose(t, c, w, `add a step using json_query with {"input": {"b": 2}, "query": ".b"}`)
			pb := propose(t, c, w, `add another step using math_evaluate with {"expression": "x + 1", "variables": {"x": "{{step1.result}}"}}`)
			pc := propose(t, c, w, "rename workflow to Rebased")
			if pa.BaseVersion != 2 || pb.BaseVersion != 2 || pc.BaseVersion != 2 || pa.Changes[0].Step.ID != "step2" || pb.Changes[0].Step.ID != "step3" {
				t.Fatalf("proposals: %+v %+v %+v", pa, pb, pc)
			}
			wb := applyProposal(t, c, w.ID, pb.ID)
			wa := applyProposal(t, c, w.ID, pa.ID) // rebased onto version 3
			wc := applyProposal(t, c, w.ID, pc.ID) // rebased onto version 4
			if wb.Version != 3 || wa.Version != 4 || wc.Version != 5 || stepIDs(wc.Steps) != "step1:json_query,step3:math_evaluate,step2:json_query" || wc.Name != "Rebased" {
				t.Fatalf("after the rebased applies: %+v", wc)
			}

			// Two proposals remove step2; once one is applied the other no
			// longer fits.
			r1 := propose(t, c, wc, "remove step step2")
			r2 := propose(t, c, wc, "delete step step2")
			if len(r1.Changes) != 1 || r1.Changes[0].Type != "remove_step" || r1.Changes[0].StepID != "step2" {
				t.Errorf("remove proposal: %+v", r1)
			}
			wr := applyProposal(t, c, w.ID, r1.ID)
			if stepIDs(wr.Steps) != "step1:json_query,step3:math_evaluate" || wr.Version != 6 {
				t.Errorf("after the removal: %+v", wr)
			}
			e := expectError(t, "stale removal", c.do("POST", "/api/workflows/"+w.ID+"/messages/apply", map[string]string{"proposalId": r2.ID}), 409, "PROPOSAL_CONFLICT")
			expectField(t, "stale removal", e, "changes[0].stepId")

			// Removing step1, which step3 uses, is not valid: it is not
			// proposed.
			if a := sendWorkflowMessage(t, c, w.ID, "remove step step1"); a.Proposal != nil || !strings.Contains(a.Content, "step1") {
				t.Errorf("removing a step another uses: %+v", a)
			}
			if got := getWorkflow(t, c, w.ID); got.Version != 6 || stepIDs(got.Steps) != stepIDs(wr.Steps) {
				t.Errorf("a conflicting apply changed the workflow: %+v", got)
			}
			for _, m := range workflowMessages(t, c, w.ID) {
				if m.Proposal != nil && m.Proposal.ID == r2.ID && m.Proposal.Status != "pending" {
					t.Errorf("the conflicting proposal is %s, want it still pending", m.Proposal.Status)
				}
			}
		})

		t.Run("another user", func(t *testing.T) {
			t.Parallel()
			eve, anon := newClient(t, srv.API), newClient(t, srv.API)
			eveID := signUpChatUser(t, eve, "wf.eve@example.com")
			eveChat := newChat(t, eve, map[string]any{})
			base := "/api/workflows/" + wf.ID
			for _, tt := range []struct {
				name, method, path string
				body               any
			}{
				{"get", "GET", base, nil},
				{"patch", "PATCH", base, map[string]string{"name": "mine"}},
				{"delete", "DELETE", base, nil},
				{"messages", "GET", base + "/messages", nil},
				{"send", "POST", base + "/messages", map[string]string{"content": "remove step step1", "modelId": "builtin"}},
				{"apply", "POST", base + "/messages/apply", map[string]string{"proposalId": p1.ID}},
				{"reject", "POST", base + "/messages/reject", map[string]string{"proposalId": p1.ID}},
				{"list", "GET", "/api/users/" + adaID + "/workflows", nil},
				{"create for ada", "POST", "/api/workflows", map[string]string{"userId": adaID, "name": "x"}},
				{"chat with ada's workflow", "POST", "/api/chats", map[string]any{"workflowId": wf.ID}},
				{"run ada's workflow", "POST", "/api/chats/" + eveChat.ID + "/workflow-runs", map[string]string{"workflowId": wf.ID}},
				{"run in ada's chat", "POST", "/api/chats/" + chat.ID + "/workflow-runs", map[string]string{"workflowId": wf.ID}},
				{"ada's runs", "GET", "/api/chats/" + chat.ID + "/workflow-runs", nil},
				{"cancel ada's run", "POST", "/api/chats/" + chat.ID + "/workflow-runs/" + run.ID + "/cancel", nil},
			} {
				expectError(t, tt.name, eve.do(tt.method, tt.path, tt.body), 403, "FORBIDDEN")
				expectError(t, tt.name+" without a session", anon.do(tt.method, tt.path, tt.body), 401, "UNAUTHORIZED")
			}
			res := eve.stream(eveChat.ID, map[string]any{"content": "run", "modelId": "builtin", "userId": eveID, "workflowId": wf.ID})
			expectError(t, "stream ada's workflow", res.response(), 403, "FORBIDDEN")
			// Nothing changed.
			if got := getWorkflow(t, ada, wf.ID); got.Version != 3 || got.Name != "Digest" {
				t.Errorf("ada's workflow after eve: %+v", got)
			}
		})

		t.Run("list and update", func(t *testing.T) {
			t.Parallel()
			c := newClient(t, srv.API)
			uid := signUpChatUser(t, c, "wf.lister@example.com")
			w1 := createWorkflow(t, c, uid, "one")
			createWorkflow(t, c, uid, "two")
			createWorkflow(t, c, uid, "three")
			list := func(query string) (names []string, total int) {
				t.Helper()
				r := c.do("GET", "/api/users/"+uid+"/workflows"+query, nil)
				if r.Status != 200 {
					t.Fatalf("list %s: %d %s", query, r.Status, r.Body)
				}
				var out struct {
					Data struct {
						Workflows []workflowJSON
						Total     int
					}
				}
				r.decode(t, &out)
				for _, w := range out.Data.Workflows {
					names = append(names, w.Name)
				}
				return names, out.Data.Total
			}
			if names, total := list(""); strings.Join(names, ",") != "three,two,one" || total != 3 {
				t.Errorf("list: %q total %d", names, total)
			}
			if names, total := list("?limit=2"); strings.Join(names, ",") != "three,two" || total != 3 {
				t.Errorf("first page: %q total %d", names, total)
			}
			if names, total := list("?limit=2&offset=2"); strings.Join(names, ",") != "one" || total != 3 {
				t.Errorf("second page: %q total %d", names, total)
			}
			for _, q := range []string{"?limit=0", "?limit=101", "?offset=-1", "?limit=x"} {
				expectError(t, "list "+q, c.do("GET", "/api/users/"+uid+"/workflows"+q, nil), 400, "INVALID_PAGINATION")
			}

			// PATCH.
			p := "/api/workflows/" + w1.ID
			r := c.do("PATCH", p, map[string]string{"description": "weekly"})
			var upd struct{ Data workflowJSON }
			r.decode(t, &upd)
			if r.Status != 200 || upd.Data.Description != "weekly" || upd.Data.Name != "one" || upd.Data.Version != 2 || !upd.Data.UpdatedAt.After(w1.UpdatedAt) {
				t.Errorf("patch description: %d %s", r.Status, r.Body)
			}
			r = c.do("PATCH", p, map[string]string{"name": " uno "})
			r.decode(t, &upd)
			if r.Status != 200 || upd.Data.Name != "uno" || upd.Data.Description != "weekly" || upd.Data.Version != 3 {
				t.Errorf("patch name: %d %s", r.Status, r.Body)
			}
			if names, _ := list(""); strings.Join(names, ",") != "uno,three,two" {
				t.Errorf("list after the update: %q, want the updated workflow first", names)
			}
			expectError(t, "patch without fields", c.do("PATCH", p, map[string]string{}), 400, "NO_FIELDS")
			expectError(t, "patch with only unknown fields", c.do("PATCH", p, map[string]string{"title": "x"}), 400, "NO_FIELDS")
			expectField(t, "patch blank name", expectError(t, "patch blank name", c.do("PATCH", p, map[string]string{"name": " "}), 400, "VALIDATION_FAILED"), "name")
			expectField(t, "patch long description", expectError(t, "patch long description", c.do("PATCH", p, map[string]string{"description": strings.Repeat("d", 1001)}), 400, "VALIDATION_FAILED"), "description")
			expectError(t, "patch malformed JSON", c.do("PATCH", p, `{`), 400, "INVALID_JSON")
			expectError(t, "patch malformed id", c.do("PATCH", "/api/workflows/nope", map[string]string{"name": "x"}), 400, "INVALID_ID")
			expectError(t, "patch unknown", c.do("PATCH", "/api/workflows/"+unknownUUID, map[string]string{"name": "x"}), 404, "WORKFLOW_NOT_FOUND")
			expectError(t, "patch too large", c.do("PATCH", p, map[string]string{"name": strings.Repeat("x", 1<<20)}), 413, "PAYLOAD_TOO_LARGE")

			// Create and get validation.
			expectError(t, "create for another user", c.do("POST", "/api/workflows", map[string]string{"userId": unknownUUID, "name": "x"}), 403, "FORBIDDEN")
			expectField(t, "create without name", expectError(t, "create without name", c.do("POST", "/api/workflows", map[string]string{"userId": uid}), 400, "VALIDATION_FAILED"), "name")
			expectField(t, "create without userId", expectError(t, "create without userId", c.do("POST", "/api/workflows", map[string]string{"name": "x"}), 400, "VALIDATION_FAILED"), "userId")
			expectField(t, "create with a long name", expectError(t, "create with a long name", c.do("POST", "/api/workflows", map[string]string{"userId": uid, "name": strings.Repeat("n", 256)}), 400, "VALIDATION_FAILED"), "name")
			expectField(t, "create with a long description", expectError(t, "create with a long description",
				c.do("POST", "/api/workflows", map[string]string{"userId": uid, "name": "x", "description": strings.Repeat("d", 1001)}), 400, "VALIDATION_FAILED"), "description")
			expectField(t, "create with a wrong type", expectError(t, "create with a wrong type", c.do("POST", "/api/workflows", map[string]any{"userId": uid, "name": 5}), 400, "VALIDATION_FAILED"), "name")
			expectError(t, "get malformed id", c.do("GET", "/api/workflows/nope", nil), 400, "INVALID_ID")
			expectError(t, "get unknown", c.do("GET", "/api/workflows/"+unknownUUID, nil), 404, "WORKFLOW_NOT_FOUND")
			if _, total := list(""); total != 3 {
				t.Errorf("refused creates changed the total to %d", total)
			}
		})

		t.Run("delete", func(t *testing.T) {
			t.Parallel()
			c := newClient(t, srv.API)
			uid := signUpChatUser(t, c, "wf.deleter@example.com")
			keep := createWorkflow(t, c, uid, "keep")
			w := createWorkflow(t, c, uid, "gone")
			w = applyProposal(t, c, w.ID, propose(t, c, w, `add a step using json_query with {"input": [1, 2], "query": "length"}`).ID)
			propose(t, c, w, "rename workflow to Pending")
			ch := newChat(t, c, map[string]any{"workflowId": w.ID})
			r := c.do("POST", "/api/chats/"+ch.ID+"/workflow-runs", map[string]string{"workflowId": w.ID})
			if r.Status != 201 {
				t.Fatalf("run: %d %s", r.Status, r.Body)
			}
			if r := c.do("POST", "/api/chats/"+ch.ID+"/workflow-runs", map[string]string{"workflowId": keep.ID}); r.Status != 201 {
				t.Fatalf("run keep: %d %s", r.Status, r.Body)
			}

			if r := c.do("DELETE", "/api/workflows/"+w.ID, nil); r.Status != 204 || len(r.Body) != 0 {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
			expectError(t, "get deleted", c.do("GET", "/api/workflows/"+w.ID, nil), 404, "WORKFLOW_NOT_FOUND")
			expectError(t, "messages of deleted", c.do("GET", "/api/workflows/"+w.ID+"/messages", nil), 404, "WORKFLOW_NOT_FOUND")
			expectError(t, "delete twice", c.do("DELETE", "/api/workflows/"+w.ID, nil), 404, "WORKFLOW_NOT_FOUND")
			expectError(t, "delete malformed id", c.do("DELETE", "/api/workflows/nope", nil), 400, "INVALID_ID")
			expectError(t, "run deleted", c.do("POST", "/api/chats/"+ch.ID+"/workflow-runs", map[string]string{"workflowId": w.ID}), 404, "WORKFLOW_NOT_FOUND")
			expectError(t, "chat with deleted", c.do("POST", "/api/chats", map[string]any{"workflowId": w.ID}), 404, "WORKFLOW_NOT_FOUND")
			res := c.stream(ch.ID, map[string]any{"content": "run", "modelId": "builtin", "userId": uid, "workflowId": w.ID})
			expectError(t, "stream deleted", res.response(), 404, "WORKFLOW_NOT_FOUND")
			// Its runs are gone too; the other workflow's run stays.
			if runs := listRuns(t, c, ch.ID); len(runs) != 1 || runs[0].WorkflowID != keep.ID {
				t.Errorf("runs after the delete: %+v", runs)
			}
			// Re-created under the same name, it starts empty: the
			// messages are gone, not hidden.
			again := createWorkflow(t, c, uid, "gone")
			if msgs := workflowMessages(t, c, again.ID); len(msgs) != 0 {
				t.Errorf("messages of a new workflow: %+v", msgs)
			}
			r = c.do("GET", "/api/users/"+uid+"/workflows", nil)
			if !strings.Contains(string(r.Body), `"total":2`) {
				t.Errorf("list after the delete: %s", r.Body)
			}
		})
	})
}

// TestWorkflowRateLimits: posting workflow messages and starting runs are
// rate limited per user (429 RATE_LIMITED with Retry-After, checked
// against the document by the transport), and refused requests do nothing.
func TestWorkflowRateLimits(t *testing.T) {
	t.Parallel()
	clock := newClockFile(t)
	srv := startServer(t, "RATE_LIMIT_MESSAGES=1/h", "RATE_LIMIT_RUNS=1/h", "DEV_CLOCK_FILE="+string(clock))
	clock.toStartOf(t, time.Hour) // the limits count per hour of the server's clock
	c := newClient(t, srv.API)
	uid := signUpChatUser(t, c, "wf.limited@example.com")
	w := createWorkflow(t, c, uid, "limited")
	sendWorkflowMessage(t, c, w.ID, "hello")
	r := c.do("POST", "/api/workflows/"+w.ID+"/messages", map[string]string{"content": "hello", "modelId": "builtin"})
	expectError(t, "second workflow message", r, 429, "RATE_LIMITED")
	if r.Header.Get("Retry-After") == "" {
		t.Error("second workflow message: no Retry-After")
	}
	if msgs := workflowMessages(t, c, w.ID); len(msgs) != 2 {
		t.Errorf("%d messages stored, want 2", len(msgs))
	}
	ch := newChat(t, c, map[string]any{})
	runs := "/api/chats/" + ch.ID + "/workflow-runs"
	if r := c.do("POST", runs, map[string]string{"workflowId": w.ID}); r.Status != 201 {
		t.Fatalf("first run: %d %s", r.Status, r.Body)
	}
	expectError(t, "second run", c.do("POST", runs, map[string]string{"workflowId": w.ID}), 429, "RATE_LIMITED")
	if got := listRuns(t, c, ch.ID); len(got) != 1 {
		t.Errorf("%d runs recorded, want 1", len(got))
	}
}

// TestWorkflowRunCancel cancels a run while its first step waits on a slow
// HTTP server: the cancel answers 200 with the run cancelled, the
// executor stops before the next step, and the run start answers with the
// cancelled run.
func TestWorkflowRunCancel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"slow":true}`)
	}))
	defer slow.Close()
	defer unblock()
	srv := startServer(t, "TOOLS_ALLOW_PRIVATE_NETWORKS=true")
	c := newClient(t, srv.API)
	uid := signUpChatUser(t, c, "wf.canceller@example.com")
	w := createWorkflow(t, c, uid, "slow")
	w = applyProposal(t, c, w.ID, propose(t, c, w, `add a step using http_request with {"url": "`+slow.URL+`/data"}`).ID)
	w = applyProposal(t, c, w.ID, propose(t, c, w, `add a step using json_query with {"input": "{{step1.status}}", "query": "."}`).ID)
	ch := newChat(t, c, map[string]any{"workflowId": w.ID})

	done := make(chan response, 1)
	go func() {
		done <- c.do("POST", "/api/chats/"+ch.ID+"/workflow-runs", map[string]string{"workflowId": w.ID})
	}()

	var running runJSON
	deadline := time.Now().Add(patience)
	for {
		if runs := listRuns(t, c, ch.ID); len(runs) == 1 && runs[0].Status == "running" && runs[0].Steps[0].Status == "running" {
			running = runs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not reach its first step within %s", patience)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := running.Steps; st[0].StartedAt == nil || !jsonEqual(t, st[0].Input, []byte(`{"url":"`+slow.URL+`/data"}`)) || st[1].Status != "pending" || running.CompletedAt != nil {
		t.Errorf("running run: %+v", running)
	}

	r := c.do("POST", "/api/chats/"+ch.ID+"/workflow-runs/"+running.ID+"/cancel", nil)
	var out struct{ Data runJSON }
	r.decode(t, &out)
	if got := out.Data; r.Status != 200 || got.ID != running.ID || got.Status != "cancelled" || got.CompletedAt == nil || got.Error == "" ||
		got.Steps[0].Status != "cancelled" || got.Steps[1].Status != "cancelled" {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	unblock()
	var finished response
	select {
	case finished = <-done:
	case <-time.After(patience):
		t.Fatal("the run start did not answer after the cancel")
	}
	var fin struct{ Data runJSON }
	finished.decode(t, &fin)
	if finished.Status != 201 || fin.Data.ID != running.ID || fin.Data.Status != "cancelled" || fin.Data.Steps[1].Status != "cancelled" {
		t.Errorf("run start after the cancel: %d %s", finished.Status, finished.Body)
	}
	runs := listRuns(t, c, ch.ID)
	// The step that was running when the run was cancelled finished, and
	// its result is kept; the next one never started.
	if len(runs) != 1 || runs[0].Status != "cancelled" || runs[0].Steps[0].Status != "completed" || len(runs[0].Steps[0].Output) == 0 ||
		runs[0].Steps[1].Status != "cancelled" || runs[0].Steps[1].StartedAt != nil {
		t.Errorf("run after the cancel: %+v", runs)
	}
	expectError(t, "cancel twice", c.do("POST", "/api/chats/"+ch.ID+"/workflow-runs/"+running.ID+"/cancel", nil), 400, "RUN_NOT_ACTIVE")
}
