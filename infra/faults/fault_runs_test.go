package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/workflow"
)

// TestFaultDurableRunCheckpoints fails each transaction of an async run
// in turn (every SDK attempt of it, so the write fails for good): the
// creation (the client gets 503 and nothing is stored) and the
// checkpoint. Steps whose tool only computes (json_query) are not
// recorded before they run, nor their results before the next such step
// runs, so a quick run of one or two of them has one checkpoint (run
// start, each step's start and result, run end); a failure of it loses
// what only the next attempt computes again. A failed checkpoint stops
// the attempt and leaves the run with its lease; once the lease expires
// the sweeper resumes it, and it ends (completed, or failed cleanly),
// never staying running, with its event log closed.
func TestFaultDurableRunCheckpoints(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		steps, skip int
	}{
		{"create", 1, 0},
		{"one step: its checkpoint", 1, 1},
		{"two steps: their one checkpoint", 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{lease: "1s"})
			wfID := e.workflowWithSteps(c.steps)
			chatID := e.createChat()
			e.proxy.add(rule{op: "TransactWriteItems", table: e.cfg.DataTable, skip: c.skip, times: 3,
				fault: awsError(500, "InternalServerError", "emulated")})

			req, _ := http.NewRequest("POST", e.api.URL+"/api/chats/"+chatID+"/workflow-runs", strings.NewReader(fmt.Sprintf(`{"workflowId":%q}`, wfID)))
			req.Header.Set("Cookie", e.cookie)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Prefer", "respond-async")
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := make([]byte, 4096)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if c.skip == 0 {
				expectUnavailable(t, resp, body[:n])
				if runs := e.runs(chatID); len(runs) != 0 {
					t.Fatalf("a failed create left runs: %+v", runs)
				}
				return
			}
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("start: %d %s", resp.StatusCode, body[:n])
			}
			var run workflow.Run
			deadline := time.Now().Add(patience)
			for {
				e.stack.Runner.Wait()
				if _, err := e.stack.Sweeper.Sweep(context.Background()); err != nil {
					t.Logf("sweep: %v", err)
				}
				e.stack.Runner.Wait()
				runs := e.runs(chatID)
				if len(runs) != 1 {
					t.Fatalf("runs %+v", runs)
				}
				run = runs[0]
				if !workflow.Active(run.Status) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("run still %s after %s: %+v", run.Status, patience, run)
				}
				time.Sleep(200 * time.Millisecond)
			}
			// json_query is idempotent: a step caught running runs again.
			if run.Status != workflow.RunCompleted || run.Attempt != 2 || len(run.Steps) != c.steps {
				t.Fatalf("run after the fault: %+v", run)
			}
			for _, s := range run.Steps {
				if s.Status != workflow.StepCompleted {
					t.Fatalf("step %s after the fault: %+v", s.ID, s)
				}
			}
			_, st, err := store.NewRuns(e.stack.DB, e.cfg.DataTable).LoggedRun(context.Background(), run.ID)
			if err != nil || st.Active {
				t.Fatalf("the run's log: %+v (%v), want ended", st, err)
			}
			expired, err := e.stack.Sweeper.Sweep(context.Background())
			if err != nil || expired != 0 {
				t.Fatalf("a sweep after the end handled %d (%v)", expired, err)
			}
		})
	}
}
