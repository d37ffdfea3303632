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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
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
	"POST /api/auth/sign-out":                               "",
	"POST /api/users/{userId}/model-preference":             `{"modelId":"builtin"}`,
	"POST /api/chats":                                       `{"title":"t"}`,
	"PATCH /api/chats/{chatId}":                             `{"title":"t2"}`,
	"POST /api/chats/{chatId}/messages":                     `{"content":"hi","modelId":"builtin"}`,
	"POST /api/chats/{chatId}/messages/stream":              `{"content":"hi","modelId":"builtin","userId":"{me}"}`,
	"POST /api/workflows":                                   `{"userId":"{me}","name":"w"}`,
	"PATCH /api/workflows/{workflowId}":                     `{"name":"w2"}`,
	"POST /api/workflows/{workflowId}/messages":             `{"content":"hi","modelId":"builtin"}`,
	"POST /api/workflows/{workflowId}/messages/apply":       `{"proposalId":"00000000-0000-4000-8000-000000000001"}`,
	"POST /api/workflows/{workflowId}/messages/reject":      `{"proposalId":"00000000-0000-4000-8000-000000000001"}`,
	"POST /api/chats/{chatId}/workflow-runs":                `{"workflowId":"{workflow}"}`,
	"POST /api/chats/{chatId}/workflow-runs/{runId}/cancel": "",
}

// securityHeaders must be on every response.
var securityHeaders = map[string]string{
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
	"Cache-Control":          "no-store",
	"X-Request-Id":           "", // present
}

// publicRoutes need no session.
var publicRoutes = map[string]bool{
	"GET /api/liveness":            true,
	"POST /api/auth/sign-up/email": true,
	"POST /api/auth/sign-in/email": true,
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
	cfg, err := config.Load(func(string) string { return "" })
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
	params := map[string]string{"{userId}": a.id, "{toolId}": "json_query", "{me}": a.id}
	_, body := do("POST", "/api/chats", `{"title":"a's chat"}`, a.cookie)
	params["{chatId}"] = jsonField(t, body, "id")
	if hasRoute(s, "POST /api/workflows") {
		_, body = do("POST", "/api/workflows", `{"userId":"`+a.id+`","name":"a's workflow"}`, a.cookie)
		params["{workflowId}"] = jsonField(t, body, "id")
		params["{workflow}"] = params["{workflowId}"]
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
			if !ok && (method == "POST" || method == "PATCH") {
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
	return strings.Contains(path, "{userId}") || strings.Contains(path, "{chatId}") || strings.Contains(path, "{workflowId}")
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
