package runs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/tracing/otlp"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// invokeFunc is a workflow.Invoker.
type invokeFunc func(ctx context.Context, ref workflow.RunRef) error

func (f invokeFunc) Invoke(ctx context.Context, ref workflow.RunRef) error { return f(ctx, ref) }

func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestResumedAttemptJoinsTheRunsTrace: a run started in a request, whose
// first attempt stalls before its first step's start is recorded (the
// run still pending: nothing running that a takeover must fail as
// interrupted) while the sweeper takes it over and a second Runner.Run,
// in a fresh context, runs the steps to the end: both
// attempts, the resume and every step land in the run's trace (its id the
// run id's bytes), under the run's first span. Not parallel: it installs
// the process's tracer provider.
func TestResumedAttemptJoinsTheRunsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := otlp.NewProvider(rec)
	t.Cleanup(tracing.Install(tp, tp.ForceFlush))

	f := newRunsFixture(t)
	chatID := f.createChat(t, 0)
	steps, _ := countSteps(3, 0)
	w := f.createWorkflow(t, 0, steps...)
	reg := newRegistry(t)

	// The second attempt's runner, reached by the sweeper's invoke.
	second := runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Tools: reg, Lease: f.lease})
	// The sweeper, an hour ahead, sees the first attempt's lease expired.
	resume := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Lease: f.lease,
		Invoker: invokeFunc(func(ctx context.Context, ref workflow.RunRef) error {
			// The runner is another process: nothing of ctx reaches it.
			return second.Run(context.Background(), ref)
		}),
		Now: func() time.Time { return time.Now().Add(time.Hour) }})
	var (
		runID   string
		resumed sync.Once
		sweep   trace.Span
	)
	// The first attempt stalls before its first checkpoint (step 1's
	// start): meanwhile the sweeper takes the run over and the second
	// attempt runs the three steps; the first one's checkpoint is then
	// refused (its attempt is not the run's) and it runs no tool.
	first := runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Tools: reg, Lease: f.lease, BeforeStep: func(i int) {
		if i != 0 {
			return
		}
		resumed.Do(func() {
			ctx, span := tracing.Start(context.Background(), "job.sweep")
			sweep = span
			defer span.End()
			if err := resume(ctx, job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: runID, ID: runID}}); err != nil {
				t.Error(err)
			}
		})
	}})
	var refs []workflow.RunRef
	svc := runs.NewService(runs.Options{Store: f.runs, Jobs: f.jobs, Workflows: f.workflows, Lease: f.lease,
		Invoker: invokeFunc(func(_ context.Context, ref workflow.RunRef) error { refs = append(refs, ref); return nil })})

	reqCtx, req := tracing.Start(context.Background(), "POST /api/chats/{chatId}/workflow-runs")
	run, err := svc.Start(auth.ActingFor(reqCtx, f.users[0].id), runs.StartRequest{ChatID: chatID, WorkflowID: w.ID})
	req.End()
	if err != nil {
		t.Fatal(err)
	}
	runID = run.ID
	if err := first.Run(context.Background(), refs[0]); err != nil {
		t.Fatal(err)
	}
	done := f.waitRun(t, chatID, run.ID)
	if done.Status != workflow.RunCompleted || done.Attempt != 2 {
		t.Fatalf("run %+v: want completed by the second attempt", done)
	}

	runTrace, runSpan := tracing.RunTraceID(run.ID), tracing.RunSpanID(run.ID)
	if runTrace.String() != strings.ReplaceAll(run.ID, "-", "") {
		t.Fatalf("trace id %s is not run id %s's bytes", runTrace, run.ID)
	}
	var (
		roots, attempts, resumes []sdktrace.ReadOnlySpan
		stepsOf                  = map[trace.SpanID][]int64{}
		toolsOf                  = map[trace.SpanID]int{}
		stepIDs                  = map[trace.SpanID]trace.SpanID{} // step -> its attempt
	)
	spans := rec.Ended()
	for _, s := range spans {
		if s.SpanContext().TraceID() != runTrace {
			continue
		}
		switch s.Name() {
		case "workflow.run":
			roots = append(roots, s)
		case "workflow.run.attempt":
			attempts = append(attempts, s)
		case "workflow.run.resume":
			resumes = append(resumes, s)
		case "workflow.step count":
			i, _ := spanAttr(s, tracing.StepIndex)
			stepsOf[s.Parent().SpanID()] = append(stepsOf[s.Parent().SpanID()], i.AsInt64())
			stepIDs[s.SpanContext().SpanID()] = s.Parent().SpanID()
		case "run_tool count":
			toolsOf[s.Parent().SpanID()]++
		}
	}
	if len(roots) != 1 || roots[0].SpanContext().SpanID() != runSpan || roots[0].Parent().IsValid() {
		t.Fatalf("run spans %v: want one root with the derived span id %s", roots, runSpan)
	}
	if len(attempts) != 2 || len(resumes) != 1 {
		t.Fatalf("%d attempts, %d resumes in the run's trace; want 2 and 1", len(attempts), len(resumes))
	}
	for _, s := range append(attempts, resumes...) {
		if s.Parent().SpanID() != runSpan {
			t.Errorf("%s: parent %s, want the run's span %s", s.Name(), s.Parent().SpanID(), runSpan)
		}
	}
	if sweep == nil {
		t.Fatal("the first attempt never reached its first step")
	}
	if l := resumes[0].Links(); len(l) != 1 || l[0].SpanContext.SpanID() != sweep.SpanContext().SpanID() {
		t.Errorf("resume links %v, want the sweep's span", l)
	}
	want := map[int64][]int64{1: {0}, 2: {0, 1, 2}} // attempt -> the steps it started
	for _, a := range attempts {
		n, _ := spanAttr(a, tracing.RunAttempt)
		got := stepsOf[a.SpanContext().SpanID()]
		if fmt.Sprint(got) != fmt.Sprint(want[n.AsInt64()]) {
			t.Errorf("attempt %d started steps %v, want %v", n.AsInt64(), got, want[n.AsInt64()])
		}
	}
	ran := 0
	for step := range stepIDs {
		ran += toolsOf[step]
	}
	if ran != 3 {
		t.Fatalf("%d tool spans under the steps, want 3 (each step's tool once)", ran)
	}
}
