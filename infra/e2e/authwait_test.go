package e2e_test

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// authWaitRun is a run as GET .../runs/{runId} shows it, with what a step
// waiting for its server's authorization says.
type authWaitRun struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Error   string `json:"error"`
	Attempt int    `json:"attempt"`
	Steps   []struct {
		ID               string         `json:"id"`
		Status           string         `json:"status"`
		Error            string         `json:"error"`
		Output           map[string]any `json:"output"`
		ElementsDone     *int           `json:"elementsDone"`
		ExpiresAt        *time.Time     `json:"expiresAt"`
		Reason           string         `json:"reason"`
		MCPServerID      string         `json:"mcpServerId"`
		AuthorizationURL string         `json:"authorizationUrl"`
		WaitedMs         int64          `json:"authorizationWaitedMs"`
	} `json:"steps"`
}

// waitAuthRun polls run runID of workflow wfID until done says so.
func waitAuthRun(t *testing.T, c *client, wfID, runID, what string, done func(authWaitRun) bool) authWaitRun {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		r := c.do("GET", "/api/workflows/"+wfID+"/runs/"+runID, nil)
		var out struct{ Data authWaitRun }
		r.decode(t, &out)
		if r.Status != 200 {
			t.Fatalf("get run: %d %s", r.Status, r.Body)
		}
		if done(out.Data) {
			return out.Data
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not %s: %+v", what, out.Data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKillWhileWaitingForAuthorization: a user's oauth server (a second
// dev server's /api/mcp, behind its own authorization server) connected
// once, its grant then revoked by the remote user. Two runs call its
// tool: a step, and a forEach step over two texts; both wait for the
// authorization (reason, server, URL, a deadline 24 h on). The dev server
// dies (SIGKILL, by pid) while they wait; a new one on the same data file
// still shows them waiting, its authorize route and OAuth callback
// authorize the server again, and both runs complete there on their
// first attempt with the tool's output, each call of the remote tool run
// once (the remote workflow behind it ran three times in all), each step
// saying how long it waited (authorizationWaitedMs).
func TestKillWhileWaitingForAuthorization(t *testing.T) {
	t.Parallel()
	dataFile := filepath.Join(t.TempDir(), "data.json")
	env := []string{"DATA_FILE=" + dataFile, "TOOLS_ALLOW_PRIVATE_NETWORKS=true", "RATE_LIMIT_MCP_SERVERS=100/m"}
	a := durableServer(t, env...)
	remote := startServer(t, "OAUTH_ALLOW_HTTP_CLIENTS=true", "RATE_LIMIT_OAUTH_DOCUMENT=100/m")
	c, cR := newClient(t, a.API), newClient(t, remote.API)
	userID := signUpChatUser(t, c, "authwait-kill@example.com")
	remoteUserID := signUpChatUser(t, cR, "authwait-remote@example.com")
	digestID := defineWorkflow(t, cR, remoteUserID, "digest", `{"steps":[{"id":"h","toolId":"hash","inputs":{"algorithm":"sha256","text":"{{input.text}}"}}],
	  "inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"toolName":"digest_text","exposeAsTool":true}`)

	// Connected once, so that its tool is known to the workflows.
	s := createMCPServer(t, c, map[string]any{"name": "remote", "url": remote.API + "/api/mcp", "auth": map[string]string{"type": "oauth"}})
	if r := get(t, noRedirects(c), consent(t, cR, authorizeURL(t, c, s.ID, nil), "approve").String()); r.Status != 200 {
		t.Fatalf("first callback: %d %s", r.Status, r.Body)
	}
	if got := getMCPServer(t, c, s.ID); got.Status != "connected" || len(got.Tools) != 1 {
		t.Fatalf("after the first authorization: %+v", got)
	}
	single := defineWorkflow(t, c, userID, "remote step", `{"steps":[{"id":"r","toolId":"mcp/remote/digest_text","inputs":{"text":"across"}},
	  {"id":"h","toolId":"hash","inputs":{"algorithm":"md5","text":"{{steps.r.text}}"}}]}`)
	each := defineWorkflow(t, c, userID, "remote forEach", `{"inputSchema":{"type":"object","properties":{"texts":{"type":"array"}}},
	  "steps":[{"id":"e","toolId":"mcp/remote/digest_text","inputs":{"text":"{{item}}"},"forEach":"{{input.texts}}","concurrency":1}]}`)

	// The remote user revokes the grant: the access token is refused.
	var conns struct {
		Data []struct {
			ClientID string `json:"clientId"`
		} `json:"data"`
	}
	r := cR.do("GET", "/api/users/"+remoteUserID+"/connections", nil)
	r.decode(t, &conns)
	if r.Status != 200 || len(conns.Data) != 1 {
		t.Fatalf("connections: %d %s", r.Status, r.Body)
	}
	if r := cR.do("DELETE", "/api/users/"+remoteUserID+"/connections/"+url.PathEscape(conns.Data[0].ClientID), nil); r.Status != 204 {
		t.Fatalf("disconnect: %d %s", r.Status, r.Body)
	}

	start := func(wfID, input string) string {
		t.Helper()
		r := c.do("POST", "/api/workflows/"+wfID+"/runs", input, "Prefer", "respond-async")
		var out struct{ Data authWaitRun }
		r.decode(t, &out)
		if r.Status != 202 || out.Data.ID == "" {
			t.Fatalf("start: %d %s", r.Status, r.Body)
		}
		return out.Data.ID
	}
	waiting := func(r authWaitRun) bool { return r.Status != "pending" && r.Status != "running" }
	runs := map[string]string{single: start(single, `{}`), each: start(each, `{"input":{"texts":["one","two"]}}`)}
	started := time.Now()
	for wfID, runID := range runs {
		w := waitAuthRun(t, c, wfID, runID, "waiting", waiting)
		st := w.Steps[0]
		if w.Status != "waiting" || st.Status != "waiting" || st.Reason != "authorization" || st.MCPServerID != s.ID ||
			st.AuthorizationURL != "/api/mcp-servers/"+s.ID+"/authorize" || st.ExpiresAt == nil ||
			st.ExpiresAt.Before(started.Add(23*time.Hour)) || st.ExpiresAt.After(time.Now().Add(24*time.Hour)) {
			t.Fatalf("before the kill: %+v", w)
		}
	}

	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done

	b := durableServer(t, env...)
	c.base = b.API
	var authURL string
	for wfID, runID := range runs {
		w := waitAuthRun(t, c, wfID, runID, "read", func(authWaitRun) bool { return true })
		if w.Status != "waiting" || w.Steps[0].Status != "waiting" || w.Steps[0].Reason != "authorization" {
			t.Fatalf("after the restart: %+v", w)
		}
		authURL = w.Steps[0].AuthorizationURL
	}
	// The step's authorizationUrl starts the authorization on the new
	// server; the consent redirects to its callback.
	var started2 struct {
		Data struct{ AuthorizationURL string }
	}
	r = c.do("POST", authURL, nil)
	r.decode(t, &started2)
	if r.Status != 200 || !strings.HasPrefix(started2.Data.AuthorizationURL, remote.API+"/oauth/authorize?") {
		t.Fatalf("authorize on the new server: %d %s", r.Status, r.Body)
	}
	cb := consent(t, cR, started2.Data.AuthorizationURL, "approve")
	if !strings.HasPrefix(cb.String(), b.API+"/oauth/callback?") {
		t.Fatalf("consent redirect = %s", cb)
	}
	if r := get(t, noRedirects(c), cb.String()); r.Status != 200 {
		t.Fatalf("callback on the new server: %d %s", r.Status, r.Body)
	}

	done := func(r authWaitRun) bool {
		return r.Status != "pending" && r.Status != "running" && r.Status != "waiting"
	}
	got := waitAuthRun(t, c, single, runs[single], "ended", done)
	if got.Status != "completed" || got.Attempt != 1 || !strings.Contains(fmt.Sprint(got.Steps[0].Output["text"]), sha256Hex("across")) ||
		got.Steps[0].Reason != "" || got.Steps[0].ExpiresAt != nil || got.Steps[0].WaitedMs <= 0 || got.Steps[1].Status != "completed" {
		t.Fatalf("the step's run on the new server: %+v", got)
	}
	got = waitAuthRun(t, c, each, runs[each], "ended", done)
	results, _ := got.Steps[0].Output["results"].([]any)
	if got.Status != "completed" || got.Attempt != 1 || len(results) != 2 || got.Steps[0].WaitedMs <= 0 {
		t.Fatalf("the forEach run on the new server: %+v", got)
	}
	for i, text := range []string{"one", "two"} {
		if m, _ := results[i].(map[string]any); !strings.Contains(fmt.Sprint(m["text"]), sha256Hex(text)) {
			t.Fatalf("element %d: %v", i, results[i])
		}
	}
	// Each call ran once on the remote side: the refused ones ran nothing.
	var list struct {
		Data struct{ WorkflowRuns []authWaitRun }
	}
	r = cR.do("GET", "/api/workflows/"+digestID+"/runs", nil)
	r.decode(t, &list)
	if r.Status != 200 || len(list.Data.WorkflowRuns) != 3 {
		t.Fatalf("the remote workflow's runs: %d %s", r.Status, r.Body)
	}
}
