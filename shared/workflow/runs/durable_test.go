package runs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// counts counts the executions of the counting tools by their key input;
// failing holds the keys whose execution fails.
var (
	counts  sync.Map // key -> *atomic.Int64
	failing sync.Map // key -> bool
)

func count(key string) int64 {
	v, _ := counts.LoadOrStore(key, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// countTool counts its executions by its key input, sleeps ms
// milliseconds and fails while its key is in failing.
func countTool(id string) *tools.Tool {
	return &tools.Tool{
		ID: id, Name: "Count", Description: "Counts its executions.", Category: "util",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"ms":{"type":"integer"}},"required":["key"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		Timeout:      time.Minute,
		Run: func(ctx context.Context, in map[string]any) (map[string]any, error) {
			key, _ := in["key"].(string)
			v, _ := counts.LoadOrStore(key, new(atomic.Int64))
			n := v.(*atomic.Int64).Add(1)
			if ms, ok := in["ms"].(float64); ok {
				select {
				case <-time.After(time.Duration(ms) * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if _, ok := failing.Load(key); ok {
				return nil, errors.New("failing on purpose")
			}
			return map[string]any{"n": n}, nil
		},
	}
}

// countSteps returns n steps of the counting tool with unique keys.
func countSteps(n int, ms int) ([]workflow.Step, []string) {
	prefix := uuid.NewString()
	var steps []workflow.Step
	var keys []string
	for i := range n {
		id := string(rune('a'+i)) + "step"
		key := prefix + "/" + id
		in := map[string]any{"key": key}
		if ms > 0 {
			in["ms"] = ms
		}
		steps = append(steps, step(id, "count", in))
		keys = append(keys, key)
	}
	return steps, keys
}

type sseEvent struct {
	ID   string
	Data workflow.RunEvent
}

// events reads the run's events (after lastID when set) until the stream
// closes.
func (f *runsFixture) events(t *testing.T, user int, chatID, runID, lastID string) []sseEvent {
	t.Helper()
	return f.eventsAt(t, user, "/api/chats/"+chatID+"/workflow-runs/"+runID+"/events", lastID)
}

// eventsAt reads the events at path (after lastID when set) until the
// stream closes.
func (f *runsFixture) eventsAt(t *testing.T, user int, path, lastID string) []sseEvent {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	req.Header.Set("Cookie", f.users[user].cookie)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
				t.Fatal(err)
			}
		case line == "" && cur.ID != "":
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	return out
}

func types(evs []sseEvent) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Data.Type)
	}
	return strings.Join(s, ",")
}

// startAsync starts an asynchronous run and checks the 202.
func (f *runsFixture) startAsync(t *testing.T, chatID, workflowID string) workflow.Run {
	t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/api/chats/"+chatID+"/workflow-runs", strings.NewReader(`{"workflowId":"`+workflowID+`"}`))
	req.Header.Set("Cookie", f.users[0].cookie)
	req.Header.Set("Prefer", "respond-async")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted {
		expect(t, resp, http.StatusAccepted, "")
	}
	var body struct{ Data workflow.Run }
	decodeBody(t, resp, &body)
	if loc := resp.Header.Get("Location"); loc != "/api/chats/"+chatID+"/workflow-runs/"+body.Data.ID {
		t.Fatalf("Location %q", loc)
	}
	if body.Data.Status != workflow.RunPending || body.Data.Attempt != 1 {
		t.Fatalf("started run = %+v", body.Data)
	}
	return body.Data
}

// waitRun polls GET run until it is no longer active.
func (f *runsFixture) waitRun(t *testing.T, chatID, runID string) workflow.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute) // a bound for a stuck run, not a measure: a loaded machine may take long
	for {
		resp := f.do(t, f.users[0].cookie, "GET", "/api/chats/"+chatID+"/workflow-runs/"+runID, "")
		if resp.StatusCode != http.StatusOK {
			expect(t, resp, http.StatusOK, "")
		}
		var body struct{ Data workflow.Run }
		decodeBody(t, resp, &body)
		if !workflow.Active(body.Data.Status) {
			return body.Data
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %s", body.Data.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAsyncRunEventsAndResume(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	steps, keys := countSteps(3, 50)
	w := f.createWorkflow(t, 0, steps...)
	run := f.startAsync(t, chatID, w.ID)

	evs := f.events(t, 0, chatID, run.ID, "")
	want := "run_started,step_started,step_completed,step_started,step_completed,step_started,step_completed,run_completed"
	if types(evs) != want {
		t.Fatalf("events %s, want %s", types(evs), want)
	}
	for i, e := range evs {
		if e.ID != run.ID+":"+string(rune('1'+i)) || e.Data.RunID != run.ID {
			t.Fatalf("event %d = %+v", i, e)
		}
	}
	if evs[2].Data.StepID != "astep" || evs[2].Data.Output["n"] != float64(1) {
		t.Fatalf("step_completed = %+v", evs[2].Data)
	}
	// Resume after the second event: the rest, from the third.
	rest := f.events(t, 0, chatID, run.ID, run.ID+":2")
	if len(rest) != len(evs)-2 || rest[0].ID != run.ID+":3" {
		t.Fatalf("resumed = %s", types(rest))
	}
	got := f.waitRun(t, chatID, run.ID)
	if got.Status != workflow.RunCompleted || got.Attempt != 1 || got.WorkflowVersion != 1 || got.Steps[2].Output["n"] != float64(1) {
		t.Fatalf("run = %+v", got)
	}
	for _, k := range keys {
		if count(k) != 1 {
			t.Fatalf("%s ran %d times", k, count(k))
		}
	}

	// Errors of the run endpoints.
	path := "/api/chats/" + chatID + "/workflow-runs/"
	expect(t, f.do(t, f.users[1].cookie, "GET", path+run.ID, ""), http.StatusForbidden, "FORBIDDEN")
	expect(t, f.do(t, f.users[0].cookie, "GET", path+uuid.NewString(), ""), http.StatusNotFound, workflow.CodeRunNotFound)
	expect(t, f.do(t, f.users[0].cookie, "GET", path+uuid.NewString()+"/events", ""), http.StatusNotFound, workflow.CodeRunNotFound)
	expect(t, f.do(t, f.users[1].cookie, "GET", path+run.ID+"/events", ""), http.StatusForbidden, "FORBIDDEN")
	req, _ := http.NewRequest("GET", f.srv.URL+path+run.ID+"/events", nil)
	req.Header.Set("Cookie", f.users[0].cookie)
	req.Header.Set("Last-Event-ID", uuid.NewString()+":1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, resp, http.StatusBadRequest, "INVALID_EVENT_ID")
}

func TestRetryReusesCompletedSteps(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	steps, keys := countSteps(4, 0)
	w := f.createWorkflow(t, 0, steps...)
	failing.Store(keys[2], true)
	run := f.startAsync(t, chatID, w.ID)
	got := f.waitRun(t, chatID, run.ID)
	if got.Status != workflow.RunFailed || got.Steps[2].Status != workflow.StepFailed || got.Steps[3].Status != workflow.StepSkipped {
		t.Fatalf("failed run = %+v", got)
	}
	failing.Delete(keys[2])
	path := "/api/chats/" + chatID + "/workflow-runs/" + run.ID + "/retry"
	expect(t, f.do(t, f.users[0].cookie, "POST", path, `{"fromStepId":"zzz"}`), http.StatusBadRequest, "VALIDATION_FAILED")
	expect(t, f.do(t, f.users[0].cookie, "POST", path, `{"fromStepId":"dstep"}`), http.StatusBadRequest, "VALIDATION_FAILED")
	expect(t, f.do(t, f.users[1].cookie, "POST", path, ``), http.StatusForbidden, "FORBIDDEN")

	resp := f.do(t, f.users[0].cookie, "POST", path, ``)
	if resp.StatusCode != http.StatusAccepted {
		expect(t, resp, http.StatusAccepted, "")
	}
	var body struct{ Data workflow.Run }
	decodeBody(t, resp, &body)
	retry := f.waitRun(t, chatID, body.Data.ID)
	if retry.Status != workflow.RunCompleted || retry.RetryOf != run.ID {
		t.Fatalf("retry = %+v", retry)
	}
	for i, s := range retry.Steps {
		if s.Reused != (i < 2) || s.Status != workflow.StepCompleted {
			t.Fatalf("retry step %d = %+v", i, s)
		}
	}
	for i, want := range []int64{1, 1, 2, 1} {
		if count(keys[i]) != want {
			t.Fatalf("step %d ran %d times, want %d", i, count(keys[i]), want)
		}
	}
	evs := f.events(t, 0, chatID, retry.ID, "")
	if want := "run_started,step_started,step_completed,step_started,step_completed,run_completed"; types(evs) != want {
		t.Fatalf("retry events %s", types(evs))
	}

	// From an explicit step of the finished retry: that step runs again.
	resp = f.do(t, f.users[0].cookie, "POST", "/api/chats/"+chatID+"/workflow-runs/"+retry.ID+"/retry", `{"fromStepId":"bstep"}`)
	decodeBody(t, resp, &body)
	again := f.waitRun(t, chatID, body.Data.ID)
	if again.Status != workflow.RunCompleted || !again.Steps[0].Reused || again.Steps[1].Reused || count(keys[1]) != 2 || count(keys[0]) != 1 {
		t.Fatalf("again = %+v, counts %d %d", again, count(keys[0]), count(keys[1]))
	}
	// A completed run without fromStepId has nothing to retry.
	expect(t, f.do(t, f.users[0].cookie, "POST", "/api/chats/"+chatID+"/workflow-runs/"+again.ID+"/retry", ``), http.StatusBadRequest, workflow.CodeRunNotRetryable)
}

// TestOneRetryAtATime: retries of one failed run sent at once start one
// run (the others 409 RUN_ACTIVE), so its steps run once more, not once
// per click; while that retry is active another is refused too; once it
// has ended (here cancelled) the run can be retried again, and so can
// that retry, which is in the same chain: while the retry of the retry
// runs, neither the first run nor the first retry can be retried.
func TestOneRetryAtATime(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	steps, keys := countSteps(2, 0)
	steps[1].Inputs["ms"] = 20000 // a retry stays running until cancelled
	w := f.createWorkflow(t, 0, steps...)
	failing.Store(keys[0], true)
	run := f.startAsync(t, chatID, w.ID)
	if got := f.waitRun(t, chatID, run.ID); got.Status != workflow.RunFailed {
		t.Fatalf("run %s, want failed", got.Status)
	}
	failing.Delete(keys[0])
	base := "/api/chats/" + chatID + "/workflow-runs/"
	retry := func() *http.Response { return f.do(t, f.users[0].cookie, "POST", base+run.ID+"/retry", ``) }
	cancel := func(id string) {
		t.Helper()
		expect(t, f.do(t, f.users[0].cookie, "POST", base+id+"/cancel", ``), http.StatusOK, "")
		if got := f.waitRun(t, chatID, id); got.Status != workflow.RunCancelled {
			t.Fatalf("retry %s %s, want cancelled", id, got.Status)
		}
	}
	const clicks = 5
	answers := make(chan *http.Response, clicks)
	var wg sync.WaitGroup
	for range clicks {
		wg.Go(func() { answers <- retry() })
	}
	wg.Wait()
	close(answers)
	var started []string
	for resp := range answers {
		if resp.StatusCode == http.StatusAccepted {
			var body struct{ Data workflow.Run }
			decodeBody(t, resp, &body)
			started = append(started, body.Data.ID)
			continue
		}
		expect(t, resp, http.StatusConflict, workflow.CodeRunActive)
	}
	if len(started) != 1 {
		t.Fatalf("%d retries started by %d clicks, want 1", len(started), clicks)
	}
	expect(t, retry(), http.StatusConflict, workflow.CodeRunActive)
	cancel(started[0])
	// A retry of that retry is one of the same chain: while it runs, the
	// first run is not retried again (nor is the retry it retries).
	resp := f.do(t, f.users[0].cookie, "POST", base+started[0]+"/retry", ``)
	if resp.StatusCode != http.StatusAccepted {
		expect(t, resp, http.StatusAccepted, "")
	}
	var chained struct{ Data workflow.Run }
	decodeBody(t, resp, &chained)
	expect(t, retry(), http.StatusConflict, workflow.CodeRunActive)
	expect(t, f.do(t, f.users[0].cookie, "POST", base+started[0]+"/retry", ``), http.StatusConflict, workflow.CodeRunActive)
	cancel(chained.Data.ID)
	resp = retry()
	if resp.StatusCode != http.StatusAccepted {
		expect(t, resp, http.StatusAccepted, "")
	}
	var body struct{ Data workflow.Run }
	decodeBody(t, resp, &body)
	cancel(body.Data.ID)
	var list struct {
		Data struct{ WorkflowRuns []workflow.Run }
	}
	decodeBody(t, f.do(t, f.users[0].cookie, "GET", "/api/chats/"+chatID+"/workflow-runs", ""), &list)
	retries := 0
	for _, r := range list.Data.WorkflowRuns {
		if r.RetryOf == run.ID {
			retries++
		}
	}
	if retries != 2 || len(list.Data.WorkflowRuns) != 4 {
		t.Errorf("%d retries of the run stored, want 2, and 4 runs in all (with the retry of a retry): %+v", retries, list.Data.WorkflowRuns)
	}
}

func TestRetryOfActiveRunAndCancel(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	steps, keys := countSteps(2, 400)
	w := f.createWorkflow(t, 0, steps...)
	run := f.startAsync(t, chatID, w.ID)
	path := "/api/chats/" + chatID + "/workflow-runs/" + run.ID
	expect(t, f.do(t, f.users[0].cookie, "POST", path+"/retry", ``), http.StatusConflict, workflow.CodeRunActive)
	// Cancel from another request while step 1 runs: step 2 never starts.
	for count(keys[0]) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	expect(t, f.do(t, f.users[0].cookie, "POST", path+"/cancel", ``), http.StatusOK, "")
	got := f.waitRun(t, chatID, run.ID)
	f.inproc.Wait()
	if got.Status != workflow.RunCancelled || count(keys[1]) != 0 {
		t.Fatalf("cancelled run = %+v, step 2 ran %d times", got, count(keys[1]))
	}
	evs := f.events(t, 0, chatID, run.ID, "")
	if n := len(evs); n == 0 || evs[n-1].Data.Type != workflow.EventRunCancelled {
		t.Fatalf("events %s", types(evs))
	}
}

// crashedRun stores a durable run as a process that died during its
// second step leaves it: step 1 completed, step 2 running, its lease
// expired.
func (f *runsFixture) crashedRun(t *testing.T, chatID string, toolID string, attempt int) (workflow.Run, []string) {
	t.Helper()
	return f.crashedRunWith(t, chatID, toolID, attempt, nil)
}

// crashedRunWith is crashedRun with edit, when set, applied to the run
// before it is stored.
func (f *runsFixture) crashedRunWith(t *testing.T, chatID string, toolID string, attempt int, edit func(*workflow.Run)) (workflow.Run, []string) {
	t.Helper()
	steps, keys := countSteps(3, 0)
	for i := range steps {
		steps[i].ToolID = toolID
	}
	w := f.createWorkflow(t, 0, steps...)
	now := time.Now().UTC()
	run := workflow.Run{ID: uuid.NewString(), ChatID: chatID, WorkflowID: w.ID, UserID: f.users[0].id, Status: workflow.RunRunning,
		StartedAt: now, Attempt: attempt, WorkflowVersion: 1, Plan: steps, Steps: []workflow.RunStep{
			{ID: steps[0].ID, ToolID: toolID, Status: workflow.StepCompleted, StartedAt: &now, CompletedAt: &now, Output: map[string]any{"n": 1.0}},
			{ID: steps[1].ID, ToolID: toolID, Status: workflow.StepRunning, StartedAt: &now, Input: steps[1].Inputs},
			{ID: steps[2].ID, ToolID: toolID, Status: workflow.StepPending},
		}}
	if edit != nil {
		edit(&run)
	}
	if err := f.runs.CreateRun(context.Background(), run, job.Lease{Until: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	return run, keys
}

func (f *runsFixture) sweep(t *testing.T) {
	t.Helper()
	sw := job.NewSweeper(f.jobs, map[string]job.Handler{
		workflow.RunKind: runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: f.inproc, Lease: f.lease}),
		"generation":     func(context.Context, job.Expired) error { return nil },
	}, nil, nil)
	if _, err := sw.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSweeperResumesExpiredRuns(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)

	// An idempotent step caught running runs again; step 1 never does.
	idem, idemKeys := f.crashedRun(t, chatID, "count_idem", 1)
	// A step that is not idempotent fails INTERRUPTED; nothing runs.
	plain, plainKeys := f.crashedRun(t, chatID, "count", 1)
	// A run on its last attempt fails INTERRUPTED.
	last, lastKeys := f.crashedRun(t, chatID, "count_idem", workflow.MaxRunAttempts)
	f.sweep(t)
	f.inproc.Wait()

	got := f.waitRun(t, chatID, idem.ID)
	if got.Status != workflow.RunCompleted || got.Attempt != 2 || count(idemKeys[0]) != 0 || count(idemKeys[1]) != 1 || count(idemKeys[2]) != 1 {
		t.Fatalf("resumed = %+v; counts %d %d %d", got, count(idemKeys[0]), count(idemKeys[1]), count(idemKeys[2]))
	}
	if evs := f.events(t, 0, chatID, idem.ID, ""); types(evs) != "run_started,step_started,step_completed,step_started,step_completed,run_completed" {
		t.Fatalf("resumed events %s", types(evs))
	}
	for _, c := range []struct {
		run  workflow.Run
		keys []string
	}{{plain, plainKeys}, {last, lastKeys}} {
		got := f.waitRun(t, chatID, c.run.ID)
		if got.Status != workflow.RunFailed || !strings.HasPrefix(got.Error, workflow.CodeInterrupted) ||
			got.Steps[1].Status != workflow.StepFailed || got.Steps[2].Status != workflow.StepSkipped {
			t.Fatalf("interrupted = %+v", got)
		}
		for _, k := range c.keys {
			if count(k) != 0 {
				t.Fatalf("%s ran", k)
			}
		}
		if evs := f.events(t, 0, chatID, c.run.ID, ""); types(evs) != "run_started,step_failed,run_failed" {
			t.Fatalf("interrupted events %s", types(evs))
		}
	}
	// Nothing is left for the sweeper.
	expired, err := f.jobs.Expired(context.Background(), time.Now().Add(time.Hour), 100)
	if err != nil || len(expired) != 0 {
		t.Fatalf("expired = %v, %v", expired, err)
	}
}

// TestInterruptedStepCountsItsAttempts: an interruption of a step with
// a retry is one of its maxAttempts calls: with attempts left the step
// (of an idempotent tool) runs again and completes; on its last attempt
// it fails INTERRUPTED and its tool is not called again, idempotent or
// not; a retry of one call (the default maxAttempts) is as none.
func TestInterruptedStepCountsItsAttempts(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	two := 2
	withRetry := func(before int) func(*workflow.Run) {
		return func(r *workflow.Run) {
			r.Plan[1].Retry = &workflow.StepRetry{MaxAttempts: &two}
			for n := range before {
				r.Steps[1].Attempts = append(r.Steps[1].Attempts, workflow.StepAttempt{Attempt: n + 1, Status: workflow.StepFailed,
					Error: workflow.CodeInterrupted + ": the call was interrupted"})
			}
		}
	}
	left, leftKeys := f.crashedRunWith(t, chatID, "count_idem", 1, withRetry(0))
	last, lastKeys := f.crashedRunWith(t, chatID, "count_idem", 1, withRetry(1))
	// A retry of one call asks for none: the step is as one without a
	// retry, its idempotent tool run again.
	one, oneKeys := f.crashedRunWith(t, chatID, "count_idem", 1, func(r *workflow.Run) {
		r.Plan[1].Retry = &workflow.StepRetry{}
	})
	f.sweep(t)
	f.inproc.Wait()

	got := f.waitRun(t, chatID, left.ID)
	if got.Status != workflow.RunCompleted || count(leftKeys[1]) != 1 || len(got.Steps[1].Attempts) != 2 ||
		!strings.HasPrefix(got.Steps[1].Attempts[0].Error, workflow.CodeInterrupted) || got.Steps[1].Attempts[1].Status != workflow.StepCompleted {
		t.Errorf("a step with an attempt left: run %s %q, %d calls, attempts %+v", got.Status, got.Error, count(leftKeys[1]), got.Steps[1].Attempts)
	}
	got = f.waitRun(t, chatID, one.ID)
	if got.Status != workflow.RunCompleted || count(oneKeys[1]) != 1 {
		t.Errorf("a step whose retry allows one call: run %s %q, %d calls; want it run again as without a retry", got.Status, got.Error, count(oneKeys[1]))
	}
	got = f.waitRun(t, chatID, last.ID)
	s := got.Steps[1]
	if got.Status != workflow.RunFailed || count(lastKeys[1]) != 0 || s.Status != workflow.StepFailed || len(s.Attempts) != 2 ||
		s.Error != workflow.CodeInterrupted+": the step was interrupted and that was its last attempt (2)" {
		t.Errorf("a step on its last attempt: run %s %q, %d calls, step %s %q, attempts %+v", got.Status, got.Error, count(lastKeys[1]), s.Status, s.Error, s.Attempts)
	}
}

// TestSyncRunThroughRunEndpoints: a run started without Prefer is the
// same durable run, waited for: 201 with the finished run, readable
// through GET run with its attempt and workflow version, with its events.
func TestSyncRunThroughRunEndpoints(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	steps, _ := countSteps(2, 0)
	w := f.createWorkflow(t, 0, steps...)
	resp := f.do(t, f.users[0].cookie, "POST", "/api/chats/"+chatID+"/workflow-runs", `{"workflowId":"`+w.ID+`"}`)
	if resp.StatusCode != http.StatusCreated {
		expect(t, resp, http.StatusCreated, "")
	}
	var body struct{ Data workflow.Run }
	decodeBody(t, resp, &body)
	got := f.waitRun(t, chatID, body.Data.ID)
	if got.Status != workflow.RunCompleted || got.Attempt != 1 || got.WorkflowVersion != 1 || len(got.Steps) != 2 {
		t.Fatalf("run = %+v", got)
	}
	if evs := f.events(t, 0, chatID, got.ID, ""); types(evs) != "run_started,step_started,step_completed,step_started,step_completed,run_completed" {
		t.Fatalf("events of a run started without Prefer: %s", types(evs))
	}
}

// whoamiTool answers the user its context acts for (auth.UserID).
func whoamiTool() *tools.Tool {
	return &tools.Tool{
		ID: "whoami", Name: "Who am I", Description: "The user the call acts for.", Category: "util",
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"user":{"type":"string"}}}`),
		Timeout:      time.Minute,
		Run: func(ctx context.Context, _ map[string]any) (map[string]any, error) {
			return map[string]any{"user": auth.UserID(ctx)}, nil
		},
	}
}

// TestAsyncRunActsForItsUser: the runner gets no request (in Lambda only
// the run's reference; in process nothing else either), yet its steps act
// for the user who started the run, so the step guards (tool policies,
// budget) check that user.
func TestAsyncRunActsForItsUser(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	steps := []workflow.Step{{ID: "who", ToolID: "whoami", Inputs: map[string]any{}}}
	wf := f.createWorkflow(t, 0, steps...)
	chatID := f.createChat(t, 0)
	run := f.waitRun(t, chatID, f.startAsync(t, chatID, wf.ID).ID)
	if run.Status != workflow.RunCompleted || len(run.Steps) != 1 {
		t.Fatalf("run = %+v, want completed with one step", run)
	}
	if got := run.Steps[0].Output["user"]; got != f.users[0].id {
		t.Errorf("step output %v, want the run's user %q", run.Steps[0].Output, f.users[0].id)
	}
}
