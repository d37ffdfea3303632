package e2e_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Workflows that run without a person, against the dev server binary:
// run inputs, `if`, forEach, human steps, schedules on the dev server's
// clock (DEV_CLOCK_FILE, moved forward by the test) and signed webhooks.

// unattendedRun is a run as the API shows it, its steps' values kept as JSON.
type unattendedRun struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Error   string `json:"error"`
	Attempt int    `json:"attempt"`
	Trigger *struct {
		Type      string `json:"type"`
		TriggerID string `json:"triggerId"`
	} `json:"trigger"`
	Steps []struct {
		ID           string         `json:"id"`
		Status       string         `json:"status"`
		Error        string         `json:"error"`
		Input        map[string]any `json:"input"`
		Output       map[string]any `json:"output"`
		ElementsDone *int           `json:"elementsDone"`
		ExpiresAt    *time.Time     `json:"expiresAt"`
		OutputURL    string         `json:"outputUrl"`
	} `json:"steps"`
}

func (r unattendedRun) step(t *testing.T, id string) int {
	t.Helper()
	for i, s := range r.Steps {
		if s.ID == id {
			return i
		}
	}
	t.Fatalf("run %s has no step %s: %+v", r.ID, id, r)
	return -1
}

// clockFile is the dev server's DEV_CLOCK_FILE: ahead moves the server's
// clock to the wall clock plus d.
type clockFile string

func newClockFile(t *testing.T) clockFile {
	p := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(p, []byte("0s"), 0o600); err != nil {
		t.Fatal(err)
	}
	return clockFile(p)
}

