package runs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// benchDurable is the storage and a chat of the durable run benchmarks.
func benchDurable(b testing.TB) (*storetest.DB, *store.Runs, *store.Jobs, *tools.Registry, string, string) {
	db := storetest.New(b)
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		b.Fatal(err)
	}
	chatID, userID := uuid.NewString(), uuid.NewString()
	now := time.Now().UTC()
	if err := store.NewChats(db.DB, db.Data()).CreateChat(context.Background(), chat.Chat{ID: chatID, UserID: userID, Title: "b", CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	return db, store.NewRuns(db.DB, db.Data()), store.NewJobs(db.DB, db.Data()), reg, chatID, userID
}

func benchWorkflow(userID string) workflow.Workflow { return benchWorkflowOf(userID, benchSteps) }

// benchWorkflowOf is a workflow of n json_query steps, each querying the
// previous step's result through a template.
func benchWorkflowOf(userID string, n int) workflow.Workflow {
	steps := []workflow.Step{{ID: "s0", ToolID: "json_query", Inputs: benchQueryInput()}}
	for i := 1; i < n; i++ {
		steps = append(steps, workflow.Step{ID: fmt.Sprintf("s%d", i), ToolID: "json_query",
			Inputs: map[string]any{"input": map[string]any{"a": fmt.Sprintf("{{s%d.result}}", i-1)}, "query": ".a"}})
	}
	return workflow.Workflow{ID: uuid.NewString(), UserID: userID, Name: "bench", Steps: steps, Version: 1}
}

// BenchmarkDurableRunStep runs a workflow of ten json_query steps, each
// querying the previous step's result through a template, as a durable
// run (created with its log, then one Runner attempt, every step's start
// and end a checkpoint transaction with its events and the lease) and
// reports the time and DynamoDB calls per step; BenchmarkEngineBareTool is
// its floor.
func BenchmarkDurableRunStep(b *testing.B) {
	db, runStore, jobs, reg, chatID, userID := benchDurable(b)
	w := benchWorkflow(userID)
	r := runs.NewRunner(runs.RunnerOptions{Store: runStore, Jobs: jobs, Tools: reg, ComputeOnly: reg.ComputeOnly})
	db.Counter.Reset()
	b.ReportAllocs()
	for b.Loop() {
		run := runs.NewRun(w, chatID, userID, time.Now())
		if err := runStore.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
			b.Fatal(err)
		}
		if err := r.Run(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchSteps), "ns/step")
	b.ReportMetric(float64(db.Counter.Count())/float64(b.N*benchSteps), "ddbcalls/step")
}

// BenchmarkAcceptedToRunStarted measures, through the in-process Invoker
// the dev server uses, the time from the run being stored and handed over
// (what precedes the 202) to its run_started event being readable in its
// log, as a follower would see it.
func BenchmarkAcceptedToRunStarted(b *testing.B) {
	_, runStore, jobs, reg, chatID, userID := benchDurable(b)
	w := benchWorkflow(userID)
	w.Steps = w.Steps[:1]
	inproc := &runs.InProcess{Runner: runs.NewRunner(runs.RunnerOptions{Store: runStore, Jobs: jobs, Tools: reg, ComputeOnly: reg.ComputeOnly})}
	var toStarted, read time.Duration
	for b.Loop() {
		run := runs.NewRun(w, chatID, userID, time.Now())
		if err := runStore.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
			b.Fatal(err)
		}
		ref := job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}
		// The floor: one read of the empty log, what a follower's poll costs.
		t0 := time.Now()
		if _, _, err := jobs.Read(context.Background(), ref, 0); err != nil {
			b.Fatal(err)
		}
		read += time.Since(t0)
		t0 = time.Now()
		_ = inproc.Invoke(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 1})
		for {
			recs, _, err := jobs.Read(context.Background(), ref, 0)
			if err != nil {
				b.Fatal(err)
			}
			if len(recs) > 0 {
				break
			}
		}
		toStarted += time.Since(t0)
		inproc.Wait()
	}
	b.ReportMetric(float64(toStarted.Nanoseconds())/float64(b.N), "ns-to-run_started")
	b.ReportMetric(float64(read.Nanoseconds())/float64(b.N), "ns-floor-read")
}

// BenchmarkSweepWithActiveRuns is one sweep (16 Queries of the sparse
// index of active leases) with N durable runs active and none expired:
// its DynamoDB calls must not grow with N (it reads only expired active
// heads, never the runs).
func BenchmarkSweepWithActiveRuns(b *testing.B) {
	for _, n := range []int{0, 100} {
		b.Run(fmt.Sprintf("active=%d", n), func(b *testing.B) {
			db, runStore, jobs, _, chatID, userID := benchDurable(b)
			w := benchWorkflow(userID)
			for range n {
				if err := runStore.CreateRun(context.Background(), runs.NewRun(w, chatID, userID, time.Now()), job.Lease{Until: time.Now().Add(time.Hour)}); err != nil {
					b.Fatal(err)
				}
			}
			sw := job.NewSweeper(jobs, map[string]job.Handler{
				workflow.RunKind: runs.ResumeExpired(runs.ResumeOptions{Store: runStore, Invoker: &runs.InProcess{}}),
			}, nil, nil)
			db.Counter.Reset()
			for b.Loop() {
				if k, err := sw.Sweep(context.Background()); err != nil || k != 0 {
					b.Fatalf("sweep: %d %v", k, err)
				}
			}
			b.ReportMetric(float64(db.Counter.Count())/float64(b.N), "ddbcalls/sweep")
		})
	}
}
