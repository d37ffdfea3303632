package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/tmaxmax/go-sse"
)

// Durable workflow runs against the dev server binary, with the tool
// server's test tools (TOOLS_TEST_HOOKS: test_count counts its executions
// per key, waits ms, fails its first failTimes runs).

type durableRunJSON struct {
	ID              string               `json:"id"`
	Status          string               `json:"status"`
	Error           string               `json:"error"`
	Attempt         int                  `json:"attempt"`
	WorkflowVersion int                  `json:"workflowVersion"`
	RetryOf         string               `json:"retryOf"`
	Steps           []durableRunStepJSON `json:"steps"`
}

type durableRunStepJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Reused bool   `json:"reused"`
	Output struct {
		N     int    `json:"n"`
		RanAt string `json:"ranAt"`
	} `json:"output"`
}

type runEventJSON struct {
	ID     string
	Type   string          `json:"type"`
	StepID string          `json:"stepId"`
	Output json.RawMessage `json:"output"`
	Error  string          `json:"error"`
}

// durableServer starts a dev server with the test tools, a short lease and
// a fast sweeper, and no rate limits in the way.
func durableServer(t *testing.T, env ...string) *server {
	t.Helper()
	return startServer(t, append([]string{"TOOLS_TEST_HOOKS=true", "GENERATION_LEASE=2s", "SWEEP_INTERVAL=200ms",
		"RATE_LIMIT_MESSAGES=0", "RATE_LIMIT_RUNS=0", "RATE_LIMIT_RESUMES=0"}, env...)...)
}

// countWorkflow creates a workflow of steps, each `tool with {input}`,
// through the workflow chat, and a chat to run it in.
func countWorkflow(t *testing.T, c *client, userID string, steps ...string) (wfID, chatID string) {
	t.Helper()
	wf := createWorkflow(t, c, userID, "durable")
	for _, s := range steps {
		wf = applyProposal(t, c, wf.ID, propose(t, c, wf, "add a step using "+s).ID)
	}
	return wf.ID, newChat(t, c, map[string]string{"title": "runs"}).ID
}

func countStep(tool, key string, extra string) string {
	return fmt.Sprintf(`%s with {"key": "%s"%s}`, tool, key, extra)
}

// startAsync starts a durable run and checks the 202.
func startAsync(t *testing.T, c *client, chatID, wfID string) durableRunJSON {
	t.Helper()
	r := c.do("POST", "/api/chats/"+chatID+"/workflow-runs", map[string]string{"workflowId": wfID}, "Prefer", "respond-async")
	if r.Status != http.StatusAccepted {
		t.Fatalf("async start: %d %s", r.Status, r.Body)
	}
	var out struct{ Data durableRunJSON }
	r.decode(t, &out)
	if loc := r.Header.Get("Location"); loc != "/api/chats/"+chatID+"/workflow-runs/"+out.Data.ID || out.Data.Status != "pending" {
		t.Fatalf("async start: Location %q, run %+v", loc, out.Data)
	}
	return out.Data
}

func getRun(t *testing.T, c *client, chatID, runID string) durableRunJSON {
	t.Helper()
	r := c.do("GET", "/api/chats/"+chatID+"/workflow-runs/"+runID, nil)
	if r.Status != 200 {
		t.Fatalf("get run: %d %s", r.Status, r.Body)
	}
	var out struct{ Data durableRunJSON }
	r.decode(t, &out)
	return out.Data
}

// waitRunUntil polls the run until done says so.
func waitRunUntil(t *testing.T, c *client, chatID, runID string, what string, done func(durableRunJSON) bool) durableRunJSON {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		r := getRun(t, c, chatID, runID)
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not %s: %+v", what, r)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func finished(r durableRunJSON) bool { return r.Status != "pending" && r.Status != "running" }

// runEvents reads GET .../events after lastID until the stream closes,
// checking each event against the OpenAPI document.
func runEvents(t *testing.T, c *client, chatID, runID, lastID string, stopAfter int) []runEventJSON {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/api/chats/"+chatID+"/workflow-runs/"+runID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	expectStreamHeaders(t, resp.Header)
	var out []runEventJSON
	for ev, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		if err := spec.ValidateSchema("WorkflowRunEvent", []byte(ev.Data)); err != nil {
			t.Errorf("event %s: %v", ev.Data, err)
		}
		var e runEventJSON
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatal(err)
		}
		e.ID = ev.LastEventID
		out = append(out, e)
		if len(out) == stopAfter {
			return out
		}
	}
	return out
}

