package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
)

// testClock is a settable clock shared by the stack and the test.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// validBodies are well-formed bodies for every protected route that takes
// one, so that body validation (400) cannot preempt the 401/403 checks. A
// new route without an entry fails TestSecurityMatrix.
var validBodies = map[string]string{
	"POST /api/users/{userId}/exports":                                      `{}`,
	"POST /api/chats/{chatId}/shares":                                       `{}`,
	"POST /api/chats/{chatId}/messages/{messageId}/regenerate":              `{}`,
	"POST /api/workflows/{workflowId}/versions/{version}/restore":           `{}`,
	"POST /api/knowledge-bases":                                             `{"name":"kb"}`,
	"PATCH /api/knowledge-bases/{knowledgeBaseId}":                          `{"name":"kb2"}`,
	"POST /api/knowledge-bases/{knowledgeBaseId}/documents":                 `{"attachmentId":"{attachmentId}"}`,
	"POST /api/knowledge-bases/{knowledgeBaseId}/query":                     `{"query":"hello"}`,
	"POST /api/auth/sign-out":                                               "",
	"POST /api/auth/sign-out-all":                                           "",
	"POST /api/users/{userId}/model-preference":                             `{"modelId":"builtin"}`,
	"POST /api/chats":                                                       `{"title":"t"}`,
	"PATCH /api/chats/{chatId}":                                             `{"title":"t2"}`,
	"POST /api/chats/{chatId}/messages":                                     `{"content":"hi","modelId":"builtin"}`,
	"POST /api/chats/{chatId}/messages/stream":                              `{"content":"hi","modelId":"builtin","userId":"{me}"}`,
	"POST /api/workflows":                                                   `{"userId":"{me}","name":"w"}`,
	"PATCH /api/workflows/{workflowId}":                                     `{"name":"w2"}`,
	"POST /api/workflows/{workflowId}/messages":                             `{"content":"hi","modelId":"builtin"}`,
	"POST /api/workflows/{workflowId}/messages/apply":                       `{"proposalId":"00000000-0000-4000-8000-000000000001"}`,
	"POST /api/workflows/{workflowId}/messages/reject":                      `{"proposalId":"00000000-0000-4000-8000-000000000001"}`,
	"POST /api/chats/{chatId}/workflow-runs":                                `{"workflowId":"{workflow}"}`,
	"POST /api/workflows/{workflowId}/runs":                                 `{}`,
	"POST /api/chats/{chatId}/workflow-runs/{runId}/cancel":                 "",
	"POST /api/chats/{chatId}/workflow-runs/{runId}/retry":                  "",
	"POST /api/workflows/{workflowId}/runs/{runId}/cancel":                  "",
	"POST /api/workflows/{workflowId}/runs/{runId}/retry":                   "",
	"POST /api/chats/{chatId}/workflow-runs/{runId}/steps/{stepId}/respond": `{"approved":true}`,
	"POST /api/workflows/{workflowId}/runs/{runId}/steps/{stepId}/respond":  `{"approved":true}`,
	"POST /api/chats/{chatId}/messages/{messageId}/stop":                    "",
	"PUT /api/users/{userId}/tool-permissions/{toolId}":                     `{"policy":"allow"}`,
	"POST /api/chats/{chatId}/tool-calls/{toolCallId}/approve":              `{"remember":true}`,
	"POST /api/chats/{chatId}/tool-calls/{toolCallId}/deny":                 "",
	"POST /api/workflows/{workflowId}/triggers":                             `{"type":"webhook"}`,
	"PATCH /api/workflows/{workflowId}/triggers/{triggerId}":                `{"enabled":false}`,
	"POST /api/workflows/{workflowId}/triggers/{triggerId}/rotate-secret":   "",
	"POST /hooks/{triggerId}":                                               `{}`,
	"POST /api/chats/{chatId}/attachments":                                  `{"name":"a.txt","contentType":"text/plain","size":3}`,
	"POST /api/users/{userId}/tokens":                                       `{"name":"t","expiresInDays":1}`,
	"POST /api/mcp":                                                         `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
	"POST /api/mcp-servers":                                                 `{"name":"matrix","url":"https://mcp.example.com/mcp","auth":{"type":"oauth"}}`,
	"PATCH /api/mcp-servers/{serverId}":                                     `{"enabled":false}`,
	"POST /api/mcp-servers/{serverId}/refresh":                              "",
	"POST /api/mcp-servers/{serverId}/authorize":                            "",
}

// securityHeaders must be on every response.
var securityHeaders = map[string]string{
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
	"Cache-Control":          "no-store",
	"X-Request-Id":           "", // present
}

// publicRoutes need no session. A webhook call is authorized by its
// signature instead (shared/trigger's tests).
var publicRoutes = map[string]bool{
	// A share is read by its unguessable id, without a session.
	"GET /api/shares/{shareId}":    true,
	"GET /api/liveness":            true,
	"POST /api/auth/sign-up/email": true,
	"POST /api/auth/sign-in/email": true,
	"POST /hooks/{triggerId}":      true,
	// The OAuth protocol's endpoints (oauth_test.go checks them): metadata
	// and keys are public, the others authenticate clients, not users, and
	// the authorization pages sign the user in themselves.
	"GET /.well-known/oauth-authorization-server":       true,
	"GET /.well-known/oauth-protected-resource":         true,
	"GET /.well-known/oauth-protected-resource/api/mcp": true,
	"GET /oauth/jwks":       true,
	"POST /oauth/token":     true,
	"POST /oauth/revoke":    true,
	"POST /oauth/register":  true,
	"GET /oauth/authorize":  true,
	"POST /oauth/authorize": true,
	// The service as an OAuth client of users' MCP servers: its client
	// metadata document is public, and the callback is authorized by its
	// single-use state (and refused unless the browser's session is the
	// state's user; e2e's TestMCPServerOAuthWithMetadataDocument).
	"GET /oauth/client.json": true,
	"GET /oauth/callback":    true,
}

type user struct {
	id, cookie, token string
}

// TestSecurityMatrix tries every protected route of every function as an
// anonymous client, with a forged cookie, with an expired session and, for
// routes on a user's resources, as another user; it then checks that no
// response and no log line carries a password, a password hash, a session
// token or the service key.
func TestSecurityMatrix(t *testing.T) {
	clk := &testClock{now: time.Now().UTC()}
	logs := &syncBuffer{}
	cfg, err := config.Load(func(k string) string { return map[string]string{"LOCAL_IAM_TEMPLATE": templatePath}[k] })
	if err != nil {
		t.Fatal(err)
	}
	s, err := local.New(context.Background(), cfg, local.Options{
		Now: clk.Now, Hasher: &auth.Hasher{Memory: 64, Time: 1, Threads: 1},
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer checkIAM(t, s)
	srv := httptest.NewServer(s.API)
	defer srv.Close()
	var bodies []string

	do := func(method, path, body, cookie string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		bodies = append(bodies, string(b)) // Set-Cookie, the one place a token belongs, is not a body
		for h, want := range securityHeaders {
			if got := resp.Header.Get(h); got == "" || !strings.Contains(got, want) {
				t.Errorf("%s %s: %s = %q, want %q", method, path, h, got, want)
			}
		}
		return resp.StatusCode, string(b)
	}
	signUp := func(email string) user {
		req, _ := http.NewRequest("POST", srv.URL+"/api/auth/sign-up/email", strings.NewReader(`{"email":"`+email+`","password":"matrix-pass-1","name":"M"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("sign-up %s: %v %v", email, resp.StatusCode, err)
		}
		defer resp.Body.Close()
		var b struct {
			Data struct{ User struct{ ID string } }
		}
		_ = json.NewDecoder(resp.Body).Decode(&b)
		c := resp.Cookies()[0]
		return user{id: b.Data.User.ID, cookie: c.Name + "=" + c.Value, token: c.Value}
	}

	// A session created eight days ago has expired.
	clk.Set(time.Now().UTC().Add(-8 * 24 * time.Hour))
	expired := signUp("expired@example.com")
	clk.Set(time.Now().UTC())
	a, b := signUp("a@example.com"), signUp("b@example.com")

	// A's resources.
	params := map[string]string{"{userId}": a.id, "{toolId}": "json_query", "{me}": a.id, "{messageId}": "00000000-0000-4000-8000-000000000002", "{toolCallId}": "call_1",
		"{tokenId}": "00000000-0000-4000-8000-000000000003", "{clientId}": "some-client", "{stepId}": "step_1",
		"{exportId}": "00000000-0000-4000-8000-000000000004", "{shareId}": "0000000000000000000000", "{version}": "1",
		"{documentId}": "00000000-0000-4000-8000-000000000005", "{knowledgeBaseId}": "00000000-0000-4000-8000-000000000006"}
	_, body := do("POST", "/api/chats", `{"title":"a's chat"}`, a.cookie)
	params["{chatId}"] = jsonField(t, body, "id")
	if hasRoute(s, "POST /api/chats/{chatId}/attachments") {
		_, body = do("POST", "/api/chats/"+params["{chatId}"]+"/attachments", validBodies["POST /api/chats/{chatId}/attachments"], a.cookie)
		params["{attachmentId}"] = jsonField(t, body, "id")
	}
	if hasRoute(s, "POST /api/workflows") {
		_, body = do("POST", "/api/workflows", `{"userId":"`+a.id+`","name":"a's workflow"}`, a.cookie)
		params["{workflowId}"] = jsonField(t, body, "id")
		params["{workflow}"] = params["{workflowId}"]
	}
	if hasRoute(s, "POST /api/workflows/{workflowId}/triggers") {
		_, body = do("POST", "/api/workflows/"+params["{workflowId}"]+"/triggers", `{"type":"webhook"}`, a.cookie)
		params["{triggerId}"] = jsonField(t, body, "id")
	}
	if hasRoute(s, "POST /api/mcp-servers") {
		_, body = do("POST", "/api/mcp-servers", `{"name":"a_server","url":"https://mcp.example.com/mcp","auth":{"type":"oauth"}}`, a.cookie)
		params["{serverId}"] = jsonField(t, body, "id")
	}
	if hasRoute(s, "POST /api/chats/{chatId}/workflow-runs") {
		_, body = do("POST", "/api/chats/"+params["{chatId}"]+"/workflow-runs", `{"workflowId":"`+params["{workflowId}"]+`"}`, a.cookie)
		params["{runId}"] = jsonField(t, body, "id")
	}
	fill := func(s string) string {
		for k, v := range params {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}
	forged := auth.CookieName + "=" + strings.Repeat("Q", 43)
	checked, owned := 0, 0

	for _, f := range s.Functions {
		for _, pattern := range f.Router.Patterns() {
			if publicRoutes[pattern] {
				continue
			}
			method, path, _ := strings.Cut(pattern, " ")
			body, ok := validBodies[pattern]
			if !ok && (method == "POST" || method == "PATCH" || method == "PUT") {
				t.Errorf("%s: no valid body in the matrix; add one", pattern)
				continue
			}
			if strings.Contains(path, "{") && strings.Contains(fill(path), "{") {
				t.Errorf("%s: no value for a path parameter; add one", pattern)
				continue
			}
			p, bd := fill(path), fill(body)
			checked++
			for _, c := range []struct{ who, cookie string }{{"anonymous", ""}, {"forged cookie", forged}, {"expired session", expired.cookie}} {
				if st, got := do(method, p, bd, c.cookie); st != 401 || !strings.Contains(got, `"code":"UNAUTHORIZED"`) {
					t.Errorf("%s as %s: %d %s, want 401 UNAUTHORIZED", pattern, c.who, st, got)
				}
			}
			if ownsResource(path) {
				owned++
				bb := strings.ReplaceAll(bd, a.id, b.id) // B names itself where the body names a user
				if st, got := do(method, p, bb, b.cookie); st != 403 || !strings.Contains(got, `"code":"FORBIDDEN"`) {
					t.Errorf("%s as another user: %d %s, want 403 FORBIDDEN", pattern, st, got)
				}
			}
		}
	}

	if checked < 14 || owned < 7 {
		t.Errorf("only %d protected routes (%d on owned resources) were tried", checked, owned)
	}

	// Nothing secret in any response body or log line.
	secrets := map[string]string{"password": "matrix-pass-1", "A's token": a.token, "B's token": b.token, "service key": s.ServiceKey, "token hash": auth.HashToken(a.token)}
	all := strings.Join(bodies, "\n") + logs.String()
	for name, v := range secrets {
		if strings.Contains(all, v) {
			t.Errorf("%s appears in a response or a log line", name)
		}
	}
	if regexp.MustCompile(`\$argon2id\$`).MatchString(all) {
		t.Error("a password hash appears in a response or a log line")
	}
	if !strings.Contains(logs.String(), `"status":403`) {
		t.Error("the captured logs hold no request lines; the log check would prove nothing")
	}
}

