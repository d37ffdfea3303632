package runs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

type runsFixture struct {
	srv       *httptest.Server
	runs      *store.Runs
	workflows *store.Workflows
	users     [2]struct{ id, cookie string }
	// inproc runs the durable runs in process, as the dev server does.
	inproc *runs.InProcess
	// lease is the durable runs' lease.
	lease time.Duration
	jobs  *store.Jobs
}

func newRunsFixture(t *testing.T) *runsFixture {
	t.Helper()
	db := storetest.New(t)
	users := store.NewUsers(db.DB, db.Users(), db.Sessions())
	authn := auth.NewService(users, &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil)
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	f := &runsFixture{runs: store.NewRuns(db.DB, db.Data()), workflows: store.NewWorkflows(db.DB, db.Data())}
	f.jobs = store.NewJobs(db.DB, db.Data())
	reg := newRegistry(t)
	f.lease = 2 * time.Second
	f.inproc = &runs.InProcess{Runner: runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Tools: reg, Lease: f.lease,
		Idempotent: func(_ context.Context, toolID string) (bool, error) { return toolID == "count_idem", nil }})}
	t.Cleanup(f.inproc.Wait)
	runSvc := runs.NewService(runs.Options{Store: f.runs, Jobs: f.jobs, Workflows: f.workflows, Invoker: f.inproc, Lease: f.lease})
	chatSvc := chat.NewService(chat.Options{Store: store.NewChats(db.DB, db.Data()), Jobs: f.jobs, Models: models, Preferences: users,
		DefaultModelID: "builtin", Runs: runs.ForChat{Service: runSvc}})
	api := httpapi.NewRouter()
	for _, r := range []*httpapi.Router{auth.Routes(authn, nil), chat.Routes(chatSvc, authn, chat.Limits{}), chat.StreamRoutes(chatSvc, authn, time.Minute, chat.Limits{}), runs.Routes(runSvc, authn, workflow.Limits{}, time.Minute)} {
		api.Mount(r, r.Patterns()...)
	}
	f.srv = httptest.NewServer(httpapi.Stack(api, httpapi.Options{}))
	t.Cleanup(f.srv.Close)
	for i, email := range []string{"a@example.com", "b@example.com"} {
		resp := f.do(t, "", "POST", "/api/auth/sign-up/email", `{"email":"`+email+`","password":"password-1x","name":"N"}`)
		var body struct {
			Data struct{ User struct{ ID string } }
		}
		decodeBody(t, resp, &body)
		f.users[i].id = body.Data.User.ID
		for _, c := range resp.Cookies() {
			f.users[i].cookie = c.Name + "=" + c.Value
		}
	}
	return f
}

