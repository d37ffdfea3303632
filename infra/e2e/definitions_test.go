package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// definitionJSON is a workflow with the fields of a definition.
type definitionJSON struct {
	ID           string          `json:"id"`
	Version      int             `json:"version"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	ExposeAsTool bool            `json:"exposeAsTool"`
	ToolName     string          `json:"toolName"`
	Steps        []struct {
		ID              string   `json:"id"`
		ToolID          string   `json:"toolId"`
		If              string   `json:"if"`
		ForEach         string   `json:"forEach"`
		Concurrency     *int     `json:"concurrency"`
		ContinueOnError bool     `json:"continueOnError"`
		Outputs         []string `json:"outputs"`
	} `json:"steps"`
}

// TestWorkflowDirectEdits drives PATCH /api/workflows/{id} as a client
// would: an input schema and a whole step list with step control (if,
// forEach, concurrency, continueOnError) and a human step, read back with
// its ETag; If-Match (match, stale 412, malformed 400); every bad step a
// 400 naming its field, nothing written; the tool name's uniqueness.
func TestWorkflowDirectEdits(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "direct-edits@example.com")
	wf := createWorkflow(t, c, userID, "direct edits")
	path := "/api/workflows/" + wf.ID

	body := `{
	  "inputSchema": {"type": "object", "properties": {"csv": {"type": "string"}, "min": {"type": "number", "default": 1}}, "required": ["csv"]},
	  "steps": [
	    {"id": "parse", "toolId": "csv_parse", "inputs": {"text": "{{input.csv}}"}},
	    {"id": "names", "toolId": "text_template", "inputs": {"template": "{{.n}}!", "values": {"n": "{{item.name}}"}}, "forEach": "{{parse.rows}}", "concurrency": 2, "continueOnError": true},
	    {"id": "check", "toolId": "ask_human", "inputs": {"message": "Send {{names.results}}?", "timeoutSeconds": 3600}, "if": "len(names.results) >= input.min"}
	  ],
	  "toolName": "names_from_csv", "exposeAsTool": true
	}`
	r := c.do("PATCH", path, body, "If-Match", `"1"`)
	if r.Status != 200 || r.Header.Get("ETag") != `"2"` {
		t.Fatalf("PATCH definition: %d %s (ETag %q)", r.Status, r.Body, r.Header.Get("ETag"))
	}
	var got struct{ Data definitionJSON }
	r.decode(t, &got)
	d := got.Data
	if d.Version != 2 || len(d.Steps) != 3 || d.ToolName != "names_from_csv" || !d.ExposeAsTool || !strings.Contains(string(d.InputSchema), `"csv"`) {
		t.Fatalf("patched = %s", r.Body)
	}
	if s := d.Steps[1]; s.ForEach != "{{parse.rows}}" || s.Concurrency == nil || *s.Concurrency != 2 || !s.ContinueOnError || strings.Join(s.Outputs, ",") != "results" {
		t.Errorf("forEach step = %+v", s)
	}
	if s := d.Steps[2]; s.If == "" || strings.Join(s.Outputs, ",") != "approved,respondedAt,timedOut,values" {
		t.Errorf("human step = %+v", s)
	}
	r = c.do("GET", path, nil)
	if r.Status != 200 || r.Header.Get("ETag") != `"2"` {
		t.Errorf("GET: %d, ETag %q", r.Status, r.Header.Get("ETag"))
	}

	// If-Match.
	expectError(t, "stale If-Match", c.do("PATCH", path, `{"name":"x"}`, "If-Match", `"1"`), 412, "VERSION_MISMATCH")
	expectError(t, "malformed If-Match", c.do("PATCH", path, `{"name":"x"}`, "If-Match", `version 2`), 400, "INVALID_IF_MATCH")
	if r := c.do("PATCH", path, `{"description":"weak tag"}`, "If-Match", `W/"2"`); r.Status != 200 || r.Header.Get("ETag") != `"3"` {
		t.Errorf("weak If-Match: %d %s", r.Status, r.Body)
	}

	// Every bad definition is a 400 naming the field; nothing is written.
	step := func(id, extra string) string {
		return `{"id":"` + id + `","toolId":"hash","inputs":{"text":"a","algorithm":"md5"}` + extra + `}`
	}
	for _, tc := range []struct {
		name, body, field string
	}{
		{"if that does not compile", `{"steps":[` + step("a", "") + `,` + step("b", `,"if":"a.digest =="`) + `]}`, "steps[1].if"},
		{"forEach over a string", `{"steps":[` + step("a", "") + `,` + step("b", `,"forEach":"{{a.digest}}"`) + `]}`, "steps[1].forEach"},
		{"item outside forEach", `{"steps":[{"id":"a","toolId":"hash","inputs":{"text":"{{item}}","algorithm":"md5"}}]}`, "steps[0].inputs"},
		{"concurrency 17", `{"steps":[` + step("a", `,"forEach":"{{input.csv}}","concurrency":17`) + `]}`, "steps[0].concurrency"},
		{"unknown input", `{"steps":[{"id":"a","toolId":"hash","inputs":{"text":"{{input.nope}}","algorithm":"md5"}}]}`, "steps[0].inputs"},
		{"inputs against the tool", `{"steps":[{"id":"a","toolId":"json_query","inputs":{"input":1,"query":5}}]}`, "steps[0].inputs.query"},
		{"input schema not an object schema", `{"inputSchema":{"type":"string"}}`, "inputSchema"},
		{"bad tool name", `{"toolName":"Bad Name"}`, "toolName"},
	} {
		expectFieldError(t, tc.name, c.do("PATCH", path, tc.body), tc.field)
	}
	if got := getWorkflow(t, c, wf.ID); got.Version != 3 {
		t.Errorf("a refused PATCH wrote: version %d", got.Version)
	}

	// The tool name is the user's: a second workflow cannot take it.
	other := createWorkflow(t, c, userID, "other")
	expectError(t, "taken tool name", c.do("PATCH", "/api/workflows/"+other.ID, `{"toolName":"names_from_csv"}`), 409, "TOOL_NAME_TAKEN")
	if r := c.do("PATCH", path, `{"toolName":"renamed","exposeAsTool":true}`); r.Status != 200 {
		t.Fatalf("rename tool: %d %s", r.Status, r.Body)
	}
	if r := c.do("PATCH", "/api/workflows/"+other.ID, `{"toolName":"names_from_csv"}`); r.Status != 200 {
		t.Errorf("the freed name: %d %s", r.Status, r.Body)
	}
}

// TestWorkflowSizeLimits is the reported reproduction: steps of about 29
// KB each, added through proposals, made a workflow DynamoDB refuses (500
// when the 14th step, 405 KB, was applied). Now the proposal that would
// pass 350 KiB is still made, its apply is 413 WORKFLOW_TOO_LARGE with
// nothing written, and a PATCH or create over the limit is 413 too (an
// 8 MiB body PAYLOAD_TOO_LARGE); a definition at the limit is accepted.
func TestWorkflowSizeLimits(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "size-limits@example.com")
	const limit = 350 << 10

	wf := createWorkflow(t, c, userID, "big steps")
	add := func(n int) string {
		return fmt.Sprintf(`add a step using hash with {"text": %q, "algorithm": "md5"}`, strings.Repeat(string(rune('a'+n%26)), 29_000))
	}
	var tooLarge proposalJSON
	applied := 0
	for n := range 14 {
		p := propose(t, c, wf, add(n))
		r := c.do("POST", "/api/workflows/"+wf.ID+"/messages/apply", map[string]string{"proposalId": p.ID})
		if r.Status == 200 {
			applied++
			continue
		}
		expectError(t, fmt.Sprintf("apply of step %d", n+1), r, 413, "WORKFLOW_TOO_LARGE")
		tooLarge = p
		break
	}
	if applied != 12 || tooLarge.ID == "" {
		t.Fatalf("%d steps of 29 KB applied before a 413, want 12 (the 13th passes 350 KiB)", applied)
	}
	before := getWorkflow(t, c, wf.ID)
	if len(before.Steps) != 12 {
		t.Errorf("%d steps after the refused apply", len(before.Steps))
	}
	for _, m := range workflowMessages(t, c, wf.ID) {
		if m.Proposal != nil && m.Proposal.ID == tooLarge.ID && m.Proposal.Status != "pending" {
			t.Errorf("the refused proposal is %s, want pending", m.Proposal.Status)
		}
	}
	// The 14th step of the report, 405 KB in all: the same answer.
	p := propose(t, c, wf, add(13))
	expectError(t, "apply of the 14th step", c.do("POST", "/api/workflows/"+wf.ID+"/messages/apply", map[string]string{"proposalId": p.ID}), 413, "WORKFLOW_TOO_LARGE")
	if after := getWorkflow(t, c, wf.ID); after.Version != before.Version {
		t.Errorf("a refused apply wrote: version %d, was %d", after.Version, before.Version)
	}

	// PATCH and create: at the limit, one byte over, far over, 8 MiB.
	hashSteps := func(n int) string {
		return `[{"id":"big","toolId":"hash","inputs":{"algorithm":"md5","text":"` + strings.Repeat("x", n) + `"}}]`
	}
	// The definition of a workflow named "p" with one such step, in bytes:
	// {"name":"p","description":"","steps":[{"id":"big","toolId":"hash","inputs":{"algorithm":"md5","text":"..."},"outputs":["digest"]}],"exposeAsTool":false}
	overhead := len(`{"name":"p","description":"","steps":[{"id":"big","toolId":"hash","inputs":{"algorithm":"md5","text":""},"outputs":["digest"]}],"exposeAsTool":false}`)
	for _, tc := range []struct {
		name   string
		text   int
		status int
		code   string
	}{
		{"at the limit", limit - overhead, 200, ""},
		{"one byte over", limit - overhead + 1, 413, "WORKFLOW_TOO_LARGE"},
		{"far over", 900_000, 413, "WORKFLOW_TOO_LARGE"},
		{"8 MiB", 8 << 20, 413, "PAYLOAD_TOO_LARGE"},
	} {
		w := createWorkflow(t, c, userID, "p")
		r := c.do("PATCH", "/api/workflows/"+w.ID, `{"steps":`+hashSteps(tc.text)+`}`)
		if tc.status == 200 {
			if r.Status != 200 {
				t.Errorf("PATCH %s: %d %.300s", tc.name, r.Status, r.Body)
			}
		} else {
			expectError(t, "PATCH "+tc.name, r, tc.status, tc.code)
			if got := getWorkflow(t, c, w.ID); got.Version != 1 || len(got.Steps) != 0 {
				t.Errorf("PATCH %s wrote version %d", tc.name, got.Version)
			}
		}
		r = c.do("POST", "/api/workflows", `{"userId":"`+userID+`","name":"p","steps":`+hashSteps(tc.text)+`}`)
		if tc.status == 200 {
			if r.Status != 201 {
				t.Errorf("create %s: %d %.300s", tc.name, r.Status, r.Body)
			}
		} else {
			expectError(t, "create "+tc.name, r, tc.status, tc.code)
		}
	}
}