func hasRoute(s *local.Stack, pattern string) bool {
	for _, f := range s.Functions {
		for _, p := range f.Router.Patterns() {
			if p == pattern {
				return true
			}
		}
	}
	return false
}

// ownsResource reports whether a route addresses one user's resource.
func ownsResource(path string) bool {
	return strings.Contains(path, "{userId}") || strings.Contains(path, "{chatId}") || strings.Contains(path, "{workflowId}") ||
		strings.Contains(path, "{serverId}")
}

func jsonField(t *testing.T, body, field string) string {
	t.Helper()
	var v struct{ Data map[string]any }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	s, _ := v.Data[field].(string)
	if s == "" {
		t.Fatalf("no %s in %s", field, body)
	}
	return s
}

// allowedOrigin is the frontend origin the cross-site tests configure in
// ALLOWED_ORIGINS; siblingOrigin is another subdomain of the same site,
// which SameSite=Lax treats as same-site.
const (
	allowedOrigin = "https://app.example.com"
	siblingOrigin = "https://evil.example.com"
)

// newCrossSiteStack builds the stack with ALLOWED_ORIGINS set and serves
// its API and tool server.
func newCrossSiteStack(t *testing.T) (s *local.Stack, api, tools *httptest.Server) {
	t.Helper()
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"ALLOWED_ORIGINS": allowedOrigin, "LOCAL_IAM_TEMPLATE": templatePath}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err = local.New(context.Background(), cfg, local.Options{
		Hasher: &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() { checkIAM(t, s) })
	api, tools = httptest.NewServer(s.API), httptest.NewServer(s.Tools)
	t.Cleanup(api.Close)
	t.Cleanup(tools.Close)
	return s, api, tools
}

