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
//
// recorded_first_added_step sets apart what a step adds from what a run
// costs whatever its length (its creation, the runner's read, its first
// start and its end): each iteration runs the recorded_first runner over
// ten steps and over twenty, and added-step-x-floor is the difference
// beyond the ten more tool calls, per added step, in journaled writes
// (added-step-x-floor-p50 the same taken in each iteration, its median;
// ddbcalls/added-step the difference in calls per added step).
func BenchmarkDurableStepAgainstJournaledWrite(b *testing.B) {
	b.Run("compute_only", func(b *testing.B) { benchStepAgainstWrite(b, true) })
	b.Run("recorded_first", func(b *testing.B) { benchStepAgainstWrite(b, false) })
	b.Run("recorded_first_added_step", benchAddedStepAgainstWrite)
}

// floorBench is the journaled engine, the store and the runner the
// durable-step benchmarks measure, and the floor they are set against.
type floorBench struct {
	runStore *store.Runs
	runner   *runs.Runner
	reg      *tools.Registry
	counter  *store.CallCounter
	put      func(ctx context.Context, pk, sk string) error
	chatID   string
	userID   string
}

func newFloorBench(b *testing.B, computeOnly bool) *floorBench {
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
	o := runs.RunnerOptions{Store: runStore, Jobs: jobs, Tools: reg}
	if computeOnly {
		o.ComputeOnly = reg.ComputeOnly
	}
	type floorItem struct {
		PK, SK string
		Pad    string `dynamo:"pad"`
	}
	// Printable text: 900 NUL bytes (as this floor once was) travel as
	// 5.4 KB of \u0000 escapes and made the floor 1.6x dearer.
	pad := strings.Repeat("x", 900)
	put := func(ctx context.Context, pk, sk string) error {
		return db.Table(data).Put(floorItem{PK: pk, SK: sk, Pad: pad}).Run(ctx)
	}
	return &floorBench{runStore: runStore, runner: runs.NewRunner(o), reg: reg, counter: counter, put: put, chatID: chatID, userID: userID}
}

// run creates a run of w and runs it to its end: its time and calls.
func (f *floorBench) run(b *testing.B, w workflow.Workflow) (time.Duration, int64) {
	ctx := context.Background()
	run := runs.NewRun(w, f.chatID, f.userID, time.Now())
	f.counter.Reset()
	t0 := time.Now()
	if err := f.runStore.CreateRun(ctx, run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		b.Fatal(err)
	}
	if err := f.runner.Run(ctx, workflow.RunRef{RunID: run.ID, Attempt: 1}); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0), f.counter.Count()
}

// tools makes n bare json_query calls: their time.
func (f *floorBench) tools(b *testing.B, n int) time.Duration {
	in := benchQueryInput()
	t0 := time.Now()
	for range n {
		if _, err := f.reg.Run(context.Background(), "json_query", in); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0)
}

// floor makes n journaled PutItems of a 1 KB item: their time.
func (f *floorBench) floor(b *testing.B, n int) time.Duration {
	pk := "FLOOR#" + uuid.NewString()
	t0 := time.Now()
	for i := range n {
		if err := f.put(context.Background(), pk, fmt.Sprintf("W#%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0)
}

func benchAddedStepAgainstWrite(b *testing.B) {
	f := newFloorBench(b, false)
	short, long := benchWorkflowOf(f.userID, benchSteps), benchWorkflowOf(f.userID, 2*benchSteps)
	var addedNS, writeNS time.Duration
	var addedCalls int64
	var ratios []float64
	b.ReportAllocs()
	for b.Loop() {
		shortNS, shortCalls := f.run(b, short)
		longNS, longCalls := f.run(b, long)
		added := longNS - shortNS - f.tools(b, benchSteps)
		write := f.floor(b, benchSteps)
		addedNS += added
		writeNS += write
		addedCalls += longCalls - shortCalls
		ratios = append(ratios, float64(added)/float64(write))
	}
	steps := float64(b.N * benchSteps)
	b.ReportMetric(float64(addedNS)/float64(writeNS), "added-step-x-floor")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "added-step-x-floor-p50")
	b.ReportMetric(float64(writeNS)/steps, "ns-floor-write")
	b.ReportMetric(float64(addedCalls)/steps, "ddbcalls/added-step")
}

func benchStepAgainstWrite(b *testing.B, computeOnly bool) {
	f := newFloorBench(b, computeOnly)
	w := benchWorkflow(f.userID)
	var runNS, toolNS, writeNS time.Duration
	var calls int64
	var ratios []float64
	b.ReportAllocs()
	for b.Loop() {
		runOne, n := f.run(b, w)
		toolOne := f.tools(b, benchSteps)
		writeOne := f.floor(b, benchSteps)
		runNS += runOne
		calls += n
		toolNS += toolOne
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
