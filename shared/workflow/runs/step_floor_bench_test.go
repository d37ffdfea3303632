package runs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// BenchmarkDurableStepAgainstJournaledWrite sets a durable step's
// overhead against its floor, in the same run, on an embedded engine that
// journals every write to disk (DATA_FILE's engine: each answered write
// synced first). Each iteration runs the ten json_query steps of
// BenchmarkDurableRunStep as a durable run (its creation, one Runner
// attempt), the same ten tool calls bare, and ten PutItems of a 1 KB item
// (one journaled write each, the floor of a durable step). Reported:
// ns/step (the durable run's time per step), ns-tool (a bare call),
// ns-floor-write (one journaled PutItem), overhead-x-floor ((ns/step -
// ns-tool) / ns-floor-write: what a step costs beyond its tool, in
// journaled writes), overhead-x-floor-p50 (the same ratio taken in each
// iteration, its median: the steadier figure on a shared machine, where
// a stall of the disk or the scheduler weighs on one part of one
// iteration) and ddbcalls/step. Two runners: compute_only is told that
// json_query only computes (as the runner function is), so the quick
// steps are written together with the run's end; recorded_first is told
// of no such tool, so every step's start is recorded before its call, as
// for a tool with effects: one checkpoint a step.
func BenchmarkDurableStepAgainstJournaledWrite(b *testing.B) {
	b.Run("compute_only", func(b *testing.B) { benchStepAgainstWrite(b, true) })
	b.Run("recorded_first", func(b *testing.B) { benchStepAgainstWrite(b, false) })
}

func benchStepAgainstWrite(b *testing.B, computeOnly bool) {
	eng, err := dynamolocal.StartWith(dynamolocal.Options{DataFile: filepath.Join(b.TempDir(), "data.json")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Close() })
	ctx := context.Background()
	counter := &store.CallCounter{}
	db, err := store.Open(ctx, store.Options{Region: "us-east-1", Endpoint: eng.URL, Counter: counter})
	if err != nil {
		b.Fatal(err)
	}
	names := map[string]string{}
	for _, tb := range store.Tables() {
		names[tb.EnvVar] = tb.LocalName
	}
	if err := store.CreateTables(ctx, db.Client(), names); err != nil {
		b.Fatal(err)
	}
	data := names[store.DataTable.EnvVar]
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		b.Fatal(err)
	}
	chatID, userID := uuid.NewString(), uuid.NewString()
	now := time.Now().UTC()
	if err := store.NewChats(db, data).CreateChat(ctx, chat.Chat{ID: chatID, UserID: userID, Title: "b", CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	runStore, jobs := store.NewRuns(db, data), store.NewJobs(db, data)
	w := benchWorkflow(userID)
	o := runs.RunnerOptions{Store: runStore, Jobs: jobs, Tools: reg}
	if computeOnly {
		o.ComputeOnly = reg.ComputeOnly
	}
	r := runs.NewRunner(o)
	in := benchQueryInput()
	type floorItem struct {
		PK, SK string
		Pad    string `dynamo:"pad"`
	}
	// Printable text: 900 NUL bytes (as this floor once was) travel as
	// 5.4 KB of \u0000 escapes and made the floor 1.6x dearer.
	pad := strings.Repeat("x", 900)
	var runNS, toolNS, writeNS time.Duration
	var calls int64
	var ratios []float64
	b.ReportAllocs()
	for b.Loop() {
		run := runs.NewRun(w, chatID, userID, time.Now())
		counter.Reset()
		t0 := time.Now()
		if err := runStore.CreateRun(ctx, run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
			b.Fatal(err)
		}
		if err := r.Run(ctx, workflow.RunRef{RunID: run.ID, Attempt: 1}); err != nil {
			b.Fatal(err)
		}
		runOne := time.Since(t0)
		runNS += runOne
		calls += counter.Count()
		t0 = time.Now()
		for range benchSteps {
			if _, err := reg.Run(ctx, "json_query", in); err != nil {
				b.Fatal(err)
			}
		}
		toolOne := time.Since(t0)
		toolNS += toolOne
		t0 = time.Now()
		for i := range benchSteps {
			it := floorItem{PK: "FLOOR#" + run.ID, SK: fmt.Sprintf("W#%d", i), Pad: pad}
			if err := db.Table(data).Put(it).Run(ctx); err != nil {
				b.Fatal(err)
			}
		}
		writeOne := time.Since(t0)
		writeNS += writeOne
		ratios = append(ratios, float64(runOne-toolOne)/float64(writeOne))
	}
	steps := float64(b.N * benchSteps)
	perStep, tool, floor := float64(runNS)/steps, float64(toolNS)/steps, float64(writeNS)/steps
	b.ReportMetric(perStep, "ns/step")
	b.ReportMetric(tool, "ns-tool")
	b.ReportMetric(floor, "ns-floor-write")
	b.ReportMetric((perStep-tool)/floor, "overhead-x-floor")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "overhead-x-floor-p50")
	b.ReportMetric(float64(calls)/steps, "ddbcalls/step")
}
