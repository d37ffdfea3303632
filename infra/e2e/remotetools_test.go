package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestRemoteToolsInChatsAndSteps: a user registers the service's own
// /api/mcp (a real MCP server: the user's workflows exposed as tools) as
// a remote server; its tool mcp/self/digest_text is listed by GET
// /api/tools for that user only (category mcp), asks before it runs in a
// chat (no readOnlyHint) and, once allowed, runs in a chat reply and as a
// workflow step; an unknown remote tool in a step is a 400; 16 steps at
// once all run.
func TestRemoteToolsInChatsAndSteps(t *testing.T) {
	t.Parallel()
	// Each run of a step calling digest_text is two runs (the tool is a
	// workflow of the same user).
	srv := startServer(t, "TOOLS_ALLOW_PRIVATE_NETWORKS=true", "RATE_LIMIT_MCP_SERVERS=100/m", "RATE_LIMIT_RUNS=200/m")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "remote-tools@example.com")
	defineWorkflow(t, c, userID, "digest", `{"steps":[{"id":"h","toolId":"hash","inputs":{"algorithm":"sha256","text":"{{input.text}}"}}],
	  "inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"toolName":"digest_text","exposeAsTool":true}`)
	var pat struct{ Data struct{ Token string } }
	c.do("POST", "/api/users/"+userID+"/tokens", `{"name":"remote","expiresInDays":1}`).decode(t, &pat)
	s := createMCPServer(t, c, map[string]any{"name": "self", "url": srv.API + "/api/mcp",
		"auth": map[string]string{"type": "header", "name": "Authorization", "value": "Bearer " + pat.Data.Token}})
	if s.Status != "connected" || len(s.Tools) != 1 {
		t.Fatalf("server = %+v", s)
	}
	const toolID = "mcp/self/digest_text"

	// Listed for its owner, in category mcp; not for another user.
	var list struct {
		Data struct {
			Tools []struct{ ID, Category string }
		}
	}
	c.do("GET", "/api/tools", nil).decode(t, &list)
	found := false
	for _, tl := range list.Data.Tools {
		found = found || tl.ID == toolID && tl.Category == "mcp"
	}
	if !found {
		t.Fatalf("GET /api/tools lacks %s: %+v", toolID, list.Data.Tools)
	}
	// Fetched and searched by its owner, like a built-in tool.
	var one struct{ Data struct{ ID, Category string } }
	c.do("GET", "/api/tools/"+url.PathEscape(toolID), nil).decode(t, &one)
	if one.Data.ID != toolID || one.Data.Category != "mcp" {
		t.Fatalf("GET /api/tools/%s = %+v", toolID, one.Data)
	}
	var found2 struct {
		Data struct{ Tools []struct{ ID string } }
	}
	c.do("GET", "/api/tools/search?q="+url.QueryEscape("DIGEST_text"), nil).decode(t, &found2)
	if !slices.ContainsFunc(found2.Data.Tools, func(tl struct{ ID string }) bool { return tl.ID == toolID }) {
		t.Fatalf("search for digest_text lacks %s: %+v", toolID, found2.Data.Tools)
	}
	other := newClient(t, srv.API)
	otherID := signUpChatUser(t, other, "remote-tools-other@example.com")
	if r := other.do("GET", "/api/tools", nil); r.Status != 200 || strings.Contains(string(r.Body), toolID) {
		t.Fatalf("another user's GET /api/tools: %d, shows %s: %v", r.Status, toolID, strings.Contains(string(r.Body), toolID))
	}
	expectError(t, "another user's GET of the tool", other.do("GET", "/api/tools/"+url.PathEscape(toolID), nil), 404, "TOOL_NOT_FOUND")
	if r := other.do("GET", "/api/tools/search?q=digest_text", nil); r.Status != 200 || strings.Contains(string(r.Body), toolID) {
		t.Fatalf("another user's search: %d, shows %s", r.Status, toolID)
	}

	// The hash the workflow behind the tool gives.
	want := sha256Hex("remote")

	// In a chat: no readOnlyHint, so the call asks first.
	chatID := newChat(t, c, map[string]string{"title": "remote"}).ID
	ask := `run ` + toolID + ` with {"text": "remote"}`
	r := c.do("POST", "/api/chats/"+chatID+"/messages", map[string]string{"content": ask})
	if r.Status >= 500 || r.Status == 201 && strings.Contains(string(r.Body), want) {
		t.Fatalf("a call that should ask: %d %s", r.Status, r.Body)
	}
	// Allowed, it runs and its result reaches the reply.
	if r := c.do("PUT", "/api/users/"+userID+"/tool-permissions/"+url.PathEscape(toolID), `{"policy":"allow"}`); r.Status != 200 {
		t.Fatalf("allow %s: %d %s", toolID, r.Status, r.Body)
	}
	chatID = newChat(t, c, map[string]string{"title": "remote 2"}).ID
	ex := sendMessage(t, c, chatID, map[string]string{"content": ask})
	if len(ex.Response.ToolCalls) != 1 || ex.Response.ToolCalls[0].ToolName != toolID || !strings.Contains(string(ex.Response.ToolCalls[0].Result), want) ||
		!strings.Contains(ex.Response.Content, want) {
		t.Fatalf("reply = %+v", ex.Response)
	}

	// As a workflow step, its result read by the next step.
	wfID := defineWorkflow(t, c, userID, "uses remote", `{"steps":[{"id":"r","toolId":"`+toolID+`","inputs":{"text":"remote"}},
	  {"id":"h","toolId":"hash","inputs":{"algorithm":"md5","text":"{{steps.r.text}}"}}]}`)
	run := c.do("POST", "/api/workflows/"+wfID+"/runs", `{}`)
	var done struct{ Data unattendedRun }
	run.decode(t, &done)
	if run.Status != 201 || done.Data.Status != "completed" || len(done.Data.Steps) != 2 || !strings.Contains(done.Data.Steps[0].Output["text"].(string), want) {
		t.Fatalf("run: %d %s", run.Status, run.Body)
	}

	// An unknown remote tool, another user's, a malformed id: 400.
	for _, id := range []string{"mcp/self/nope", "mcp/other/digest_text", "mcp/Self/x", "mcp/self/" + strings.Repeat("a", 129)} {
		r := c.do("PATCH", "/api/workflows/"+wfID, `{"steps":[{"id":"r","toolId":"`+id+`","inputs":{}}]}`)
		if r.Status != 400 {
			t.Errorf("step toolId %s: %d %s", id, r.Status, r.Body)
		}
	}
	otherWf := createWorkflow(t, other, otherID, "theirs")
	if r := other.do("PATCH", "/api/workflows/"+otherWf.ID, `{"steps":[{"id":"r","toolId":"`+toolID+`","inputs":{"text":"x"}}]}`); r.Status != 400 {
		t.Errorf("another user's step naming %s: %d %s", toolID, r.Status, r.Body)
	}

	// 16 runs at once, each calling the remote tool.
	var wg sync.WaitGroup
	fails := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			r := c.do("POST", "/api/workflows/"+wfID+"/runs", `{}`)
			var d struct{ Data unattendedRun }
			if json.Unmarshal(r.Body, &d) != nil || r.Status >= 500 || r.Status == 201 && d.Data.Status != "completed" {
				fails <- string(r.Body)
			}
		})
	}
	wg.Wait()
	close(fails)
	for f := range fails {
		t.Errorf("a concurrent run: %s", f)
	}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
