package e2e_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Step retries and timeouts against the dev server binary.

type attemptsRun struct {
	Status string `json:"status"`
	Steps  []struct {
		ID       string         `json:"id"`
		Status   string         `json:"status"`
		Error    string         `json:"error"`
		Output   map[string]any `json:"output"`
		Attempts []struct {
			Attempt   int       `json:"attempt"`
			Status    string    `json:"status"`
			Error     string    `json:"error"`
			StartedAt time.Time `json:"startedAt"`
		} `json:"attempts"`
	} `json:"steps"`
}

func attemptsOf(t *testing.T, c *client, wfID, runID string) attemptsRun {
	t.Helper()
	var out struct{ Data attemptsRun }
	c.do("GET", "/api/workflows/"+wfID+"/runs/"+runID, nil).decode(t, &out)
	return out.Data
}

// TestStepRetryAndTimeout: a step that fails twice with maxAttempts 3
// completes at its third attempt, each recorded, the waits following the
// backoff, with a step_retrying event per failed attempt; a step whose
// calls pass timeoutSeconds fails TOOL_TIMEOUT after its attempts; the
// bounds are checked at, one over and far over.
func TestStepRetryAndTimeout(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "retries@example.com")
	chatID := newChat(t, c, map[string]string{"title": "retries"}).ID
	wf := createWorkflow(t, c, userID, "retried")

	step := func(control string) string {
		return `{"steps": [{"id": "s", "toolId": "test_count", "inputs": {"key": "bounds"}` + control + `}]}`
	}
	for _, ok := range []string{`"retry": {"maxAttempts": 10, "backoffSeconds": 3600, "backoffRate": 10}`, `"retry": {"maxAttempts": 1, "backoffSeconds": 0, "backoffRate": 1}`,
		`"timeoutSeconds": 900`, `"timeoutSeconds": 1`, `"retry": {}`} {
		if r := c.do("PATCH", "/api/workflows/"+wf.ID, step(", "+ok)); r.Status != 200 {
			t.Errorf("%s: %d %s", ok, r.Status, r.Body)
		}
	}
	for control, field := range map[string]string{
		`"retry": {"maxAttempts": 11}`:           "retry.maxAttempts",
		`"retry": {"maxAttempts": 1000000}`:      "retry.maxAttempts",
		`"retry": {"maxAttempts": 0}`:            "retry.maxAttempts",
		`"retry": {"backoffRate": 10.5}`:         "retry.backoffRate",
		`"retry": {"backoffRate": 0.5}`:          "retry.backoffRate",
		`"retry": {"backoffSeconds": 3601}`:      "retry.backoffSeconds",
		`"retry": {"backoffSeconds": -1}`:        "retry.backoffSeconds",
		`"timeoutSeconds": 901`:                  "timeoutSeconds",
		`"timeoutSeconds": 0`:                    "timeoutSeconds",
		`"timeoutSeconds": 99999999`:             "timeoutSeconds",
		`"forEach": "{{input.xs}}", "retry": {}`: "retry",
	} {
		body := step(", " + control)
		if strings.Contains(control, "forEach") {
			body = `{"inputSchema": {"type": "object", "properties": {"xs": {"type": "array"}}}, "steps": [{"id": "s", "toolId": "test_count", "inputs": {"key": "{{item}}"}, ` + control + `}]}`
		}
		e := expectError(t, control, c.do("PATCH", "/api/workflows/"+wf.ID, body), 400, "VALIDATION_FAILED")
		if len(e.Details) == 0 || !strings.HasSuffix(e.Details[0].Field, "."+field) {
			t.Errorf("%s: details %+v, want the field %s", control, e.Details, field)
		}
	}
	human := `{"steps": [{"id": "h", "toolId": "ask_human", "inputs": {"message": "ok?"}, "retry": {"maxAttempts": 2}}]}`
	expectError(t, "a human step's retry", c.do("PATCH", "/api/workflows/"+wf.ID, human), 400, "VALIDATION_FAILED")

	// Fails twice, completes at the third attempt.
	if r := c.do("PATCH", "/api/workflows/"+wf.ID, `{"steps": [{"id": "s", "toolId": "test_count", "inputs": {"key": "twice", "failTimes": 2},
	    "retry": {"maxAttempts": 3, "backoffSeconds": 0.5, "backoffRate": 2}}]}`); r.Status != 200 {
		t.Fatalf("define: %d %s", r.Status, r.Body)
	}
	_, run := startRun(t, c, chatID, wf.ID, nil)
	waitRun(t, c, wf.ID, run.ID, "ended", ended)
	got := attemptsOf(t, c, wf.ID, run.ID)
	s := got.Steps[0]
	if got.Status != "completed" || s.Output["n"] != 3.0 || len(s.Attempts) != 3 ||
		s.Attempts[0].Status != "failed" || s.Attempts[1].Status != "failed" || s.Attempts[2].Status != "completed" ||
		!strings.Contains(s.Attempts[0].Error, "fails on purpose") {
		t.Fatalf("retried run: %+v", got)
	}
	// The waits: at least 0.5 s, then at least 1 s (backoffRate 2).
	if d := s.Attempts[1].StartedAt.Sub(s.Attempts[0].StartedAt); d < 500*time.Millisecond {
		t.Errorf("second attempt %s after the first", d)
	}
	if d := s.Attempts[2].StartedAt.Sub(s.Attempts[1].StartedAt); d < time.Second {
		t.Errorf("third attempt %s after the second", d)
	}
	evs := runEvents(t, c, chatID, run.ID, "", 0)
	if want := "run_started,step_started,step_retrying,step_started,step_retrying,step_started,step_completed,run_completed"; eventTypes(evs) != want {
		t.Errorf("events %s, want %s", eventTypes(evs), want)
	}
	raw := c.do("GET", "/api/chats/"+chatID+"/workflow-runs/"+run.ID+"/events", nil, "Accept", "text/event-stream")
	if n := strings.Count(string(raw.Body), `"type":"step_retrying"`); n != 2 || !strings.Contains(string(raw.Body), `"retryAt":`) || !strings.Contains(string(raw.Body), `"attempt":2`) {
		t.Errorf("step_retrying events (%d): %s", n, raw.Body)
	}

	// Every call passes timeoutSeconds: TOOL_TIMEOUT after both attempts.
	if r := c.do("PATCH", "/api/workflows/"+wf.ID, `{"steps": [{"id": "s", "toolId": "test_count", "inputs": {"key": "slow", "ms": 5000},
	    "timeoutSeconds": 1, "retry": {"maxAttempts": 2, "backoffSeconds": 0}}]}`); r.Status != 200 {
		t.Fatalf("define: %d %s", r.Status, r.Body)
	}
	_, run = startRun(t, c, chatID, wf.ID, nil)
	waitRun(t, c, wf.ID, run.ID, "ended", ended)
	got = attemptsOf(t, c, wf.ID, run.ID)
	s = got.Steps[0]
	if got.Status != "failed" || s.Status != "failed" || !strings.HasPrefix(s.Error, "TOOL_TIMEOUT") || len(s.Attempts) != 2 ||
		!strings.HasPrefix(s.Attempts[0].Error, "TOOL_TIMEOUT") || !strings.HasPrefix(s.Attempts[1].Error, "TOOL_TIMEOUT") {
		b, _ := json.Marshal(got)
		t.Errorf("timed-out run: %s", b)
	}

	// Cancelled while it waits for its next attempt: nothing stays active.
	if r := c.do("PATCH", "/api/workflows/"+wf.ID, `{"steps": [{"id": "s", "toolId": "test_count", "inputs": {"key": "cancelled", "failTimes": 5},
	    "retry": {"maxAttempts": 5, "backoffSeconds": 3600}}]}`); r.Status != 200 {
		t.Fatalf("define: %d %s", r.Status, r.Body)
	}
	_, run = startRun(t, c, chatID, wf.ID, nil)
	waitRun(t, c, wf.ID, run.ID, "waiting for its retry", func(r unattendedRun) bool { return r.Status == "waiting" })
	if r := c.do("POST", "/api/workflows/"+wf.ID+"/runs/"+run.ID+"/cancel", nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if got := runOf(t, c, wf.ID, run.ID); got.Status != "cancelled" {
		t.Errorf("cancelled between attempts: %+v", got)
	}
	if evs := runEvents(t, c, chatID, run.ID, "", 0); !strings.HasSuffix(eventTypes(evs), "step_retrying,run_cancelled") {
		t.Errorf("events of the cancelled run: %s", eventTypes(evs))
	}
}