func (f clockFile) ahead(t *testing.T, d time.Duration) {
	t.Helper()
	// A new size as well as a new time, whatever the file system's time
	// resolution: the server reads the file again when either changes.
	s := fmt.Sprintf("%s%s", d, strings.Repeat(" ", (int(d/time.Second)%7+7)%7))
	if err := os.WriteFile(string(f), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// toStartOf moves the server's clock back to the start of the wall clock's
// current unit (a minute, an hour): what the server counts per minute or
// hour of its clock (rate limits) then has a whole unit ahead for the
// requests that follow, however slow the machine, with no wait.
func (f clockFile) toStartOf(t *testing.T, unit time.Duration) {
	t.Helper()
	now := time.Now()
	f.ahead(t, -now.Sub(now.Truncate(unit)))
}

// unattendedServer is a durable-run dev server (test tools, short lease,
// fast sweeper) whose schedules are polled every 100 ms and whose clock
// is clock's.
func unattendedServer(t *testing.T, clock clockFile, env ...string) *server {
	t.Helper()
	return durableServer(t, append([]string{"SCHEDULE_POLL_INTERVAL=100ms", "DEV_CLOCK_FILE=" + string(clock)}, env...)...)
}

// defineWorkflow creates a workflow and sets its definition (PATCH body).
func defineWorkflow(t *testing.T, c *client, userID, name, definition string) string {
	t.Helper()
	wf := createWorkflow(t, c, userID, name)
	if r := c.do("PATCH", "/api/workflows/"+wf.ID, definition); r.Status != 200 {
		t.Fatalf("define %s: %d %s", name, r.Status, r.Body)
	}
	return wf.ID
}

// startRun starts a run of wfID in chatID with input (nil: none), waiting
// as a client without Prefer does; it returns the status and the run.
func startRun(t *testing.T, c *client, chatID, wfID string, input any) (int, unattendedRun) {
	t.Helper()
	body := map[string]any{"workflowId": wfID}
	if input != nil {
		body["input"] = input
	}
	r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", body)
	var out struct{ Data unattendedRun }
	if r.Status == 201 || r.Status == 202 {
		r.decode(t, &out)
	} else {
		t.Logf("start: %d %s", r.Status, r.Body)
	}
	return r.Status, out.Data
}

// runOf reads run runID under its workflow.
func runOf(t *testing.T, c *client, wfID, runID string) unattendedRun {
	t.Helper()
	r := c.do("GET", "/api/workflows/"+wfID+"/runs/"+runID, nil)
	if r.Status != 200 {
		t.Fatalf("get run: %d %s", r.Status, r.Body)
	}
	var out struct{ Data unattendedRun }
	r.decode(t, &out)
	return out.Data
}

// waitRun polls run runID until done says so (patience at most).
func waitRun(t *testing.T, c *client, wfID, runID, what string, done func(unattendedRun) bool) unattendedRun {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		r := runOf(t, c, wfID, runID)
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not %s: %+v", what, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ended(r unattendedRun) bool {
	return r.Status == "completed" || r.Status == "failed" || r.Status == "cancelled"
}

// TestRunInputIfAndForEach: a run's input is checked against the
// workflow's inputSchema (defaults applied) and read by templates and
// conditions; a forEach step runs its tool per element into results, in
// order; a step whose `if` is false is skipped.
func TestRunInputIfAndForEach(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "inputs-if-foreach@example.com")
	wfID := defineWorkflow(t, c, userID, "scale", `{
	  "inputSchema": {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "number"}}, "factor": {"type": "number", "default": 10}}, "required": ["items"]},
	  "steps": [
	    {"id": "scaled", "toolId": "json_query", "inputs": {"input": "{{item}}", "query": ". * {{input.factor}}"}, "forEach": "{{input.items}}", "concurrency": 2},
	    {"id": "total", "toolId": "json_query", "inputs": {"input": "{{scaled.results}}", "query": "map(.result) | add"}, "if": "len(input.items) > 1"},
	    {"id": "never", "toolId": "json_query", "inputs": {"input": 1, "query": "."}, "if": "input.factor > 1000"}
	  ]}`)
	chatID := newChat(t, c, map[string]string{"title": "inputs"}).ID

	status, run := startRun(t, c, chatID, wfID, map[string]any{"items": []int{1, 2, 3, 4, 5}})
	if status != 201 || run.Status != "completed" {
		t.Fatalf("run: %d %+v", status, run)
	}
	results, _ := json.Marshal(run.Steps[0].Output["results"])
	if string(results) != `[{"result":10},{"result":20},{"result":30},{"result":40},{"result":50}]` {
		t.Errorf("forEach results %s", results)
	}
	if total := run.Steps[1].Output["result"]; total != 150.0 || run.Steps[2].Status != "skipped" || run.Steps[2].Output != nil {
		t.Errorf("total %v, never %+v", total, run.Steps[2])
	}

	// factor given; a single item: the `if` is false.
	if _, run = startRun(t, c, chatID, wfID, map[string]any{"items": []int{7}, "factor": 2}); run.Status != "completed" ||
		run.Steps[0].Output["results"].([]any)[0].(map[string]any)["result"] != 14.0 || run.Steps[1].Status != "skipped" {
		t.Errorf("second run: %+v", run)
	}

	// Input the schema refuses: 400 naming the field, no run.
	for _, bad := range []any{map[string]any{}, map[string]any{"items": "x"}, map[string]any{"items": []int{1}, "factor": "ten"}} {
		r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", map[string]any{"workflowId": wfID, "input": bad})
		expectError(t, fmt.Sprintf("input %v", bad), r, 400, "INVALID_INPUT")
		if !strings.Contains(string(r.Body), `"field":"input.`) {
			t.Errorf("input %v: the error names no field: %s", bad, r.Body)
		}
	}
	if r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", `{"workflowId":"`+wfID+`","input":"not an object"}`); r.Status != 400 {
		t.Errorf("input not an object: %d %s", r.Status, r.Body)
	}
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	c.do("GET", "/api/workflows/"+wfID+"/runs", nil).decode(t, &list)
	if len(list.Data.WorkflowRuns) != 2 {
		t.Errorf("%d runs after two good and four bad starts", len(list.Data.WorkflowRuns))
	}
}

