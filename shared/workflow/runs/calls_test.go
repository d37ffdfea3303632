package runs_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/latency"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// countingBlobs is a blob backend (in memory, as the dev server's) that
// counts the calls and the bytes written and read, so that a test can
// say what a run costs the blob store (S3 in AWS) beside DynamoDB.
type countingBlobs struct {
	blob.Backend
	puts, gets            atomic.Int64
	written, read, others atomic.Int64
}

func newCountingBlobs() *countingBlobs { return &countingBlobs{Backend: blob.NewMemory(nil)} }

func (c *countingBlobs) Put(ctx context.Context, key string, body io.Reader, o blob.PutOptions) (blob.Info, error) {
	c.puts.Add(1)
	c.written.Add(o.Size)
	return c.Backend.Put(ctx, key, body, o)
}

func (c *countingBlobs) Get(ctx context.Context, key string) (*blob.Object, error) {
	c.gets.Add(1)
	o, err := c.Backend.Get(ctx, key)
	if err == nil {
		o.Body = countingReader{o.Body, &c.read}
	}
	return o, err
}

func (c *countingBlobs) Stat(ctx context.Context, key string) (blob.Info, error) {
	c.others.Add(1)
	return c.Backend.Stat(ctx, key)
}

func (c *countingBlobs) calls() int64 { return c.puts.Load() + c.gets.Load() + c.others.Load() }

func (c *countingBlobs) reset() {
	c.puts.Store(0)
	c.gets.Store(0)
	c.written.Store(0)
	c.read.Store(0)
	c.others.Store(0)
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	k, err := r.ReadCloser.Read(p)
	r.n.Add(int64(k))
	return k, err
}

// callsFixture is a durable runner over the real store on the embedded
// engine, with a counted blob store: what the runner function has in AWS.
type callsFixture struct {
	db     *storetest.DB
	runs   *store.Runs
	runner *runs.Runner
	// stepwise is runner told of no compute-only tool: every step's
	// start is recorded before its call, as for tools with effects.
	stepwise *runs.Runner
	blobs    *countingBlobs
	chatID   string
	userID   string
}

func newCallsFixture(tb testing.TB) *callsFixture {
	tb.Helper()
	db, _, jobs, reg, chatID, userID := benchDurable(tb)
	blobs := newCountingBlobs()
	rs := store.NewRuns(db.DB, db.Data()).WithBlobs(blobs)
	// The heartbeat's reads and the checkpoints of quick compute-only
	// steps (StartDelay) follow the clock, not the steps: on a loaded
	// machine a run may last past either, so the clock is set far off.
	o := runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: reg, Values: blobs, Lease: time.Hour, CancelCheck: time.Hour, StartDelay: time.Hour}
	stepwise := runs.NewRunner(o)
	o.ComputeOnly = reg.ComputeOnly
	return &callsFixture{db: db, runs: rs, blobs: blobs, chatID: chatID, userID: userID, runner: runs.NewRunner(o), stepwise: stepwise}
}

// exec stores a run of w (with input) and runs it to its end as one
// runner attempt; it returns the run's id.
func (f *callsFixture) exec(tb testing.TB, w workflow.Workflow, input map[string]any) string {
	tb.Helper()
	return f.execWith(tb, f.runner, w, input)
}

// execWith is exec with runner r.
func (f *callsFixture) execWith(tb testing.TB, r *runs.Runner, w workflow.Workflow, input map[string]any) string {
	tb.Helper()
	run := runs.NewRun(w, f.chatID, f.userID, time.Now())
	run.Input = input
	if err := f.runs.CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		tb.Fatal(err)
	}
	if err := r.Run(context.Background(), workflow.RunRef{RunID: run.ID, Attempt: 1}); err != nil {
		tb.Fatal(err)
	}
	return run.ID
}

