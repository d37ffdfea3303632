package workflow_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/workflow"
)

// patch sends PATCH /api/workflows/{id} with the headers given (name,
// value pairs) and returns the response, read.
func (a *wfAPI) patch(t *testing.T, id, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	resp := a.call(t, "a", "PATCH", "/api/workflows/"+id, body, header...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func decodeWorkflow(t *testing.T, b []byte) workflow.Workflow {
	t.Helper()
	var env struct{ Data workflow.Workflow }
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	return env.Data
}

func decodeError(t *testing.T, b []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	return e
}

func (e apiError) names(field string) bool {
	for _, d := range e.Details {
		if d.Field == field {
			return true
		}
	}
	return false
}

const patchSchema = `{"type":"object","properties":{"text":{"type":"string"},"items":{"type":"array"},"doc":{"type":"string","format":"attachment"}},"required":["text"]}`

// patchSteps is a valid step list over patchSchema: a CSV parse of the
// input, a forEach over its rows, a conditional hash and a human step.
const patchSteps = `[
  {"id":"csv","toolId":"csv_parse","inputs":{"text":"{{input.text}}"}},
  {"id":"each","toolId":"json_query","inputs":{"input":"{{item}}","query":".name"},"forEach":"{{csv.rows}}","concurrency":8,"continueOnError":true},
  {"id":"h","toolId":"hash","inputs":{"text":"{{each.results}} {{input.doc}}","algorithm":"sha256"},"if":"len(each.results) > 0 and input.text != \"\""},
  {"id":"ok","toolId":"ask_human","inputs":{"message":"Publish {{h.digest}}?","inputSchema":{"type":"object","properties":{"note":{"type":"string"}}},"timeoutSeconds":3600,"onTimeout":"continue"}}
]`

// TestWorkflowPatchDefinition: PATCH takes inputSchema and the whole step
// list, validated as a proposal is (every problem a 400 naming its field,
// nothing written), sets the outputs (results for a forEach step), and
// answers with the new ETag.
func TestWorkflowPatchDefinition(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "Definition")

	status, h, b := a.patch(t, w.ID, `{"inputSchema":`+patchSchema+`,"steps":`+patchSteps+`}`)
	if status != 200 {
		t.Fatalf("PATCH: %d %s", status, b)
	}
	got := decodeWorkflow(t, b)
	if got.Version != 2 || h.Get("ETag") != `"2"` || len(got.Steps) != 4 || !strings.Contains(string(got.InputSchema), `"attachment"`) {
		t.Fatalf("patched = %+v (ETag %s)", got, h.Get("ETag"))
	}
	wantOutputs := [][]string{{"rows"}, {"results"}, {"digest"}, {"approved", "respondedAt", "timedOut", "values"}}
	for i, s := range got.Steps {
		if !slices.Equal(s.Outputs, wantOutputs[i]) {
			t.Errorf("step %s outputs %v, want %v", s.ID, s.Outputs, wantOutputs[i])
		}
	}
	if s := got.Steps[1]; s.ForEach != "{{csv.rows}}" || s.Concurrency == nil || *s.Concurrency != 8 || !s.ContinueOnError {
		t.Errorf("forEach step = %+v", s)
	}
	if got.Steps[2].If == "" {
		t.Errorf("if lost: %+v", got.Steps[2])
	}
	if again := a.get(t, w.ID); again.Version != 2 || len(again.Steps) != 4 || again.Steps[1].ForEach == "" {
		t.Errorf("stored = %+v", again)
	}

	bad := func(i int, field, value string) string {
		var steps []map[string]any
		if err := json.Unmarshal([]byte(patchSteps), &steps); err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			delete(steps[i], field)
		} else {
			steps[i][field] = v
		}
		out, _ := json.Marshal(map[string]any{"steps": steps})
		return string(out)
	}
	cases := []struct {
		name, body string
		status     int
		code       string
		field      string
	}{
		{"bad if", bad(2, "if", `"each.results >"`), 400, "VALIDATION_FAILED", "steps[2].if"},
		{"if over a later step", bad(0, "if", `"h.digest == \"\""`), 400, "VALIDATION_FAILED", "steps[0].if"},
		{"forEach over a non-array", bad(1, "forEach", `"{{input.text}}"`), 400, "VALIDATION_FAILED", "steps[1].forEach"},
		{"item outside forEach", bad(2, "inputs", `{"text":"{{item}}","algorithm":"md5"}`), 400, "VALIDATION_FAILED", "steps[2].inputs"},
		{"concurrency 0", bad(1, "concurrency", `0`), 400, "VALIDATION_FAILED", "steps[1].concurrency"},
		{"concurrency 17", bad(1, "concurrency", `17`), 400, "VALIDATION_FAILED", "steps[1].concurrency"},
		{"unknown input name", bad(0, "inputs", `{"text":"{{input.nope}}"}`), 400, "VALIDATION_FAILED", "steps[0].inputs"},
		{"input schema mismatch", bad(1, "inputs", `{"input":"{{item}}","query":5}`), 400, "VALIDATION_FAILED", "steps[1].inputs.query"},
		{"unknown tool", bad(0, "toolId", `"nope"`), 400, "VALIDATION_FAILED", "steps[0].toolId"},
		{"reserved step id", bad(0, "id", `"input"`), 400, "VALIDATION_FAILED", "steps[0].id"},
		{"inputSchema not an object schema", `{"inputSchema":{"type":"array"}}`, 400, "VALIDATION_FAILED", "inputSchema"},
		{"inputSchema not JSON Schema", `{"inputSchema":{"type":"object","properties":{"a":{"minimum":"x"}}}}`, 400, "VALIDATION_FAILED", "inputSchema"},
		{"inputSchema a string", `{"inputSchema":"object"}`, 400, "VALIDATION_FAILED", "inputSchema"},
		// Validating a run's input against these would overflow the stack.
		{"inputSchema refers to itself", `{"inputSchema":{"type":"object","$ref":"#"}}`, 400, "VALIDATION_FAILED", "inputSchema"},
		{"inputSchema with a $defs loop", `{"inputSchema":{"type":"object","$defs":{"x":{"$ref":"#/$defs/x"}},"properties":{"a":{"$ref":"#/$defs/x"}}}}`,
			400, "VALIDATION_FAILED", "inputSchema"},
		// Validating one against this would take 2^22 schema applications
		// (2^14 already to check the default).
		{"inputSchema too costly to validate", `{"inputSchema":` + costlyChain(22) + `}`, 400, "VALIDATION_FAILED", "inputSchema"},
		{"inputSchema removed under steps that read it", `{"inputSchema":null}`, 400, "VALIDATION_FAILED", "steps[0].inputs"},
		{"steps not an array", `{"steps":{}}`, 400, "VALIDATION_FAILED", "steps"},
		{"too many steps", `{"steps":[` + strings.TrimSuffix(strings.Repeat(`{"id":"x","toolId":"hash"},`, 51), ",") + `]}`, 400, "VALIDATION_FAILED", "steps"},
		{"no fields", `{"unknown":1}`, 400, "NO_FIELDS", ""},
	}
	for _, c := range cases {
		status, _, b := a.patch(t, w.ID, c.body)
		e := decodeError(t, b)
		if status != c.status || e.Code != c.code || (c.field != "" && !e.names(c.field)) {
			t.Errorf("%s: %d %s %+v, want %d %s naming %s", c.name, status, e.Code, e.Details, c.status, c.code, c.field)
		}
	}
	if again := a.get(t, w.ID); again.Version != 2 {
		t.Errorf("a refused PATCH wrote: version %d", again.Version)
	}

	// Removing the schema and the steps that read it, together.
	status, _, b = a.patch(t, w.ID, `{"inputSchema":null,"steps":[]}`)
	if got := decodeWorkflow(t, b); status != 200 || got.InputSchema != nil || len(got.Steps) != 0 || got.Version != 3 {
		t.Errorf("clear: %d %s", status, b)
	}

	// Create takes a definition too.
	var created workflow.Workflow
	a.do(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"Whole","inputSchema":%s,"steps":%s}`, a.users["a"].id, patchSchema, patchSteps), 201, &created)
	if len(created.Steps) != 4 || created.Steps[1].Outputs[0] != "results" {
		t.Errorf("created = %+v", created)
	}
	e := a.fail(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"Cyclic","inputSchema":{"type":"object","$ref":"#"}}`, a.users["a"].id), 400, "VALIDATION_FAILED")
	if !e.names("inputSchema") {
		t.Errorf("create with a self-referencing inputSchema: %+v", e)
	}
	e = a.fail(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"Bad","steps":[{"id":"x","toolId":"hash","inputs":{"text":"{{item}}","algorithm":"md5"}}]}`, a.users["a"].id), 400, "VALIDATION_FAILED")
	if !e.names("steps[0].inputs") {
		t.Errorf("create with a bad step: %+v", e)
	}
}

// TestWorkflowIfMatch: GET answers ETag "<version>"; PATCH with If-Match
// applies only to that version (412 VERSION_MISMATCH otherwise, nothing
// written), takes W/ and unquoted tags, lists and *, and refuses a
// malformed header with 400 before anything else.
func TestWorkflowIfMatch(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "Versioned")
	resp := a.call(t, "a", "GET", "/api/workflows/"+w.ID, "")
	resp.Body.Close()
	if got := resp.Header.Get("ETag"); got != `"1"` {
		t.Fatalf("ETag = %q, want \"1\"", got)
	}
	steps := []struct {
		name, ifMatch string
		status        int
		code          string
		version       int // the version after
	}{
		{"match", `"1"`, 200, "", 2},
		{"stale", `"1"`, 412, "VERSION_MISMATCH", 2},
		{"future", `"9"`, 412, "VERSION_MISMATCH", 2},
		{"weak tag", `W/"2"`, 200, "", 3},
		{"unquoted", `3`, 200, "", 4},
		{"list", `"1", "4"`, 200, "", 5},
		{"any", `*`, 200, "", 6},
		{"malformed word", `"abc"`, 400, "INVALID_IF_MATCH", 6},
		{"malformed zero", `"0"`, 400, "INVALID_IF_MATCH", 6},
		{"malformed empty tag", `""`, 400, "INVALID_IF_MATCH", 6},
		{"malformed list", `"6",`, 400, "INVALID_IF_MATCH", 6},
		{"no header", ``, 200, "", 7},
	}
	for _, s := range steps {
		var header []string
		if s.ifMatch != "" {
			header = []string{"If-Match", s.ifMatch}
		}
		status, h, b := a.patch(t, w.ID, `{"description":"`+s.name+`"}`, header...)
		if status != s.status {
			t.Fatalf("%s: %d %s, want %d", s.name, status, b, s.status)
		}
		if s.code != "" {
			if e := decodeError(t, b); e.Code != s.code {
				t.Errorf("%s: code %s, want %s", s.name, e.Code, s.code)
			}
		} else if got := decodeWorkflow(t, b); got.Version != s.version || h.Get("ETag") != workflow.ETag(s.version) {
			t.Errorf("%s: version %d ETag %s, want %d", s.name, got.Version, h.Get("ETag"), s.version)
		}
		if got := a.get(t, w.ID); got.Version != s.version {
			t.Errorf("%s: stored version %d, want %d", s.name, got.Version, s.version)
		}
	}
	// Check order: a malformed header is 400 before 404 and 403.
	status, _, _ := a.patch(t, missingID, `{"name":"x"}`, "If-Match", "nope")
	if status != 400 {
		t.Errorf("malformed If-Match on a missing workflow: %d", status)
	}
	resp = a.call(t, "b", "PATCH", "/api/workflows/"+w.ID, `{"name":"x"}`, "If-Match", `"7"`)
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("another user's workflow with a matching If-Match: %d", resp.StatusCode)
	}
}

// TestWorkflowToolNameOverHTTP: exposeAsTool needs a toolName, the name's
// pattern is checked, a name is unique per user (409 TOOL_NAME_TAKEN) and
// freed by a rename and a delete.
func TestWorkflowToolNameOverHTTP(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w1, w2 := a.create(t, "a", "One"), a.create(t, "a", "Two")
	wb := a.create(t, "b", "B's")
	cases := []struct {
		name, id, body string
		status         int
		code, field    string
	}{
		{"expose without a name", w1.ID, `{"exposeAsTool":true}`, 400, "VALIDATION_FAILED", "exposeAsTool"},
		{"bad name", w1.ID, `{"toolName":"Search-It"}`, 400, "VALIDATION_FAILED", "toolName"},
		{"name too long", w1.ID, `{"toolName":"` + strings.Repeat("a", 65) + `"}`, 400, "VALIDATION_FAILED", "toolName"},
		{"name and expose", w1.ID, `{"toolName":"search","exposeAsTool":true}`, 200, "", ""},
		{"taken", w2.ID, `{"toolName":"search"}`, 409, "TOOL_NAME_TAKEN", ""},
		{"rename frees it", w1.ID, `{"toolName":"find"}`, 200, "", ""},
		{"now free", w2.ID, `{"toolName":"search"}`, 200, "", ""},
		{"unname while exposed", w1.ID, `{"toolName":""}`, 400, "VALIDATION_FAILED", "exposeAsTool"},
		{"unname and hide", w1.ID, `{"toolName":"","exposeAsTool":false}`, 200, "", ""},
	}
	for _, c := range cases {
		status, _, b := a.patch(t, c.id, c.body)
		if status != c.status {
			t.Fatalf("%s: %d %s, want %d", c.name, status, b, c.status)
		}
		if c.code != "" {
			if e := decodeError(t, b); e.Code != c.code || (c.field != "" && !e.names(c.field)) {
				t.Errorf("%s: %+v, want %s naming %s", c.name, e, c.code, c.field)
			}
		}
	}
	if got := a.get(t, w1.ID); got.ToolName != "" || got.ExposeAsTool {
		t.Errorf("w1 = %+v", got)
	}
	// Another user may take a name in use; a delete frees a name.
	resp := a.call(t, "b", "PATCH", "/api/workflows/"+wb.ID, `{"toolName":"search"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("another user's name: %d", resp.StatusCode)
	}
	a.do(t, "a", "DELETE", "/api/workflows/"+w2.ID, "", 204, nil)
	var created workflow.Workflow
	a.do(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"Three","toolName":"search","exposeAsTool":true}`, a.users["a"].id), 201, &created)
	if created.ToolName != "search" || !created.ExposeAsTool {
		t.Errorf("created = %+v", created)
	}
	a.fail(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"Four","toolName":"search"}`, a.users["a"].id), 409, "TOOL_NAME_TAKEN")
}