// TestForEachElementFailure: one failing element fails the step and the
// run, naming the element; with continueOnError its result is
// {"error": ...} and the run completes. A forEach over what is not an
// array fails its step.
func TestForEachElementFailure(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "foreach-failure@example.com")
	chatID := newChat(t, c, map[string]string{"title": "foreach"}).ID
	def := func(continueOnError bool, over string) string {
		return fmt.Sprintf(`{
		  "inputSchema": {"type": "object", "properties": {"items": {}}},
		  "steps": [
		    {"id": "plus", "toolId": "json_query", "inputs": {"input": "{{item}}", "query": ". + 1"}, "forEach": %q, "continueOnError": %v},
		    {"id": "after", "toolId": "json_query", "inputs": {"input": "{{plus.results}}", "query": "length"}}
		  ]}`, over, continueOnError)
	}
	items := map[string]any{"items": []any{1, map[string]any{"not": "a number"}, 3}}

	strict := defineWorkflow(t, c, userID, "strict", def(false, "{{input.items}}"))
	_, run := startRun(t, c, chatID, strict, items)
	if run.Status != "failed" || run.Steps[0].Status != "failed" || !strings.Contains(run.Steps[0].Error, "element 1") ||
		run.Steps[1].Status != "skipped" {
		t.Errorf("strict run: %+v", run)
	}

	lenient := defineWorkflow(t, c, userID, "lenient", def(true, "{{input.items}}"))
	_, run = startRun(t, c, chatID, lenient, items)
	res, _ := run.Steps[0].Output["results"].([]any)
	if run.Status != "completed" || len(res) != 3 || res[0].(map[string]any)["result"] != 2.0 || res[2].(map[string]any)["result"] != 4.0 ||
		res[1].(map[string]any)["error"] == nil || run.Steps[1].Output["result"] != 3.0 {
		t.Errorf("lenient run: %+v", run)
	}

	_, run = startRun(t, c, chatID, strict, map[string]any{"items": "abc"})
	if run.Status != "failed" || !strings.Contains(run.Steps[0].Error, "not an array") {
		t.Errorf("forEach over a string: %+v", run)
	}
}

// TestHumanStep: a run pauses `waiting` at an ask_human step (event
// step_waiting with the request); an answer the step's inputSchema
// refuses is 400 and changes nothing; a good one is 202 and the run goes
// on with it; a second answer is 409 STEP_NOT_WAITING. A rejection
// needs no values. A waiting run can be cancelled.
func TestHumanStep(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "human-step@example.com")
	chatID := newChat(t, c, map[string]string{"title": "human"}).ID
	wfID := defineWorkflow(t, c, userID, "approve", `{
	  "inputSchema": {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
	  "steps": [
	    {"id": "ask", "toolId": "ask_human", "inputs": {"message": "Pay {{input.amount}} EUR?", "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}}},
	    {"id": "after", "toolId": "json_query", "inputs": {"input": {"ok": "{{ask.approved}}", "note": "{{ask.values}}"}, "query": "[.ok, .note.note]"}}
	  ]}`)

	status, run := startRun(t, c, chatID, wfID, map[string]any{"amount": 120})
	if status != 202 || run.Status != "waiting" || run.Steps[0].Status != "waiting" || run.Steps[0].Input["message"] != "Pay 120 EUR?" {
		t.Fatalf("start: %d %+v", status, run)
	}
	// The log stays open while the run waits.
	if evs := runEvents(t, c, chatID, run.ID, "", 2); eventTypes(evs) != "run_started,step_waiting" {
		t.Errorf("events %s", eventTypes(evs))
	}
	respond := "/api/workflows/" + wfID + "/runs/" + run.ID + "/steps/ask/respond"
	expectError(t, "values the schema refuses", c.do("POST", respond, `{"approved":true,"values":{"note":5}}`), 400, "INVALID_INPUT")
	expectError(t, "no approved", c.do("POST", respond, `{"values":{"note":"x"}}`), 400, "VALIDATION_FAILED")
	expectError(t, "a step that does not wait", c.do("POST", "/api/workflows/"+wfID+"/runs/"+run.ID+"/steps/after/respond", `{"approved":true}`), 409, "STEP_NOT_WAITING")
	expectError(t, "no such step", c.do("POST", "/api/workflows/"+wfID+"/runs/"+run.ID+"/steps/nope/respond", `{"approved":true}`), 404, "STEP_NOT_FOUND")
	if r := runOf(t, c, wfID, run.ID); r.Status != "waiting" {
		t.Fatalf("after refused answers: %+v", r)
	}

	r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs/"+run.ID+"/steps/ask/respond", `{"approved":true,"values":{"note":"invoice 7"}}`)
	if r.Status != 202 {
		t.Fatalf("respond: %d %s", r.Status, r.Body)
	}
	done := waitRun(t, c, wfID, run.ID, "completed", ended)
	if out, _ := json.Marshal(done.Steps[1].Output["result"]); done.Status != "completed" || string(out) != `[true,"invoice 7"]` ||
		done.Steps[0].Output["approved"] != true || done.Steps[0].Output["timedOut"] != false {
		t.Errorf("answered run: %+v", done)
	}
	expectError(t, "a second answer", c.do("POST", respond, `{"approved":false}`), 409, "STEP_NOT_WAITING")

	// A rejection needs no values, whatever the schema requires; values
	// given with one are checked all the same.
	_, rejected := startRun(t, c, chatID, wfID, map[string]any{"amount": 99})
	reject := "/api/workflows/" + wfID + "/runs/" + rejected.ID + "/steps/ask/respond"
	expectError(t, "a rejection with values the schema refuses", c.do("POST", reject, `{"approved":false,"values":{"note":5}}`), 400, "INVALID_INPUT")
	if r := c.do("POST", reject, `{"approved":false}`); r.Status != 202 {
		t.Fatalf("a rejection without values: %d %s", r.Status, r.Body)
	}
	done = waitRun(t, c, wfID, rejected.ID, "completed", ended)
	if out, _ := json.Marshal(done.Steps[1].Output["result"]); done.Status != "completed" || string(out) != `[false,null]` ||
		done.Steps[0].Output["approved"] != false || fmt.Sprint(done.Steps[0].Output["values"]) != "map[]" {
		t.Errorf("rejected run: %+v", done)
	}

	// From the chat stream: the reply ends with the question, the run
	// waits. A workflow whose input is required cannot start from the
	// stream (it takes no input): 400 before any stream.
	simple := defineWorkflow(t, c, userID, "just ask", `{"steps": [{"id": "ask", "toolId": "ask_human", "inputs": {"message": "Proceed?"}}]}`)
	st := c.stream(chatID, map[string]any{"content": "go", "modelId": "builtin", "userId": userID, "workflowId": simple})
	var text string
	for _, e := range st.Events {
		text += e.Delta
	}
	if st.Status != 200 || st.Events[len(st.Events)-1].Type != "end" || !strings.Contains(text, `is waiting for your answer at step ask: "Proceed?"`) {
		t.Errorf("stream of a workflow that asks: %d %q %+v", st.Status, text, st.Events)
	}
	expectError(t, "stream of a workflow that needs input", c.stream(chatID, map[string]any{"content": "go", "modelId": "builtin", "userId": userID, "workflowId": wfID}).response(), 400, "INVALID_INPUT")

	// Cancelled while waiting: its log ends at once.
	_, waiting := startRun(t, c, chatID, wfID, map[string]any{"amount": 1})
	if r := c.do("POST", "/api/workflows/"+wfID+"/runs/"+waiting.ID+"/cancel", nil); r.Status != 200 {
		t.Fatalf("cancel a waiting run: %d %s", r.Status, r.Body)
	}
	if got := runOf(t, c, wfID, waiting.ID); got.Status != "cancelled" || got.Steps[0].Status != "cancelled" {
		t.Errorf("cancelled waiting run: %+v", got)
	}
	if evs := runEvents(t, c, chatID, waiting.ID, "", 0); !strings.HasSuffix(eventTypes(evs), "step_waiting,run_cancelled") {
		t.Errorf("cancelled waiting run's events %s", eventTypes(evs))
	}
}

