package contract_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
)

// startStack builds the whole service on the embedded DynamoDB engine.
func startStack(t *testing.T) *local.Stack {
	t.Helper()
	env := map[string]string{"LOCAL_IAM_TEMPLATE": "../../template.yaml"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stack, err := local.New(ctx, cfg, local.Options{
		Logger: slog.New(slog.DiscardHandler),
		Hasher: &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, // cheap for tests
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stack.Close(); err != nil {
			t.Errorf("closing the stack: %v", err)
		}
	})
	return stack
}

// TestDocumentedRoutesAreServedRoutes compares the operations of
// docs/openapi.yaml with the routes the functions register, both ways.
func TestDocumentedRoutesAreServedRoutes(t *testing.T) {
	spec := loadSpec(t)
	stack := startStack(t)

	served := map[string]string{} // pattern -> function
	for _, f := range stack.Functions {
		for _, p := range f.Router.Patterns() {
			if other, dup := served[p]; dup {
				t.Errorf("%s is served by both %s and %s", p, other, f.LogicalID)
			}
			served[p] = f.LogicalID
		}
	}
	// The dev server's signed blob URLs (S3 presigned URLs in AWS).
	for _, p := range stack.Blobs.Routes().Patterns() {
		served[p] = "the dev server's blob handler"
	}
	documented := spec.Routes()
	for _, p := range documented {
		if _, ok := served[p]; !ok {
			t.Errorf("documented but not served: %s", p)
		}
	}
	for p, fn := range served {
		if !slices.Contains(documented, p) {
			t.Errorf("served by %s but not documented in docs/openapi.yaml: %s", fn, p)
		}
	}
}

// TestServiceConformsToDocument drives the real service through a checking
// Transport: every response, success and error alike, must match
// docs/openapi.yaml.
func TestServiceConformsToDocument(t *testing.T) {
	spec := loadSpec(t)
	stack := startStack(t)
	srv := httptest.NewServer(stack.API)
	defer srv.Close()

	newClient := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Transport: spec.Transport(t, nil), Jar: jar}
	}
	ada, eve, anon := newClient(), newClient(), newClient()
	var adaID string
	tooLarge := `{"modelId":"` + strings.Repeat("x", 1<<20) + `"}`
	// crossSite are the headers of the steps a cross-site page could send.
	crossSite := map[string]map[string]string{
		"preference from another site": {"Origin": "https://evil.example"},
		"preference as text/plain":     {"Content-Type": "text/plain"},
		"sign-in from another site":    {"Origin": "null"},
		"sign-up as a form":            {"Content-Type": "application/x-www-form-urlencoded"},
		"sign-out from another site":   {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
	}

	steps := []struct {
		name         string
		client       *http.Client
		method, path string
		body         string
		want         int
		after        func(body []byte)
	}{
		{"liveness", anon, "GET", "/api/liveness", "", 200, nil},
		{"sign-up", ada, "POST", "/api/auth/sign-up/email", `{"email":" Ada@Example.com ","password":"correct horse","name":"Ada","extra":1}`, 200, func(b []byte) {
			var out struct {
				Data struct {
					User struct{ ID string }
				}
			}
			if err := json.Unmarshal(b, &out); err != nil || out.Data.User.ID == "" {
				t.Fatalf("sign-up body %s: %v", b, err)
			}
			adaID = out.Data.User.ID
		}},
		{"sign-up taken", anon, "POST", "/api/auth/sign-up/email", `{"email":"ada@example.com","password":"correct horse","name":"Ada 2"}`, 409, nil},
		{"sign-up invalid", anon, "POST", "/api/auth/sign-up/email", `{"email":"nope","password":"short","name":""}`, 400, nil},
		{"sign-up wrong type", anon, "POST", "/api/auth/sign-up/email", `{"email":5}`, 400, nil},
		{"sign-up malformed JSON", anon, "POST", "/api/auth/sign-up/email", `{"email":`, 400, nil},
		{"sign-up too large", anon, "POST", "/api/auth/sign-up/email", tooLarge, 413, nil},
		{"sign-up eve", eve, "POST", "/api/auth/sign-up/email", `{"email":"eve@example.com","password":"correct horse","name":"Eve"}`, 200, nil},
		{"sign-in wrong password", anon, "POST", "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"wrong password"}`, 401, nil},
		{"sign-in missing fields", anon, "POST", "/api/auth/sign-in/email", `{}`, 400, nil},
		{"sign-in", ada, "POST", "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"correct horse"}`, 200, nil},
		{"session", ada, "GET", "/api/auth/session", "", 200, nil},
		{"session without cookie", anon, "GET", "/api/auth/session", "", 401, nil},
		{"models", ada, "GET", "/api/models", "", 200, nil},
		{"models without session", anon, "GET", "/api/models", "", 401, nil},
		{"preference", ada, "POST", "/api/users/{ada}/model-preference", `{"modelId":"builtin"}`, 200, nil},
		{"preference unknown model", ada, "POST", "/api/users/{ada}/model-preference", `{"modelId":"nope"}`, 400, nil},
		{"preference missing model", ada, "POST", "/api/users/{ada}/model-preference", `{}`, 400, nil},
		{"preference malformed JSON", ada, "POST", "/api/users/{ada}/model-preference", `[]`, 400, nil},
		{"preference of another user", eve, "POST", "/api/users/{ada}/model-preference", `{"modelId":"builtin"}`, 403, nil},
		{"preference without session", anon, "POST", "/api/users/{ada}/model-preference", `{"modelId":"builtin"}`, 401, nil},
		{"preference too large", ada, "POST", "/api/users/{ada}/model-preference", tooLarge, 413, nil},
		{"preference from another site", ada, "POST", "/api/users/{ada}/model-preference", `{"modelId":"builtin"}`, 403, nil},
		{"preference as text/plain", ada, "POST", "/api/users/{ada}/model-preference", `{"modelId":"builtin"}`, 415, nil},
		{"sign-in from another site", anon, "POST", "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"correct horse"}`, 403, nil},
		{"sign-up as a form", anon, "POST", "/api/auth/sign-up/email", `email=x`, 415, nil},
		{"sign-out from another site", ada, "POST", "/api/auth/sign-out", "", 403, nil},
		{"sign-out", ada, "POST", "/api/auth/sign-out", "", 200, nil},
		{"sign-out again", ada, "POST", "/api/auth/sign-out", "", 401, nil},
		{"session after sign-out", ada, "GET", "/api/auth/session", "", 401, nil},
	}
	for _, s := range steps {
		path := strings.ReplaceAll(s.path, "{ada}", adaID)
		var body io.Reader
		if s.body != "" {
			body = strings.NewReader(s.body)
		}
		req, err := http.NewRequest(s.method, srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if s.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range crossSite[s.name] {
			req.Header.Set(k, v)
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.want {
			t.Fatalf("%s: %s %s = %d %s, want %d", s.name, s.method, path, resp.StatusCode, b, s.want)
		}
		if s.after != nil {
			s.after(b)
		}
	}
}
