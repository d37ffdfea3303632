package runs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/runworkflow"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// childFixture runs durable runs in process with child runs wired as
// runstart wires them: the runner starts children through the service,
// and every end of a run passes through the service's RunEnded.
type childFixture struct {
	svc       *runs.Service
	inproc    *runs.InProcess
	runs      *store.Runs
	jobs      *store.Jobs
	workflows *store.Workflows
	lease     time.Duration
	user      string
	// dropEnds, while above 0, drops that many ends before RunEnded
	// sees them (a crash between a child's end and its parent's resume).
	dropEnds atomic.Int32
	// children, when set, wraps the service as the runner's Children.
	children func(runs.Children) runs.Children
}

func newChildFixture(t *testing.T, wrap func(runs.Children) runs.Children) *childFixture {
	t.Helper()
	db := storetest.New(t)
	f := &childFixture{runs: store.NewRuns(db.DB, db.Data()), jobs: store.NewJobs(db.DB, db.Data()),
		workflows: store.NewWorkflows(db.DB, db.Data()), lease: 2 * time.Second, user: uuid.NewString(), children: wrap}
	f.inproc = &runs.InProcess{}
	f.svc = runs.NewService(runs.Options{Store: f.runs, Jobs: f.jobs, Workflows: f.workflows, Invoker: f.inproc, Lease: f.lease, Ended: f.ended})
	var children runs.Children = f.svc
	if wrap != nil {
		children = wrap(f.svc)
	}
	f.inproc.Runner = runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Tools: newRegistry(t), Lease: f.lease,
		Ended: f.ended, Children: children})
	t.Cleanup(f.inproc.Wait)
	return f
}

func (f *childFixture) ended(ctx context.Context, run workflow.Run) error {
	if f.dropEnds.Add(-1) >= 0 {
		return nil
	}
	return f.svc.RunEnded(ctx, run)
}

func (f *childFixture) ctx() context.Context { return auth.ActingFor(context.Background(), f.user) }

