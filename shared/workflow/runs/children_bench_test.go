package runs_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// BenchmarkChildRunOverhead measures a child run's overhead over running
// its steps inline: the floor (inline) is a durable run of three
// json_query steps, started through the run service and run to its end
// by the in-process runner (the dev server's), then read; child is a run of one run_workflow step
// whose child workflow has the same three steps: the child's start
// through the same service (its checks, its creation with its log), the
// parent's two checkpoints (the step's start, its wait), the child's
// run, and the parent's resume (one checkpoint) and second runner
// attempt that records its end. `ddbcalls/op` counts each one's DynamoDB
// calls; `x floor` of child is the figure.
func BenchmarkChildRunOverhead(b *testing.B) {
	db, runStore, jobs, reg, _, userID := benchDurable(b)
	workflows := store.NewWorkflows(db.DB, db.Data())
	inproc := &runs.InProcess{}
	var svc *runs.Service
	ended := func(ctx context.Context, run workflow.Run) error { return svc.RunEnded(ctx, run) }
	svc = runs.NewService(runs.Options{Store: runStore, Jobs: jobs, Workflows: workflows, Invoker: inproc, Ended: ended})
	// Told which tools only compute, as the dev server's runner is: the
	// three json_query steps ride their run's end.
	inproc.Runner = runs.NewRunner(runs.RunnerOptions{Store: runStore, Jobs: jobs, Tools: reg, Ended: ended, Children: svc, ComputeOnly: reg.ComputeOnly})
	now := time.Now().UTC()
	save := func(steps []workflow.Step) workflow.Workflow {
		w := workflow.Workflow{ID: uuid.NewString(), UserID: userID, Name: "bench", Steps: steps, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := workflows.CreateWorkflow(context.Background(), w); err != nil {
			b.Fatal(err)
		}
		return w
	}
	inline := save(benchWorkflow(userID).Steps[:3])
	parent := save([]workflow.Step{{ID: "sub", ToolID: workflow.RunWorkflowToolID, Inputs: map[string]any{"workflowId": inline.ID}}})
	ctx := auth.ActingFor(context.Background(), userID)
	for _, c := range []struct {
		name string
		w    workflow.Workflow
	}{{"inline", inline}, {"child", parent}} {
		b.Run(c.name, func(b *testing.B) {
			db.Counter.Reset()
			for b.Loop() {
				run, err := svc.Start(ctx, runs.StartRequest{WorkflowID: c.w.ID})
				if err != nil {
					b.Fatal(err)
				}
				inproc.Wait() // the runner's attempts, the parent's second included
				got, err := runStore.Run(ctx, run.ID)
				if err != nil || got.Status != workflow.RunCompleted {
					b.Fatalf("run %s: %v", got.Status, err)
				}
			}
			b.ReportMetric(float64(db.Counter.Count())/float64(b.N), "ddbcalls/op")
		})
	}
}