// completed reads run id, which must have completed.
func (f *callsFixture) completed(tb testing.TB, id string) workflow.Run {
	tb.Helper()
	got, err := f.runs.Run(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	if got.Status != workflow.RunCompleted {
		tb.Fatalf("run %s: %s %q", id, got.Status, got.Error)
	}
	return got
}

// sizedSteps is a workflow of n json_query steps: the first outputs
// {"result": "xxx..."} of exactly size bytes of JSON, each next one reads
// the previous one's result whole through a template and outputs it again.
func sizedSteps(userID string, n, size int) workflow.Workflow {
	w := benchWorkflow(userID)
	w.Steps = []workflow.Step{{ID: "s0", ToolID: "json_query",
		Inputs: map[string]any{"input": 1, "query": `"x" * ` + strconv.Itoa(size-len(`{"result":""}`))}}}
	for i := 1; i < n; i++ {
		w.Steps = append(w.Steps, workflow.Step{ID: fmt.Sprintf("s%d", i), ToolID: "json_query",
			Inputs: map[string]any{"input": fmt.Sprintf("{{s%d.result}}", i-1), "query": "."}})
	}
	return w
}

// Durable run call budget: storing the run with its log is one
// transaction (CreateRun), the runner's attempt reads the run and its
// log's head in one TransactGetItems (LoggedRun), then every checkpoint is
// one transaction (the run's record, its new events and the lease). A
// step whose tool may have effects has its start (running, with its
// resolved input) recorded before its tool runs, and that write also
// records the result of the step before: one checkpoint a step, and the
// last step's result is recorded with the run's end; the first step's
// start is a checkpoint of its own (the first one marks the run running).
// A step whose tool only computes (json_query here) need not be recorded
// before it runs, nor its result before the next such step runs (a crash
// loses only what the next attempt computes again): a run of them costs
// one checkpoint, its end, when it takes less than runs.StartDelay (the
// fixture's is an hour, so that a slow machine counts the same), else one
// a StartDelay, and one more for each runs.MaxRiders+1 steps. So a run of
// n steps costs 3 + n calls (3 + 2n before a transition was one write),
// or 2 + computeOnlyCheckpoints(n) when they only compute, whatever the
// size of its values up to runs.SpillBytes, which stay in the record and
// make no blob call. (BenchmarkDurableRunStep's ddbcalls/step is 0.4 for
// its ten steps: these 4 calls over ten.)
const (
	durableRunFixedCalls = 2 // CreateRun, LoggedRun
	durableStepCalls     = 1 // the step's end, with the next step's start or the run's end
	firstStartCalls      = 1 // the first step's start, when its tool may have effects
)

// computeOnlyCheckpoints is the checkpoints of a quick run of n
// compute-only steps: the first MaxRiders ride the next write, which is
// the start of the next step (recorded before its call), and so on, then
// the run's end.
func computeOnlyCheckpoints(n int) int64 { return int64(1 + n/(runs.MaxRiders+1)) }

// TestDurableRunDynamoDBCalls holds a durable run to its DynamoDB call
// budget, per step, for values up to the spill threshold, so that a
// change adding a call per step (or a blob call for a small value) is
// caught: the calls are counted with the store's call-counting middleware,
// as the benchmarks count them.
func TestDurableRunDynamoDBCalls(t *testing.T) {
	f := newCallsFixture(t)
	for _, tc := range []struct {
		steps, size int
	}{
		{1, 100}, {3, 100}, {5, 100}, {runs.MaxRiders, 100}, {runs.MaxRiders + 1, 100}, {20, 100},
		// The largest values kept in the record: each step's output and
		// the next one's resolved input (11 bytes longer) both under
		// runs.SpillBytes.
		{1, runs.SpillBytes - 16}, {3, runs.SpillBytes - 16},
	} {
		t.Run(fmt.Sprintf("%d_steps_%d_B", tc.steps, tc.size), func(t *testing.T) {
			w := sizedSteps(f.userID, tc.steps, tc.size)
			for _, r := range []struct {
				name   string
				runner *runs.Runner
				want   int64
			}{
				{"compute-only", f.runner, durableRunFixedCalls + computeOnlyCheckpoints(tc.steps)},
				{"stepwise", f.stepwise, int64(durableRunFixedCalls + firstStartCalls + durableStepCalls*tc.steps)},
			} {
				f.db.Counter.Reset()
				f.blobs.reset()
				id := f.execWith(t, r.runner, w, nil)
				n := f.db.Counter.Count()
				got := f.completed(t, id)
				if n != r.want {
					t.Errorf("%s: %d DynamoDB calls, want %d", r.name, n, r.want)
				}
				if n := f.blobs.calls(); n != 0 {
					t.Errorf("%s: %d blob calls for values of %d bytes, want none", r.name, n, tc.size)
				}
				if _, spilled := workflow.SpilledKey(got.Steps[tc.steps-1].Output); spilled {
					t.Errorf("%s: a %d-byte output was spilled", r.name, tc.size)
				}
			}
		})
	}
	// One byte over the threshold goes to the blob store, with no more
	// DynamoDB calls: the cut form rides the same checkpoints.
	t.Run("1_step_over_the_threshold", func(t *testing.T) {
		f.db.Counter.Reset()
		f.blobs.reset()
		id := f.exec(t, sizedSteps(f.userID, 1, runs.SpillBytes+1), nil)
		n, want := f.db.Counter.Count(), int64(durableRunFixedCalls)+computeOnlyCheckpoints(1)
		got := f.completed(t, id)
		if n != want {
			t.Errorf("%d DynamoDB calls, want %d", n, want)
		}
		if _, spilled := workflow.SpilledKey(got.Steps[0].Output); !spilled || f.blobs.puts.Load() != 1 {
			t.Errorf("output %v after %d blob puts, want spilled by one", got.Steps[0].Output, f.blobs.puts.Load())
		}
	})
}

// TestManyStepsAtTheValueLimit: the most steps a workflow has, each with
// values just under runs.SpillBytes, complete, recorded stepwise and as
// compute-only steps written together: the record fits DynamoDB's 400 KB
// (values are spilled once together they pass truncate.MaxItem, each
// counted at its cut form's real size: a preview of
// workflow.SpilledPreview, where 200 bytes were once assumed and the
// fiftieth step's checkpoint was refused), and so does every checkpoint's
// transaction (the embedded engine refuses an item over 400 KB, or a
// transaction over 4 MB or 100 items, as DynamoDB does).
func TestManyStepsAtTheValueLimit(t *testing.T) {
	f := newCallsFixture(t)
	for _, r := range []*runs.Runner{f.runner, f.stepwise} {
		id := f.execWith(t, r, sizedSteps(f.userID, workflow.MaxSteps, runs.SpillBytes-16), nil)
		got := f.completed(t, id)
		for _, s := range got.Steps {
			if s.Status != workflow.StepCompleted || s.Output == nil {
				t.Fatalf("step %s: %s %v", s.ID, s.Status, s.Error)
			}
		}
	}
}

// forEachWorkflow is one forEach step of json_query over the run input's
// array items, each element's output small.
func forEachWorkflow(userID string) workflow.Workflow {
	w := benchWorkflow(userID)
	w.Steps = []workflow.Step{{ID: "each", ToolID: "json_query", ForEach: "{{input.items}}",
		Inputs: map[string]any{"input": "{{item}}", "query": ". + 1"}}}
	return w
}

func items(n int) map[string]any {
	a := make([]any, n)
	for i := range a {
		a[i] = float64(i)
	}
	return map[string]any{"items": a}
}

// forEachElementCalls is what one element of a forEach step adds: its
// output's own write (SaveElement), apart from the run's record. A
// forEach step's start is a checkpoint of its own even when first
// (forEachStartCalls): its elements are recorded as they finish, so the
// run shows it running first.
const (
	forEachElementCalls = 1
	forEachStartCalls   = 1
)

// TestForEachDynamoDBCalls: a forEach step costs what a step costs, its
// start, and one write per element.
func TestForEachDynamoDBCalls(t *testing.T) {
	f := newCallsFixture(t)
	for _, n := range []int{1, 10} {
		f.db.Counter.Reset()
		id := f.exec(t, forEachWorkflow(f.userID), items(n))
		want := int64(durableRunFixedCalls + forEachStartCalls + durableStepCalls + forEachElementCalls*n)
		c := f.db.Counter.Count()
		got := f.completed(t, id)
		if c != want {
			t.Errorf("forEach over %d: %d DynamoDB calls, want %d", n, c, want)
		}
		if rs, _ := got.Steps[0].Output["results"].([]any); len(rs) != n {
			t.Errorf("forEach over %d: output %v", n, got.Steps[0].Output)
		}
	}
}

// BenchmarkForEachElement runs a forEach step of json_query over 100
// elements as a durable run and reports the time and DynamoDB calls per
// element (the run's own calls spread over them); BenchmarkEngineBareTool
// is its floor.
func BenchmarkForEachElement(b *testing.B) {
	const n = 100
	f := newCallsFixture(b)
	w, in := forEachWorkflow(f.userID), items(n)
	f.db.Counter.Reset()
	b.ReportAllocs()
	for b.Loop() {
		f.exec(b, w, in)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/element")
	b.ReportMetric(float64(f.db.Counter.Count())/float64(b.N*n), "ddbcalls/element")
}

// BenchmarkStepOutput runs, as a durable run, a step whose output is 100
// bytes of JSON (the floor) or 1 MB, and a second step that reads it whole
// through a template and outputs its length. The 1 MB output goes to the
// blob store, and so does the second step's resolved input (the same
// megabyte, recorded as the step's input); the second step gets the value
// from the runner's memory, so nothing is read back within one attempt
// (a later attempt, after a pause or a takeover, reads it). It reports
// DynamoDB calls, blob calls and blob bytes written and read per run.
func BenchmarkStepOutput(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"100_B", 100}, {"1_MB", 1_000_000}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newCallsFixture(b)
			w := sizedSteps(f.userID, 2, bc.size)
			w.Steps[1].Inputs["query"] = "length"
			f.db.Counter.Reset()
			f.blobs.reset()
			var each []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				f.exec(b, w, nil)
				each = append(each, time.Since(t0))
			}
			n := float64(b.N)
			b.ReportMetric(float64(latency.Percentile(each, 0.5).Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(f.db.Counter.Count())/n, "ddbcalls/op")
			b.ReportMetric(float64(f.blobs.calls())/n, "blobcalls/op")
			b.ReportMetric(float64(f.blobs.written.Load())/n, "blob-written-B/op")
			b.ReportMetric(float64(f.blobs.read.Load())/n, "blob-read-B/op")
		})
	}
}