func eventTypes(evs []runEventJSON) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, ",")
}

func TestDurableRunEventsAndRetry(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "durable@example.com")
	k := uuid.NewString()

	// An async run of three slow steps, watched from a second connection
	// that drops after three events and resumes with Last-Event-ID.
	wfID, chatID := countWorkflow(t, c, userID,
		countStep("test_count", k+"a", `, "ms": 150`), countStep("test_count", k+"b", `, "ms": 150`), countStep("test_count", k+"c", `, "ms": 150`))
	run := startAsync(t, c, chatID, wfID)
	watcher := newClient(t, srv.API)
	watcher.http.Jar = c.http.Jar
	first := runEvents(t, watcher, chatID, run.ID, "", 3)
	rest := runEvents(t, watcher, chatID, run.ID, first[2].ID, 0)
	all := append(first, rest...)
	want := "run_started,step_started,step_completed,step_started,step_completed,step_started,step_completed,run_completed"
	if eventTypes(all) != want {
		t.Fatalf("events %s, want %s", eventTypes(all), want)
	}
	for i, e := range all {
		if e.ID != fmt.Sprintf("%s:%d", run.ID, i+1) {
			t.Fatalf("event %d id %q", i, e.ID)
		}
	}
	done := getRun(t, c, chatID, run.ID)
	if done.Status != "completed" || done.Attempt != 1 || done.WorkflowVersion != 4 {
		t.Fatalf("finished run %+v", done)
	}

	// A run whose step 3 fails, retried: steps 1-2 are reused, not run
	// again (step 4 peeks at step 1's count), step 3 runs on.
	k2 := uuid.NewString()
	wfID, chatID = countWorkflow(t, c, userID, countStep("test_count", k2+"a", ""), countStep("test_count", k2+"b", ""),
		countStep("test_count", k2+"c", `, "failTimes": 1`), countStep("test_count", k2+"a", `, "peek": true`))
	failed := waitRunUntil(t, c, chatID, startAsync(t, c, chatID, wfID).ID, "failed", finished)
	if failed.Status != "failed" || failed.Steps[2].Status != "failed" || failed.Steps[3].Status != "skipped" {
		t.Fatalf("failed run %+v", failed)
	}
	path := "/api/chats/" + chatID + "/workflow-runs/" + failed.ID + "/retry"
	expectError(t, "unknown fromStepId", c.do("POST", path, map[string]string{"fromStepId": "nostep"}), 400, "VALIDATION_FAILED")
	r := c.do("POST", path, nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("retry: %d %s", r.Status, r.Body)
	}
	var retry struct{ Data durableRunJSON }
	r.decode(t, &retry)
	got := waitRunUntil(t, c, chatID, retry.Data.ID, "finished", finished)
	if got.Status != "completed" || got.RetryOf != failed.ID || !got.Steps[0].Reused || !got.Steps[1].Reused || got.Steps[2].Reused ||
		got.Steps[0].Output != failed.Steps[0].Output || got.Steps[2].Output.N != 2 || got.Steps[3].Output.N != 1 {
		t.Fatalf("retry %+v of %+v", got, failed)
	}

	// Cancel from another request: the runner stops the running step
	// before it ends (it reads the cancel from the log's head), and the
	// run does not go on.
	k3 := uuid.NewString()
	wfID, chatID = countWorkflow(t, c, userID, countStep("test_count", k3+"a", `, "ms": 25000`), countStep("test_count", k3+"b", ""))
	run = startAsync(t, c, chatID, wfID)
	waitRunUntil(t, c, chatID, run.ID, "in step 1", func(r durableRunJSON) bool { return r.Steps[0].Status == "running" })
	expectError(t, "retry of an active run", c.do("POST", "/api/chats/"+chatID+"/workflow-runs/"+run.ID+"/retry", nil), 409, "RUN_ACTIVE")
	if r := watcher.do("POST", "/api/chats/"+chatID+"/workflow-runs/"+run.ID+"/cancel", nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	cancelled := time.Now()
	evs := runEvents(t, c, chatID, run.ID, "", 0)
	if got := eventTypes(evs); got != "run_started,step_started,run_cancelled" {
		t.Fatalf("cancelled run's events %s", got)
	}
	// A runner that let the step run would end the log only after the
	// step's 25 s sleep, which started before the cancel.
	if took := time.Since(cancelled); took >= 25*time.Second {
		t.Errorf("the cancelled run's log ended %s after the cancel: the step ran to its end", took)
	}
	if r := getRun(t, c, chatID, run.ID); r.Status != "cancelled" || r.Steps[0].Status != "cancelled" || r.Steps[1].Status != "cancelled" {
		t.Fatalf("cancelled run %+v", r)
	}
}

