package local_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
)

// shoutDefinition is the workflow the MCP tests expose: it upper-cases
// its text in three steps (a progress notification each), fails on the
// text "fail", and first sleeps 25 s on "slow" (longer than the tests'
// call wait, callWait, which runs before the run starts: however slow the
// machine, a "slow" run outlives the call). Its output is
// {"result": "<TEXT>"}.
const shoutDefinition = `{
  "description": "Upper-cases text in three steps",
  "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
  "steps": [
    {"id": "wait", "toolId": "test_count", "inputs": {"key": "slow", "ms": 25000}, "if": "input.text == \"slow\""},
    {"id": "check", "toolId": "json_query", "inputs": {"input": "{{input.text}}", "query": "if . == \"fail\" then error(\"the text says fail\") else . end"}},
    {"id": "upper", "toolId": "json_query", "inputs": {"input": "{{check.result}}", "query": "ascii_upcase"}},
    {"id": "done", "toolId": "json_query", "inputs": {"input": "{{upper.result}}", "query": "."}}
  ],
  "exposeAsTool": true, "toolName": %q}`

// callWait is how long the tests' MCP calls wait for their run: long
// enough for a three-step run on a loaded machine, shorter than the
// "slow" run's sleep.
const callWait = 20 * time.Second

// patience bounds a test's wait for an event (a notification, a run's
// end): a bound for a stuck service, never a measure of its speed.
const patience = 10 * time.Minute

// expose gives u a real workflow exposed as the tool name
// (shoutDefinition), through the REST API, and returns its id.
func (e *oauthEnv) expose(u testUser, name string) string {
	e.t.Helper()
	r := e.do(u.browser, "POST", "/api/workflows", `{"userId":"`+u.id+`","name":"`+name+`"}`, nil)
	if r.status != 201 {
		e.t.Fatalf("create workflow: %d %s", r.status, r.body)
	}
	id := jsonPath(e.t, r.body, "data", "id")
	if r := e.do(u.browser, "PATCH", "/api/workflows/"+id, fmt.Sprintf(shoutDefinition, name), nil); r.status != 200 {
		e.t.Fatalf("define workflow: %d %s", r.status, r.body)
	}
	return id
}

// oauthEnv is a running stack with an HTTP server and its clock; its
// MCP calls run real workflows on the run engine (a call waits 1.5 s).
type oauthEnv struct {
	t       *testing.T
	srv     *httptest.Server
	stack   *local.Stack
	clk     *testClock
	keyFile string
	logs    *syncBuffer
}

// newOAuthEnv starts the whole stack (infra/local) behind an httptest
// server, with the given extra environment.
func newOAuthEnv(t *testing.T, env map[string]string) *oauthEnv {
	t.Helper()
	e := &oauthEnv{t: t, clk: &testClock{now: time.Now().UTC()}, logs: &syncBuffer{}}
	e.keyFile = filepath.Join(t.TempDir(), "oauth-keys.json")
	vars := map[string]string{"OAUTH_KEY_FILE": e.keyFile, "OAUTH_ALLOW_HTTP_CLIENTS": "true", "TOOLS_TEST_HOOKS": "true", "LOCAL_IAM_TEMPLATE": templatePath}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	e.stack, err = local.New(context.Background(), cfg, local.Options{
		Now: e.clk.Now, Hasher: &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, MCPCallWait: callWait,
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkIAM(t, e.stack) })
	e.srv = httptest.NewServer(e.stack.API)
	t.Cleanup(func() { e.srv.Close(); e.stack.Close() })
	return e
}

// browser is a cookie-keeping client that does not follow redirects.
func (e *oauthEnv) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// testUser is a signed-up user with a browser session.
type testUser struct {
	id, email, password string
	browser             *http.Client
}