// TestKillBetweenAndDuringAttempts: the dev server dies (SIGKILL) while
// one run waits for its step's next attempt and another's step with an
// explicit retry is mid-call (its tool not idempotent). After the restart
// the first goes on at its retryAt and completes; the second records the
// cut call as an INTERRUPTED attempt and runs the step again.
func TestKillBetweenAndDuringAttempts(t *testing.T) {
	t.Parallel()
	dataFile := filepath.Join(t.TempDir(), "data.json")
	srv := durableServer(t, "DATA_FILE="+dataFile)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "kill-retry@example.com")
	chatID := newChat(t, c, map[string]string{"title": "kill retries"}).ID
	between := defineWorkflow(t, c, userID, "between", `{"steps": [{"id": "s", "toolId": "test_count", "inputs": {"key": "between", "failTimes": 1},
	    "retry": {"maxAttempts": 3, "backoffSeconds": 2}}]}`)
	during := defineWorkflow(t, c, userID, "during", `{"steps": [{"id": "s", "toolId": "test_count", "inputs": {"key": "during", "ms": 4000},
	    "retry": {"maxAttempts": 2, "backoffSeconds": 0}}]}`)
	start := func(wfID string) string {
		r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", map[string]any{"workflowId": wfID}, "Prefer", "respond-async")
		var out struct{ Data unattendedRun }
		r.decode(t, &out)
		return out.Data.ID
	}
	a, b := start(between), start(during)
	waitRun(t, c, between, a, "waiting for its retry", func(r unattendedRun) bool { return r.Status == "waiting" || ended(r) })
	waitRun(t, c, during, b, "mid-call", func(r unattendedRun) bool { return r.Steps[0].Status == "running" || ended(r) })
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-srv.done

	srv2 := durableServer(t, "DATA_FILE="+dataFile)
	c.base = srv2.API
	waitRun(t, c, between, a, "ended", ended)
	waitRun(t, c, during, b, "ended", ended)
	// The counts start again with the new process: "between" fails its
	// first call there too, and completes at its third attempt.
	if got := attemptsOf(t, c, between, a); got.Status != "completed" || len(got.Steps[0].Attempts) != 3 || got.Steps[0].Attempts[2].Status != "completed" {
		t.Errorf("the run killed between attempts: %+v", got)
	}
	got := attemptsOf(t, c, during, b)
	if s := got.Steps[0]; got.Status != "completed" || len(s.Attempts) != 2 || !strings.HasPrefix(s.Attempts[0].Error, "INTERRUPTED") || s.Attempts[1].Status != "completed" {
		t.Errorf("the run killed mid-call: %+v", got)
	}
}
