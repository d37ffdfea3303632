package local_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/latency"
)

// retryDefinition is a one-step workflow of the test tool test_count
// (the dev server's TOOLS_TEST_HOOKS), failing its first fails calls of
// the run's key, with a retry of up to 4 attempts and no backoff.
func retryDefinition(fails int) string {
	return fmt.Sprintf(`{"inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
  "steps": [{"id": "s", "toolId": "test_count", "inputs": {"key": "{{input.key}}", "failTimes": %d},
    "retry": {"maxAttempts": 4, "backoffSeconds": 0, "backoffRate": 1}}]}`, fails)
}

// BenchmarkRetryAttempt measures what a step's retry attempt costs in
// DynamoDB calls and time, in process on the dev server's stack: a durable
// run of one step with a retry of 4 attempts, started by POST
// .../workflow-runs (Prefer: respond-async) and driven to its end as AWS
// drives it. A failed attempt with attempts left records the run waiting
// (step_retrying) with its lease ending at retryAt; the sweeper finds the
// ended lease, records the run running and invokes the runner, which reads
// the run and runs the step again. Here the backoff is 0, so each sweep
// (Sweeper.Sweep, as SweeperFunction's schedule runs it) finds the run due
// at once. no_failure: the step succeeds at its first attempt (the floor,
// no sweep); three_failures: it fails three times and succeeds at its
// fourth. `ddbcalls/op` are all the calls of the run, the sweeps
// included; `ddbcalls/attempt` is three_failures' calls beyond
// no_failure's per retried attempt, and `run-ddbcalls/attempt` the same
// without each sweep's fixed Queries (an idle sweep's calls, measured in
// the same run as `idle-sweep-ddbcalls`: the sweeper makes them every
// minute whatever waits). Reading the run's status between sweeps is not
// counted.
func BenchmarkRetryAttempt(b *testing.B) {
	f := newFixture(b, "TOOLS_TEST_HOOKS", "true")
	ctx := context.Background()
	workflowOf := func(fails int) string {
		var w struct{ ID string }
		data(b, f.serve(b, "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"retry %d"}`, f.userID, fails)), 201, &w)
		data(b, f.serve(b, "PATCH", "/api/workflows/"+w.ID, retryDefinition(fails)), 200, &struct{}{})
		return w.ID
	}
	f.counter.Reset()
	if _, err := f.stack.Sweeper.Sweep(ctx); err != nil {
		b.Fatal(err)
	}
	idleSweep := f.counter.Count()

	// run runs wfID to its end and returns its DynamoDB calls and the
	// sweeps it took.
	key := 0
	run := func(b *testing.B, wfID string, wantAttempts int) (int64, int) {
		key++
		f.counter.Reset()
		var started struct{ ID string }
		data(b, f.serve(b, "POST", "/api/chats/"+f.chatID+"/workflow-runs", fmt.Sprintf(`{"workflowId":%q,"input":{"key":"k%d"}}`, wfID, key),
			"Prefer", "respond-async"), 202, &started)
		f.stack.Runner.Wait()
		calls, sweeps := f.counter.Count(), 0
		for {
			var got struct {
				Status string
				Steps  []struct{ Attempts []struct{ Status string } }
			}
			data(b, f.serve(b, "GET", "/api/workflows/"+wfID+"/runs/"+started.ID, ""), 200, &got)
			if got.Status == "completed" {
				if len(got.Steps) != 1 || len(got.Steps[0].Attempts) != wantAttempts {
					b.Fatalf("run %s completed with %+v, want %d attempts", started.ID, got.Steps, wantAttempts)
				}
				return calls, sweeps
			}
			if got.Status != "waiting" || sweeps > 10 {
				b.Fatalf("run %s is %s after %d sweeps", started.ID, got.Status, sweeps)
			}
			f.counter.Reset()
			if _, err := f.stack.Sweeper.Sweep(ctx); err != nil {
				b.Fatal(err)
			}
			f.stack.Runner.Wait()
			calls += f.counter.Count()
			sweeps++
		}
	}
	var floorCalls float64
	for _, tc := range []struct {
		name  string
		fails int
	}{{"no_failure", 0}, {"three_failures", 3}} {
		wfID := workflowOf(tc.fails)
		b.Run(tc.name, func(b *testing.B) {
			var calls, sweeps int64
			var d []time.Duration
			for b.Loop() {
				start := time.Now()
				c, s := run(b, wfID, tc.fails+1)
				d = append(d, time.Since(start))
				calls += c
				sweeps += int64(s)
			}
			perRun := float64(calls) / float64(b.N)
			b.ReportMetric(perRun, "ddbcalls/op")
			b.ReportMetric(float64(sweeps)/float64(b.N), "sweeps/op")
			b.ReportMetric(float64(idleSweep), "idle-sweep-ddbcalls")
			if tc.fails == 0 {
				floorCalls = perRun
			} else if floorCalls > 0 {
				extra := (perRun - floorCalls) / float64(tc.fails)
				b.ReportMetric(extra, "ddbcalls/attempt")
				b.ReportMetric(extra-float64(sweeps)/float64(b.N)/float64(tc.fails)*float64(idleSweep), "run-ddbcalls/attempt")
			}
			latency.Report(b, d)
		})
	}
}
