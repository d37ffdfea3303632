package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/workflow"
)

// patience bounds every wait of these tests for the service (a response,
// a stream's end, a run's end, quiet storage): a bound for a service that
// hangs, never a measure of its speed (a loaded machine is many times
// slower than a quiet one).
const patience = 10 * time.Minute

// streamDeadline is how long a stream may take before the test calls it
// hung: it bounds the end, it measures no latency.
const streamDeadline = patience

// runJSONQuery makes the built-in model call json_query.
const runJSONQuery = `run json_query with {"query": ".a", "input": {"a": 1}}`

func requireEvents(t *testing.T, evs []event, types ...string) {
	t.Helper()
	var got []string
	for _, e := range evs {
		if e.Type != chat.EventContent && e.Type != "ping" {
			got = append(got, e.Type)
		}
	}
	if strings.Join(got, ",") != strings.Join(types, ",") {
		t.Fatalf("events %v (content omitted), want %v: %+v", got, types, evs)
	}
}

func toolError(t *testing.T, ev event) string {
	t.Helper()
	var r struct{ Error string }
	if err := json.Unmarshal(ev.Result, &r); err != nil || r.Error == "" {
		t.Fatalf("tool_result %s: want {\"error\": ...}", ev.Result)
	}
	return r.Error
}

// TestFaultStreamStorage fails the stream's writes after it started. When
// a write of the reply's event log fails (after the SDK's retries) the
// reply ends: the client gets an error event (STORAGE_UNAVAILABLE) and
// end, and the message is saved failed with exactly the deltas streamed.
// When storage stays down, the client still gets error and end, never a
// hang, and the sweeper saves the reply failed once storage is back.
func TestFaultStreamStorage(t *testing.T) {
	t.Parallel()
	t.Run("log write fails, storage recovers", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		chatID := e.createChat()
		// The start's transaction passes, the first log write (one
		// conditional PutItem of its slot) fails.
		e.proxy.add(rule{op: "PutItem", table: e.cfg.DataTable, times: store.MaxAttempts, fault: throttled})
		m, ops := e.proxy.mark(), e.counter.Count()
		resp, evs, body := e.stream(e.api, chatID, streamBody(e, "count to 50 slowly", ""), streamDeadline)
		e.proxy.clear()
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		requireEvents(t, evs, chat.EventStart, chat.EventError, chat.EventEnd)
		if errEv := eventsOf(evs, chat.EventError)[0]; errEv.Error != "STORAGE_UNAVAILABLE" || errEv.Message == "" {
			t.Errorf("error event %+v", errEv)
		}
		if end := evs[len(evs)-1]; end.Reason != chat.ReasonInterrupted {
			t.Errorf("end %+v, want reason interrupted", end)
		}
		e.expectRetries(t, m, ops, 1)
		var streamed strings.Builder
		for _, ev := range eventsOf(evs, chat.EventContent) {
			streamed.WriteString(ev.Delta)
		}
		msgs := e.messages(chatID)
		if len(msgs) != 2 || msgs[1].Status != chat.StatusFailed || msgs[1].Content != streamed.String() || streamed.Len() == 0 {
			t.Errorf("messages %+v, want the reply failed with the %q streamed", msgs, streamed.String())
		}
	})
	t.Run("storage stays down", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		chatID := e.createChat()
		// After the start's transaction, every log write (PutItem) and
		// the end's transaction fail.
		e.proxy.add(rule{op: "PutItem", table: e.cfg.DataTable, times: -1, fault: internal})
		e.proxy.add(rule{op: "TransactWriteItems", table: e.cfg.DataTable, skip: 1, times: -1, fault: internal})
		resp, evs, body := e.stream(e.api, chatID, streamBody(e, "count to 50 slowly", ""), streamDeadline)
		e.proxy.clear()
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		requireEvents(t, evs, chat.EventStart, chat.EventError, chat.EventEnd)
		msgs := e.messages(chatID)
		if len(msgs) != 2 || msgs[1].Status != chat.StatusStreaming {
			t.Fatalf("messages %+v, want the reply still streaming until its lease runs out", msgs)
		}
		// A sweep after the lease ran out ends it.
		later := func() time.Time { return time.Now().Add(time.Minute) }
		jobs := store.NewJobs(e.stack.DB, e.cfg.DataTable)
		chats := chat.NewService(chat.Options{Store: store.NewChats(e.stack.DB, e.cfg.DataTable), Jobs: jobs, Now: later})
		sw := job.NewSweeper(jobs, map[string]job.Handler{chat.GenerationKind: chats.InterruptExpired}, later, nil)
		if n, err := sw.Sweep(context.Background()); err != nil || n < 1 {
			t.Fatalf("sweep: %d ended, %v", n, err)
		}
		msgs = e.messages(chatID)
		if len(msgs) != 2 || msgs[1].Status != chat.StatusFailed {
			t.Errorf("messages %+v, want the reply failed", msgs)
		}
		e.postMessage(chatID) // the chat is free again
	})
	t.Run("workflow run record", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		chatID, wfID := e.createChat(), e.workflowWithStep()
		// The user message passes; the run cannot be recorded.
		e.proxy.add(rule{op: "TransactWriteItems", table: e.cfg.DataTable, skip: 1, times: -1, fault: internal})
		resp, evs, body := e.stream(e.wf, chatID, streamBody(e, "go", wfID), streamDeadline)
		e.proxy.clear()
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		requireEvents(t, evs, chat.EventStart, chat.EventError, chat.EventEnd)
		if errEv := eventsOf(evs, chat.EventError)[0]; errEv.Error != "STORAGE_UNAVAILABLE" {
			t.Errorf("error event %+v", errEv)
		}
		if runs := e.runs(chatID); len(runs) != 0 {
			t.Errorf("runs %+v, want none", runs)
		}
	})
}

