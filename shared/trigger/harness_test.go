package trigger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/webhook"
	"github.com/workflowchat/service/shared/workflow"
)

// clock is a fake clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// engine is the test double of the run engine: it records every start it
// is asked for and keeps each run active until the test ends it, as a
// slow run would be. It implements trigger.RunStarter's whole contract:
// an existing run id starts nothing (nil while active, RUN_ENDED once
// ended).
type engine struct {
	mu     sync.Mutex
	calls  []trigger.TriggeredRun // every call
	runs   map[string]*engineRun  // started runs by id
	order  []string               // run ids in start order
	failAt map[int]error          // the error of call i (0-based), if any
}

type engineRun struct {
	req   trigger.TriggeredRun
	ended bool
}

func newEngine() *engine { return &engine{runs: map[string]*engineRun{}, failAt: map[int]error{}} }

func (e *engine) StartTriggered(ctx context.Context, req trigger.TriggeredRun) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := len(e.calls)
	e.calls = append(e.calls, req)
	if auth.UserID(ctx) != req.UserID {
		return "", fmt.Errorf("engine: started for %q in a context acting for %q", req.UserID, auth.UserID(ctx))
	}
	if r, ok := e.runs[req.RunID]; ok {
		if r.ended {
			return "", errs.E("engine", errs.Conflict, trigger.CodeRunEnded, "the run has ended")
		}
		return req.RunID, nil
	}
	if err := e.failAt[i]; err != nil {
		return "", err
	}
	e.runs[req.RunID] = &engineRun{req: req}
	e.order = append(e.order, req.RunID)
	return req.RunID, nil
}

// failNext makes the next call fail with err.
func (e *engine) failNext(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failAt[len(e.calls)] = err
}

// end marks run id ended (the engine would then call RunEnded).
func (e *engine) end(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs[id].ended = true
}

func (e *engine) started() []trigger.TriggeredRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]trigger.TriggeredRun, 0, len(e.order))
	for _, id := range e.order {
		out = append(out, e.runs[id].req)
	}
	return out
}

// flakyScheduler is the local scheduler, whose next Put can be made to
// fail as EventBridge Scheduler's can (a refused expression, throttling).
type flakyScheduler struct {
	trigger.Scheduler
	mu   sync.Mutex
	next error
}

// failNextPut makes the next Put fail with err, leaving the schedules as
// they are.
func (f *flakyScheduler) failNextPut(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = err
}

func (f *flakyScheduler) Put(ctx context.Context, spec trigger.ScheduleSpec) error {
	f.mu.Lock()
	err := f.next
	f.next = nil
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Scheduler.Put(ctx, spec)
}

// env is a trigger service on the embedded DynamoDB engine, with the
// local scheduler, the engine double, a fake clock and the HTTP routes.
type env struct {
	db        *storetest.DB
	clock     *clock
	engine    *engine
	triggers  *store.Triggers
	due       *store.DueSchedules
	sched     *flakyScheduler
	svc       *trigger.Service
	workflows *workflow.Service
	secrets   *webhook.Secrets
	poller    *trigger.Poller
	api       http.Handler
	users     map[string]user
}

type user struct{ id, cookie string }

// t0 is the fake clock's start: a Saturday.
var t0 = time.Date(2026, 3, 7, 17, 0, 30, 0, time.UTC)

