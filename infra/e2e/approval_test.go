package e2e_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// permissionsOf returns userID's tool policies, tool id to policy/source.
func permissionsOf(t *testing.T, c *client, userID string) map[string]string {
	t.Helper()
	r := c.do("GET", "/api/users/"+userID+"/tool-permissions", nil)
	if r.Status != 200 {
		t.Fatalf("tool permissions: %d %s", r.Status, r.Body)
	}
	var out struct {
		Data struct {
			Permissions []struct{ ToolID, Policy, Source string }
		}
	}
	r.decode(t, &out)
	m := map[string]string{}
	for _, p := range out.Data.Permissions {
		m[p.ToolID] = p.Policy + "/" + p.Source
	}
	return m
}

// streamTypes lists the types of events.
func streamTypes(events []streamEvent) string {
	var ts []string
	for _, e := range events {
		ts = append(ts, e.Type)
	}
	return strings.Join(ts, " ")
}

// approvalOf returns the call id of the tool_approval event of res,
// failing unless the stream paused on it.
func approvalOf(t *testing.T, res streamResult) string {
	t.Helper()
	if res.Status != 200 {
		t.Fatalf("stream: %d %s", res.Status, res.Body)
	}
	n := len(res.Events)
	last, approval := res.Events[n-1], res.Events[max(n-2, 0)]
	if got := streamTypes(res.Events); !strings.HasSuffix(got, " tool_approval end") || strings.Contains(got, "tool_call") ||
		last.Reason != "awaiting_approval" || approval.ToolCallID == "" || approval.ToolName != "http_request" {
		t.Fatalf("events %q (%+v), want tool_approval(http_request) then end(awaiting_approval), no tool_call", got, res.Events)
	}
	return approval.ToolCallID
}