// TestHumanStepTimesOut: when its timeout passes (the dev server's clock
// moved past it), the sweeper continues the run with approved false and
// timedOut true (onTimeout continue), or fails it (fail, the default).
func TestHumanStepTimesOut(t *testing.T) {
	t.Parallel()
	clock := newClockFile(t)
	srv := unattendedServer(t, clock, "GENERATION_LEASE=10m")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "human-timeout@example.com")
	chatID := newChat(t, c, map[string]string{"title": "timeouts"}).ID
	def := func(onTimeout string) string {
		return fmt.Sprintf(`{"steps": [
		  {"id": "ask", "toolId": "ask_human", "inputs": {"message": "Go on?", "timeoutSeconds": 3600, "onTimeout": %q}},
		  {"id": "after", "toolId": "json_query", "inputs": {"input": "{{ask.timedOut}}", "query": "."}}
		]}`, onTimeout)
	}
	cont, fail := defineWorkflow(t, c, userID, "continue", def("continue")), defineWorkflow(t, c, userID, "fail", def("fail"))
	_, rc := startRun(t, c, chatID, cont, nil)
	_, rf := startRun(t, c, chatID, fail, nil)
	if rc.Status != "waiting" || rf.Status != "waiting" || rc.Steps[0].ExpiresAt == nil {
		t.Fatalf("runs: %+v %+v", rc, rf)
	}
	time.Sleep(300 * time.Millisecond) // sweeps before the deadline leave them waiting
	if r := runOf(t, c, cont, rc.ID); r.Status != "waiting" {
		t.Fatalf("before the deadline: %+v", r)
	}
	clock.ahead(t, time.Hour+time.Minute)
	done := waitRun(t, c, cont, rc.ID, "ended", ended)
	if done.Status != "completed" || done.Steps[0].Output["timedOut"] != true || done.Steps[0].Output["approved"] != false ||
		done.Steps[1].Output["result"] != true {
		t.Errorf("onTimeout continue: %+v", done)
	}
	failed := waitRun(t, c, fail, rf.ID, "ended", ended)
	if failed.Status != "failed" || failed.Steps[0].Status != "failed" || !strings.Contains(failed.Steps[0].Error, "HUMAN_TIMEOUT") ||
		failed.Steps[1].Status != "skipped" {
		t.Errorf("onTimeout fail: %+v", failed)
	}
	expectError(t, "an answer after the timeout", c.do("POST", "/api/workflows/"+fail+"/runs/"+rf.ID+"/steps/ask/respond", `{"approved":true}`), 409, "STEP_NOT_WAITING")
}

