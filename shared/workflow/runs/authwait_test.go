package runs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// oauthTools runs the remote tool mcp/srv/echo as usertools does for an
// oauth server: AUTHORIZATION_REQUIRED (mcpserver.AuthorizationError)
// until authorized is set; other tools are the registry's.
type oauthTools struct {
	runs.ToolRunner
	serverID   string
	authorized atomic.Bool
	calls      atomic.Int32
}

func (o *oauthTools) Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error) {
	if toolID != "mcp/srv/echo" {
		return o.ToolRunner.Run(ctx, toolID, input)
	}
	o.calls.Add(1)
	if !o.authorized.Load() {
		return nil, mcpserver.AuthorizationError(mcpserver.Server{ID: o.serverID, Name: "srv", Auth: mcpserver.Auth{Type: mcpserver.AuthOAuth}})
	}
	return map[string]any{"text": "hi"}, nil
}

func newAuthFixture(t *testing.T) (*childFixture, *oauthTools) {
	t.Helper()
	return newAuthFixtureAt(t, nil)
}

// newAuthFixtureAt is newAuthFixture whose service and runner read the
// clock now (nil: time.Now).
func newAuthFixtureAt(t *testing.T, now func() time.Time) (*childFixture, *oauthTools) {
	t.Helper()
	tools := &oauthTools{ToolRunner: newRegistry(t), serverID: uuid.NewString()}
	return newClockedFixture(t, now, tools), tools
}

// newClockedFixture returns a fixture whose service and runner read the
// clock now (nil: time.Now) and whose runner runs tools.
func newClockedFixture(t *testing.T, now func() time.Time, tools runs.ToolRunner) *childFixture {
	t.Helper()
	db := storetest.New(t)
	f := &childFixture{runs: store.NewRuns(db.DB, db.Data()), jobs: store.NewJobs(db.DB, db.Data()),
		workflows: store.NewWorkflows(db.DB, db.Data()), lease: 2 * time.Second, user: uuid.NewString()}
	f.inproc = &runs.InProcess{}
	f.svc = runs.NewService(runs.Options{Store: f.runs, Jobs: f.jobs, Workflows: f.workflows, Invoker: f.inproc, Lease: f.lease, Ended: f.ended, AuthWaits: f.runs, Now: now})
	f.inproc.Runner = runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Tools: tools, Lease: f.lease, Ended: f.ended, AuthWaits: f.runs, Now: now})
	t.Cleanup(f.inproc.Wait)
	return f
}

// checkAuthWait checks run waits for the authorization of serverID.
func checkAuthWait(t *testing.T, run workflow.Run, serverID string) {
	t.Helper()
	s := run.Steps[0]
	if run.Status != workflow.RunWaiting || s.Status != workflow.StepWaiting || s.Reason != workflow.WaitAuthorization ||
		s.MCPServerID != serverID || s.AuthorizationURL != runs.AuthorizeURL(serverID) || s.ExpiresAt == nil {
		t.Fatalf("run %s step %+v", run.Status, s)
	}
}

// TestAuthorizationWait: a step whose server needs authorization leaves
// the run waiting (reason, server, URL, deadline: the step_waiting
// event says them too); an answer is refused; the authorization's
// success continues it through its wait item, and the run completes.
func TestAuthorizationWait(t *testing.T) {
	f, tools := newAuthFixture(t)
	w := f.workflow(t, f.user, step("remote", "mcp/srv/echo", map[string]any{"q": "x"}))
	run := f.start(t, w, nil)
	waiting := f.waitStatus(t, run.ID, workflow.RunWaiting)
	f.inproc.Wait()
	checkAuthWait(t, waiting, tools.serverID)
	var ev workflow.RunEvent
	if err := f.svc.Follow(f.ctx(), run.ID, 0, func(e workflow.RunEvent) error {
		if e.Type == workflow.EventStepWaiting {
			ev = e
			return context.Canceled
		}
		return nil
	}); err != context.Canceled || ev.Reason != workflow.WaitAuthorization || ev.MCPServerID != tools.serverID || ev.AuthorizationURL == "" {
		t.Fatalf("follow: %v, event %+v", err, ev)
	}
	if _, err := f.svc.Respond(f.ctx(), runs.Scope{WorkflowID: w.ID}, run.ID, "remote", runs.Answer{Approved: true}); err == nil {
		t.Fatal("an answer to an authorization wait was taken")
	}
	waits, err := f.runs.AuthWaits(context.Background(), f.user, tools.serverID)
	if err != nil || len(waits) != 1 || waits[0].RunID != run.ID {
		t.Fatalf("wait items %+v, %v", waits, err)
	}
	tools.authorized.Store(true)
	if err := f.svc.Authorized(context.Background(), f.user, tools.serverID); err != nil {
		t.Fatal(err)
	}
	got := f.waitStatus(t, run.ID, workflow.RunCompleted)
	f.inproc.Wait()
	if got.Status != workflow.RunCompleted || got.Steps[0].Output["text"] != "hi" || got.Steps[0].ExpiresAt != nil {
		t.Fatalf("%s %+v", got.Status, got.Steps[0])
	}
	if waits, err := f.runs.AuthWaits(context.Background(), f.user, tools.serverID); err != nil || len(waits) != 0 {
		t.Fatalf("wait items left %+v, %v", waits, err)
	}
}