// TestDurableRunSurvivesKill kills the dev server during step 2 of an
// async run and restarts it on the same DATA_FILE: the sweeper resumes
// the run. An idempotent step 2 runs again and the run completes, step 1
// not run again (its output, with the time it ran, is unchanged); a step
// that is not idempotent fails the run INTERRUPTED and nothing runs.
func TestDurableRunSurvivesKill(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tool, want string
	}{{"test_count_idempotent", "completed"}, {"test_count", "failed"}} {
		t.Run(c.tool, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "data.json")
			srv := durableServer(t, "DATA_FILE="+file, "SNAPSHOT_INTERVAL=50ms")
			cl := newClient(t, srv.API)
			userID := signUpChatUser(t, cl, "kill-"+c.tool+"@example.com")
			k := uuid.NewString()
			wfID, chatID := countWorkflow(t, cl, userID, countStep(c.tool, k+"a", ""), countStep(c.tool, k+"b", `, "ms": 3000`),
				countStep(c.tool, k+"c", ""))
			run := startAsync(t, cl, chatID, wfID)
			before := waitRunUntil(t, cl, chatID, run.ID, "in step 2", func(r durableRunJSON) bool { return r.Steps[1].Status == "running" })
			// Let a snapshot hold the checkpoint, then kill.
			for deadline := time.Now().Add(patience); ; time.Sleep(20 * time.Millisecond) {
				if b, _ := os.ReadFile(file); strings.Contains(string(b), before.Steps[0].Output.RanAt) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no snapshot with step 1's result")
				}
			}
			time.Sleep(200 * time.Millisecond)
			_ = srv.cmd.Process.Kill()
			<-srv.done

			srv2 := durableServer(t, "DATA_FILE="+file, "SNAPSHOT_INTERVAL=50ms")
			cl2 := newClient(t, srv2.API)
			if r := cl2.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "kill-" + c.tool + "@example.com", "password": "chat-password-1"}); r.Status != 200 {
				t.Fatalf("sign-in: %d %s", r.Status, r.Body)
			}
			got := waitRunUntil(t, cl2, chatID, run.ID, "finished after the restart", finished)
			if got.Status != c.want || got.Steps[0].Output != before.Steps[0].Output || got.Steps[0].Reused {
				t.Fatalf("after the restart %+v, before %+v", got, before)
			}
			switch c.want {
			case "completed":
				if got.Attempt != 2 || got.Steps[1].Output.N != 1 || got.Steps[2].Output.N != 1 {
					t.Fatalf("resumed run %+v", got)
				}
			default:
				if !strings.HasPrefix(got.Error, "INTERRUPTED") || got.Steps[1].Status != "failed" || got.Steps[2].Status != "skipped" {
					t.Fatalf("interrupted run %+v", got)
				}
			}
			evs := runEvents(t, cl2, chatID, run.ID, "", 0)
			if n := len(evs); n == 0 || (evs[n-1].Type != "run_completed" && evs[n-1].Type != "run_failed") {
				t.Fatalf("events after the restart %s", eventTypes(evs))
			}
		})
	}
}
