package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// bigTemplate is a text_template input rendering about 400 KB: 40 times a
// 10,000-character string.
func bigTemplate() string {
	n := strings.TrimSuffix(strings.Repeat("1,", 40), ",")
	return `{"template": "{{range .n}}{{$.s}}{{end}}", "values": {"n": [` + n + `], "s": "` + strings.Repeat("x", 10000) + `"}}`
}

// expectCut checks that v is a cut value: {"truncated": true, "preview":
// "<the start of the value>"} with a preview that begins like want.
func expectCut(t *testing.T, what string, v json.RawMessage, want string) {
	t.Helper()
	var c struct {
		Truncated bool   `json:"truncated"`
		Preview   string `json:"preview"`
	}
	if err := json.Unmarshal(v, &c); err != nil || !c.Truncated || !strings.HasPrefix(c.Preview, want) {
		t.Errorf("%s: not a cut value beginning %q: %.200s", what, want, v)
	}
}

// TestLargeValuesAreStoredTruncated is the report's reproduction: tool
// results and step outputs of hundreds of kilobytes, which made a 2.4 MB
// run item (DynamoDB refuses items over 400 KB, and the embedded engine
// now does too). A two-step run whose steps produce 400 KB and 800 KB, and
// a chat tool call producing 400 KB, are stored with the large values cut
// and marked `truncated`, and read back under 400 KB.
func TestLargeValuesAreStoredTruncated(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "big-values@example.com")

	wf := createWorkflow(t, c, userID, "big values")
	wf = applyProposal(t, c, wf.ID, propose(t, c, wf, "add a step using text_template with "+bigTemplate()).ID)
	wf = applyProposal(t, c, wf.ID, propose(t, c, wf, `add a step using text_template with {"template": "{{.t}}{{.t}}", "values": {"t": "{{step1.text}}"}}`).ID)
	chat := newChat(t, c, map[string]any{"title": "big", "workflowId": wf.ID})
	r := c.do("POST", "/api/chats/"+chat.ID+"/workflow-runs", map[string]string{"workflowId": wf.ID})
	if r.Status != 201 || len(r.Body) > 400_000 {
		t.Fatalf("run: %d, %d bytes: %.300s", r.Status, len(r.Body), r.Body)
	}
	var started struct{ Data runJSON }
	r.decode(t, &started)
	run := started.Data
	if run.Status != "completed" || len(run.Steps) != 2 || !run.Steps[0].Truncated || !run.Steps[1].Truncated {
		t.Fatalf("run %s, steps %+v", run.Status, run.Steps)
	}
	expectCut(t, "step 1 output", run.Steps[0].Output, `{"text":"xxxx`)
	expectCut(t, "step 2 input", run.Steps[1].Input, `{"template":`)
	expectCut(t, "step 2 output", run.Steps[1].Output, `{"text":"xxxx`)
	runs := listRuns(t, c, chat.ID)
	if len(runs) != 1 || runs[0].ID != run.ID || !runs[0].Steps[1].Truncated {
		t.Errorf("stored runs: %+v", runs)
	}

	plain := newChat(t, c, map[string]any{"title": "tool call"})
	ex := sendMessage(t, c, plain.ID, map[string]any{"modelId": "builtin", "content": "run text_template with " + bigTemplate()})
	if calls := ex.Response.ToolCalls; len(calls) != 1 || !calls[0].Truncated {
		t.Fatalf("tool calls of the reply: %d", len(calls))
	}
	expectCut(t, "tool result", ex.Response.ToolCalls[0].Result, `{"text":"xxxx`)
	msgs := getMessages(t, c, plain.ID)
	if len(msgs) != 2 || len(msgs[1].ToolCalls) != 1 || !msgs[1].ToolCalls[0].Truncated || len(msgs[1].Content) > 65536 {
		t.Errorf("stored messages: %d", len(msgs))
	}
}

// TestRunsArePaginated: GET .../workflow-runs returned every run of a chat
// in one response (2.4 MB in the report). It now returns pages of `limit`
// runs with a `nextCursor`, oldest first, and refuses a forged cursor.
func TestRunsArePaginated(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "paged-runs@example.com")
	wf := createWorkflow(t, c, userID, "paged")
	wf = applyProposal(t, c, wf.ID, propose(t, c, wf, `add a step using json_query with {"input": {"a": 1}, "query": ".a"}`).ID)
	chat := newChat(t, c, map[string]any{"title": "paged", "workflowId": wf.ID})
	var want []string
	for range 5 {
		r := c.do("POST", "/api/chats/"+chat.ID+"/workflow-runs", map[string]string{"workflowId": wf.ID})
		var started struct{ Data runJSON }
		r.decode(t, &started)
		if r.Status != 201 {
			t.Fatalf("run: %d %s", r.Status, r.Body)
		}
		want = append(want, started.Data.ID)
	}
	var got []string
	path := "/api/chats/" + chat.ID + "/workflow-runs?limit=2"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 2 for 5 runs")
		}
		r := c.do("GET", path, nil)
		var out struct {
			Data struct {
				WorkflowRuns []runJSON `json:"workflowRuns"`
				NextCursor   string    `json:"nextCursor"`
			}
		}
		r.decode(t, &out)
		if r.Status != 200 || len(out.Data.WorkflowRuns) > 2 {
			t.Fatalf("page %d: %d %s", pages, r.Status, r.Body)
		}
		for _, run := range out.Data.WorkflowRuns {
			got = append(got, run.ID)
		}
		if out.Data.NextCursor == "" {
			break
		}
		path = "/api/chats/" + chat.ID + "/workflow-runs?limit=2&cursor=" + out.Data.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("runs over the pages %v, want %v", got, want)
	}
	if runs := listRuns(t, c, chat.ID); len(runs) != 5 {
		t.Errorf("default page: %d runs, want 5", len(runs))
	}
	for _, q := range []string{"cursor=TVNHIzIwMjY", "cursor=", "limit=0", "limit=101"} {
		expectError(t, q, c.do("GET", "/api/chats/"+chat.ID+"/workflow-runs?"+q, nil), 400, "INVALID_PAGINATION")
	}
}
