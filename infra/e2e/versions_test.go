package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Workflow versions against the dev server binary: every write keeps a
// version, the routes list, read and restore them, a run keeps its
// version to the end whatever is edited meanwhile, and a trigger may pin
// one.

type versionSummaryJSON struct {
	Version   int    `json:"version"`
	Source    string `json:"source"`
	StepCount int    `json:"stepCount"`
}

func versionList(t *testing.T, c *client, wfID, query string) ([]versionSummaryJSON, string) {
	t.Helper()
	r := c.do("GET", "/api/workflows/"+wfID+"/versions"+query, nil)
	if r.Status != 200 {
		t.Fatalf("versions%s: %d %s", query, r.Status, r.Body)
	}
	var out struct {
		Data struct {
			Versions   []versionSummaryJSON
			NextCursor string
		}
	}
	r.decode(t, &out)
	return out.Data.Versions, out.Data.NextCursor
}

func versionString(vs []versionSummaryJSON) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, fmt.Sprintf("%d:%s:%d", v.Version, v.Source, v.StepCount))
	}
	return strings.Join(parts, " ")
}

// TestWorkflowVersions: the create, a PATCH, an applied proposal and a
// restore each make a version; the list pages newest first; a version
// reads whole; bad numbers, cursors and limits are 400, an unknown
// version 404, another user's workflow 403; a run started at version 2
// runs version 2's steps to its end though the workflow is edited while
// it waits.
func TestWorkflowVersions(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "versions@example.com")
	chatID := newChat(t, c, map[string]string{"title": "versions"}).ID
	v2 := `{"steps": [
	    {"id": "ask", "toolId": "ask_human", "inputs": {"message": "go?"}},
	    {"id": "after", "toolId": "json_query", "inputs": {"input": {"v": 2}, "query": ".v"}}]}`
	wfID := defineWorkflow(t, c, userID, "versioned", v2)

	status, run := startRun(t, c, chatID, wfID, nil)
	if status != 202 || run.Status != "waiting" {
		t.Fatalf("start: %d %+v", status, run)
	}
	// Edited while the run waits: version 3 has other steps.
	if r := c.do("PATCH", "/api/workflows/"+wfID, `{"steps": [{"id": "other", "toolId": "json_query", "inputs": {"input": {"v": 3}, "query": ".v"}}]}`); r.Status != 200 {
		t.Fatalf("edit: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/api/workflows/"+wfID+"/runs/"+run.ID+"/steps/ask/respond", `{"approved":true}`); r.Status != 202 {
		t.Fatalf("respond: %d %s", r.Status, r.Body)
	}
	done := waitRun(t, c, wfID, run.ID, "ended", ended)
	var pinned struct {
		Data struct {
			WorkflowVersion int `json:"workflowVersion"`
		}
	}
	c.do("GET", "/api/workflows/"+wfID+"/runs/"+run.ID, nil).decode(t, &pinned)
	if done.Status != "completed" || len(done.Steps) != 2 || done.Steps[1].ID != "after" || done.Steps[1].Output["result"] != 2.0 || pinned.Data.WorkflowVersion != 2 {
		t.Errorf("the run of version 2 after the edit: version %d, %+v", pinned.Data.WorkflowVersion, done)
	}

	// A proposal applied (version 4), then version 2 restored (version 5).
	p := propose(t, c, getWorkflow(t, c, wfID), `add a step using json_query with {"input": {"a": 1}, "query": ".a"}`)
	applyProposal(t, c, wfID, p.ID)
	r := c.do("POST", "/api/workflows/"+wfID+"/versions/2/restore", nil)
	if r.Status != 200 || r.Header.Get("ETag") != `"5"` {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	var restored struct{ Data workflowJSON }
	r.decode(t, &restored)
	if restored.Data.Version != 5 || stepIDs(restored.Data.Steps) != "ask:ask_human,after:json_query" {
		t.Errorf("restored workflow: %+v", restored.Data)
	}
	all, next := versionList(t, c, wfID, "")
	if got := versionString(all); next != "" || !strings.HasPrefix(got, "5:restore:2 4:proposal:") || !strings.HasSuffix(got, " 3:patch:1 2:patch:2 1:create:0") {
		t.Errorf("versions = %q (next %q)", got, next)
	}
	// Paged by 2: the same list.
	var paged []versionSummaryJSON
	for cursor, i := "", 0; i < 10; i++ {
		q := "?limit=2"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		page, nc := versionList(t, c, wfID, q)
		paged = append(paged, page...)
		if cursor = nc; cursor == "" {
			break
		}
	}
	if versionString(paged) != versionString(all) {
		t.Errorf("paged versions %q, want %q", versionString(paged), versionString(all))
	}
	r = c.do("GET", "/api/workflows/"+wfID+"/versions/3", nil)
	var v3 struct {
		Data struct {
			Version int
			Source  string
			Steps   []stepJSON
		}
	}
	r.decode(t, &v3)
	if r.Status != 200 || v3.Data.Version != 3 || v3.Data.Source != "patch" || stepIDs(v3.Data.Steps) != "other:json_query" {
		t.Errorf("version 3: %d %s", r.Status, r.Body)
	}

	// Bad input: at, one over and far over each bound.
	for _, bad := range []string{"0", "-1", "abc", "01", "+1", "1234567890", strings.Repeat("9", 400)} {
		expectError(t, "version "+bad, c.do("GET", "/api/workflows/"+wfID+"/versions/"+bad, nil), 400, "INVALID_ID")
		expectError(t, "restore of version "+bad, c.do("POST", "/api/workflows/"+wfID+"/versions/"+bad+"/restore", nil), 400, "INVALID_ID")
	}
	for _, n := range []string{"6", "999999999"} {
		expectError(t, "version "+n, c.do("GET", "/api/workflows/"+wfID+"/versions/"+n, nil), 404, "VERSION_NOT_FOUND")
		expectError(t, "restore of version "+n, c.do("POST", "/api/workflows/"+wfID+"/versions/"+n+"/restore", nil), 404, "VERSION_NOT_FOUND")
	}
	if vs, _ := versionList(t, c, wfID, "?limit=100"); len(vs) != 5 {
		t.Errorf("limit 100: %d versions", len(vs))
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=100000", "?cursor=", "?cursor=bm9wZQ", "?cursor=" + strings.Repeat("A", 257)} {
		expectError(t, "versions"+q, c.do("GET", "/api/workflows/"+wfID+"/versions"+q, nil), 400, "INVALID_PAGINATION")
	}
	expectError(t, "restore with a stale If-Match", c.do("POST", "/api/workflows/"+wfID+"/versions/1/restore", nil, "If-Match", `"4"`), 412, "VERSION_MISMATCH")
	expectError(t, "a bad workflow id", c.do("GET", "/api/workflows/nope/versions", nil), 400, "INVALID_ID")
	expectError(t, "an unknown workflow", c.do("GET", "/api/workflows/00000000-0000-4000-8000-000000000000/versions", nil), 404, "WORKFLOW_NOT_FOUND")
	if vs, _ := versionList(t, c, wfID, ""); len(vs) != 5 {
		t.Errorf("refused restores made versions: %s", versionString(vs))
	}

	other := newClient(t, srv.API)
	signUpChatUser(t, other, "versions-other@example.com")
	expectError(t, "another user's versions", other.do("GET", "/api/workflows/"+wfID+"/versions", nil), 403, "FORBIDDEN")
	expectError(t, "another user's version", other.do("GET", "/api/workflows/"+wfID+"/versions/1", nil), 403, "FORBIDDEN")
	expectError(t, "another user's restore", other.do("POST", "/api/workflows/"+wfID+"/versions/1/restore", nil), 403, "FORBIDDEN")
}

// TestTriggerPinsVersion: a webhook trigger pinned to version 1 runs
// version 1's steps though the workflow is at version 2; unpinned (null),
// it runs the latest; a pin out of bounds is 400 naming version; a pin
// the workflow does not have starts nothing and says so.
func TestTriggerPinsVersion(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "pinned@example.com")
	wf := createWorkflow(t, c, userID, "pinned")
	for _, v := range []int{2, 3} {
		body := fmt.Sprintf(`{"steps": [{"id": "v", "toolId": "json_query", "inputs": {"input": {"v": %d}, "query": ".v"}}]}`, v)
		if r := c.do("PATCH", "/api/workflows/"+wf.ID, body); r.Status != 200 {
			t.Fatalf("define version %d: %d %s", v, r.Status, r.Body)
		}
	}
	for _, bad := range []string{`0`, `-1`, `1000000001`, `"2"`, `2.5`} {
		e := expectError(t, "pin "+bad, c.do("POST", "/api/workflows/"+wf.ID+"/triggers", `{"type":"webhook","version":`+bad+`}`), 400, "VALIDATION_FAILED")
		if len(e.Details) == 0 || e.Details[0].Field != "version" {
			t.Errorf("pin %s: details %+v", bad, e.Details)
		}
	}
	tr := createTrigger(t, c, wf.ID, `{"type":"webhook","version":2}`)
	calls := 0
	call := func() string {
		t.Helper()
		calls++
		ts, body := fmt.Sprint(nowUnix()), fmt.Sprintf(`{"call":%d}`, calls)
		r := c.do("POST", "/hooks/"+tr.ID, body, "X-Signature", webhookSignature(tr.Secret, ts, body))
		if r.Status != 202 {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
		var out struct{ Data struct{ RunID string } }
		r.decode(t, &out)
		return out.Data.RunID
	}
	resultOf := func(runID string) any {
		t.Helper()
		run := waitRun(t, c, wf.ID, runID, "ended", ended)
		if run.Status != "completed" {
			t.Fatalf("run: %+v", run)
		}
		return run.Steps[0].Output["result"]
	}
	if got := resultOf(call()); got != 2.0 {
		t.Errorf("pinned to 2, the run returned %v", got)
	}
	var view struct{ Data map[string]json.RawMessage }
	c.do("GET", "/api/workflows/"+wf.ID+"/triggers/"+tr.ID, nil).decode(t, &view)
	if string(view.Data["version"]) != "2" {
		t.Errorf("trigger's version = %s", view.Data["version"])
	}
	if r := c.do("PATCH", "/api/workflows/"+wf.ID+"/triggers/"+tr.ID, `{"version":null}`); r.Status != 200 {
		t.Fatalf("unpin: %d %s", r.Status, r.Body)
	}
	if got := resultOf(call()); got != 3.0 {
		t.Errorf("unpinned, the run returned %v", got)
	}
	expectError(t, "pin 0 by PATCH", c.do("PATCH", "/api/workflows/"+wf.ID+"/triggers/"+tr.ID, `{"version":0}`), 400, "VALIDATION_FAILED")
	if r := c.do("PATCH", "/api/workflows/"+wf.ID+"/triggers/"+tr.ID, `{"version":9}`); r.Status != 200 {
		t.Fatalf("pin 9: %d %s", r.Status, r.Body)
	}
	ts := fmt.Sprint(nowUnix())
	expectError(t, "a call pinned to a version the workflow lacks", c.do("POST", "/hooks/"+tr.ID, `{"n":1}`, "X-Signature", webhookSignature(tr.Secret, ts, `{"n":1}`)), 404, "VERSION_NOT_FOUND")
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	c.do("GET", "/api/workflows/"+wf.ID+"/runs", nil).decode(t, &list)
	if len(list.Data.WorkflowRuns) != 2 {
		t.Errorf("%d runs, want the 2 that started", len(list.Data.WorkflowRuns))
	}
}

func nowUnix() int64 { return time.Now().Unix() }