// triggerJSON is a trigger as the API shows it.
type triggerJSON struct {
	ID          string `json:"id"`
	URL         string `json:"url"`
	Secret      string `json:"secret"`
	ActiveRunID string `json:"activeRunId"`
	LastFire    *struct {
		RunID   string `json:"runId"`
		Outcome string `json:"outcome"`
	} `json:"lastFire"`
}

func createTrigger(t *testing.T, c *client, wfID, body string) triggerJSON {
	t.Helper()
	r := c.do("POST", "/api/workflows/"+wfID+"/triggers", body)
	if r.Status != 201 {
		t.Fatalf("create trigger %s: %d %s", body, r.Status, r.Body)
	}
	var out struct{ Data triggerJSON }
	r.decode(t, &out)
	return out.Data
}

func getTrigger(t *testing.T, c *client, wfID, id string) triggerJSON {
	t.Helper()
	var out struct{ Data triggerJSON }
	c.do("GET", "/api/workflows/"+wfID+"/triggers/"+id, nil).decode(t, &out)
	return out.Data
}

// TestScheduleFiresOnTheClock: a rate schedule fires one period after it
// was created, on the dev server's clock, and starts a run with its input
// (trigger schedule); with overlap skip, a fire while that run is active
// starts nothing (lastFire skipped); once the run ended the next fire
// starts one again.
func TestScheduleFiresOnTheClock(t *testing.T) {
	t.Parallel()
	clock := newClockFile(t)
	srv := unattendedServer(t, clock, "GENERATION_LEASE=10m")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "schedule@example.com")
	wfID := defineWorkflow(t, c, userID, "nightly", `{
	  "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}, "ms": {"type": "integer"}}},
	  "steps": [{"id": "slow", "toolId": "test_count", "inputs": {"key": "{{input.key}}", "ms": "{{input.ms}}"}}]}`)
	tr := createTrigger(t, c, wfID, `{"type":"schedule","schedule":"rate(1 minute)","timezone":"Europe/Lisbon","overlap":"skip","input":{"key":"nightly","ms":25000},"enabled":true}`)

	time.Sleep(400 * time.Millisecond) // polls before the period: no fire
	if got := getTrigger(t, c, wfID, tr.ID); got.LastFire != nil {
		t.Fatalf("fired before its period: %+v", got.LastFire)
	}
	clock.ahead(t, 61*time.Second)
	first := waitTrigger(t, c, wfID, tr.ID, "fired", func(g triggerJSON) bool { return g.LastFire != nil && g.LastFire.Outcome == "started" })
	run := runOf(t, c, wfID, first.LastFire.RunID)
	if run.Trigger == nil || run.Trigger.Type != "schedule" || run.Trigger.TriggerID != tr.ID || run.Steps[0].Status == "pending" && run.Status != "pending" {
		t.Errorf("scheduled run: %+v", run)
	}
	if first.ActiveRunID != run.ID {
		t.Errorf("active run %q, want %q", first.ActiveRunID, run.ID)
	}

	clock.ahead(t, 122*time.Second) // the next period, while the slow run is active
	skipped := waitTrigger(t, c, wfID, tr.ID, "skipped", func(g triggerJSON) bool { return g.LastFire != nil && g.LastFire.Outcome == "skipped" })
	if skipped.ActiveRunID != run.ID {
		t.Errorf("after the skip: %+v", skipped)
	}
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	c.do("GET", "/api/workflows/"+wfID+"/runs", nil).decode(t, &list)
	if len(list.Data.WorkflowRuns) != 1 {
		t.Errorf("%d runs after a skipped fire, want 1", len(list.Data.WorkflowRuns))
	}

	if r := c.do("POST", "/api/workflows/"+wfID+"/runs/"+run.ID+"/cancel", nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	waitTrigger(t, c, wfID, tr.ID, "released", func(g triggerJSON) bool { return g.ActiveRunID == "" })
	clock.ahead(t, 183*time.Second)
	again := waitTrigger(t, c, wfID, tr.ID, "fired again", func(g triggerJSON) bool {
		return g.LastFire != nil && g.LastFire.Outcome == "started" && g.LastFire.RunID != run.ID
	})
	if again.ActiveRunID != again.LastFire.RunID {
		t.Errorf("after the next fire: %+v", again)
	}
}