// checkpointLog is the real store, noting which steps each checkpoint
// wrote.
type checkpointLog struct {
	*store.Runs
	mu      sync.Mutex
	written [][]int // nil: every step
}

func (c *checkpointLog) SaveCheckpoint(ctx context.Context, cp workflow.Checkpoint) error {
	c.mu.Lock()
	if cp.Partial {
		c.written = append(c.written, append([]int{}, cp.Changed...))
	} else {
		c.written = append(c.written, nil)
	}
	c.mu.Unlock()
	return c.Runs.SaveCheckpoint(ctx, cp)
}

// TestCheckpointsWriteTheStepsThatChanged: an attempt's first checkpoint
// writes every step, each later one only the steps whose record changed
// (the step that ended and the one that starts), so what a checkpoint
// sends does not grow with the run; the run reads back whole.
func TestCheckpointsWriteTheStepsThatChanged(t *testing.T) {
	t.Parallel()
	db, _, jobs, reg, chatID, userID := benchDurable(t)
	rs := &checkpointLog{Runs: store.NewRuns(db.DB, db.Data())}
	runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: reg, Lease: time.Hour, CancelCheck: time.Hour})
	w := sizedSteps(userID, 5, 1000)
	run := runs.NewRun(w, chatID, userID, time.Now())
	ctx := context.Background()
	if err := rs.CreateRun(ctx, run, job.Lease{Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := runner.Run(ctx, workflow.RunRef{RunID: run.ID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	want := [][]int{nil, {0, 1}, {1, 2}, {2, 3}, {3, 4}, {4}}
	if fmt.Sprint(rs.written) != fmt.Sprint(want) {
		t.Errorf("steps written per checkpoint %v, want %v (nil: all)", rs.written, want)
	}
	got, err := rs.Run(ctx, run.ID)
	if err != nil || got.Status != workflow.RunCompleted || len(got.Steps) != 5 {
		t.Fatalf("run %+v, %v", got, err)
	}
	for i, s := range got.Steps {
		if s.Status != workflow.StepCompleted || len(s.Output) == 0 || s.StartedAt == nil || s.CompletedAt == nil {
			t.Errorf("step %d read back as %+v", i, s)
		}
	}
}