// errorBody is the standard error body.
type errorBody struct {
	Error, Message, Code string
}

// served is one route of one server.
type served struct {
	pattern string
	base    string // the server's URL, which is also its own origin
	public  bool   // no session or key needed
	tool    bool   // the tool server
	// access is the route's httpapi.Access: the protocol routes (OAuth,
	// the bearer-only MCP endpoint) never act on the session cookie.
	access httpapi.Access
}

// servedRoutes enumerates every route of every function and of the tool
// server from their routers.
func servedRoutes(s *local.Stack, api, tools *httptest.Server) []served {
	var out []served
	for _, f := range s.Functions {
		for _, p := range f.Router.Patterns() {
			method, path, _ := strings.Cut(p, " ")
			req := httptest.NewRequest(method, strings.NewReplacer("{", "", "}", "").Replace(path), nil)
			out = append(out, served{pattern: p, base: api.URL, public: publicRoutes[p], access: f.Router.AccessOf(req)})
		}
	}
	for _, p := range s.ToolRouter.Patterns() {
		out = append(out, served{pattern: p, base: tools.URL, tool: true})
	}
	return out
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// TestCrossSiteMatrix sends every route of the service (every function's
// and the tool server's) requests from each kind of origin and with each
// kind of body a cross-site page can send without a preflight, anonymous so
// that nothing changes: a write from a foreign origin, the null origin or
// a sibling subdomain is 403 ORIGIN_NOT_ALLOWED; a write with a text/plain,
// form or multipart body is 415 UNSUPPORTED_MEDIA_TYPE; a write from the
// allowed origin, the server's own origin or with no Origin, and every
// read, pass the checks and reach the handler (401 without a session or
// key; a public write answers its body's validation).
func TestCrossSiteMatrix(t *testing.T) {
	s, api, tools := newCrossSiteStack(t)
	anyID := "00000000-0000-4000-8000-00000000000a"
	fill := strings.NewReplacer("{userId}", anyID, "{chatId}", anyID, "{workflowId}", anyID, "{runId}", anyID, "{toolId}", "hash", "{me}", anyID, "{workflow}", anyID,
		"{triggerId}", anyID, "{stepId}", "step_1", "{serverId}", anyID)

	do := func(method, url, body string, header map[string]string) (int, errorBody) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e errorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	// passed reports whether a response comes from the handler, past the
	// origin and media-type checks.
	passed := func(r served, status int, e errorBody) bool {
		switch {
		case e.Code == "ORIGIN_NOT_ALLOWED" || e.Code == "UNSUPPORTED_MEDIA_TYPE":
			return false
		case !r.public:
			return status == 401 && e.Code == "UNAUTHORIZED"
		case r.pattern == "GET /api/liveness":
			return status == 200
		case r.pattern == "POST /hooks/{triggerId}": // no such trigger
			return status == 404 && e.Code == "TRIGGER_NOT_FOUND"
		case r.pattern == "GET /oauth/callback": // no state: an HTML page
			return status == 400
		default: // sign-up and sign-in with an empty object (or rate limited)
			return status == 400 && e.Code == "VALIDATION_FAILED" || status == 429
		}
	}

	writes, reads, protocol := 0, 0, 0
	for _, r := range servedRoutes(s, api, tools) {
		method, path, _ := strings.Cut(r.pattern, " ")
		url := r.base + fill.Replace(path)
		if r.access != httpapi.Cookie {
			// A protocol route never acts on the session cookie, so a
			// cross-site request can abuse no ambient credential: an Open
			// one answers any origin without credentials; the
			// authorization form checks its origin and a CSRF token itself
			// (oauth_test.go's TestConsentFormCSRF).
			protocol++
			req, _ := http.NewRequest(method, url, strings.NewReader("a=b"))
			req.Header.Set("Origin", "https://evil.example")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			switch {
			case r.access == httpapi.Open && (resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Credentials") != ""):
				t.Errorf("%s (open) from another site: CORS %q credentials %q, want * without credentials", r.pattern, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Credentials"))
			case r.access == httpapi.OwnForms && method == "POST" && resp.StatusCode != 403:
				t.Errorf("%s (own forms) from another site: %d, want 403", r.pattern, resp.StatusCode)
			case resp.Header.Get("Access-Control-Allow-Credentials") != "":
				t.Errorf("%s from another site: allows credentials", r.pattern)
			}
			continue
		}
		body := fill.Replace(validBodies[r.pattern])
		switch {
		case r.public:
			body = `{}`
		case r.tool:
			body = `{"method":"listTools","params":{}}`
		}
		if !isWrite(method) {
			reads++
			for _, origin := range []string{"https://evil.example", "null", siblingOrigin} {
				if st, e := do(method, url, "", map[string]string{"Origin": origin}); !passed(r, st, e) {
					t.Errorf("%s from %s: %d %s, want the read served", r.pattern, origin, st, e.Code)
				}
			}
			continue
		}
		writes++
		refused := []map[string]string{
			{"Origin": "https://evil.example"},
			{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			{"Origin": "null"},
			{"Origin": "null", "Sec-Fetch-Site": "cross-site"},
			{"Origin": siblingOrigin},
			{"Origin": siblingOrigin, "Sec-Fetch-Site": "same-site"},
			{"Origin": "https://app.example.com.evil.example"},
			{"Origin": strings.Replace(r.base, "http://", "https://", 1) + "0"}, // own host, another port
		}
		for _, h := range refused {
			h["Content-Type"] = "application/json"
			if st, e := do(method, url, body, h); st != 403 || e.Code != "ORIGIN_NOT_ALLOWED" || e.Error != "Forbidden" || e.Message == "" {
				t.Errorf("%s from %v: %d %+v, want 403 ORIGIN_NOT_ALLOWED", r.pattern, h, st, e)
			}
		}
		accepted := []map[string]string{
			{"Origin": allowedOrigin},
			{"Origin": allowedOrigin, "Sec-Fetch-Site": "cross-site"},
			{"Origin": r.base},
			{"Origin": "https://d111111abcdef8.cloudfront.net", "Sec-Fetch-Site": "same-origin"}, // the browser's own origin behind CloudFront
			{},
		}
		for _, h := range accepted {
			h["Content-Type"] = "application/json; charset=utf-8"
			if st, e := do(method, url, body, h); !passed(r, st, e) {
				t.Errorf("%s from %v: %d %s, want it past the origin check", r.pattern, h, st, e.Code)
			}
		}
		if st, e := do(method, url, body, nil); !passed(r, st, e) {
			t.Errorf("%s without Content-Type: %d %s, want it past the media-type check", r.pattern, st, e.Code)
		}
		mediaTypes := []struct{ contentType, body string }{
			{"text/plain;charset=UTF-8", body},
			{"text/plain", ""},
			{"application/x-www-form-urlencoded", "a=b"},
			{"application/x-www-form-urlencoded", ""},
			{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n" + body + "\r\n--x--\r\n"},
		}
		for _, mt := range mediaTypes {
			for _, origin := range []string{"", allowedOrigin} {
				h := map[string]string{"Content-Type": mt.contentType}
				if origin != "" {
					h["Origin"] = origin
				}
				if st, e := do(method, url, mt.body, h); st != 415 || e.Code != "UNSUPPORTED_MEDIA_TYPE" || e.Error != "Unsupported Media Type" || e.Message == "" {
					t.Errorf("%s with %s from %q: %d %+v, want 415 UNSUPPORTED_MEDIA_TYPE", r.pattern, mt.contentType, origin, st, e)
				}
			}
		}
	}
	if writes < 17 || reads < 10 || protocol < 9 {
		t.Errorf("only %d write, %d read and %d protocol routes were tried", writes, reads, protocol)
	}
}

// TestCrossSiteAttacks replays the attacks a page on another site, or on a
// sibling subdomain, could mount with the victim's cookie, and checks that
// none changes anything, while the allowed frontend still works.
func TestCrossSiteAttacks(t *testing.T) {
	_, api, _ := newCrossSiteStack(t)
	send := func(method, path, body, cookie string, header map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, api.URL+path, strings.NewReader(body))
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := send("POST", "/api/auth/sign-up/email", `{"email":"victim@example.com","password":"victim-pass-1","name":"V"}`, "", map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 200 || len(resp.Cookies()) == 0 {
		t.Fatalf("sign-up: %d %s", resp.StatusCode, body)
	}
	c := resp.Cookies()[0]
	cookie := c.Name + "=" + c.Value
	resp, body = send("POST", "/api/chats", `{"title":"kept"}`, cookie, map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 201 {
		t.Fatalf("create chat: %d %s", resp.StatusCode, body)
	}
	chatID := jsonField(t, body, "id")
	countChats := func() string {
		t.Helper()
		resp, body := send("GET", "/api/auth/session", "", cookie, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("the victim's session is gone: %d %s", resp.StatusCode, body)
		}
		var s struct {
			Data struct{ User struct{ ID string } }
		}
		_ = json.Unmarshal([]byte(body), &s)
		resp, body = send("GET", "/api/users/"+s.Data.User.ID+"/chats", "", cookie, nil)
		var page struct{ Data struct{ Total int } }
		_ = json.Unmarshal([]byte(body), &page)
		return resp.Status + " " + strconv.Itoa(page.Data.Total)
	}
	before := countChats()

	attacks := []struct {
		name, method, path, body string
		header                   map[string]string
	}{
		{"create a chat with a text/plain form", "POST", "/api/chats", `{"title":"planted"}`, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}},
		{"create a chat from a sibling subdomain", "POST", "/api/chats", `{"title":"planted"}`, map[string]string{"Origin": siblingOrigin, "Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}},
		{"create a chat from a sandboxed frame", "POST", "/api/chats", `{"title":"planted"}`, map[string]string{"Origin": "null", "Content-Type": "application/json"}},
		{"create a chat with an unlabelled body from a sibling", "POST", "/api/chats", `{"title":"planted"}`, map[string]string{"Origin": siblingOrigin}},
		{"delete the chat", "DELETE", "/api/chats/" + chatID, "", map[string]string{"Origin": "https://evil.example"}},
		{"sign out", "POST", "/api/auth/sign-out", "", map[string]string{"Origin": siblingOrigin, "Content-Type": "application/x-www-form-urlencoded"}},
		{"sign out everywhere", "POST", "/api/auth/sign-out-all", "", map[string]string{"Origin": "https://evil.example"}},
	}
	for _, a := range attacks {
		if resp, body := send(a.method, a.path, a.body, cookie, a.header); resp.StatusCode != 403 && resp.StatusCode != 415 {
			t.Errorf("%s: %d %s, want it refused", a.name, resp.StatusCode, body)
		}
	}
	if after := countChats(); after != before {
		t.Errorf("chats before the attacks %q, after %q", before, after)
	}
	if resp, body := send("GET", "/api/chats/"+chatID+"/messages", "", cookie, nil); resp.StatusCode != 200 {
		t.Errorf("the chat is gone: %d %s", resp.StatusCode, body)
	}

	// A cross-site sign-in (login CSRF) sets no cookie.
	resp, body = send("POST", "/api/auth/sign-in/email", `{"email":"victim@example.com","password":"victim-pass-1"}`, "", map[string]string{"Origin": siblingOrigin, "Content-Type": "text/plain"})
	if resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Errorf("cross-site sign-in: %d, %d cookies, %s; want 403 and no cookie", resp.StatusCode, len(resp.Cookies()), body)
	}

	// The allowed frontend works as before.
	resp, body = send("POST", "/api/chats", `{"title":"from the frontend"}`, cookie, map[string]string{"Origin": allowedOrigin, "Content-Type": "application/json"})
	if resp.StatusCode != 201 || resp.Header.Get("Access-Control-Allow-Origin") != allowedOrigin {
		t.Errorf("allowed frontend: %d %s (CORS %q)", resp.StatusCode, body, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp, body = send("POST", "/api/auth/sign-in/email", `{"email":"victim@example.com","password":"victim-pass-1"}`, "", map[string]string{"Origin": allowedOrigin, "Content-Type": "application/json"})
	if resp.StatusCode != 200 || len(resp.Cookies()) == 0 {
		t.Errorf("sign-in from the allowed frontend: %d %s", resp.StatusCode, body)
	}
}
