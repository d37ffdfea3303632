package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
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

// TestLargeRunValues holds the reproductions of runs whose values did not
// fit one item: a workflow of 8 steps with 31 KB inputs (a 249 KB
// definition) runs synchronously, asynchronously and from the stream; a
// 1 MB step output reaches a later step whole across a pause for a person
// and a retry, and a client reads it whole at its outputUrl; an 8 MB
// output flows between steps; an output over 8 MiB fails its step with a
// message naming the limit (no 5xx anywhere).
func TestLargeRunValues(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "large-run-values@example.com")
	chatID := newChat(t, c, map[string]string{"title": "large"}).ID

	// 8 steps of 31 KB inputs.
	var steps []string
	for i := 1; i <= 8; i++ {
		steps = append(steps, fmt.Sprintf(`{"id": "s%d", "toolId": "json_query", "inputs": {"input": "%s", "query": "length"}}`, i, strings.Repeat("q", 31_000)))
	}
	wide := defineWorkflow(t, c, userID, "wide", `{"steps": [`+strings.Join(steps, ",")+`]}`)
	status, run := startRun(t, c, chatID, wide, nil)
	if status != 201 || run.Status != "completed" || len(run.Steps) != 8 || run.Steps[7].Output["result"] != 31000.0 {
		t.Fatalf("synchronous run: %d %s %q", status, run.Status, run.Error)
	}
	r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", map[string]any{"workflowId": wide}, "Prefer", "respond-async")
	var started struct{ Data unattendedRun }
	r.decode(t, &started)
	if done := waitRun(t, c, wide, started.Data.ID, "ended", ended); done.Status != "completed" {
		t.Errorf("asynchronous run: %s %q", done.Status, done.Error)
	}
	st := c.stream(chatID, map[string]any{"content": "run it", "modelId": "builtin", "userId": userID, "workflowId": wide})
	if st.Status != 200 || st.Events[len(st.Events)-1].Type != "end" {
		t.Errorf("stream run: %d %+v", st.Status, st.Events[len(st.Events)-1])
	}
	var thirteen []string
	for i := 1; i <= 13; i++ {
		thirteen = append(thirteen, strings.Replace(steps[0], `"s1"`, fmt.Sprintf(`"s%d"`, i), 1))
	}
	expectError(t, "a 403 KB definition", c.do("PATCH", "/api/workflows/"+wide, `{"steps": [`+strings.Join(thirteen, ",")+`]}`), 413, "WORKFLOW_TOO_LARGE")

	// A 1 MB output across a pause and a retry.
	big := defineWorkflow(t, c, userID, "big", `{"steps": [
	  {"id": "a", "toolId": "json_query", "inputs": {"input": 1, "query": "\"ab\" * 500000"}},
	  {"id": "ok", "toolId": "ask_human", "inputs": {"message": "continue?"}},
	  {"id": "n", "toolId": "json_query", "inputs": {"input": "{{a.result}}", "query": "length"}}
	]}`)
	_, run = startRun(t, c, chatID, big, nil)
	if run.Status != "waiting" {
		t.Fatalf("1 MB run: %s %q", run.Status, run.Error)
	}
	if r := c.do("POST", "/api/workflows/"+big+"/runs/"+run.ID+"/steps/ok/respond", `{"approved":true}`); r.Status != 202 {
		t.Fatalf("respond: %d %s", r.Status, r.Body)
	}
	done := waitRun(t, c, big, run.ID, "ended", ended)
	if done.Status != "completed" || done.Steps[2].Output["result"] != 1_000_000.0 || done.Steps[0].Output["truncated"] != true ||
		done.Steps[0].OutputURL == "" || done.Steps[0].Output["blob"] != nil {
		t.Fatalf("1 MB run: %s %q, steps %+v", done.Status, done.Error, done.Steps)
	}
	resp, err := http.Get(done.Steps[0].OutputURL) // a signed URL: no cookie
	if err != nil {
		t.Fatal(err)
	}
	var whole map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&whole); err != nil || resp.StatusCode != 200 || len(whole["result"]) != 1_000_000 {
		t.Errorf("outputUrl: %d, %d bytes, %v", resp.StatusCode, len(whole["result"]), err)
	}
	resp.Body.Close()
	r = c.do("POST", "/api/workflows/"+big+"/runs/"+run.ID+"/retry", `{"fromStepId":"n"}`)
	var retry struct{ Data unattendedRun }
	r.decode(t, &retry)
	if again := waitRun(t, c, big, retry.Data.ID, "ended", ended); again.Status != "completed" || again.Steps[2].Output["result"] != 1_000_000.0 {
		t.Errorf("retry: %s %q %v", again.Status, again.Error, again.Steps[2].Output)
	}

	// 8 MB flows; over 8 MiB fails its step, naming the limit.
	huge := defineWorkflow(t, c, userID, "huge", `{
	  "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
	  "steps": [
	  {"id": "a", "toolId": "json_query", "inputs": {"input": "{{input.n}}", "query": "\"ab\" * ."}},
	  {"id": "n", "toolId": "json_query", "inputs": {"input": "{{a.result}}", "query": "length"}}
	]}`)
	if _, run = startRun(t, c, chatID, huge, map[string]any{"n": 4_000_000}); run.Status != "completed" || run.Steps[1].Output["result"] != 8_000_000.0 {
		t.Errorf("8 MB: %s %q %v", run.Status, run.Error, run.Steps)
	}
	if _, run = startRun(t, c, chatID, huge, map[string]any{"n": 4_300_000}); run.Status != "failed" || !strings.Contains(run.Steps[0].Error, "8 MiB") {
		t.Errorf("over 8 MiB: %s %q", run.Status, run.Steps[0].Error)
	}
}