// TestToolApproval: http_request (open world) asks by default. The reply
// pauses; another user cannot decide the call; approving with remember
// lets the reply go on (on the same message, when the chat's stream is
// resumed) and makes the next call to the tool run without asking; a
// second decision is 409. A denied call and a deny-policy tool give the
// model a refusal and never run.
func TestToolApproval(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer target.Close()
	srv := startServer(t, "TOOLS_ALLOW_PRIVATE_NETWORKS=true")
	ask := `run http_request with {"url": "` + target.URL + `/data"}`

	t.Run("ask, approve and remember", func(t *testing.T) {
		c := newClient(t, srv.API)
		userID := signUpChatUser(t, c, "approve@example.com")
		perms := permissionsOf(t, c, userID)
		if perms["http_request"] != "ask/default" || perms["json_query"] != "allow/default" || perms["llm_generate"] != "allow/default" {
			t.Fatalf("default policies: %v", perms)
		}
		chat := newChat(t, c, map[string]any{})
		before := hits.Load()
		res := c.stream(chat.ID, map[string]any{"content": ask, "modelId": "builtin", "userId": userID})
		callID := approvalOf(t, res)
		msgID := res.Events[0].MessageID
		msgs := getMessages(t, c, chat.ID)
		if len(msgs) != 2 || msgs[1].ID != msgID || msgs[1].Status != "awaiting_approval" || hits.Load() != before {
			t.Fatalf("paused reply: %+v (tool ran %d times)", msgs, hits.Load()-before)
		}

		other := newClient(t, srv.API)
		signUpChatUser(t, other, "approve.other@example.com")
		expectError(t, "another user's approval", other.do("POST", "/api/chats/"+chat.ID+"/tool-calls/"+callID+"/approve", nil), 403, "FORBIDDEN")
		expectError(t, "unknown call", c.do("POST", "/api/chats/"+chat.ID+"/tool-calls/call_99/approve", nil), 409, "TOOL_CALL_NOT_PENDING")

		r := c.do("POST", "/api/chats/"+chat.ID+"/tool-calls/"+callID+"/approve", map[string]any{"remember": true})
		if r.Status != 202 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		expectError(t, "second decision", c.do("POST", "/api/chats/"+chat.ID+"/tool-calls/"+callID+"/deny", nil), 409, "TOOL_CALL_NOT_PENDING")

		// The reply goes on when the stream is resumed, on the same message.
		cont := c.resume(chat.ID, res.Events[len(res.Events)-1].ID, false)
		if cont.Status != 200 {
			t.Fatalf("resume: %d %s", cont.Status, cont.Body)
		}
		if got := streamTypes(cont.Events); !strings.HasPrefix(got, "tool_call tool_result content") || !strings.HasSuffix(got, "end") {
			t.Fatalf("continuation events %q", got)
		}
		if last := cont.Events[len(cont.Events)-1]; last.Reason != "completed" || last.MessageID != msgID {
			t.Errorf("continuation end %+v", last)
		}
		if want := seqOf(t, res.Events[len(res.Events)-1]) + 1; seqOf(t, cont.Events[0]) != want {
			t.Errorf("continuation starts at %s, want seq %d", cont.Events[0].ID, want)
		}
		msgs = getMessages(t, c, chat.ID)
		if len(msgs) != 2 || msgs[1].ID != msgID || msgs[1].Status != "completed" || len(msgs[1].ToolCalls) != 1 ||
			!strings.Contains(string(msgs[1].ToolCalls[0].Result), `"ok":true`) || hits.Load() != before+1 {
			t.Fatalf("continued reply: %+v (tool ran %d times)", msgs, hits.Load()-before)
		}
		if p := permissionsOf(t, c, userID)["http_request"]; p != "allow/user" {
			t.Errorf("http_request after remember: %s", p)
		}
		// The next call runs without asking.
		res = c.stream(chat.ID, map[string]any{"content": ask, "modelId": "builtin", "userId": userID})
		if got := streamTypes(res.Events); res.Status != 200 || !strings.Contains(got, "tool_call tool_result") || strings.Contains(got, "tool_approval") {
			t.Errorf("second call: %d %q", res.Status, got)
		}
		if hits.Load() != before+2 {
			t.Errorf("tool ran %d times, want 2", hits.Load()-before)
		}
	})

	t.Run("deny", func(t *testing.T) {
		c := newClient(t, srv.API)
		userID := signUpChatUser(t, c, "deny@example.com")
		chat := newChat(t, c, map[string]any{})
		before := hits.Load()
		res := c.stream(chat.ID, map[string]any{"content": ask, "modelId": "builtin", "userId": userID})
		callID := approvalOf(t, res)
		if r := c.do("POST", "/api/chats/"+chat.ID+"/tool-calls/"+callID+"/deny", nil); r.Status != 202 {
			t.Fatalf("deny: %d %s", r.Status, r.Body)
		}
		cont := c.resume(chat.ID, "", false)
		if got := streamTypes(cont.Events); cont.Status != 200 || !strings.HasPrefix(got, "tool_call tool_result") {
			t.Fatalf("continuation: %d %q", cont.Status, got)
		}
		if r := string(cont.Events[1].Result); !strings.Contains(r, "did not allow") {
			t.Errorf("denied call's result %s, want a refusal", r)
		}
		if hits.Load() != before {
			t.Errorf("a denied call ran")
		}
		if p := permissionsOf(t, c, userID)["http_request"]; p != "ask/default" {
			t.Errorf("http_request after a deny: %s", p)
		}
	})

	t.Run("whole message", func(t *testing.T) {
		c := newClient(t, srv.API)
		signUpChatUser(t, c, "approve.whole@example.com")
		chat := newChat(t, c, map[string]any{})
		r := c.do("POST", "/api/chats/"+chat.ID+"/messages", map[string]any{"content": ask, "modelId": "builtin"})
		var ex struct {
			Data struct{ Response messageJSON }
		}
		r.decode(t, &ex)
		if r.Status != 201 || ex.Data.Response.Status != "awaiting_approval" {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		if r := c.do("POST", "/api/chats/"+chat.ID+"/tool-calls/call_1/approve", nil); r.Status != 202 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		cont := c.resume(chat.ID, "", false)
		if got := streamTypes(cont.Events); cont.Status != 200 || !strings.HasPrefix(got, "tool_call tool_result") || !strings.HasSuffix(got, "end") {
			t.Fatalf("continuation: %d %q", cont.Status, got)
		}
		msgs := getMessages(t, c, chat.ID)
		if len(msgs) != 2 || msgs[1].ID != ex.Data.Response.ID || msgs[1].Status != "completed" || len(msgs[1].ToolCalls) != 1 {
			t.Errorf("continued message: %+v", msgs)
		}
	})

	t.Run("deny policy", func(t *testing.T) {
		c := newClient(t, srv.API)
		userID := signUpChatUser(t, c, "denypolicy@example.com")
		if r := c.do("PUT", "/api/users/"+userID+"/tool-permissions/json_query", map[string]string{"policy": "deny"}); r.Status != 200 {
			t.Fatalf("set deny: %d %s", r.Status, r.Body)
		}
		expectError(t, "unknown tool", c.do("PUT", "/api/users/"+userID+"/tool-permissions/no_such_tool", map[string]string{"policy": "deny"}), 404, "TOOL_NOT_FOUND")
		expectError(t, "bad policy", c.do("PUT", "/api/users/"+userID+"/tool-permissions/json_query", map[string]string{"policy": "never"}), 400, "VALIDATION_FAILED")
		other := newClient(t, srv.API)
		otherID := signUpChatUser(t, other, "denypolicy.other@example.com")
		expectError(t, "another user's policy", c.do("PUT", "/api/users/"+otherID+"/tool-permissions/json_query", map[string]string{"policy": "allow"}), 403, "FORBIDDEN")
		expectError(t, "another user's policies", c.do("GET", "/api/users/"+otherID+"/tool-permissions", nil), 403, "FORBIDDEN")

		chat := newChat(t, c, map[string]any{})
		res := c.stream(chat.ID, map[string]any{"content": `run json_query with {"query": ".a", "input": {"a": 1}}`, "modelId": "builtin", "userId": userID})
		got := streamTypes(res.Events)
		if res.Status != 200 || !strings.Contains(got, "tool_call tool_result") || strings.Contains(got, "tool_approval") {
			t.Fatalf("stream: %d %q", res.Status, got)
		}
		if r := string(res.Events[strings.Count(got[:strings.Index(got, "tool_result")], " ")].Result); !strings.Contains(r, "did not allow") {
			t.Errorf("deny-policy result %s, want a refusal", r)
		}
	})
}

// TestWorkflowStepsAndPolicies: workflow steps run without asking (an
// ask tool runs), and a step whose tool the user denies fails with
// TOOL_DENIED without running.
func TestWorkflowStepsAndPolicies(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	uid := signUpChatUser(t, c, "wf.policies@example.com")
	w := createWorkflow(t, c, uid, "policies")
	w = applyProposal(t, c, w.ID, propose(t, c, w, `add a step using json_query with {"input": {"a": 1}, "query": ".a"}`).ID)
	ch := newChat(t, c, map[string]any{"workflowId": w.ID})

	run := func() runJSON {
		t.Helper()
		r := c.do("POST", "/api/chats/"+ch.ID+"/workflow-runs", map[string]string{"workflowId": w.ID})
		var out struct{ Data runJSON }
		r.decode(t, &out)
		if r.Status != 201 || len(out.Data.Steps) != 1 {
			t.Fatalf("run: %d %s", r.Status, r.Body)
		}
		return out.Data
	}
	// json_query is allowed by default; ask would not stop it either.
	if r := c.do("PUT", "/api/users/"+uid+"/tool-permissions/json_query", map[string]string{"policy": "ask"}); r.Status != 200 {
		t.Fatalf("set ask: %d %s", r.Status, r.Body)
	}
	if got := run(); got.Status != "completed" || got.Steps[0].Status != "completed" {
		t.Fatalf("run with an ask tool: %+v", got)
	}
	if r := c.do("PUT", "/api/users/"+uid+"/tool-permissions/json_query", map[string]string{"policy": "deny"}); r.Status != 200 {
		t.Fatalf("set deny: %d %s", r.Status, r.Body)
	}
	got := run()
	if got.Status != "failed" || got.Steps[0].Status != "failed" || !strings.Contains(got.Steps[0].Error, "TOOL_DENIED") {
		t.Fatalf("run with a denied tool: %+v", got)
	}
	// A durable run executes in the runner, outside any request of the
	// user's: it is denied all the same.
	async := startAsync(t, c, ch.ID, w.ID)
	done := waitRunUntil(t, c, ch.ID, async.ID, "finished", finished)
	if done.Status != "failed" || len(done.Steps) != 1 || done.Steps[0].Status != "failed" || !strings.Contains(done.Steps[0].Error, "TOOL_DENIED") {
		t.Fatalf("async run with a denied tool: %+v", done)
	}
}