func newEnv(t *testing.T) *env {
	t.Helper()
	db := storetest.New(t)
	e := &env{db: db, clock: &clock{t: t0}, engine: newEngine(), users: map[string]user{}}
	secrets, err := webhook.NewSecrets([]byte("test-webhook-signing-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	e.secrets = secrets
	e.triggers = store.NewTriggers(db.DB, db.Data())
	e.due = store.NewDueSchedules(db.DB, db.Data(), e.clock.Now)
	logger := slog.New(slog.DiscardHandler)
	e.sched = &flakyScheduler{Scheduler: e.due}
	e.svc = trigger.NewService(trigger.Options{Store: e.triggers, Scheduler: e.sched, Runs: e.engine, Secrets: secrets, Now: e.clock.Now, Logger: logger,
		Erasures: store.NewDeletedAccounts(db.DB, db.Data())})
	e.poller = &trigger.Poller{Due: e.due, Fire: e.svc.Fire, Now: e.clock.Now, Logger: logger}
	e.workflows = workflow.NewService(workflow.Options{Store: store.NewWorkflows(db.DB, db.Data()), Triggers: e.svc, Now: e.clock.Now})
	authn := auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil)
	api := httpapi.NewRouter()
	for _, r := range []*httpapi.Router{auth.Routes(authn, nil), workflow.Routes(e.workflows, authn), trigger.Routes(e.svc, authn)} {
		api.Mount(r, r.Patterns()...)
	}
	e.api = httpapi.Stack(api, httpapi.Options{Logger: logger})
	for _, name := range []string{"a", "b"} {
		resp := e.do(t, "", "POST", "/api/auth/sign-up/email", fmt.Sprintf(`{"email":"%s@example.com","password":"password-1x","name":"%s"}`, name, name), nil)
		var body struct {
			Data struct{ User struct{ ID string } }
		}
		decode(t, resp, 200, &body)
		u := user{id: body.Data.User.ID}
		for _, c := range resp.Result().Cookies() {
			u.cookie = c.Name + "=" + c.Value
		}
		e.users[name] = u
	}
	return e
}

// do sends a request to the API as user (cookie; "" for none).
func (e *env) do(t *testing.T, cookie, method, path, body string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = bytes.NewBufferString(body)
	}
	req := httptest.NewRequest(method, path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	return rec
}

// as sends a request as user name.
func (e *env) as(t *testing.T, name, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	return e.do(t, e.users[name].cookie, method, path, body, nil)
}

// workflow creates a workflow of user name and returns its id.
func (e *env) workflow(t *testing.T, name string) string {
	t.Helper()
	var w struct{ Data struct{ ID string } }
	decode(t, e.as(t, name, "POST", "/api/workflows", fmt.Sprintf(`{"name":"wf","userId":%q}`, e.users[name].id)), 201, &w)
	return w.Data.ID
}

// view is the JSON of a trigger as the API answers it.
type view struct {
	ID, WorkflowID, Type, Schedule, Timezone, Overlap, URL, Secret string
	Enabled                                                        bool
	Input                                                          map[string]any
	NextFireAt                                                     *time.Time
	ActiveRunID, BufferedRunID                                     string
	LastFire                                                       *trigger.Fire
}

// create creates a trigger of workflow wf as user name and returns it.
func (e *env) create(t *testing.T, name, wf, body string) view {
	t.Helper()
	var out struct{ Data view }
	decode(t, e.as(t, name, "POST", "/api/workflows/"+wf+"/triggers", body), 201, &out)
	return out.Data
}

func (e *env) get(t *testing.T, name, wf, id string) view {
	t.Helper()
	var out struct{ Data view }
	decode(t, e.as(t, name, "GET", "/api/workflows/"+wf+"/triggers/"+id, ""), 200, &out)
	return out.Data
}

func decode(t *testing.T, rec *httptest.ResponseRecorder, status int, out any) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body.String())
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("decode %s: %v", rec.Body.String(), err)
		}
	}
}

// errorOf returns the code and detail fields of an error answer.
func errorOf(t *testing.T, rec *httptest.ResponseRecorder, status int) (string, []string) {
	t.Helper()
	var body httpapi.ErrorBody
	decode(t, rec, status, &body)
	var fields []string
	for _, d := range body.Details {
		fields = append(fields, d.Field)
	}
	return body.Code, fields
}

// poll advances the fake clock by step n times, polling after each, and
// returns the runs started meanwhile.
func (e *env) poll(t *testing.T, n int, step time.Duration) {
	t.Helper()
	for range n {
		e.clock.Advance(step)
		if _, err := e.poller.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// hook sends a webhook call.
func (e *env) hook(t *testing.T, id string, body []byte, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", "/hooks/"+id, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	return rec
}

func newID() string { return uuid.NewString() }
