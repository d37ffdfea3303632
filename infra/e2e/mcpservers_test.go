package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

type mcpServerJSON struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	URL     string `json:"url"`
	Enabled bool   `json:"enabled"`
	Status  string `json:"status"`
	// AuthorizationURL is where the user authorizes an oauth server
	// while it waits for it.
	AuthorizationURL string `json:"authorizationUrl"`
	Auth             struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"auth"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
}

func createMCPServer(t *testing.T, c *client, body any) mcpServerJSON {
	t.Helper()
	r := c.do("POST", "/api/mcp-servers", body)
	if r.Status != 201 {
		t.Fatalf("create MCP server %v: %d %s", body, r.Status, r.Body)
	}
	var out struct{ Data mcpServerJSON }
	r.decode(t, &out)
	return out.Data
}

// TestMCPServerConnectsToAnInstance: a user registers the service's own
// /api/mcp (a real MCP server: the user's workflows exposed as tools) as
// their remote server, with a personal access token as its API key
// header; the tools come back with their schemas, the key never does;
// a wrong key, a refresh after a new tool, a disabled server, a rename,
// a new URL, a delete.
func TestMCPServerConnectsToAnInstance(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "TOOLS_ALLOW_PRIVATE_NETWORKS=true", "RATE_LIMIT_MCP_SERVERS=100/m")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "mcp-servers@example.com")
	defineWorkflow(t, c, userID, "digest", `{"steps":[{"id":"h","toolId":"hash","inputs":{"algorithm":"sha256","text":"{{input.text}}"}}],
	  "inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"toolName":"digest_text","exposeAsTool":true}`)
	var pat struct{ Data struct{ Token string } }
	c.do("POST", "/api/users/"+userID+"/tokens", `{"name":"remote","expiresInDays":1}`).decode(t, &pat)
	if pat.Data.Token == "" {
		t.Fatal("no personal access token")
	}
	endpoint := srv.API + "/api/mcp"

	s := createMCPServer(t, c, map[string]any{"name": "self", "url": endpoint,
		"auth": map[string]string{"type": "header", "name": "Authorization", "value": "Bearer " + pat.Data.Token}})
	if s.Status != "connected" || s.Auth.Type != "header" || s.Auth.Name != "Authorization" || len(s.Tools) != 1 ||
		s.Tools[0].Name != "digest_text" || !strings.Contains(string(s.Tools[0].InputSchema), `"text"`) {
		t.Fatalf("created = %+v", s)
	}
	for _, path := range []string{"/api/mcp-servers/" + s.ID, "/api/mcp-servers"} {
		if r := c.do("GET", path, nil); r.Status != 200 || strings.Contains(string(r.Body), pat.Data.Token) {
			t.Fatalf("GET %s: %d, shows the key: %v", path, r.Status, strings.Contains(string(r.Body), pat.Data.Token))
		}
	}

	// A wrong key is stored, in status error, with the remote's refusal.
	bad := createMCPServer(t, c, map[string]any{"name": "wrong_key", "url": endpoint,
		"auth": map[string]string{"type": "header", "name": "Authorization", "value": "Bearer nope"}})
	if bad.Status != "error" || bad.Error == nil || bad.Error.Code != "SERVER_UNAUTHORIZED" || len(bad.Tools) != 0 {
		t.Fatalf("wrong key = %+v", bad)
	}
	// Without auth the service's MCP endpoint refuses too.
	if none := createMCPServer(t, c, map[string]any{"name": "no_key", "url": endpoint}); none.Status != "error" || none.Error.Code != "SERVER_UNAUTHORIZED" {
		t.Fatalf("no key = %+v", none)
	}
	// OAuth: waits for the user to authorize.
	if o := createMCPServer(t, c, map[string]any{"name": "oauth", "url": endpoint, "auth": map[string]string{"type": "oauth"}}); o.Status != "needs_authorization" {
		t.Fatalf("oauth = %+v", o)
	}
	// Nothing listens: status error, not a 5xx.
	if gone := createMCPServer(t, c, map[string]any{"name": "gone", "url": "http://127.0.0.1:1/mcp"}); gone.Status != "error" || gone.Error.Code != "SERVER_UNREACHABLE" {
		t.Fatalf("nothing listens = %+v", gone)
	}

	// A second exposed workflow shows after refresh, not before.
	defineWorkflow(t, c, userID, "second", `{"steps":[{"id":"h","toolId":"hash","inputs":{"algorithm":"md5","text":"x"}}],"toolName":"second_tool","exposeAsTool":true}`)
	var got struct{ Data mcpServerJSON }
	c.do("GET", "/api/mcp-servers/"+s.ID, nil).decode(t, &got)
	if len(got.Data.Tools) != 1 {
		t.Fatalf("tools changed without a refresh: %+v", got.Data.Tools)
	}
	r := c.do("POST", "/api/mcp-servers/"+s.ID+"/refresh", nil)
	r.decode(t, &got)
	if r.Status != 200 || got.Data.Status != "connected" || len(got.Data.Tools) != 2 {
		t.Fatalf("refresh: %d %s", r.Status, r.Body)
	}

	// Disable, rename; a new URL keeps the key.
	r = c.do("PATCH", "/api/mcp-servers/"+s.ID, `{"enabled":false,"name":"renamed"}`)
	r.decode(t, &got)
	if r.Status != 200 || got.Data.Enabled || got.Data.Name != "renamed" || len(got.Data.Tools) != 2 {
		t.Fatalf("PATCH: %d %s", r.Status, r.Body)
	}
	expectError(t, "rename onto a taken name", c.do("PATCH", "/api/mcp-servers/"+s.ID, `{"name":"wrong_key"}`), 409, "NAME_TAKEN")
	r = c.do("PATCH", "/api/mcp-servers/"+s.ID, map[string]string{"url": strings.Replace(endpoint, "127.0.0.1", "localhost", 1)})
	r.decode(t, &got)
	if r.Status != 200 || got.Data.Status != "connected" || len(got.Data.Tools) != 2 {
		t.Fatalf("new URL: %d %s", r.Status, r.Body)
	}
	// The old name is free again.
	createMCPServer(t, c, map[string]any{"name": "self", "url": "http://127.0.0.1:1/mcp"})

	if r := c.do("DELETE", "/api/mcp-servers/"+s.ID, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	expectError(t, "deleted", c.do("GET", "/api/mcp-servers/"+s.ID, nil), 404, "MCP_SERVER_NOT_FOUND")
}

