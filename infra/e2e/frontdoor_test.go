package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// peopleWorkflow reads the CSV attachment its input names (format
// attachment) and answers the rows' names; it is exposed as the MCP tool
// "people".
const peopleWorkflow = `{
  "inputSchema": {"type": "object", "properties": {"doc": {"type": "string", "format": "attachment"}}, "required": ["doc"]},
  "steps": [{"id": "rows", "toolId": "csv_parse", "inputs": {"text": "{{input.doc}}"}},
            {"id": "names", "toolId": "json_query", "inputs": {"input": "{{rows.rows}}", "query": "map(.name)"}}],
  "exposeAsTool": true, "toolName": "people"}`

// peopleCSV is the attachment peopleWorkflow reads.
var peopleCSV = []byte("name,age\nAda,36\nAlan,41\n")

// readyCSV uploads peopleCSV as an attachment of chatID and returns its
// id.
func readyCSV(t *testing.T, c *client, chatID string) string {
	t.Helper()
	a := newAttachment(t, c, chatID, "people.csv", "text/csv", int64(len(peopleCSV)))
	if r := upload(t, a, peopleCSV); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	return a.ID
}

func names(run unattendedRun) string {
	if len(run.Steps) < 2 {
		return ""
	}
	b, _ := json.Marshal(run.Steps[1].Output["result"])
	return string(b)
}

// hook posts body to webhook trigger tr, signed now.
func hook(c *client, tr triggerJSON, body string) response {
	return c.do("POST", "/hooks/"+tr.ID, body, "X-Signature", webhookSignature(tr.Secret, fmt.Sprint(time.Now().Unix()), body))
}

// TestWebhookRunsAsARestRunDoes: a run a webhook starts goes through the
// same run service as a REST run: its input naming an attachment is
// read by the steps (the trigger's function had no attachment checks and
// no blob store before), an attachment that is not the user's readable
// one and a body the inputSchema refuses are 400 INVALID_INPUT naming the
// field, and none of them starts a run.
func TestWebhookRunsAsARestRunDoes(t *testing.T) {
	t.Parallel()
	srv := durableServer(t, "ALLOWED_ORIGINS="+frontendOrigin)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "hook-files@example.com")
	chatID := newChat(t, c, map[string]string{"title": "files"}).ID
	doc := readyCSV(t, c, chatID)
	wfID := defineWorkflow(t, c, userID, "people", peopleWorkflow)
	tr := createTrigger(t, c, wfID, `{"type":"webhook","enabled":true}`)

	r := hook(c, tr, `{"doc":"`+doc+`"}`)
	if r.Status != 202 {
		t.Fatalf("webhook naming an attachment: %d %s", r.Status, r.Body)
	}
	var started struct{ Data struct{ RunID string } }
	r.decode(t, &started)
	run := waitRun(t, c, wfID, started.Data.RunID, "ended", ended)
	if run.Status != "completed" || names(run) != `["Ada","Alan"]` || run.Trigger == nil || run.Trigger.Type != "webhook" {
		t.Fatalf("webhook run over the attachment: %s %q %s %+v", run.Status, run.Error, names(run), run.Trigger)
	}
	// The REST run of the same input answers the same.
	if status, rest := startRun(t, c, chatID, wfID, map[string]any{"doc": doc}); status != 201 || names(rest) != names(run) {
		t.Errorf("REST run: %d %s %s", status, rest.Status, names(rest))
	}

	other := newClient(t, srv.API)
	signUpChatUser(t, other, "hook-files-other@example.com")
	theirs := readyCSV(t, other, newChat(t, other, map[string]string{"title": "theirs"}).ID)
	pending := newAttachment(t, c, chatID, "later.csv", "text/csv", 10)
	for name, body := range map[string]string{
		"another user's attachment":   `{"doc":"` + theirs + `"}`,
		"an attachment not uploaded":  `{"doc":"` + pending.ID + `"}`,
		"no such attachment":          `{"doc":"00000000-0000-4000-8000-000000000000"}`,
		"a number for the attachment": `{"doc":7}`,
		"no doc":                      `{"other":true}`,
	} {
		e := expectError(t, name, hook(c, tr, body), 400, "INVALID_INPUT")
		if len(e.Details) != 1 || e.Details[0].Field != "input.doc" {
			t.Errorf("%s: details %+v, want one naming input.doc", name, e.Details)
		}
	}
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	c.do("GET", "/api/workflows/"+wfID+"/runs", nil).decode(t, &list)
	if len(list.Data.WorkflowRuns) != 2 {
		t.Errorf("%d runs after one webhook run, one REST run and five refused calls, want 2", len(list.Data.WorkflowRuns))
	}
}

