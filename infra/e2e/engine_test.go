package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// One engine for long work: whatever runs when the process dies is ended
// or resumed by the sweeper of the next process.

// runsOfChat lists the runs of a chat.
func runsOfChat(t *testing.T, c *client, chatID string) []durableRunJSON {
	t.Helper()
	r := c.do("GET", "/api/chats/"+chatID+"/workflow-runs", nil)
	if r.Status != 200 {
		t.Fatalf("list runs: %d %s", r.Status, r.Body)
	}
	var out struct {
		Data struct {
			WorkflowRuns []durableRunJSON `json:"workflowRuns"`
		}
	}
	r.decode(t, &out)
	return out.Data.WorkflowRuns
}

// waitFor polls cond every 50 ms until it holds, failing after patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(patience); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %s", what, patience)
		}
	}
}

// TestNothingStaysActiveAfterKill kills the dev server (SIGKILL) while a
// run started without Prefer, a run started from the chat stream and a
// streamed reply are all under way, then restarts it on the same
// DATA_FILE. Every reply ends and every run ends or is resumed: none stays
// active (before, the two runs stayed running for good and a retry
// answered 409 RUN_ACTIVE). A client that resumes the reply from the last
// id it received gets the end, numbered after that id (never an id it
// already holds), carrying the reply as saved, which is exactly the
// message's content.
func TestNothingStaysActiveAfterKill(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	srv := durableServer(t, "DATA_FILE="+file)
	c := newClient(t, srv.API)
	const email, password = "kill-all@example.com", "chat-password-1"
	userID := signUpChatUser(t, c, email)
	k := uuid.NewString()
	wfID, syncChat := countWorkflow(t, c, userID, countStep("test_count", k+"a", ""),
		countStep("test_count_idempotent", k+"b", `, "ms": 25000`), countStep("test_count", k+"c", ""))
	streamChat := newChat(t, c, map[string]string{"title": "stream run"}).ID
	replyChat := newChat(t, c, map[string]string{"title": "reply"}).ID

	// A run started without Prefer: the request waits for it.
	go func() {
		hc := &http.Client{Timeout: patience, Jar: c.http.Jar}
		req, _ := http.NewRequest("POST", srv.API+"/api/chats/"+syncChat+"/workflow-runs", strings.NewReader(`{"workflowId":"`+wfID+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close() // the server dies first
		}
	}()
	// A run started from the chat stream.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runResp := c.openStream(ctx, streamChat, map[string]any{"content": "run it", "modelId": "builtin", "userId": userID, "workflowId": wfID})
	defer runResp.Body.Close()
	if runResp.StatusCode != 200 {
		t.Fatalf("stream with a workflow: %d", runResp.StatusCode)
	}
	// A streamed reply, read up to its 30th event.
	replyResp, next, stop := startCount(t, ctx, c, replyChat, userID, 200)
	defer replyResp.Body.Close()
	var seen []streamEvent
	for e, err, ok := next(); ok && err == nil; e, err, ok = next() {
		seen = append(seen, e)
		if len(seen) == 30 {
			break
		}
	}
	stop()
	if len(seen) != 30 {
		t.Fatalf("the reply's first events: %+v", seen)
	}
	inStep2 := func(chatID string) func() bool {
		return func() bool {
			runs := runsOfChat(t, c, chatID)
			return len(runs) == 1 && runs[0].Steps[1].Status == "running"
		}
	}
	waitFor(t, "in step 2 (run without Prefer)", inStep2(syncChat))
	waitFor(t, "in step 2 (stream run)", inStep2(streamChat))
	lastSeen := seen[len(seen)-1]
	_ = srv.cmd.Process.Kill()
	<-srv.done

	srv2 := durableServer(t, "DATA_FILE="+file)
	c2 := newClient(t, srv2.API)
	if r := c2.do("POST", "/api/auth/sign-in/email", map[string]string{"email": email, "password": password}); r.Status != 200 {
		t.Fatalf("sign-in: %d %s", r.Status, r.Body)
	}
	// Two lease periods plus a sweep (2 s, 2 s, 200 ms here), on a loaded
	// machine: waitFor's minute bounds it.
	for _, chatID := range []string{syncChat, streamChat} {
		waitFor(t, "ended or resumed to its end", func() bool {
			runs := runsOfChat(t, c2, chatID)
			return len(runs) == 1 && finished(runs[0])
		})
		run := runsOfChat(t, c2, chatID)[0]
		// The step caught running is idempotent: the next attempt runs it
		// again, and the run completes.
		if run.Status != "completed" || run.Attempt != 2 {
			t.Errorf("run of chat %s after the restart: %+v, want completed by its second attempt", chatID, run)
		}
		if r := c2.do("POST", "/api/chats/"+chatID+"/workflow-runs/"+run.ID+"/retry", map[string]string{"fromStepId": run.Steps[0].ID}); r.Status != 202 {
			t.Errorf("retry of the resumed run: %d %s", r.Status, r.Body)
		}
	}
	for _, chatID := range []string{streamChat, replyChat} {
		waitFor(t, "ended", func() bool {
			msgs := getMessages(t, c2, chatID)
			return !slices.ContainsFunc(msgs, func(m messageJSON) bool { return m.Status == "streaming" })
		})
	}

	// The reply's client resumes from the last id it saw: the events the
	// dead process logged after it (it may have got further than the
	// client read), then error INTERRUPTED and end, numbered after it.
	res := c2.resume(replyChat, lastSeen.ID, false)
	n := len(res.Events)
	if res.Status != 200 || n < 2 || res.Events[n-2].Type != "error" || res.Events[n-2].Error != "INTERRUPTED" ||
		res.Events[n-1].Type != "end" || res.Events[n-1].Reason != "interrupted" {
		t.Fatalf("resume after %s: %d %+v", lastSeen.ID, res.Status, res.Events)
	}
	var received strings.Builder
	for _, e := range seen {
		received.WriteString(e.Delta)
	}
	received.WriteString(checkSequence(t, seen[0].MessageID, seqOf(t, lastSeen)+1, res.Events[:n-2]))
	if seqOf(t, res.Events[n-2]) <= seqOf(t, lastSeen) {
		t.Errorf("the closing events reuse ids: %s after %s", res.Events[n-2].ID, lastSeen.ID)
	}
	saved := res.Events[n-2].Content
	if saved == nil {
		t.Fatalf("error INTERRUPTED without content: %+v", res.Events[n-2])
	}
	msgs := getMessages(t, c2, replyChat)
	reply := msgs[len(msgs)-1]
	// The client replaces what it shows with the saved content: exactly
	// the saved message, and the start of what it received (the live
	// stream may run ahead of the log by the events of one batch, which
	// the dead process never wrote).
	if reply.Status != "failed" || reply.Content != *saved || !strings.HasPrefix(received.String(), *saved) || !strings.HasPrefix(counted(200), reply.Content) {
		t.Errorf("the saved reply %q (%s); the client was told %q after receiving %q", reply.Content, reply.Status, *saved, received.String())
	}
}

// TestWaitingWebhookAndMCPRunsSurviveKill kills the dev server (SIGKILL)
// while a run waits at an ask_human step, a webhook-started run is in a
// slow step and an MCP tools/call waits on a slow run, then restarts it on
// the same DATA_FILE. The waiting run still waits and its answer (202)
// lets it complete; the webhook and MCP runs are resumed (their slow step
// is idempotent) and complete; no request after the restart answers 5xx.
func TestWaitingWebhookAndMCPRunsSurviveKill(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	srv := durableServer(t, "DATA_FILE="+file)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "kill-waits@example.com")
	chatID := newChat(t, c, map[string]string{"title": "kill waits"}).ID
	askID := defineWorkflow(t, c, userID, "asks", `{"steps": [
	  {"id": "ask", "toolId": "ask_human", "inputs": {"message": "Proceed?"}},
	  {"id": "after", "toolId": "json_query", "inputs": {"input": "{{ask.approved}}", "query": "."}}]}`)
	// One slow idempotent step (ms from the input, long enough to be
	// caught running) then a quick one; exposed as an MCP tool.
	slowID := defineWorkflow(t, c, userID, "slow", `{
	  "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}, "ms": {"type": "integer"}}, "required": ["key", "ms"]},
	  "steps": [{"id": "slow", "toolId": "test_count_idempotent", "inputs": {"key": "{{input.key}}", "ms": "{{input.ms}}"}},
	            {"id": "after", "toolId": "json_query", "inputs": {"input": "{{slow.n}}", "query": "."}}],
	  "exposeAsTool": true, "toolName": "slow_count"}`)
	hook := createTrigger(t, c, slowID, `{"type":"webhook","enabled":true}`)
	r := c.do("POST", "/api/users/"+userID+"/tokens", `{"name":"kill","expiresInDays":1}`)
	var pat struct{ Data struct{ Token string } }
	r.decode(t, &pat)
	if r.Status != 201 || pat.Data.Token == "" {
		t.Fatalf("token: %d %s", r.Status, r.Body)
	}

	// (a) A run waiting at its ask_human step.
	if status, run := startRun(t, c, chatID, askID, nil); run.Status != "waiting" {
		t.Fatalf("the asking run: %d %+v", status, run)
	}
	waiting := waitRun(t, c, askID, runsOf(t, c, askID)[0].ID, "waiting", func(r unattendedRun) bool { return r.Status == "waiting" })
	// (b) A webhook-started run in its slow step.
	body := `{"key": "hook", "ms": 8000}`
	ts := fmt.Sprint(time.Now().Unix())
	call := c.do("POST", "/hooks/"+hook.ID, body, "X-Signature", webhookSignature(hook.Secret, ts, body))
	var hooked struct{ Data struct{ RunID string } }
	call.decode(t, &hooked)
	if call.Status != 202 || hooked.Data.RunID == "" {
		t.Fatalf("webhook call: %d %s", call.Status, call.Body)
	}
	// (c) An MCP tools/call waiting on its run (the call waits for it).
	mcpAnswered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", srv.API+"/api/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_count","arguments":{"key":"mcp","ms":8000}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+pat.Data.Token)
		resp, err := (&http.Client{Timeout: patience}).Do(req)
		if err != nil {
			mcpAnswered <- 0 // the server died first
			return
		}
		resp.Body.Close()
		mcpAnswered <- resp.StatusCode
	}()
	var mcpRunID string
	waitFor(t, "in the slow step (webhook and MCP runs)", func() bool {
		inSlow := 0
		for _, run := range runsOf(t, c, slowID) {
			if run.Steps[0].Status == "running" {
				inSlow++
			}
			if run.Trigger != nil && run.Trigger.Type == "mcp" {
				mcpRunID = run.ID
			}
		}
		return inSlow == 2 && mcpRunID != ""
	})
	_ = srv.cmd.Process.Kill()
	<-srv.done
	if status := <-mcpAnswered; status != 0 {
		t.Errorf("the MCP call was answered %d before the kill, want it waiting on its run", status)
	}

	srv2 := durableServer(t, "DATA_FILE="+file)
	c.base = srv2.API
	// Two lease periods plus a sweep (2 s, 2 s, 200 ms here) and the slow
	// step run again, on a loaded machine: waitRun's minute bounds it.
	for name, id := range map[string]string{"webhook": hooked.Data.RunID, "mcp": mcpRunID} {
		run := waitRun(t, c, slowID, id, "ended", ended)
		if run.Status != "completed" || run.Attempt < 2 || run.Trigger == nil || run.Trigger.Type != name || run.Steps[1].Output["result"] == nil {
			t.Errorf("the %s run after the restart: %+v, want completed by a later attempt", name, run)
		}
	}
	// The asking run waited through the kill and the sweeps since.
	if got := runOf(t, c, askID, waiting.ID); got.Status != "waiting" || got.Steps[0].Status != "waiting" {
		t.Fatalf("the asking run after the restart: %+v", got)
	}
	if r := c.do("POST", "/api/workflows/"+askID+"/runs/"+waiting.ID+"/steps/ask/respond", `{"approved":true}`); r.Status != 202 {
		t.Fatalf("answer after the restart: %d %s", r.Status, r.Body)
	}
	if done := waitRun(t, c, askID, waiting.ID, "ended", ended); done.Status != "completed" || done.Steps[1].Output["result"] != true {
		t.Errorf("the answered run: %+v", done)
	}
	// MCP answers again on the restarted server.
	mcp := c.do("POST", "/api/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_count","arguments":{"key":"again","ms":0}}}`,
		"Authorization", "Bearer "+pat.Data.Token, "Accept", "application/json, text/event-stream")
	if mcp.Status != 200 || !strings.Contains(string(mcp.Body), `"structuredContent":{"result":1}`) {
		t.Errorf("MCP call after the restart: %d %s", mcp.Status, mcp.Body)
	}
}

// runsOf lists the runs of a workflow.
func runsOf(t *testing.T, c *client, wfID string) []unattendedRun {
	t.Helper()
	var list struct {
		Data struct{ WorkflowRuns []unattendedRun }
	}
	r := c.do("GET", "/api/workflows/"+wfID+"/runs", nil)
	if r.Status != 200 {
		t.Fatalf("list runs: %d %s", r.Status, r.Body)
	}
	r.decode(t, &list)
	return list.Data.WorkflowRuns
}