// chatRuns is what a chat needs of the run service (chatsfn wires the
// same in the functions).
func (f *runsFixture) do(t *testing.T, cookie, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// expect checks the status and, for errors, the code.
func expect(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	defer resp.Body.Close()
	var body struct{ Code string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != status || (code != "" && body.Code != code) {
		t.Fatalf("status %d code %q, want %d %q", resp.StatusCode, body.Code, status, code)
	}
}

func (f *runsFixture) createChat(t *testing.T, user int) string {
	t.Helper()
	resp := f.do(t, f.users[user].cookie, "POST", "/api/chats", `{"title":"runs"}`)
	var body struct{ Data chat.Chat }
	decodeBody(t, resp, &body)
	return body.Data.ID
}

func (f *runsFixture) createWorkflow(t *testing.T, user int, steps ...workflow.Step) workflow.Workflow {
	t.Helper()
	now := time.Now().UTC()
	w := workflow.Workflow{ID: uuid.NewString(), UserID: f.users[user].id, Name: "Prices", Steps: steps, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.workflows.CreateWorkflow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func pricesSteps() []workflow.Step {
	return []workflow.Step{
		step("pick", "json_query", map[string]any{"input": map[string]any{"price": 4}, "query": ".price"}),
		step("calc", "math_evaluate", map[string]any{"expression": "p + 1", "variables": map[string]any{"p": "{{pick.result}}"}}),
	}
}

func TestRunEndpoints(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	a, b := f.users[0].cookie, f.users[1].cookie
	chatID := f.createChat(t, 0)
	otherChat := f.createChat(t, 1)
	w := f.createWorkflow(t, 0, pricesSteps()...)
	otherWf := f.createWorkflow(t, 1)
	runsPath := "/api/chats/" + chatID + "/workflow-runs"

	resp := f.do(t, a, "POST", runsPath, `{"workflowId":"`+w.ID+`"}`)
	if resp.StatusCode != http.StatusCreated {
		expect(t, resp, http.StatusCreated, "")
	}
	var created struct{ Data workflow.Run }
	decodeBody(t, resp, &created)
	run := created.Data
	if run.Status != workflow.RunCompleted || run.ChatID != chatID || run.WorkflowID != w.ID || len(run.Steps) != 2 ||
		run.Steps[1].Output["value"] != float64(5) || run.CompletedAt == nil || run.Steps[0].StartedAt == nil {
		t.Fatalf("run = %+v", run)
	}

	resp = f.do(t, a, "GET", runsPath, "")
	var list struct {
		Data struct{ WorkflowRuns []workflow.Run }
	}
	decodeBody(t, resp, &list)
	if len(list.Data.WorkflowRuns) != 1 || list.Data.WorkflowRuns[0].ID != run.ID || list.Data.WorkflowRuns[0].Status != workflow.RunCompleted {
		t.Fatalf("list = %+v", list)
	}
	// An empty list is an array.
	resp = f.do(t, b, "GET", "/api/chats/"+otherChat+"/workflow-runs", "")
	var raw struct{ Data map[string]json.RawMessage }
	decodeBody(t, resp, &raw)
	if string(raw.Data["workflowRuns"]) != "[]" {
		t.Fatalf("empty list = %s", raw.Data["workflowRuns"])
	}

	// Cancel.
	expect(t, f.do(t, a, "POST", runsPath+"/"+run.ID+"/cancel", ""), http.StatusBadRequest, workflow.CodeRunNotActive)
	expect(t, f.do(t, a, "POST", runsPath+"/"+uuid.NewString()+"/cancel", ""), http.StatusNotFound, workflow.CodeRunNotFound)
	expect(t, f.do(t, b, "POST", runsPath+"/"+run.ID+"/cancel", ""), http.StatusForbidden, "FORBIDDEN")
	expect(t, f.do(t, a, "POST", runsPath+"/not-a-uuid/cancel", ""), http.StatusBadRequest, "INVALID_ID")
	pending := workflow.Run{ID: uuid.NewString(), ChatID: chatID, WorkflowID: w.ID, UserID: f.users[0].id, Status: workflow.RunRunning,
		StartedAt: time.Now().UTC(), Steps: []workflow.RunStep{{ID: "pick", ToolID: "json_query", Status: workflow.StepRunning}}}
	if err := f.runs.CreateRun(context.Background(), pending, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	resp = f.do(t, a, "POST", runsPath+"/"+pending.ID+"/cancel", "")
	var cancelled struct{ Data workflow.Run }
	if resp.StatusCode != http.StatusOK {
		expect(t, resp, http.StatusOK, "")
	}
	decodeBody(t, resp, &cancelled)
	if cancelled.Data.Status != workflow.RunCancelled || cancelled.Data.Steps[0].Status != workflow.StepCancelled || cancelled.Data.CompletedAt == nil {
		t.Fatalf("cancelled = %+v", cancelled.Data)
	}

	// Errors of start and list.
	for _, c := range []struct {
		cookie, method, path, body string
		status                     int
		code                       string
	}{
		{"", "POST", runsPath, `{"workflowId":"` + w.ID + `"}`, 401, ""},
		{"", "GET", runsPath, "", 401, ""},
		{a, "POST", "/api/chats/bad/workflow-runs", `{"workflowId":"` + w.ID + `"}`, 400, ""},
		{a, "POST", runsPath, `{}`, 400, "VALIDATION_FAILED"},
		{a, "POST", runsPath, `{"workflowId":"nope"}`, 400, "VALIDATION_FAILED"},
		{a, "POST", "/api/chats/" + uuid.NewString() + "/workflow-runs", `{"workflowId":"` + w.ID + `"}`, 404, "CHAT_NOT_FOUND"},
		{a, "POST", "/api/chats/" + otherChat + "/workflow-runs", `{"workflowId":"` + w.ID + `"}`, 403, "FORBIDDEN"},
		{a, "POST", runsPath, `{"workflowId":"` + uuid.NewString() + `"}`, 404, "WORKFLOW_NOT_FOUND"},
		{a, "POST", runsPath, `{"workflowId":"` + otherWf.ID + `"}`, 403, "FORBIDDEN"},
		{a, "GET", "/api/chats/bad/workflow-runs", "", 400, "INVALID_ID"},
		{a, "GET", "/api/chats/" + uuid.NewString() + "/workflow-runs", "", 404, "CHAT_NOT_FOUND"},
		{a, "GET", "/api/chats/" + otherChat + "/workflow-runs", "", 403, "FORBIDDEN"},
	} {
		t.Run(c.method+" "+c.path+" "+c.body, func(t *testing.T) {
			expect(t, f.do(t, c.cookie, c.method, c.path, c.body), c.status, c.code)
		})
	}
}

func TestRunFailingStepOverHTTP(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	w := f.createWorkflow(t, 0,
		step("boom", "json_query", map[string]any{"input": map[string]any{}, "query": `error("boom")`}),
		step("after", "hash", map[string]any{"text": "{{boom.result}}", "algorithm": "md5"}))
	resp := f.do(t, f.users[0].cookie, "POST", "/api/chats/"+chatID+"/workflow-runs", `{"workflowId":"`+w.ID+`"}`)
	var created struct{ Data workflow.Run }
	decodeBody(t, resp, &created)
	if resp.StatusCode != http.StatusCreated || created.Data.Status != workflow.RunFailed || statuses(created.Data) != "failed,skipped" {
		t.Fatalf("%d %+v", resp.StatusCode, created.Data)
	}
}

// streamEvents posts to the stream and returns its events, or the status
// and code of a plain error response.
func (f *runsFixture) streamEvents(t *testing.T, user int, chatID, body string) (int, string, []chat.Event) {
	t.Helper()
	resp := f.do(t, f.users[user].cookie, "POST", "/api/chats/"+chatID+"/messages/stream", body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Code string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Code, nil
	}
	var events []chat.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e chat.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	return resp.StatusCode, "", events
}

func TestStreamWithWorkflow(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	w := f.createWorkflow(t, 0, pricesSteps()...)
	body := func(wfID string) string {
		return `{"content":"run it","modelId":"builtin","userId":"` + f.users[0].id + `","workflowId":"` + wfID + `"}`
	}
	status, _, events := f.streamEvents(t, 0, chatID, body(w.ID))
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, ","); got != "start,tool_call,tool_result,tool_call,tool_result,content,end" {
		t.Fatalf("events = %s", got)
	}
	if events[1].ToolName != "json_query" || events[3].ToolName != "math_evaluate" || !strings.Contains(string(events[3].ToolArgs), `"p":4`) {
		t.Fatalf("tool calls = %+v / %+v", events[1], events[3])
	}
	if string(events[4].Result) != `{"value":5}` {
		t.Fatalf("result = %s", events[4].Result)
	}
	summary := events[5].Delta
	if !strings.Contains(summary, `Workflow "Prices" completed`) || !strings.Contains(summary, `calc → {"value":5}`) {
		t.Fatalf("summary = %q", summary)
	}
	if events[0].MessageID == "" || events[6].MessageID != events[0].MessageID {
		t.Fatalf("start/end = %+v / %+v", events[0], events[6])
	}
	// The run is stored as completed, the summary as the assistant message.
	runs, _, err := f.runs.ChatRunsPage(context.Background(), chatID, 10, "")
	if err != nil || len(runs) != 1 || runs[0].Status != workflow.RunCompleted || statuses(runs[0]) != "completed,completed" {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	resp := f.do(t, f.users[0].cookie, "GET", "/api/chats/"+chatID+"/messages", "")
	var msgs struct {
		Data struct{ Messages []chat.Message }
	}
	decodeBody(t, resp, &msgs)
	m := msgs.Data.Messages
	if len(m) != 2 || m[0].Content != "run it" || m[1].ID != events[0].MessageID || m[1].Content != summary || len(m[1].ToolCalls) != 2 {
		t.Fatalf("messages = %+v", m)
	}

	// A failing workflow: the failure is reported in the summary.
	bad := f.createWorkflow(t, 0, step("boom", "json_query", map[string]any{"input": 1, "query": `error("boom")`}))
	_, _, events = f.streamEvents(t, 0, chatID, body(bad.ID))
	if len(events) != 5 || !strings.Contains(string(events[2].Result), "boom") || !strings.Contains(events[3].Delta, "failed at step boom") {
		t.Fatalf("events = %+v", events)
	}

	// Before the stream: the workflow must be the caller's.
	other := f.createWorkflow(t, 1)
	if status, code, _ := f.streamEvents(t, 0, chatID, body(other.ID)); status != 403 || code != "FORBIDDEN" {
		t.Fatalf("another's workflow: %d %s", status, code)
	}
	if status, code, _ := f.streamEvents(t, 0, chatID, body(uuid.NewString())); status != 404 || code != "WORKFLOW_NOT_FOUND" {
		t.Fatalf("missing workflow: %d %s", status, code)
	}
	if status, _, _ := f.streamEvents(t, 0, chatID, body("nope")); status != 400 {
		t.Fatalf("bad workflow id: %d", status)
	}
	// Chat checks come first.
	otherChat := f.createChat(t, 1)
	if status, code, _ := f.streamEvents(t, 0, otherChat, body(w.ID)); status != 403 || code != "FORBIDDEN" {
		t.Fatalf("another's chat: %d %s", status, code)
	}
}

// TestRunsOfAWorkflow: every run of a workflow, whatever started it, is
// reachable under /api/workflows/{workflowId}/runs: listed newest first
// with cursors, read, followed, cancelled and retried there, with the
// workflow's owner checked (404 before 403) and a run of another
// workflow not found.
func TestRunsOfAWorkflow(t *testing.T) {
	t.Parallel()
	f := newRunsFixture(t)
	a, b := f.users[0].cookie, f.users[1].cookie
	steps, _ := countSteps(2, 0)
	w := f.createWorkflow(t, 0, steps...)
	other := f.createWorkflow(t, 0, steps...)
	theirs := f.createWorkflow(t, 1)
	chatID := f.createChat(t, 0)
	var started []string
	for range 3 {
		run := f.startAsync(t, chatID, w.ID)
		f.waitRun(t, chatID, run.ID)
		started = append(started, run.ID)
	}
	otherRun := f.waitRun(t, chatID, f.startAsync(t, chatID, other.ID).ID)
	base := "/api/workflows/" + w.ID + "/runs"

	var got []string
	for cursor := ""; ; {
		path := base + "?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		resp := f.do(t, a, "GET", path, "")
		if resp.StatusCode != http.StatusOK {
			expect(t, resp, http.StatusOK, "")
		}
		var page struct {
			Data struct {
				WorkflowRuns []workflow.Run
				NextCursor   string
			}
		}
		decodeBody(t, resp, &page)
		for _, r := range page.Data.WorkflowRuns {
			got = append(got, r.ID)
		}
		if cursor = page.Data.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{started[2], started[1], started[0]}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("the workflow's runs %v, want newest first %v", got, want)
	}
	resp := f.do(t, a, "GET", base+"/"+started[0], "")
	var one struct{ Data workflow.Run }
	decodeBody(t, resp, &one)
	if one.Data.ID != started[0] || one.Data.Status != workflow.RunCompleted || one.Data.Trigger == nil || one.Data.Trigger.Type != workflow.TriggerManual {
		t.Fatalf("run through the workflow = %+v", one.Data)
	}
	if evs := f.eventsAt(t, 0, base+"/"+started[0]+"/events", ""); types(evs) != "run_started,step_started,step_completed,step_started,step_completed,run_completed" {
		t.Fatalf("events through the workflow: %s", types(evs))
	}
	resp = f.do(t, a, "POST", base+"/"+started[0]+"/retry", `{"fromStepId":"bstep"}`)
	if resp.StatusCode != http.StatusAccepted {
		expect(t, resp, http.StatusAccepted, "")
	}
	var retry struct{ Data workflow.Run }
	decodeBody(t, resp, &retry)
	if loc := resp.Header.Get("Location"); loc != base+"/"+retry.Data.ID || retry.Data.ChatID != chatID {
		t.Fatalf("retry: Location %q, run %+v", loc, retry.Data)
	}
	f.waitRun(t, chatID, retry.Data.ID)
	expect(t, f.do(t, a, "POST", base+"/"+retry.Data.ID+"/cancel", ""), http.StatusBadRequest, workflow.CodeRunNotActive)

	for _, c := range []struct {
		cookie, method, path string
		status               int
		code                 string
	}{
		{"", "GET", base, 401, ""},
		{a, "GET", "/api/workflows/bad/runs", 400, "INVALID_ID"},
		{a, "GET", "/api/workflows/" + uuid.NewString() + "/runs", 404, "WORKFLOW_NOT_FOUND"},
		{b, "GET", base, 403, "FORBIDDEN"},
		{a, "GET", "/api/workflows/" + theirs.ID + "/runs", 403, "FORBIDDEN"},
		{a, "GET", base + "/" + otherRun.ID, 404, workflow.CodeRunNotFound},
		{a, "GET", base + "/" + uuid.NewString(), 404, workflow.CodeRunNotFound},
		{b, "GET", base + "/" + started[0], 403, "FORBIDDEN"},
		{b, "POST", base + "/" + started[0] + "/cancel", 403, "FORBIDDEN"},
		{a, "GET", base + "?cursor=nope", 400, "INVALID_PAGINATION"},
	} {
		expect(t, f.do(t, c.cookie, c.method, c.path, ""), c.status, c.code)
	}
}