func waitTrigger(t *testing.T, c *client, wfID, id, what string, done func(triggerJSON) bool) triggerJSON {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		g := getTrigger(t, c, wfID, id)
		if done(g) {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("trigger not %s: %+v", what, g)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// webhookSignature is the X-Signature of body sent at ts (Unix seconds)
// to a webhook trigger whose secret is secret.
func webhookSignature(secret, ts, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + body))
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// TestWebhookCalls: a signed call starts a run with the body as its
// input (202 {runId}); the same call again with its Idempotency-Key is
// 200 with the same run and starts nothing; a bad signature is 401; a
// body over 256 KB is 413; a disabled trigger is 404.
func TestWebhookCalls(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "webhook@example.com")
	wfID := defineWorkflow(t, c, userID, "hooked", `{
	  "inputSchema": {"type": "object", "properties": {"order": {"type": "integer"}}, "required": ["order"]},
	  "steps": [{"id": "echo", "toolId": "json_query", "inputs": {"input": "{{input.order}}", "query": ". + 1"}}]}`)
	tr := createTrigger(t, c, wfID, `{"type":"webhook","enabled":true}`)
	if !strings.HasSuffix(tr.URL, "/hooks/"+tr.ID) || !strings.HasPrefix(tr.Secret, "whsec_") {
		t.Fatalf("webhook trigger: %+v", tr)
	}
	type signedCall struct {
		response
		ts, sig string
	}
	signed := func(body, key string, sign func(ts, body string) string) signedCall {
		ts := fmt.Sprint(time.Now().Unix())
		h := []string{"X-Signature", sign(ts, body)}
		if key != "" {
			h = append(h, "Idempotency-Key", key)
		}
		return signedCall{c.do("POST", "/hooks/"+tr.ID, body, h...), ts, h[1]}
	}
	call := func(body, key string, sign func(ts, body string) string) response {
		return signed(body, key, sign).response
	}
	good := func(ts, body string) string { return webhookSignature(tr.Secret, ts, body) }
	first := signed(`{"order": 41}`, "order-41", good)
	if first.Status != 202 {
		t.Fatalf("signed call: %d %s", first.Status, first.Body)
	}
	var a struct{ Data struct{ RunID string } }
	first.decode(t, &a)
	again := call(`{"order": 41}`, "order-41", good)
	var b struct{ Data struct{ RunID string } }
	again.decode(t, &b)
	if again.Status != 200 || b.Data.RunID != a.Data.RunID {
		t.Errorf("replayed call: %d %s, want 200 with run %s", again.Status, again.Body, a.Data.RunID)
	}
	// The first call, captured and replayed with a new Idempotency-Key,
	// names the same run; reformatted, it is refused.
	for i, sig := range []string{first.sig, "v1=" + strings.TrimPrefix(first.sig, "t="+first.ts+",v1=") + ",t=" + first.ts} {
		r := c.do("POST", "/hooks/"+tr.ID, `{"order": 41}`, "X-Signature", sig, "Idempotency-Key", fmt.Sprint("order-41-replay-", i))
		var rr struct{ Data struct{ RunID string } }
		r.decode(t, &rr)
		if r.Status != 200 || rr.Data.RunID != a.Data.RunID {
			t.Errorf("replay %d with a new key: %d %s, want 200 with run %s", i, r.Status, r.Body, a.Data.RunID)
		}
	}
	for _, sig := range []string{first.sig + ",x=1", first.sig + ",v1=00", strings.ToUpper(first.sig), strings.Replace(first.sig, ",", ", ", 1)} {
		expectError(t, "a reformatted replay "+sig, c.do("POST", "/hooks/"+tr.ID, `{"order": 41}`, "X-Signature", sig, "Idempotency-Key", "order-41-reformatted"), 401, "INVALID_SIGNATURE")
	}
	run := waitRun(t, c, wfID, a.Data.RunID, "ended", ended)
	if run.Status != "completed" || run.Steps[0].Output["result"] != 42.0 || run.Trigger == nil || run.Trigger.Type != "webhook" {
		t.Errorf("webhook run: %+v", run)
	}
	expectError(t, "a wrong signature", call(`{"order": 1}`, "", func(ts, body string) string { return "t=" + ts + ",v1=" + strings.Repeat("0", 64) }), 401, "INVALID_SIGNATURE")
	expectError(t, "an old signature", call(`{"order": 1}`, "", func(_, body string) string { return good(fmt.Sprint(time.Now().Add(-10*time.Minute).Unix()), body) }), 401, "SIGNATURE_EXPIRED")
	big := `{"order": 1, "pad": "` + strings.Repeat("x", 256<<10) + `"}`
	if r := call(big, "", good); r.Status != 413 {
		t.Errorf("a body over 256 KB: %d %.200s", r.Status, r.Body)
	}
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	c.do("GET", "/api/workflows/"+wfID+"/runs", nil).decode(t, &list)
	if len(list.Data.WorkflowRuns) != 1 {
		t.Errorf("%d runs after one call, its replay and refused calls", len(list.Data.WorkflowRuns))
	}
	if r := c.do("PATCH", "/api/workflows/"+wfID+"/triggers/"+tr.ID, `{"enabled":false}`); r.Status != 200 {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	expectError(t, "a disabled trigger", call(`{"order": 2}`, "order-2", good), 404, "TRIGGER_NOT_FOUND")
}

// TestKillDuringForEach: the dev server dies (SIGKILL) while a forEach
// step runs; after the restart the run resumes and completes, and the
// elements that had finished are not run again: every element recorded
// before the kill ran before it (its output's ranAt), and only the others
// ran after the restart.
func TestKillDuringForEach(t *testing.T) {
	t.Parallel()
	dataFile := filepath.Join(t.TempDir(), "data.json")
	srv := durableServer(t, "DATA_FILE="+dataFile)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "kill-foreach@example.com")
	wfID := defineWorkflow(t, c, userID, "fan out", `{
	  "inputSchema": {"type": "object", "properties": {"keys": {"type": "array"}}},
	  "steps": [{"id": "each", "toolId": "test_count_idempotent", "inputs": {"key": "{{item}}", "ms": 700}, "forEach": "{{input.keys}}", "concurrency": 2}]}`)
	chatID := newChat(t, c, map[string]string{"title": "kill"}).ID
	keys := []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"}
	r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", map[string]any{"workflowId": wfID, "input": map[string]any{"keys": keys}}, "Prefer", "respond-async")
	var started struct{ Data unattendedRun }
	r.decode(t, &started)

	before := waitRun(t, c, wfID, started.Data.ID, "half done", func(r unattendedRun) bool {
		return (r.Steps[0].ElementsDone != nil && *r.Steps[0].ElementsDone >= 3) || ended(r)
	})
	if ended(before) {
		t.Fatalf("the run ended before the kill: %+v", before)
	}
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-srv.done
	killed := time.Now()

	srv2 := durableServer(t, "DATA_FILE="+dataFile)
	c.base = srv2.API
	after := waitRun(t, c, wfID, started.Data.ID, "ended", ended)
	if after.Status != "completed" || after.Attempt < 2 {
		t.Fatalf("after the restart: %+v", after)
	}
	results, _ := after.Steps[0].Output["results"].([]any)
	if len(results) != len(keys) {
		t.Fatalf("results %v", after.Steps[0].Output)
	}
	ranBefore := 0
	for _, res := range results {
		at, err := time.Parse(time.RFC3339Nano, res.(map[string]any)["ranAt"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if at.Before(killed) {
			ranBefore++
		}
	}
	// The recorded elements kept their outputs; an element that was
	// running at the kill ran again after the restart.
	if done := *before.Steps[0].ElementsDone; ranBefore < done || ranBefore == len(keys) {
		t.Errorf("%d elements ran before the kill in the results, %d were recorded then", ranBefore, done)
	}
}
