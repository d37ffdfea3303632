package local_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/mcpgateway"
)

// batchOf returns a JSON-RPC batch of n copies of msg, each with its own
// id (msg holds the id placeholder ID).
func batchOf(msg string, n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = strings.Replace(msg, "ID", strconv.Itoa(i+1), 1)
	}
	return "[" + strings.Join(items, ",") + "]"
}

// TestMCPRefusesBatches: /api/mcp answers any JSON-RPC batch with one
// small JSON-RPC invalid-request error (400), whatever the protocol
// version and however long the batch, and none of its calls runs: the
// 18,000 tools/list that answered 32.9 MB, the 30 tools/call that ran
// 30 runs.
func TestMCPRefusesBatches(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	wfID := e.expose(ada, "shout")
	redirect := "http://127.0.0.1:9/callback"
	tk := e.connect(ada, e.register(redirect), redirect)
	list := `{"jsonrpc":"2.0","id":ID,"method":"tools/list","params":{}}`
	call := `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"shout","arguments":{"text":"hi"}}}`
	bodies := map[string]string{
		"one tools/list":       batchOf(list, 1),
		"18,000 tools/list":    batchOf(`{"jsonrpc":"2.0","id":ID,"method":"tools/list"}`, 18000),
		"30 tools/call":        batchOf(call, 30),
		"a call with progress": batchOf(`{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"shout","arguments":{"text":"hi"},"_meta":{"progressToken":1}}}`, 2),
		"leading whitespace":   " \n\t" + batchOf(call, 2),
	}
	for name, body := range bodies {
		if len(body) > 1<<20 {
			t.Fatalf("%s: %d bytes, more than the 1 MiB body limit", name, len(body))
		}
		for _, version := range []string{"", "2025-03-26", "2025-06-18"} {
			h := map[string]string{"Accept": "application/json, text/event-stream", "Authorization": "Bearer " + tk.AccessToken}
			if version != "" {
				h["MCP-Protocol-Version"] = version
			}
			r := e.do(nil, "POST", "/api/mcp", body, h)
			if r.status != 400 || len(r.body) > 512 || !strings.Contains(r.body, `"code":-32600`) || !strings.Contains(r.body, mcpgateway.ErrBatch) ||
				!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("%s (version %q): %d %s %.300s, want 400 with one JSON-RPC error", name, version, r.status, r.header.Get("Content-Type"), r.body)
			}
		}
	}
	runs := e.do(ada.browser, "GET", "/api/workflows/"+wfID+"/runs", "", nil)
	if runs.status != 200 || !strings.Contains(runs.body, `"workflowRuns":[]`) {
		t.Errorf("runs after the batches: %d %.300s, want none", runs.status, runs.body)
	}
	// A single message still works.
	if r := e.mcp(tk.AccessToken, strings.Replace(list, "ID", "1", 1)); r.status != 200 || !strings.Contains(r.body, `"name":"shout"`) {
		t.Errorf("tools/list: %d %.300s", r.status, r.body)
	}
}

// TestMCPRateLimit: each user's /api/mcp requests are limited by
// RATE_LIMIT_MCP: over it, 429 RATE_LIMITED with Retry-After; another
// user is not affected, and the window's end lets the user in again.
func TestMCPRateLimit(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, map[string]string{"RATE_LIMIT_MCP": "3/m"})
	redirect := "http://127.0.0.1:9/callback"
	client := e.register(redirect)
	ada, bob := e.signUp("ada@example.com"), e.signUp("bob@example.com")
	adaTk, bobTk := e.connect(ada, client, redirect), e.connect(bob, client, redirect)
	for i := range 3 {
		if r := e.mcp(adaTk.AccessToken, listTools); r.status != 200 {
			t.Fatalf("request %d: %d %s", i+1, r.status, r.body)
		}
	}
	r := e.mcp(adaTk.AccessToken, listTools)
	if r.status != 429 || !strings.Contains(r.body, `"code":"RATE_LIMITED"`) || r.header.Get("Retry-After") == "" {
		t.Errorf("request 4: %d %q %s, want 429 RATE_LIMITED with Retry-After", r.status, r.header.Get("Retry-After"), r.body)
	}
	// A batch counts too, and is still refused as one.
	if r := e.mcp(adaTk.AccessToken, batchOf(`{"jsonrpc":"2.0","id":ID,"method":"ping"}`, 2)); r.status != 429 {
		t.Errorf("a batch over the limit: %d %s, want 429", r.status, r.body)
	}
	if r := e.mcp(bobTk.AccessToken, listTools); r.status != 200 {
		t.Errorf("another user: %d %s", r.status, r.body)
	}
	e.clk.Set(e.clk.Now().Add(time.Minute))
	if r := e.mcp(adaTk.AccessToken, listTools); r.status != 200 {
		t.Errorf("after the window: %d %s", r.status, r.body)
	}
}