// TestStartRunOfWorkflow: POST /api/workflows/{workflowId}/runs starts a
// run with no chat (trigger manual) and answers as the chat route does:
// 201 with the finished run, 202 with its Location at once with Prefer:
// respond-async; its input is checked (400 INVALID_INPUT naming the
// field); the path is checked before the body (a malformed id is
// INVALID_ID, another user's workflow 403, a missing one 404, whatever
// the body), on the chat route too.
func TestStartRunOfWorkflow(t *testing.T) {
	t.Parallel()
	srv := durableServer(t, "ALLOWED_ORIGINS="+frontendOrigin)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "workflow-runs@example.com")
	chatID := newChat(t, c, map[string]string{"title": "files"}).ID
	doc := readyCSV(t, c, chatID)
	wfID := defineWorkflow(t, c, userID, "people", peopleWorkflow)
	base := "/api/workflows/" + wfID + "/runs"

	r := c.do("POST", base, map[string]any{"input": map[string]any{"doc": doc}})
	var done struct {
		Data struct {
			unattendedRun
			ChatID *string `json:"chatId"`
		}
	}
	r.decode(t, &done)
	run := done.Data.unattendedRun
	if r.Status != 201 || run.Status != "completed" || names(run) != `["Ada","Alan"]` || run.Trigger == nil || run.Trigger.Type != "manual" || done.Data.ChatID != nil {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	r = c.do("POST", base, map[string]any{"input": map[string]any{"doc": doc}}, "Prefer", "respond-async")
	var async struct{ Data unattendedRun }
	r.decode(t, &async)
	if r.Status != 202 || r.Header.Get("Location") != base+"/"+async.Data.ID || r.Header.Get("Preference-Applied") != "respond-async" {
		t.Errorf("respond-async: %d Location %q %s", r.Status, r.Header.Get("Location"), r.Body)
	}
	if got := waitRun(t, c, wfID, async.Data.ID, "ended", ended); got.Status != "completed" {
		t.Errorf("the async run: %+v", got)
	}
	e := expectError(t, "input the schema refuses", c.do("POST", base, `{"input":{"doc":5}}`), 400, "INVALID_INPUT")
	if len(e.Details) != 1 || e.Details[0].Field != "input.doc" {
		t.Errorf("details %+v", e.Details)
	}
	expectError(t, "no input for a required field", c.do("POST", base, `{}`), 400, "INVALID_INPUT")
	expectError(t, "no body: no input", c.do("POST", base, nil), 400, "INVALID_INPUT")
	expectError(t, "a body that is not JSON", c.do("POST", base, `{"input":`), 400, "INVALID_JSON")

	// The path first, whatever the body.
	other := newClient(t, srv.API)
	otherID := signUpChatUser(t, other, "workflow-runs-other@example.com")
	theirs := defineWorkflow(t, other, otherID, "theirs", `{"steps":[{"id":"a","toolId":"json_query","inputs":{"input":1,"query":"."}}]}`)
	// The order of every route: the path's ids (400 INVALID_ID, before the
	// body), the body (400), then existence (404) and ownership (403).
	for name, tc := range map[string]struct {
		path, body string
		status     int
		code       string
	}{
		"malformed workflow id":               {"/api/workflows/not-a-uuid/runs", `not json`, 400, "INVALID_ID"},
		"malformed chat id":                   {"/api/chats/not-a-uuid/workflow-runs", `not json`, 400, "INVALID_ID"},
		"another user's workflow, bad body":   {"/api/workflows/" + theirs + "/runs", `not json`, 400, "INVALID_JSON"},
		"another user's workflow":             {"/api/workflows/" + theirs + "/runs", `{}`, 403, "FORBIDDEN"},
		"no such workflow":                    {"/api/workflows/00000000-0000-4000-8000-000000000000/runs", `{}`, 404, "WORKFLOW_NOT_FOUND"},
		"another user's workflow, with input": {"/api/workflows/" + theirs + "/runs", `{"input":{"a":1}}`, 403, "FORBIDDEN"},
	} {
		expectError(t, name, c.do("POST", tc.path, tc.body), tc.status, tc.code)
	}
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	other.do("GET", "/api/workflows/"+theirs+"/runs", nil).decode(t, &list)
	if len(list.Data.WorkflowRuns) != 0 {
		t.Errorf("another user's workflow has %d runs", len(list.Data.WorkflowRuns))
	}
}

