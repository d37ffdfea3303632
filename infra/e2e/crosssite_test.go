package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCrossSiteWrites drives the dev server binary as a page of another
// site (or of a sibling subdomain) would, with the victim's cookie: writes
// are refused (403 ORIGIN_NOT_ALLOWED, 415 for a text body), the stream
// and the tool server included, and change nothing; the allowed frontend
// and the server's own origin still work. The tool server also answers an
// unknown JSON-RPC method as JSON-RPC.
func TestCrossSiteWrites(t *testing.T) {
	t.Parallel()
	const frontend = "https://app.example.com"
	srv := startServer(t, "ALLOWED_ORIGINS="+frontend)
	c := newClient(t, srv.API)
	signUpChatUser(t, c, "crosssite@example.com")
	chat := newChat(t, c, map[string]string{"title": "kept"})
	body := map[string]string{"title": "planted"}

	expectError(t, "text/plain from another site", c.do("POST", "/api/chats", body, "Origin", "https://evil.example", "Content-Type", "text/plain"), 403, "ORIGIN_NOT_ALLOWED")
	expectError(t, "sibling subdomain", c.do("POST", "/api/chats", body, "Origin", "https://evil.example.com", "Sec-Fetch-Site", "same-site"), 403, "ORIGIN_NOT_ALLOWED")
	expectError(t, "null origin", c.do("DELETE", "/api/chats/"+chat.ID, nil, "Origin", "null"), 403, "ORIGIN_NOT_ALLOWED")
	expectError(t, "stream from another site", c.do("POST", "/api/chats/"+chat.ID+"/messages/stream",
		map[string]string{"content": "hi", "modelId": "builtin"}, "Origin", "https://evil.example", "Accept", "text/event-stream"), 403, "ORIGIN_NOT_ALLOWED")
	expectError(t, "sign-out as a form", c.do("POST", "/api/auth/sign-out", "", "Content-Type", "application/x-www-form-urlencoded"), 415, "UNSUPPORTED_MEDIA_TYPE")
	expectError(t, "text/plain, same origin", c.do("POST", "/api/chats", body, "Content-Type", "text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")

	r := c.do("GET", "/api/chats/"+chat.ID+"/messages", nil)
	if r.Status != 200 {
		t.Fatalf("the chat is gone after the refused delete: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/api/chats", body, "Origin", frontend); r.Status != 201 || r.Header.Get("Access-Control-Allow-Origin") != frontend {
		t.Errorf("allowed frontend: %d %s (CORS %q)", r.Status, r.Body, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := c.do("POST", "/api/chats", body, "Origin", srv.API); r.Status != 201 {
		t.Errorf("own origin: %d %s", r.Status, r.Body)
	}

	mcp := func(body string, header ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.MCP, strings.NewReader(body))
		req.Header.Set("X-Service-Key", srv.Key)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if st, b := mcp(`{"method":"listTools","params":{}}`, "Origin", "https://evil.example"); st != 403 || !strings.Contains(string(b), `"code":"ORIGIN_NOT_ALLOWED"`) {
		t.Errorf("tool server from another site: %d %s", st, b)
	}
	st, b := mcp(`{"jsonrpc":"2.0","id":4,"method":"tools/nuke","params":{}}`, "Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2025-06-18")
	var rpc struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &rpc); err != nil || st != 200 || rpc.ID != 4 || rpc.Error.Code != -32601 {
		t.Errorf("unknown JSON-RPC method: %d %s (%v), want 200 with a -32601 error for id 4", st, b, err)
	}
}

// httpClient is the tests' plain client, on a transport of its own: every
// httptest.Server.Close (some tests here start one) calls
// CloseIdleConnections on http.DefaultTransport, which breaks a request of
// a parallel test that is about to reuse one of its connections.
var httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