// TestMCPServerBadInput: every field at its limit, one over and far over;
// the SSRF cases without TOOLS_ALLOW_PRIVATE_NETWORKS; the 20-server
// limit; another user's server; pages; the rate of connecting writes.
// Never a 5xx, nothing stored by a refused request.
func TestMCPServerBadInput(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "RATE_LIMIT_MCP_SERVERS=100/m")
	c := newClient(t, srv.API)
	signUpChatUser(t, c, "mcp-bad@example.com")
	oauth := map[string]string{"type": "oauth"}
	ok := func(name string) map[string]any {
		return map[string]any{"name": name, "url": "https://mcp.example.com/mcp", "auth": oauth}
	}

	long := "https://mcp.example.com/" + strings.Repeat("a", 2048-len("https://mcp.example.com/"))
	cases := []struct {
		name string
		body any
		code string
	}{
		{"name missing", map[string]any{"url": "https://mcp.example.com/mcp"}, "VALIDATION_FAILED"},
		{"name upper case", map[string]any{"name": "Bad", "url": "https://mcp.example.com/mcp"}, "VALIDATION_FAILED"},
		{"name starts with a digit", map[string]any{"name": "1x", "url": "https://mcp.example.com/mcp"}, "VALIDATION_FAILED"},
		{"name 33 characters", map[string]any{"name": "a" + strings.Repeat("b", 32), "url": "https://mcp.example.com/mcp"}, "VALIDATION_FAILED"},
		{"name far over", map[string]any{"name": strings.Repeat("a", 100000), "url": "https://mcp.example.com/mcp"}, "VALIDATION_FAILED"},
		{"url missing", map[string]any{"name": "x"}, "INVALID_URL"},
		{"url http", map[string]any{"name": "x", "url": "http://mcp.example.com/mcp"}, "INVALID_URL"},
		{"url ftp", map[string]any{"name": "x", "url": "ftp://mcp.example.com/mcp"}, "INVALID_URL"},
		{"url relative", map[string]any{"name": "x", "url": "/api/mcp"}, "INVALID_URL"},
		{"url with credentials", map[string]any{"name": "x", "url": "https://u:p@mcp.example.com/mcp"}, "INVALID_URL"},
		{"url one over", map[string]any{"name": "x", "url": long + "a"}, "INVALID_URL"},
		{"url far over", map[string]any{"name": "x", "url": long + strings.Repeat("a", 500000)}, "INVALID_URL"},
		{"loopback", map[string]any{"name": "x", "url": "https://127.0.0.1/mcp"}, "INVALID_URL"},
		{"loopback v6", map[string]any{"name": "x", "url": "https://[::1]/mcp"}, "INVALID_URL"},
		{"localhost", map[string]any{"name": "x", "url": "https://localhost:8443/mcp"}, "INVALID_URL"},
		{"metadata service", map[string]any{"name": "x", "url": "https://169.254.169.254/latest/meta-data"}, "INVALID_URL"},
		{"private", map[string]any{"name": "x", "url": "https://10.0.0.1/mcp"}, "INVALID_URL"},
		{"mapped loopback", map[string]any{"name": "x", "url": "https://[::ffff:127.0.0.1]/mcp"}, "INVALID_URL"},
		{"name resolving to loopback", map[string]any{"name": "x", "url": "https://127.0.0.1.nip.io.localhost/mcp"}, "INVALID_URL"},
		{"auth type unknown", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "basic"}}, "VALIDATION_FAILED"},
		{"header without value", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "header", "name": "X-Key"}}, "VALIDATION_FAILED"},
		{"header Host", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "header", "name": "host", "value": "v"}}, "VALIDATION_FAILED"},
		{"header name not a token", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "header", "name": "X Key", "value": "v"}}, "VALIDATION_FAILED"},
		{"header value with a line break", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "header", "name": "X-Key", "value": "a\r\nX-Evil: 1"}}, "VALIDATION_FAILED"},
		{"header name one over", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "header", "name": strings.Repeat("k", 65), "value": "v"}}, "VALIDATION_FAILED"},
		{"header value one over", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "header", "name": "X-Key", "value": strings.Repeat("v", 4097)}}, "VALIDATION_FAILED"},
		{"header value far over", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "header", "name": "X-Key", "value": strings.Repeat("v", 500000)}}, "VALIDATION_FAILED"},
		{"oauth with a value", map[string]any{"name": "x", "url": "https://mcp.example.com/mcp", "auth": map[string]string{"type": "oauth", "value": "v"}}, "VALIDATION_FAILED"},
		{"not an object", `[1,2]`, "INVALID_JSON"},
		{"not JSON", `{"name":`, "INVALID_JSON"},
	}
	for _, tc := range cases {
		r := c.do("POST", "/api/mcp-servers", tc.body)
		if r.Status >= 500 {
			t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
			continue
		}
		expectError(t, tc.name, r, 400, tc.code)
	}
	// At the limits: a 32-character name, a 2,048-character URL, a
	// 64-character header name and a 4,096-character value.
	at := createMCPServer(t, c, map[string]any{"name": "a" + strings.Repeat("b", 31), "url": long, "auth": oauth})
	if at.URL != long {
		t.Fatalf("URL at its limit came back as %d characters", len(at.URL))
	}
	// The header server connects to a public name that is not an MCP
	// server (or, offline, does not resolve): either way status error.
	hdr := c.do("POST", "/api/mcp-servers", map[string]any{"name": "hdr", "url": "https://mcp.invalid/mcp",
		"auth": map[string]string{"type": "header", "name": strings.Repeat("k", 64), "value": strings.Repeat("v", 4096)}})
	var hv struct{ Data mcpServerJSON }
	hdr.decode(t, &hv)
	if hdr.Status != 201 || hv.Data.Status != "error" || strings.Contains(string(hdr.Body), strings.Repeat("v", 100)) {
		t.Fatalf("header at its limits: %d %s", hdr.Status, hdr.Body)
	}

	// Nothing was stored by the refused requests: 2 servers.
	var list struct {
		Data struct {
			MCPServers []mcpServerJSON `json:"mcpServers"`
			NextCursor string          `json:"nextCursor"`
		}
	}
	c.do("GET", "/api/mcp-servers", nil).decode(t, &list)
	if len(list.Data.MCPServers) != 2 {
		t.Fatalf("%d servers after the refused requests, want 2", len(list.Data.MCPServers))
	}

	// The limit: 20, then 409 SERVER_LIMIT; a taken name is NAME_TAKEN.
	for i := 2; i < 20; i++ {
		createMCPServer(t, c, ok(fmt.Sprintf("s%d", i)))
	}
	expectError(t, "21st server", c.do("POST", "/api/mcp-servers", ok("s20")), 409, "SERVER_LIMIT")
	// A taken name is told first, whatever the count.
	expectError(t, "name taken at the limit", c.do("POST", "/api/mcp-servers", ok("s2")), 409, "NAME_TAKEN")
	if r := c.do("DELETE", "/api/mcp-servers/"+at.ID, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	expectError(t, "name taken", c.do("POST", "/api/mcp-servers", ok("s2")), 409, "NAME_TAKEN")
	createMCPServer(t, c, ok("s20"))

	// Pages of 7 cover the 20 in order, each once.
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		q := "/api/mcp-servers?limit=7"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := c.do("GET", q, nil)
		if r.Status != 200 {
			t.Fatalf("page %d: %d %s", page, r.Status, r.Body)
		}
		list.Data.NextCursor = ""
		r.decode(t, &list)
		for _, s := range list.Data.MCPServers {
			if seen[s.ID] {
				t.Fatalf("%s listed twice", s.Name)
			}
			seen[s.ID] = true
		}
		if cursor = list.Data.NextCursor; cursor == "" || page > 5 {
			break
		}
	}
	if len(seen) != 20 {
		t.Fatalf("pages listed %d servers, want 20", len(seen))
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?cursor=" + strings.Repeat("a", 257), "?cursor=bm9wZQ"} {
		expectError(t, "list "+q, c.do("GET", "/api/mcp-servers"+q, nil), 400, "INVALID_PAGINATION")
	}

	// Another user sees none of them and cannot touch one.
	other := newClient(t, srv.API)
	signUpChatUser(t, other, "mcp-other@example.com")
	var mine struct{ Data mcpServerJSON }
	c.do("GET", "/api/mcp-servers/"+hv.Data.ID, nil).decode(t, &mine)
	other.do("GET", "/api/mcp-servers", nil).decode(t, &list)
	if len(list.Data.MCPServers) != 0 {
		t.Fatalf("another user lists %d servers", len(list.Data.MCPServers))
	}
	expectError(t, "other GET", other.do("GET", "/api/mcp-servers/"+hv.Data.ID, nil), 403, "FORBIDDEN")
	expectError(t, "other PATCH", other.do("PATCH", "/api/mcp-servers/"+hv.Data.ID, `{"enabled":false}`), 403, "FORBIDDEN")
	expectError(t, "other refresh", other.do("POST", "/api/mcp-servers/"+hv.Data.ID+"/refresh", nil), 403, "FORBIDDEN")
	expectError(t, "other DELETE", other.do("DELETE", "/api/mcp-servers/"+hv.Data.ID, nil), 403, "FORBIDDEN")
	expectError(t, "bad id", c.do("GET", "/api/mcp-servers/nope", nil), 400, "INVALID_ID")
	expectError(t, "no session", newClient(t, srv.API).do("GET", "/api/mcp-servers", nil), http.StatusUnauthorized, "UNAUTHORIZED")
	var still struct{ Data mcpServerJSON }
	c.do("GET", "/api/mcp-servers/"+hv.Data.ID, nil).decode(t, &still)
	if !still.Data.Enabled {
		t.Fatal("another user's PATCH disabled the server")
	}

	// Connecting writes are rate limited per user: refresh until 429
	// (at most the 100 of a window, and one more window if the minute
	// turns), with Retry-After; reads are not counted.
	limited := false
	for i := 0; i < 220 && !limited; i++ {
		r := c.do("POST", "/api/mcp-servers/"+at.ID+"/refresh", nil)
		switch r.Status {
		case 404:
		case 429:
			limited = true
			expectError(t, "rate limited", r, 429, "RATE_LIMITED")
			if r.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		default:
			t.Fatalf("refresh %d: %d %s", i, r.Status, r.Body)
		}
	}
	if !limited {
		t.Fatal("no 429 after 220 connecting writes")
	}
	if r := c.do("GET", "/api/mcp-servers?limit=1", nil); r.Status != 200 {
		t.Fatalf("a read after the limit: %d", r.Status)
	}
}