// TestRunRateLimitOnEveryPath: RATE_LIMIT_RUNS counts the runs a user
// starts whatever starts them (the chat route, the workflow route, a
// retry, a webhook call, an MCP tools/call), once each, inside the run
// service: over it, each path refuses with RATE_LIMITED, and a refused
// start leaves no run.
func TestRunRateLimitOnEveryPath(t *testing.T) {
	t.Parallel()
	srv := durableServer(t, "ALLOWED_ORIGINS="+frontendOrigin, "RATE_LIMIT_RUNS=4/h")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "runs-limit@example.com")
	chatID := newChat(t, c, map[string]string{"title": "limit"}).ID
	doc := readyCSV(t, c, chatID)
	wfID := defineWorkflow(t, c, userID, "people", peopleWorkflow)
	tr := createTrigger(t, c, wfID, `{"type":"webhook","enabled":true}`)
	input := map[string]any{"doc": doc}
	var pat struct{ Data struct{ Token string } }
	c.do("POST", "/api/users/"+userID+"/tokens", `{"name":"limit","expiresInDays":1}`).decode(t, &pat)
	mcpCall := func() response {
		return c.do("POST", "/api/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"people","arguments":{"doc":"`+doc+`"}}}`,
			"Authorization", "Bearer "+pat.Data.Token, "Accept", "application/json, text/event-stream")
	}

	status, first := startRun(t, c, chatID, wfID, input)
	if status != 201 {
		t.Fatalf("chat route: %d", status)
	}
	if r := c.do("POST", "/api/workflows/"+wfID+"/runs", map[string]any{"input": input}); r.Status != 201 {
		t.Fatalf("workflow route: %d %s", r.Status, r.Body)
	}
	if r := hook(c, tr, `{"doc":"`+doc+`"}`); r.Status != 202 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	if r := mcpCall(); r.Status != 200 || strings.Contains(string(r.Body), `"isError":true`) {
		t.Fatalf("MCP call: %d %s", r.Status, r.Body)
	}
	// The fifth start, on every path.
	expectError(t, "chat route over the limit", c.do("POST", "/api/chats/"+chatID+"/workflow-runs", map[string]any{"workflowId": wfID, "input": input}), 429, "RATE_LIMITED")
	expectError(t, "workflow route over the limit", c.do("POST", "/api/workflows/"+wfID+"/runs", map[string]any{"input": input}), 429, "RATE_LIMITED")
	expectError(t, "retry over the limit", c.do("POST", "/api/workflows/"+wfID+"/runs/"+first.ID+"/retry", `{"fromStepId":"rows"}`), 429, "RATE_LIMITED")
	expectError(t, "webhook over the limit", hook(c, tr, `{"doc":"`+doc+`","call":2}`), 429, "RATE_LIMITED")
	if r := mcpCall(); r.Status != 200 || !strings.Contains(string(r.Body), `"isError":true`) || !strings.Contains(string(r.Body), "too many workflow runs") {
		t.Errorf("MCP call over the limit: %d %s", r.Status, r.Body)
	}
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	c.do("GET", "/api/workflows/"+wfID+"/runs", nil).decode(t, &list)
	if len(list.Data.WorkflowRuns) != 4 {
		t.Errorf("%d runs, want the 4 the limit allows", len(list.Data.WorkflowRuns))
	}
}
