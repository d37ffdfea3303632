package local_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/store"
)

// fixture is a stack on the embedded engine with a signed-up user.
type fixture struct {
	stack   *local.Stack
	counter *store.CallCounter
	cookie  string
	userID  string
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	counter := &store.CallCounter{}
	s, err := local.New(context.Background(), cfg, local.Options{Counter: counter, Hasher: &auth.Hasher{Memory: 64, Time: 1, Threads: 1}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/api/auth/sign-up/email", strings.NewReader(`{"email":"bench@example.com","password":"bench-pass-1","name":"Bench"}`))
	s.API.ServeHTTP(rec, req)
	if rec.Code != 200 {
		tb.Fatalf("sign-up: %d %s", rec.Code, rec.Body)
	}
	c := rec.Result().Cookies()[0]
	var body struct {
		Data struct{ User struct{ ID string } }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		tb.Fatal(err)
	}
	return &fixture{stack: s, counter: counter, cookie: c.Name + "=" + c.Value, userID: body.Data.User.ID}
}

func (f *fixture) request(method, path, body string) *http.Request {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
	}
	r.Header.Set("Cookie", f.cookie)
	return r
}

// callBudgets are the DynamoDB calls each request may make: the session
// lookup (one read) plus what the endpoint itself needs.
func callBudgets(f *fixture) []struct {
	name, method, path, body string
	status                   int
	calls                    int64
} {
	return []struct {
		name, method, path, body string
		status                   int
		calls                    int64
	}{
		{"liveness (no storage)", "GET", "/api/liveness", "", 200, 0},
		{"session", "GET", "/api/auth/session", "", 200, 1},
		{"models", "GET", "/api/models", "", 200, 1},
		{"set preference", "POST", "/api/users/" + f.userID + "/model-preference", `{"modelId":"builtin"}`, 200, 2},
		{"preference of another user", "POST", "/api/users/00000000-0000-4000-8000-000000000000/model-preference", `{"modelId":"builtin"}`, 403, 1},
	}
}

// TestDynamoDBCallBudget holds each endpoint to its DynamoDB call budget:
// an authenticated GET costs exactly the session read plus what the
// endpoint needs.
func TestDynamoDBCallBudget(t *testing.T) {
	f := newFixture(t)
	for _, tt := range callBudgets(f) {
		f.counter.Reset()
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request(tt.method, tt.path, tt.body))
		if rec.Code != tt.status {
			t.Errorf("%s: status %d, want %d: %s", tt.name, rec.Code, tt.status, rec.Body)
		}
		if got := f.counter.Count(); got != tt.calls {
			t.Errorf("%s: %d DynamoDB calls, want %d", tt.name, got, tt.calls)
		}
	}
}

// BenchmarkEndpoints measures each endpoint in process against the
// embedded engine, reporting DynamoDB calls per request. The liveness
// endpoint (no storage) is the floor the others are compared against.
func BenchmarkEndpoints(b *testing.B) {
	f := newFixture(b)
	for _, tt := range callBudgets(f) {
		b.Run(strings.ReplaceAll(tt.name, " ", "_"), func(b *testing.B) {
			f.counter.Reset()
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				f.stack.API.ServeHTTP(rec, f.request(tt.method, tt.path, tt.body))
				if rec.Code != tt.status {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(f.counter.Count())/float64(b.N), "ddbcalls/op")
		})
	}
}