// TestFaultToolServer makes the tool server unreachable (its port closed)
// or slow (answering after the client's timeout) during streams and runs.
// A chat reply reports the failed tool to the model (a tool_result
// {"error": ...}) and goes on to its end; a workflow's failed step fails
// the run, recorded as failed, and the stream ends. Nothing hangs.
func TestFaultToolServer(t *testing.T) {
	t.Parallel()
	t.Run("unreachable from the start: chat stream", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{toolURL: closedURL(t)})
		chatID := e.createChat()
		// No tools can be listed: the model answers without them.
		_, evs, _ := e.stream(e.api, chatID, streamBody(e, runJSONQuery, ""), streamDeadline)
		requireEvents(t, evs, chat.EventStart, chat.EventEnd)
	})
	t.Run("unreachable: chat stream", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		chatID := e.createChat()
		_, evs, _ := e.stream(e.wf, chatID, streamBody(e, runJSONQuery, ""), streamDeadline) // the tools are listed and cached
		requireEvents(t, evs, chat.EventStart, chat.EventToolCall, chat.EventToolResult, chat.EventEnd)
		e.tools.shut()
		_, evs, _ = e.stream(e.wf, chatID, streamBody(e, runJSONQuery, ""), streamDeadline)
		requireEvents(t, evs, chat.EventStart, chat.EventToolCall, chat.EventToolResult, chat.EventEnd)
		if msg := toolError(t, eventsOf(evs, chat.EventToolResult)[0]); !strings.Contains(msg, "could not be reached") {
			t.Errorf("tool error %q", msg)
		}
		msgs := e.messages(chatID)
		if len(msgs) != 4 || len(msgs[3].ToolCalls) != 1 || !strings.Contains(string(msgs[3].ToolCalls[0].Result), "error") {
			t.Errorf("stored reply %+v", msgs[len(msgs)-1])
		}
	})
	t.Run("slow: chat stream", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{toolTimeout: time.Second})
		chatID := e.createChat()
		e.tools.slow.Store(true)
		_, evs, _ := e.stream(e.wf, chatID, streamBody(e, runJSONQuery, ""), streamDeadline)
		requireEvents(t, evs, chat.EventStart, chat.EventToolCall, chat.EventToolResult, chat.EventEnd)
		if msg := toolError(t, eventsOf(evs, chat.EventToolResult)[0]); !strings.Contains(msg, "in time") {
			t.Errorf("tool error %q", msg)
		}
	})
	workflowCases := []struct {
		name    string
		opts    envOptions
		breakIt func(e *env)
		want    string // in the step's error
	}{
		{name: "unreachable", breakIt: func(e *env) { e.tools.shut() }, want: "could not be reached"},
		{name: "slow, step timeout", opts: envOptions{stepTimeout: 500 * time.Millisecond},
			breakIt: func(e *env) { e.tools.slow.Store(true) }, want: "timed out"},
		{name: "slow, client timeout", opts: envOptions{toolTimeout: 500 * time.Millisecond},
			breakIt: func(e *env) { e.tools.slow.Store(true) }, want: "in time"},
	}
	for _, c := range workflowCases {
		t.Run(c.name+": workflow stream", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c.opts)
			chatID, wfID := e.createChat(), e.workflowWithStep()
			c.breakIt(e)
			_, evs, _ := e.stream(e.wf, chatID, streamBody(e, "go", wfID), streamDeadline)
			requireEvents(t, evs, chat.EventStart, chat.EventToolCall, chat.EventToolResult, chat.EventEnd)
			if msg := toolError(t, eventsOf(evs, chat.EventToolResult)[0]); !strings.Contains(msg, c.want) {
				t.Errorf("step error %q, want %q", msg, c.want)
			}
			runs := e.runs(chatID)
			if len(runs) != 1 || runs[0].Status != workflow.RunFailed || runs[0].CompletedAt == nil ||
				len(runs[0].Steps) != 1 || runs[0].Steps[0].Status != workflow.StepFailed {
				t.Errorf("runs %+v, want one failed run", runs)
			}
			if content := eventsOf(evs, chat.EventContent); len(content) != 1 || !strings.Contains(content[0].Delta, "failed") {
				t.Errorf("summary %+v", content)
			}
		})
		t.Run(c.name+": start run", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c.opts)
			chatID, wfID := e.createChat(), e.workflowWithStep()
			c.breakIt(e)
			resp, body := e.as(e.wf, "POST", "/api/chats/"+chatID+"/workflow-runs", fmt.Sprintf(`{"workflowId":%q}`, wfID))
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			var run struct{ Data workflow.Run }
			mustJSON(t, body, &run)
			if run.Data.Status != workflow.RunFailed || !strings.Contains(run.Data.Error, c.want) {
				t.Errorf("run %+v", run.Data)
			}
			if runs := e.runs(chatID); len(runs) != 1 || runs[0].Status != workflow.RunFailed {
				t.Errorf("stored runs %+v", runs)
			}
		})
	}
}
