package e2e_test

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

type sessionBody struct {
	Data struct {
		User struct {
			ID, Email, Name      string
			CreatedAt, UpdatedAt time.Time
		} `json:"user"`
		Session struct {
			ExpiresAt time.Time `json:"expiresAt"`
		} `json:"session"`
	} `json:"data"`
}

// TestAuthJourney signs up, signs in, reads the session, lists models, sets
// a preference and signs out, as a browser client would.
func TestAuthJourney(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)

	r := c.do("GET", "/api/liveness", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"status":"ok"`) {
		t.Fatalf("liveness: %d %s", r.Status, r.Body)
	}

	r = c.do("POST", "/api/auth/sign-up/email", map[string]string{"email": "Grace@Example.com", "password": "hopper-1906", "name": "Grace"})
	if r.Status != 200 {
		t.Fatalf("sign-up: %d %s", r.Status, r.Body)
	}
	var up sessionBody
	r.decode(t, &up)
	if up.Data.User.Email != "grace@example.com" || up.Data.User.ID == "" {
		t.Fatalf("sign-up body: %s", r.Body)
	}
	setCookie := r.Header.Get("Set-Cookie")
	for _, attr := range []string{"session_token=", "HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=604800"} {
		if !strings.Contains(setCookie, attr) {
			t.Errorf("Set-Cookie %q lacks %s", setCookie, attr)
		}
	}
	if strings.Contains(setCookie, "Secure") {
		t.Errorf("Set-Cookie %q is Secure on plain-http localhost; the browser would drop it", setCookie)
	}
	if strings.Contains(string(r.Body), "hopper-1906") || strings.Contains(string(r.Body), "passwordHash") {
		t.Errorf("sign-up body leaks the password: %s", r.Body)
	}

	// A fresh client signs in with the same credentials.
	c2 := newClient(t, srv.API)
	r = c2.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "grace@example.com", "password": "hopper-1906"})
	if r.Status != 200 {
		t.Fatalf("sign-in: %d %s", r.Status, r.Body)
	}
	r = c2.do("GET", "/api/auth/session", nil)
	var sess sessionBody
	r.decode(t, &sess)
	if r.Status != 200 || sess.Data.User.ID != up.Data.User.ID || time.Until(sess.Data.Session.ExpiresAt) < 6*24*time.Hour {
		t.Fatalf("session: %d %s", r.Status, r.Body)
	}

	r = c2.do("GET", "/api/models", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"id":"builtin"`) {
		t.Fatalf("models: %d %s", r.Status, r.Body)
	}
	r = c2.do("POST", "/api/users/"+up.Data.User.ID+"/model-preference", map[string]string{"modelId": "builtin"})
	if r.Status != 200 || string(r.Body) != `{"data":{"userId":"`+up.Data.User.ID+`","modelId":"builtin"}}`+"\n" {
		t.Fatalf("preference: %d %s", r.Status, r.Body)
	}

	r = c2.do("POST", "/api/auth/sign-out", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"success":true`) {
		t.Fatalf("sign-out: %d %s", r.Status, r.Body)
	}
	expectError(t, "session after sign-out", c2.do("GET", "/api/auth/session", nil), 401, "UNAUTHORIZED")
	// The first client's session is separate and still valid.
	if r := c.do("GET", "/api/auth/session", nil); r.Status != 200 {
		t.Errorf("first session after second sign-out: %d", r.Status)
	}
}

// TestAuthErrors covers every error the auth, models and preference
// endpoints document, with status, code and body.
func TestAuthErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	owner := newClient(t, srv.API)
	r := owner.do("POST", "/api/auth/sign-up/email", map[string]string{"email": "owner@example.com", "password": "owner-pass-1", "name": "Owner"})
	if r.Status != 200 {
		t.Fatalf("sign-up: %d %s", r.Status, r.Body)
	}
	var me sessionBody
	r.decode(t, &me)
	anon := newClient(t, srv.API)
	big := `{"email":"a@example.com","password":"` + strings.Repeat("x", 1<<20) + `","name":"A"}`

	tests := []struct {
		name   string
		c      *client
		method string
		path   string
		body   any
		status int
		code   string
		field  string
	}{
		{"sign-up malformed json", anon, "POST", "/api/auth/sign-up/email", `{"email":`, 400, "INVALID_JSON", ""},
		{"sign-up bad email", anon, "POST", "/api/auth/sign-up/email", map[string]string{"email": "nope", "password": "long-enough", "name": "N"}, 400, "VALIDATION_FAILED", "email"},
		{"sign-up short password", anon, "POST", "/api/auth/sign-up/email", map[string]string{"email": "n@example.com", "password": "short", "name": "N"}, 400, "VALIDATION_FAILED", "password"},
		{"sign-up long password", anon, "POST", "/api/auth/sign-up/email", map[string]string{"email": "n@example.com", "password": strings.Repeat("p", 129), "name": "N"}, 400, "VALIDATION_FAILED", "password"},
		{"sign-up no name", anon, "POST", "/api/auth/sign-up/email", map[string]string{"email": "n@example.com", "password": "long-enough"}, 400, "VALIDATION_FAILED", "name"},
		{"sign-up wrong type", anon, "POST", "/api/auth/sign-up/email", `{"email":1,"password":"long-enough","name":"N"}`, 400, "VALIDATION_FAILED", "email"},
		{"sign-up taken (case-insensitive)", anon, "POST", "/api/auth/sign-up/email", map[string]string{"email": "OWNER@example.com", "password": "another-pass", "name": "O"}, 409, "EMAIL_TAKEN", ""},
		{"sign-up too large", anon, "POST", "/api/auth/sign-up/email", big, 413, "PAYLOAD_TOO_LARGE", ""},
		{"sign-in wrong password", anon, "POST", "/api/auth/sign-in/email", map[string]string{"email": "owner@example.com", "password": "wrong-pass-1"}, 401, "INVALID_CREDENTIALS", ""},
		{"sign-in unknown email", anon, "POST", "/api/auth/sign-in/email", map[string]string{"email": "ghost@example.com", "password": "owner-pass-1"}, 401, "INVALID_CREDENTIALS", ""},
		{"sign-in missing password", anon, "POST", "/api/auth/sign-in/email", map[string]string{"email": "owner@example.com"}, 400, "VALIDATION_FAILED", "password"},
		{"session anonymous", anon, "GET", "/api/auth/session", nil, 401, "UNAUTHORIZED", ""},
		{"sign-out anonymous", anon, "POST", "/api/auth/sign-out", nil, 401, "UNAUTHORIZED", ""},
		{"models anonymous", anon, "GET", "/api/models", nil, 401, "UNAUTHORIZED", ""},
		{"preference anonymous", anon, "POST", "/api/users/" + me.Data.User.ID + "/model-preference", map[string]string{"modelId": "builtin"}, 401, "UNAUTHORIZED", ""},
		{"preference unknown model", owner, "POST", "/api/users/" + me.Data.User.ID + "/model-preference", map[string]string{"modelId": "no-such-model"}, 400, "INVALID_MODEL", "modelId"},
		{"preference missing model", owner, "POST", "/api/users/" + me.Data.User.ID + "/model-preference", map[string]string{}, 400, "VALIDATION_FAILED", "modelId"},
		{"preference malformed json", owner, "POST", "/api/users/" + me.Data.User.ID + "/model-preference", `{`, 400, "INVALID_JSON", ""},
		{"preference of another user", owner, "POST", "/api/users/3f1e2d4c-5b6a-4789-8abc-def012345678/model-preference", map[string]string{"modelId": "builtin"}, 403, "FORBIDDEN", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.t = t
			e := expectError(t, tt.name, tt.c.do(tt.method, tt.path, tt.body), tt.status, tt.code)
			if tt.field != "" && (len(e.Details) == 0 || e.Details[0].Field != tt.field) {
				t.Errorf("details = %+v, want field %s", e.Details, tt.field)
			}
		})
	}

	// A forged cookie is refused like none at all.
	forged := newClient(t, srv.API)
	req, _ := http.NewRequest("GET", srv.API+"/api/models", nil)
	req.AddCookie(&http.Cookie{Name: "session_token", Value: strings.Repeat("A", 43)})
	resp, err := forged.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("forged cookie: %d, want 401", resp.StatusCode)
	}
}

// TestUnknownRoutes checks the JSON 404 and 405 of the router. These routes
// are undocumented on purpose, so the client does not check the contract.
func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := &client{t: t, base: srv.API, http: httpClient}
	expectError(t, "unknown route", c.do("GET", "/api/nope", nil), 404, "ROUTE_NOT_FOUND")
	r := c.do("DELETE", "/api/models", nil)
	expectError(t, "wrong method", r, 405, "METHOD_NOT_ALLOWED")
	if r.Header.Get("Allow") == "" {
		t.Error("405 without Allow header")
	}
}

// TestGracefulShutdown stops the server with SIGTERM and expects a clean exit.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	if r := newClient(t, srv.API).do("GET", "/api/liveness", nil); r.Status != 200 {
		t.Fatalf("liveness: %d", r.Status)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.done:
		if srv.err != nil {
			t.Fatalf("exit after SIGTERM: %v", srv.err)
		}
	case <-time.After(patience):
		t.Fatalf("no exit within %s of SIGTERM", patience)
	}
	if !strings.Contains(srv.stdout.String(), "shutting down") {
		t.Errorf("stdout: %s", srv.stdout)
	}
	if srv.Key == "" || !strings.HasPrefix(srv.MCP, "http://127.0.0.1:") {
		t.Errorf("startup banner: key %q, mcp %q", srv.Key, srv.MCP)
	}
}