func (f *childFixture) workflow(t *testing.T, user string, steps ...workflow.Step) workflow.Workflow {
	t.Helper()
	now := time.Now().UTC()
	w := workflow.Workflow{ID: uuid.NewString(), UserID: user, Name: "W", Steps: steps, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.workflows.CreateWorkflow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

// start starts a manual run of w with input.
func (f *childFixture) start(t *testing.T, w workflow.Workflow, input map[string]any) workflow.Run {
	t.Helper()
	run, err := f.svc.Start(f.ctx(), runs.StartRequest{WorkflowID: w.ID, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// waitEnd waits for run id's last event (generous bound: the machine is
// shared) and returns the run as stored.
func (f *childFixture) waitEnd(t *testing.T, id string) workflow.Run {
	t.Helper()
	run, done, err := f.svc.Wait(f.ctx(), id, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !done {
		t.Fatalf("run %s did not end: %s %s", id, run.Status, statuses(run))
	}
	return run
}

// waitStatus polls run id until its status is want.
func (f *childFixture) waitStatus(t *testing.T, id, want string) workflow.Run {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		run, err := f.runs.Run(context.Background(), id)
		if err == nil && run.Status == want {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s (err %v)", id, run.Status, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func childStep(id, workflowID string, input map[string]any) workflow.Step {
	in := map[string]any{"workflowId": workflowID}
	if input != nil {
		in["input"] = input
	}
	return step(id, workflow.RunWorkflowToolID, in)
}

func TestChildRunOutput(t *testing.T) {
	f := newChildFixture(t, nil)
	key := uuid.NewString()
	child := f.workflow(t, f.user, step("c1", "count", map[string]any{"key": "{{input.key}}"}))
	child.InputSchema = nil
	parent := f.workflow(t, f.user,
		childStep("sub", child.ID, map[string]any{"key": key}),
		step("after", "count", map[string]any{"key": key + "/after/{{sub.n}}"}))
	run := f.waitEnd(t, f.start(t, parent, nil).ID)
	if run.Status != workflow.RunCompleted {
		t.Fatalf("parent %s: %s %s", run.Status, run.Error, statuses(run))
	}
	sub := run.Steps[0]
	if sub.ChildRunID == "" || sub.Output["n"] != float64(1) {
		t.Fatalf("sub step %+v", sub)
	}
	if count(key) != 1 || count(key+"/after/1") != 1 {
		t.Fatalf("counts %d %d; after's input %v", count(key), count(key+"/after/1"), run.Steps[1].Input)
	}
	c, err := f.runs.Run(context.Background(), sub.ChildRunID)
	if err != nil {
		t.Fatal(err)
	}
	if c.ParentRunID != run.ID || c.Trigger == nil || c.Trigger.Type != workflow.TriggerWorkflow || c.Depth != 1 ||
		c.WorkflowID != child.ID || c.Status != workflow.RunCompleted || c.Input["key"] != key {
		t.Fatalf("child run %+v", c)
	}
	// The parent's events tell of the wait, with the child's id.
	var waited bool
	if err := f.svc.Follow(f.ctx(), run.ID, 0, func(e workflow.RunEvent) error {
		waited = waited || (e.Type == workflow.EventStepWaiting && e.ChildRunID == c.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !waited {
		t.Fatal("no step_waiting with the child's id")
	}
}

func TestChildRunFailures(t *testing.T) {
	f := newChildFixture(t, nil)
	other := f.workflow(t, uuid.NewString(), step("o", "count", map[string]any{"key": uuid.NewString()}))
	failingKey := uuid.NewString()
	failing.Store(failingKey, true)
	t.Cleanup(func() { failing.Delete(failingKey) })
	bad := f.workflow(t, f.user, step("b", "count", map[string]any{"key": failingKey}))
	self := f.workflow(t, f.user, childStep("again", "{{input.wf}}", nil))
	typed := f.workflow(t, f.user, step("t", "count", map[string]any{"key": uuid.NewString()}))
	typed.InputSchema = []byte(`{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`)
	typed.Version = 2
	if err := f.workflows.UpdateWorkflow(context.Background(), typed, workflow.Workflow{ID: typed.ID, Version: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		steps []workflow.Step
		input map[string]any
		code  string
	}{
		{"another user's", []workflow.Step{childStep("sub", other.ID, nil)}, nil, runworkflow.CodeWorkflowNotFound},
		{"unknown", []workflow.Step{childStep("sub", uuid.NewString(), nil)}, nil, runworkflow.CodeWorkflowNotFound},
		{"bad inputs", []workflow.Step{step("sub", workflow.RunWorkflowToolID, map[string]any{"workflowId": 3})}, nil, "INVALID_PARAMS"},
		{"child fails", []workflow.Step{childStep("sub", bad.ID, nil)}, nil, runworkflow.CodeChildRunFailed},
		{"input the child refuses", []workflow.Step{childStep("sub", typed.ID, map[string]any{"x": 1})}, nil, "INVALID_INPUT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := f.workflow(t, f.user, c.steps...)
			run := f.waitEnd(t, f.start(t, w, c.input).ID)
			if run.Status != workflow.RunFailed || !strings.HasPrefix(run.Steps[0].Error, c.code+": ") {
				t.Fatalf("%s: %q %s", run.Status, run.Steps[0].Error, statuses(run))
			}
		})
	}
	t.Run("itself, templated", func(t *testing.T) {
		run := f.waitEnd(t, f.start(t, self, map[string]any{"wf": self.ID}).ID)
		if run.Status != workflow.RunFailed || !strings.HasPrefix(run.Steps[0].Error, runworkflow.CodeWorkflowCycle+": ") {
			t.Fatalf("%s: %q", run.Status, run.Steps[0].Error)
		}
	})
	t.Run("continueOnError", func(t *testing.T) {
		s := childStep("sub", bad.ID, nil)
		s.ContinueOnError = true
		key := uuid.NewString()
		w := f.workflow(t, f.user, s, step("after", "count", map[string]any{"key": key}))
		run := f.waitEnd(t, f.start(t, w, nil).ID)
		if run.Status != workflow.RunCompleted || run.Steps[0].Status != workflow.StepFailed || count(key) != 1 ||
			!strings.HasPrefix(run.Steps[0].Output["error"].(string), runworkflow.CodeChildRunFailed) {
			t.Fatalf("%s %s %+v", run.Status, statuses(run), run.Steps[0])
		}
	})
}

func TestChildRunCycleAndDepth(t *testing.T) {
	f := newChildFixture(t, nil)
	// a runs b, b runs a: stored directly, past the checks made when a
	// definition is saved, so the run refuses it.
	a := workflow.Workflow{ID: uuid.NewString()}
	b := f.workflow(t, f.user, childStep("back", a.ID, nil))
	now := time.Now().UTC()
	a = workflow.Workflow{ID: a.ID, UserID: f.user, Name: "A", Steps: []workflow.Step{childStep("fwd", b.ID, nil)}, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.workflows.CreateWorkflow(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	run := f.waitEnd(t, f.start(t, a, nil).ID)
	c, err := f.runs.Run(context.Background(), run.Steps[0].ChildRunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.RunFailed || c.Status != workflow.RunFailed || !strings.HasPrefix(c.Steps[0].Error, runworkflow.CodeWorkflowCycle+": ") ||
		!strings.HasPrefix(run.Steps[0].Error, runworkflow.CodeChildRunFailed+": ") {
		t.Fatalf("parent %s %q; child %s %q", run.Status, run.Steps[0].Error, c.Status, c.Steps[0].Error)
	}

	// A chain of 7 workflows: the run at depth 5 may not start a child.
	key := uuid.NewString()
	chain := []workflow.Workflow{f.workflow(t, f.user, step("leaf", "count", map[string]any{"key": key}))}
	for range 6 {
		chain = append(chain, f.workflow(t, f.user, childStep("down", chain[len(chain)-1].ID, nil)))
	}
	top := f.waitEnd(t, f.start(t, chain[5], nil).ID) // depth 0 to 5: the leaf at 5 runs
	if top.Status != workflow.RunCompleted || count(key) != 1 {
		t.Fatalf("5 deep: %s %q", top.Status, top.Error)
	}
	top = f.waitEnd(t, f.start(t, chain[6], nil).ID)
	if top.Status != workflow.RunFailed || count(key) != 1 {
		t.Fatalf("6 deep: %s %q", top.Status, top.Error)
	}
	deepest := top
	for deepest.Steps[0].ChildRunID != "" {
		if deepest, err = f.runs.Run(context.Background(), deepest.Steps[0].ChildRunID); err != nil {
			t.Fatal(err)
		}
	}
	if deepest.Depth != 5 || !strings.HasPrefix(deepest.Steps[0].Error, runs.CodeDepthExceeded+": ") {
		t.Fatalf("deepest run: depth %d, %q", deepest.Depth, deepest.Steps[0].Error)
	}
}

func TestChildRunCancel(t *testing.T) {
	f := newChildFixture(t, nil)
	// The grandchild waits for a person; cancelling the top run cancels
	// the child and the grandchild.
	human := f.workflow(t, f.user, step("ask", workflow.AskHumanToolID, map[string]any{"message": "ok?"}))
	mid := f.workflow(t, f.user, childStep("h", human.ID, nil))
	top := f.workflow(t, f.user, childStep("m", mid.ID, nil))
	run := f.start(t, top, nil)
	r := f.waitStatus(t, run.ID, workflow.RunWaiting)
	var childID string
	for childID == "" {
		r = f.waitStatus(t, run.ID, workflow.RunWaiting)
		childID = r.Steps[0].ChildRunID
	}
	c := f.waitStatus(t, childID, workflow.RunWaiting)
	for c.Steps[0].ChildRunID == "" {
		c = f.waitStatus(t, childID, workflow.RunWaiting)
	}
	grand := f.waitStatus(t, c.Steps[0].ChildRunID, workflow.RunWaiting)
	if _, err := f.svc.Cancel(f.ctx(), runs.Scope{WorkflowID: top.ID}, run.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{run.ID, childID, grand.ID} {
		if got := f.waitEnd(t, id); got.Status != workflow.RunCancelled {
			t.Fatalf("run %s: %s", id, got.Status)
		}
	}

	// A child in a running step is cancelled with its parent too.
	slow := f.workflow(t, f.user, step("s", "count", map[string]any{"key": uuid.NewString(), "ms": 120000}))
	top = f.workflow(t, f.user, childStep("m", slow.ID, nil))
	run = f.start(t, top, nil)
	for childID = ""; childID == ""; {
		childID = f.waitStatus(t, run.ID, workflow.RunWaiting).Steps[0].ChildRunID
	}
	f.waitStatus(t, childID, workflow.RunRunning)
	if _, err := f.svc.Cancel(f.ctx(), runs.Scope{WorkflowID: top.ID}, run.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.waitEnd(t, childID); got.Status != workflow.RunCancelled {
		t.Fatalf("child: %s", got.Status)
	}
}

// later is a clock an hour ahead: every lease has expired.
func later() time.Time { return time.Now().Add(time.Hour) }

func TestChildRunEndLost(t *testing.T) {
	// The child's end reaches no one (the process died between the
	// child's last write and its parent's resume): the sweeper reads
	// the child of a parent whose lease expired and resumes it.
	f := newChildFixture(t, nil)
	key := uuid.NewString()
	// The child takes a moment, so that the parent records its wait
	// first (else the parent's own read of it after the wait resumes it).
	child := f.workflow(t, f.user, step("c1", "count", map[string]any{"key": key, "ms": 300}))
	parent := f.workflow(t, f.user, childStep("sub", child.ID, nil))
	f.dropEnds.Store(1)
	run := f.start(t, parent, nil)
	var childID string
	for childID == "" {
		childID = f.waitStatus(t, run.ID, workflow.RunWaiting).Steps[0].ChildRunID
	}
	f.waitStatus(t, childID, workflow.RunCompleted)
	f.inproc.Wait()
	if r, _ := f.runs.Run(context.Background(), run.ID); r.Status != workflow.RunWaiting {
		// The parent read its child after recording the wait and found
		// it ended: nothing was lost.
		t.Skipf("the child ended before the parent recorded its wait (%s)", r.Status)
	}
	sweep := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: f.inproc, Lease: f.lease, Now: later, Ended: f.ended})
	if err := sweep(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
		t.Fatal(err)
	}
	got := f.waitEnd(t, run.ID)
	if got.Status != workflow.RunCompleted || got.Steps[0].Output["n"] != float64(1) || count(key) != 1 {
		t.Fatalf("%s %+v, count %d", got.Status, got.Steps[0], count(key))
	}
}

// crashAfterStart starts the child, then fails as a runner that died
// before recording the wait, once.
type crashAfterStart struct {
	runs.Children
	crashed atomic.Bool
}

func (c *crashAfterStart) StartChild(ctx context.Context, parent workflow.Run, childID string, req runworkflow.Request) (workflow.Run, error) {
	run, err := c.Children.StartChild(ctx, parent, childID, req)
	if err == nil && c.crashed.CompareAndSwap(false, true) {
		return workflow.Run{}, errs.E("test", errs.Unavailable, "", "the runner died")
	}
	return run, err
}

func TestChildRunStartedBeforeACrash(t *testing.T) {
	// The runner dies after starting the child and before recording the
	// wait: the next attempt finds the step running, starts the same
	// child (it exists: nothing new runs) and waits for it.
	f := newChildFixture(t, func(c runs.Children) runs.Children { return &crashAfterStart{Children: c} })
	key := uuid.NewString()
	child := f.workflow(t, f.user, step("c1", "count", map[string]any{"key": key}))
	parent := f.workflow(t, f.user, childStep("sub", child.ID, nil))
	run := f.start(t, parent, nil)
	f.inproc.Wait()
	r, _ := f.runs.Run(context.Background(), run.ID)
	if r.Status != workflow.RunRunning || r.Steps[0].Status != workflow.StepRunning {
		t.Fatalf("after the crash: %s %s", r.Status, statuses(r))
	}
	sweep := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: f.inproc, Lease: f.lease, Now: later, Ended: f.ended})
	if err := sweep(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
		t.Fatal(err)
	}
	got := f.waitEnd(t, run.ID)
	if got.Status != workflow.RunCompleted || got.Attempt != 2 || got.Steps[0].Output["n"] != float64(1) || count(key) != 1 {
		t.Fatalf("%s attempt %d %+v, count %d", got.Status, got.Attempt, got.Steps[0], count(key))
	}
}