// TestAuthorizationWaitSweeper: a run waiting for an authorization whose
// word was lost is resumed by the sweeper (it calls the tool again); one
// still unauthorized waits again keeping its deadline, and past it the
// step fails AUTHORIZATION_TIMEOUT.
func TestAuthorizationWaitSweeper(t *testing.T) {
	f, tools := newAuthFixture(t)
	w := f.workflow(t, f.user, step("remote", "mcp/srv/echo", nil))
	run := f.start(t, w, nil)
	first := f.waitStatus(t, run.ID, workflow.RunWaiting)
	f.inproc.Wait()
	deadline := *first.Steps[0].ExpiresAt
	sweep := func(now time.Time) {
		t.Helper()
		s := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: f.inproc, Lease: f.lease, Now: func() time.Time { return now }, Ended: f.ended})
		if err := s(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
			t.Fatal(err)
		}
		f.inproc.Wait()
	}
	calls := tools.calls.Load()
	sweep(time.Now().Add(runs.AuthCheck + time.Minute))
	again, err := f.runs.Run(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkAuthWait(t, again, tools.serverID)
	if tools.calls.Load() != calls+1 || !again.Steps[0].ExpiresAt.Equal(deadline) {
		t.Fatalf("calls %d then %d, deadline %v then %v", calls, tools.calls.Load(), deadline, again.Steps[0].ExpiresAt)
	}
	sweep(deadline.Add(time.Second))
	got := f.waitStatus(t, run.ID, workflow.RunFailed)
	if got.Status != workflow.RunFailed || !strings.HasPrefix(got.Steps[0].Error, runs.CodeAuthorizationTimeout) {
		t.Fatalf("%s %+v", got.Status, got.Steps[0])
	}
}

// TestAuthorizationResumer: where no runner can be reached (the OAuth
// callback's function), the authorization ends the waiting run's lease;
// the sweeper's next pass hands it to the runner on the same attempt and
// it completes.
func TestAuthorizationResumer(t *testing.T) {
	f, tools := newAuthFixture(t)
	w := f.workflow(t, f.user, step("remote", "mcp/srv/echo", nil))
	run := f.start(t, w, nil)
	f.waitStatus(t, run.ID, workflow.RunWaiting)
	f.inproc.Wait()
	tools.authorized.Store(true)
	now := time.Now()
	r := runs.AuthResumer{Store: f.runs, AuthWaits: f.runs, Now: func() time.Time { return now }}
	if err := r.Authorized(context.Background(), f.user, tools.serverID); err != nil {
		t.Fatal(err)
	}
	if _, head, err := f.runs.LoggedRun(context.Background(), run.ID); err != nil || head.LeaseUntil.After(now.Add(time.Second)) {
		t.Fatalf("lease %v (now %v), %v", head.LeaseUntil, now, err)
	}
	sweep := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: f.inproc, Lease: f.lease, Now: func() time.Time { return now.Add(time.Second) }, Ended: f.ended})
	if err := sweep(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
		t.Fatal(err)
	}
	got := f.waitStatus(t, run.ID, workflow.RunCompleted)
	f.inproc.Wait()
	if got.Attempt != 1 || got.Steps[0].Output["text"] != "hi" {
		t.Fatalf("attempt %d %+v", got.Attempt, got.Steps[0])
	}
	if waits, err := f.runs.AuthWaits(context.Background(), f.user, tools.serverID); err != nil || len(waits) != 0 {
		t.Fatalf("wait items left %+v, %v", waits, err)
	}
}