// hashSteps returns a step list of one hash step whose text is n bytes.
func hashStep(id string, n int) workflow.Step {
	return workflow.Step{ID: id, ToolID: "hash", Inputs: map[string]any{"algorithm": "md5", "text": strings.Repeat("x", n)}, Outputs: []string{"digest"}}
}

// padTo returns the length of the text of a hash step "big" that makes
// w (its steps, with big first) measure size bytes.
func padTo(t *testing.T, w workflow.Workflow, size int) int {
	t.Helper()
	w.Steps = append([]workflow.Step{hashStep("big", 0)}, w.Steps...)
	n := size - workflow.DefinitionSize(w)
	if n < 0 {
		t.Fatalf("the rest of the workflow is already %d bytes over %d", -n, size)
	}
	return n
}

// TestWorkflowSizeLimitsOverHTTP: every write path of a definition
// (create, PATCH, propose, apply) at the 350 KiB limit, one byte over and
// far over: at the limit it is written, over it the answer is 413
// (WORKFLOW_TOO_LARGE, or PAYLOAD_TOO_LARGE for bodies over 1 MiB; a
// proposal is still made, its apply refused), never a 5xx, and nothing is
// half-written.
func TestWorkflowSizeLimitsOverHTTP(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	uid := a.users["a"].id
	limit := workflow.MaxDefinitionBytes
	huge := strings.Repeat("x", 8<<20)

	t.Run("create", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			over   int
			status int
			code   string
		}{{"at the limit", 0, 201, ""}, {"one byte over", 1, 413, "WORKFLOW_TOO_LARGE"}, {"far over, under the body limit", 500_000, 413, "WORKFLOW_TOO_LARGE"}} {
			pad := padTo(t, workflow.Workflow{Name: c.name, Steps: []workflow.Step{}}, limit) + c.over
			steps, _ := json.Marshal([]workflow.Step{hashStep("big", pad)})
			resp := a.call(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":%q,"steps":%s}`, uid, c.name, steps))
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || (c.code != "" && decodeError(t, b).Code != c.code) {
				t.Errorf("%s: %d %.200s", c.name, resp.StatusCode, b)
			}
			if c.status == 201 {
				if got := decodeWorkflow(t, b); workflow.DefinitionSize(got) != limit {
					t.Errorf("%s: stored %d bytes, want %d", c.name, workflow.DefinitionSize(got), limit)
				}
			}
		}
		a.fail(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"huge","description":%q}`, uid, huge), 413, "PAYLOAD_TOO_LARGE")
		var page struct{ Total int }
		a.do(t, "a", "GET", "/api/users/"+uid+"/workflows", "", 200, &page)
		if page.Total != 1 {
			t.Errorf("%d workflows after the refused creates, want 1", page.Total)
		}
	})

	t.Run("patch", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			over   int
			status int
			code   string
		}{{"at the limit", 0, 200, ""}, {"one byte over", 1, 413, "WORKFLOW_TOO_LARGE"}, {"far over, under the body limit", 600_000, 413, "WORKFLOW_TOO_LARGE"}, {"8 MiB", 8 << 20, 413, "PAYLOAD_TOO_LARGE"}} {
			w := a.create(t, "a", "patch "+c.name)
			pad := padTo(t, w, limit) + c.over
			steps, _ := json.Marshal([]workflow.Step{hashStep("big", pad)})
			status, _, b := a.patch(t, w.ID, `{"steps":`+string(steps)+`}`)
			if status != c.status || (c.code != "" && decodeError(t, b).Code != c.code) {
				t.Errorf("%s: %d %.200s", c.name, status, b)
			}
			got := a.get(t, w.ID)
			if c.status == 200 && (got.Version != 2 || workflow.DefinitionSize(got) != limit) {
				t.Errorf("%s: stored version %d, %d bytes", c.name, got.Version, workflow.DefinitionSize(got))
			}
			if c.status != 200 && (got.Version != 1 || len(got.Steps) != 0) {
				t.Errorf("%s: a refused PATCH wrote version %d", c.name, got.Version)
			}
		}
		// A workflow at the limit: a longer name passes it.
		w := a.create(t, "a", "n")
		pad := padTo(t, w, limit)
		steps, _ := json.Marshal([]workflow.Step{hashStep("big", pad)})
		if status, _, b := a.patch(t, w.ID, `{"steps":`+string(steps)+`}`); status != 200 {
			t.Fatalf("at the limit: %d %.200s", status, b)
		}
		if status, _, b := a.patch(t, w.ID, `{"name":"nn"}`); status != 413 || decodeError(t, b).Code != "WORKFLOW_TOO_LARGE" {
			t.Errorf("rename past the limit: %d %.200s", status, b)
		}
	})

	t.Run("propose and apply", func(t *testing.T) {
		const stepText = 20_000
		for _, c := range []struct {
			name   string
			over   int
			status int
		}{{"at the limit", 0, 200}, {"one byte over", 1, 413}} {
			w := a.create(t, "a", "apply "+c.name)
			p := a.propose(t, w.ID, fmt.Sprintf(`add a step using hash with {"text": %q, "algorithm": "md5"}`, strings.Repeat("y", stepText)))
			added := *p.Changes[0].Step
			final := w
			final.Steps = []workflow.Step{{ID: added.ID, ToolID: "hash", Inputs: added.Inputs, Outputs: []string{"digest"}}}
			pad := padTo(t, final, limit) + c.over
			steps, _ := json.Marshal([]workflow.Step{hashStep("big", pad)})
			if status, _, b := a.patch(t, w.ID, `{"steps":`+string(steps)+`}`); status != 200 {
				t.Fatalf("%s: base PATCH %d %.200s", c.name, status, b)
			}
			// A proposal whose apply would pass the limit is still made.
			p2 := a.propose(t, w.ID, fmt.Sprintf(`add a step using hash with {"text": %q, "algorithm": "md5"}`, strings.Repeat("z", stepText)))
			resp := a.call(t, "a", "POST", "/api/workflows/"+w.ID+"/messages/apply", fmt.Sprintf(`{"proposalId":%q}`, p.ID))
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("%s: apply %d %.200s", c.name, resp.StatusCode, b)
			}
			got := a.get(t, w.ID)
			if c.status == 200 && workflow.DefinitionSize(got) != limit {
				t.Errorf("%s: %d bytes after apply", c.name, workflow.DefinitionSize(got))
			}
			if c.status == 413 {
				if e := decodeError(t, b); e.Code != "WORKFLOW_TOO_LARGE" || !strings.Contains(e.Message, fmt.Sprint(limit)) {
					t.Errorf("%s: %+v", c.name, e)
				}
				if got.Version != 2 || len(got.Steps) != 1 {
					t.Errorf("%s: a refused apply wrote version %d", c.name, got.Version)
				}
			}
			var list struct{ Messages []workflow.Message }
			a.do(t, "a", "GET", "/api/workflows/"+w.ID+"/messages", "", 200, &list)
			wantStatus := map[int]string{200: workflow.ProposalApplied, 413: workflow.ProposalPending}[c.status]
			for _, m := range list.Messages {
				if m.Proposal != nil && m.Proposal.ID == p.ID && m.Proposal.Status != wantStatus {
					t.Errorf("%s: proposal %s, want %s", c.name, m.Proposal.Status, wantStatus)
				}
			}
			// The second proposal would pass the limit either way.
			resp = a.call(t, "a", "POST", "/api/workflows/"+w.ID+"/messages/apply", fmt.Sprintf(`{"proposalId":%q}`, p2.ID))
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Errorf("%s: the second apply %d, want 413", c.name, resp.StatusCode)
			}
		}
		w := a.create(t, "a", "propose huge")
		a.fail(t, "a", "POST", "/api/workflows/"+w.ID+"/messages", fmt.Sprintf(`{"content":%q,"modelId":"builtin"}`, huge), 413, "PAYLOAD_TOO_LARGE")
		a.fail(t, "a", "POST", "/api/workflows/"+w.ID+"/messages", fmt.Sprintf(`{"content":%q,"modelId":"builtin"}`, strings.Repeat("x", 32001)), 400, "VALIDATION_FAILED")
	})
	if httpapi.MaxBodyBytes <= limit {
		t.Errorf("the body limit %d does not leave room for a definition of %d bytes", httpapi.MaxBodyBytes, limit)
	}
}

// costlyChain returns an input schema whose property x, with a default,
// applies $defs a0, each aK applying aK+1 twice to the same value.
func costlyChain(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"x":{"$ref":"#/$defs/a0","default":1}},"$defs":{`)
	for i := range n {
		fmt.Fprintf(&b, `"a%d":{"allOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%[2]d"}]},`, i, i+1)
	}
	fmt.Fprintf(&b, `"a%d":{}}}`, n)
	return b.String()
}