func (e *oauthEnv) signUp(email string) testUser {
	e.t.Helper()
	u := testUser{email: email, password: "oauth-pass-" + email, browser: e.browser()}
	resp := e.do(u.browser, "POST", "/api/auth/sign-up/email", `{"email":"`+email+`","password":"`+u.password+`","name":"U"}`, nil)
	if resp.status != 200 {
		e.t.Fatalf("sign-up %s: %d %s", email, resp.status, resp.body)
	}
	u.id = jsonPath(e.t, resp.body, "data", "user", "id")
	return u
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (e *oauthEnv) do(c *http.Client, method, path, body string, header map[string]string) answer {
	e.t.Helper()
	target := path
	if strings.HasPrefix(path, "/") {
		target = e.srv.URL + path
	}
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if c == nil {
		c = &http.Client{Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (e *oauthEnv) form(c *http.Client, path string, v url.Values, header map[string]string) answer {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for k, val := range header {
		h[k] = val
	}
	return e.do(c, "POST", path, v.Encode(), h)
}

// jsonPath reads a string at path in a JSON body.
func jsonPath(t *testing.T, body string, path ...string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("no %v in %s", path, body)
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// pkce is a code verifier and its S256 challenge.
type pkce struct{ verifier, challenge string }

func newPKCE() pkce {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(v))
	return pkce{verifier: v, challenge: base64.RawURLEncoding.EncodeToString(sum[:])}
}

// register registers a public client with the redirect URIs.
func (e *oauthEnv) register(redirects ...string) string {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"client_name": "Test client", "redirect_uris": redirects,
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}})
	resp := e.do(nil, "POST", "/oauth/register", string(b), nil)
	if resp.status != 201 {
		e.t.Fatalf("register: %d %s", resp.status, resp.body)
	}
	return jsonPath(e.t, resp.body, "client_id")
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// authorizeParams are the parameters of an authorization request.
func authorizeParams(clientID, redirect string, p pkce, extra map[string]string) url.Values {
	v := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"code_challenge": {p.challenge}, "code_challenge_method": {"S256"}, "state": {"st-1"}}
	for k, val := range extra {
		if val == "" {
			v.Del(k)
		} else {
			v.Set(k, val)
		}
	}
	return v
}

// authorize drives the pages as u's browser (signing in when the browser
// has no session) and returns the redirect the consent sends back.
func (e *oauthEnv) authorize(u testUser, params url.Values) *url.URL {
	e.t.Helper()
	page := e.do(u.browser, "GET", "/oauth/authorize?"+params.Encode(), "", nil)
	if page.status != 200 {
		e.t.Fatalf("authorize page: %d %s", page.status, page.body)
	}
	csrf := csrfField.FindStringSubmatch(page.body)
	if csrf == nil {
		e.t.Fatalf("no CSRF field in %s", page.body)
	}
	post := url.Values{"csrf": {csrf[1]}}
	for k, v := range params {
		post[k] = v
	}
	if strings.Contains(page.body, `value="sign-in"`) {
		in := url.Values{"action": {"sign-in"}, "email": {u.email}, "password": {u.password}}
		for k, v := range post {
			in[k] = v
		}
		page = e.form(u.browser, "/oauth/authorize", in, nil)
		if page.status != 200 || !strings.Contains(page.body, `value="approve"`) {
			e.t.Fatalf("sign-in: %d %s", page.status, page.body)
		}
		// The consent page carries the token of the new session.
		post.Set("csrf", csrfField.FindStringSubmatch(page.body)[1])
	}
	post.Set("action", "approve")
	resp := e.form(u.browser, "/oauth/authorize", post, nil)
	if resp.status != http.StatusSeeOther {
		e.t.Fatalf("approve: %d %s", resp.status, resp.body)
	}
	loc, err := url.Parse(resp.header.Get("Location"))
	if err != nil {
		e.t.Fatal(err)
	}
	return loc
}

// tokens is a token endpoint answer.
type tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
}

func (e *oauthEnv) token(v url.Values) (int, tokens, string) {
	e.t.Helper()
	resp := e.form(nil, "/oauth/token", v, nil)
	var tk tokens
	_ = json.Unmarshal([]byte(resp.body), &tk)
	return resp.status, tk, resp.body
}

// connect runs the whole flow for u and returns the tokens.
func (e *oauthEnv) connect(u testUser, clientID, redirect string) tokens {
	e.t.Helper()
	p := newPKCE()
	loc := e.authorize(u, authorizeParams(clientID, redirect, p, nil))
	code := loc.Query().Get("code")
	if code == "" {
		e.t.Fatalf("no code in %s", loc)
	}
	st, tk, body := e.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {clientID},
		"redirect_uri": {redirect}, "code_verifier": {p.verifier}, "resource": {e.srv.URL + "/api/mcp"}})
	if st != 200 || tk.AccessToken == "" {
		e.t.Fatalf("token: %d %s", st, body)
	}
	return tk
}

// mcp posts a JSON-RPC message to /api/mcp with a bearer token.
func (e *oauthEnv) mcp(token, body string) answer {
	h := map[string]string{"Accept": "application/json, text/event-stream"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return e.do(nil, "POST", "/api/mcp", body, h)
}

const listTools = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