// TestAuthorizationWaitCancelled: a cancel ends the wait; the
// authorization that comes later leaves the run cancelled, calls nothing,
// and drops the wait item.
func TestAuthorizationWaitCancelled(t *testing.T) {
	f, tools := newAuthFixture(t)
	w := f.workflow(t, f.user, step("remote", "mcp/srv/echo", nil))
	run := f.start(t, w, nil)
	f.waitStatus(t, run.ID, workflow.RunWaiting)
	f.inproc.Wait()
	if _, err := f.svc.Cancel(f.ctx(), runs.Scope{WorkflowID: w.ID}, run.ID); err != nil {
		t.Fatal(err)
	}
	calls := tools.calls.Load()
	tools.authorized.Store(true)
	if err := f.svc.Authorized(context.Background(), f.user, tools.serverID); err != nil {
		t.Fatal(err)
	}
	f.inproc.Wait()
	got, err := f.runs.Run(context.Background(), run.ID)
	if err != nil || got.Status != workflow.RunCancelled || tools.calls.Load() != calls {
		t.Fatalf("%s, calls %d then %d, %v", got.Status, calls, tools.calls.Load(), err)
	}
	if waits, err := f.runs.AuthWaits(context.Background(), f.user, tools.serverID); err != nil || len(waits) != 0 {
		t.Fatalf("wait items left %+v, %v", waits, err)
	}
}

// TestAuthorizationWaitLeftOutOfRunTime: a step (a forEach step too)
// authorized an hour after it waited, far past the runner's run time
// limit (RunnerRunTimeout), completes: the wait is left out of the run's
// time, as a person's is, and the step says how long it waited; the
// sweeper's check before the authorization adds its wait too.
func TestAuthorizationWaitLeftOutOfRunTime(t *testing.T) {
	t.Parallel()
	for _, forEach := range []bool{false, true} {
		t.Run(fmt.Sprint("forEach ", forEach), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			skew := time.Duration(0)
			now := func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				return time.Now().Add(skew)
			}
			advance := func(d time.Duration) {
				mu.Lock()
				skew += d
				mu.Unlock()
			}
			f, tools := newAuthFixtureAt(t, now)
			s := step("remote", "mcp/srv/echo", map[string]any{"q": "{{input.q}}"})
			input := map[string]any{"q": "x"}
			if forEach {
				s.ForEach, s.Concurrency, s.Inputs = "{{input.qs}}", one(1), map[string]any{"q": "{{item}}"}
				input = map[string]any{"qs": []any{"a", "b"}}
			}
			w := f.workflow(t, f.user, s)
			run := f.start(t, w, input)
			f.waitStatus(t, run.ID, workflow.RunWaiting)
			f.inproc.Wait()
			// The sweeper's check half an hour on: still unauthorized, it
			// waits again.
			advance(30 * time.Minute)
			sweep := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: f.inproc, Lease: f.lease, Now: now, Ended: f.ended})
			if err := sweep(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
				t.Fatal(err)
			}
			f.inproc.Wait()
			again, err := f.runs.Run(context.Background(), run.ID)
			if err != nil {
				t.Fatal(err)
			}
			checkAuthWait(t, again, tools.serverID)
			advance(30 * time.Minute)
			tools.authorized.Store(true)
			if err := f.svc.Authorized(context.Background(), f.user, tools.serverID); err != nil {
				t.Fatal(err)
			}
			got := f.waitStatus(t, run.ID, workflow.RunCompleted)
			f.inproc.Wait()
			if waited := time.Duration(got.Steps[0].AuthorizationWaitedMs) * time.Millisecond; waited < time.Hour || waited > time.Hour+time.Minute {
				t.Fatalf("step %+v waited %s", got.Steps[0], waited)
			}
		})
	}
}
