package ratelimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/truora/minidyn/server"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// clock is an injectable clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// lockedBuffer collects log output from concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fixture is a limited route served over HTTP behind the standard stack and
// auth.Require, on the embedded engine, with two signed-up users.
type fixture struct {
	srv            *httptest.Server
	clock          *clock
	logs           *lockedBuffer
	db             *storetest.DB
	alice, bob     string // session cookies
	served         int
	servedMu       sync.Mutex
	rateLimitTable string
}

// t0 is 10 s into a minute.
var t0 = time.Date(2026, 4, 1, 12, 30, 10, 0, time.UTC)

func newFixture(t *testing.T, rule ratelimit.Rule, table func(db *storetest.DB) string) *fixture {
	t.Helper()
	db := storetest.New(t)
	f := &fixture{clock: &clock{t: t0}, logs: &lockedBuffer{}, db: db}
	authn := auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, f.clock.Now)
	f.rateLimitTable = db.RateLimits()
	if table != nil {
		f.rateLimitTable = table(db)
	}
	limiter := ratelimit.New(store.NewRateLimits(db.DB, f.rateLimitTable), f.clock.Now)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.servedMu.Lock()
		f.served++
		f.servedMu.Unlock()
		httpapi.Respond(w, http.StatusCreated, map[string]string{"user": auth.UserID(r.Context())})
	})
	r := httpapi.NewRouter()
	r.Handle("POST /limited", authn.Require(limiter.Limit(rule)(ok)))
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.srv = httptest.NewServer(httpapi.Stack(r, httpapi.Options{Logger: logger}))
	t.Cleanup(f.srv.Close)
	for i, email := range []string{"alice@example.com", "bob@example.com"} {
		in, err := authn.SignUp(context.Background(), auth.Credentials{Email: email, Password: "password-1x", Name: "N"})
		if err != nil {
			t.Fatal(err)
		}
		cookie := auth.CookieName + "=" + in.Token
		if i == 0 {
			f.alice = cookie
		} else {
			f.bob = cookie
		}
	}
	return f
}

type result struct {
	status     int
	retryAfter string
	body       httpapi.ErrorBody
}

func (f *fixture) post(t *testing.T, cookie string) result {
	t.Helper()
	req, err := http.NewRequest("POST", f.srv.URL+"/limited", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	res := result{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &res.body); err != nil {
			t.Fatalf("error body %q: %v", b, err)
		}
	}
	return res
}

func expectAllowed(t *testing.T, name string, r result) {
	t.Helper()
	if r.status != http.StatusCreated || r.retryAfter != "" {
		t.Errorf("%s: %d (Retry-After %q) %+v, want 201", name, r.status, r.retryAfter, r.body)
	}
}

func expectLimited(t *testing.T, name string, r result, retryAfter, message string) {
	t.Helper()
	want := httpapi.ErrorBody{Error: "Too Many Requests", Code: "RATE_LIMITED", Message: message}
	if r.status != http.StatusTooManyRequests || r.retryAfter != retryAfter || r.body.Error != want.Error || r.body.Code != want.Code || r.body.Message != want.Message || r.body.Details != nil {
		t.Errorf("%s: %d Retry-After %q %+v, want 429 Retry-After %s %+v", name, r.status, r.retryAfter, r.body, retryAfter, want)
	}
}

// TestLimitOverHTTP: N requests a window are allowed, the next is 429 with
// Retry-After (the seconds left in the window) and the standard error
// body; another user is unaffected; the next window allows again.
func TestLimitOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ratelimit.MustParse("messages", "3/m"), nil)
	for i := range 3 {
		expectAllowed(t, "alice "+string(rune('1'+i)), f.post(t, f.alice))
	}
	const msg = "rate limit exceeded: at most 3 messages per minute; retry in 50 s"
	expectLimited(t, "alice 4", f.post(t, f.alice), "50", msg)
	f.clock.Set(t0.Add(20*time.Second + 500*time.Millisecond))
	expectLimited(t, "alice 5, 29.5 s before the window ends", f.post(t, f.alice), "30",
		"rate limit exceeded: at most 3 messages per minute; retry in 30 s")
	expectAllowed(t, "bob", f.post(t, f.bob))
	f.servedMu.Lock()
	served := f.served
	f.servedMu.Unlock()
	if served != 4 {
		t.Errorf("handler served %d requests, want 4 (refused ones never reach it)", served)
	}

	// The next window starts at 12:31:00.
	f.clock.Set(t0.Add(50 * time.Second))
	for i := range 3 {
		expectAllowed(t, "alice, next window "+string(rune('1'+i)), f.post(t, f.alice))
	}
	expectLimited(t, "alice, next window 4", f.post(t, f.alice), "60",
		"rate limit exceeded: at most 3 messages per minute; retry in 60 s")
	if !strings.Contains(f.logs.String(), "code=RATE_LIMITED") {
		t.Errorf("refusals not logged:\n%s", f.logs)
	}
}

// TestLimitCostsOneCallPerWindow: a limited request costs the session read
// plus one UpdateItem per window of the rule.
func TestLimitCostsOneCallPerWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec  string
		calls int64
	}{{"5/m", 2}, {"5/m,100/h", 3}, {"0", 1}} {
		f := newFixture(t, ratelimit.MustParse("messages", tc.spec), nil)
		f.db.Counter.Reset()
		expectAllowed(t, tc.spec, f.post(t, f.alice))
		if got := f.db.Counter.Count(); got != tc.calls {
			t.Errorf("%s: %d DynamoDB calls, want %d", tc.spec, got, tc.calls)
		}
	}
}

// TestLimitSeveralWindows: every window of a rule holds; a request refused
// by one window is not counted in the windows after it.
func TestLimitSeveralWindows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ratelimit.MustParse("runs", "2/s,3/m"), nil)
	expectAllowed(t, "1", f.post(t, f.alice))
	expectAllowed(t, "2", f.post(t, f.alice))
	expectLimited(t, "3, same second", f.post(t, f.alice), "1", "rate limit exceeded: at most 2 runs per second; retry in 1 s")
	f.clock.Set(t0.Add(time.Second))
	expectAllowed(t, "3, next second", f.post(t, f.alice))
	expectLimited(t, "4, over the minute", f.post(t, f.alice), "49", "rate limit exceeded: at most 3 runs per minute; retry in 49 s")
}

// TestLimitFailsOpen: when the counters cannot be written, requests are
// allowed (over the limit too) and a warning is logged.
func TestLimitFailsOpen(t *testing.T) {
	t.Parallel()
	t.Run("storage failure", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, ratelimit.MustParse("messages", "1/m"), nil)
		expectAllowed(t, "1", f.post(t, f.alice))
		// Only this test's table fails (the engine is shared). The SDK
		// retries the internal error before the limiter sees it.
		eng := storetest.Engine(t)
		eng.WithBackend(func(s *server.Server) {
			s.EmulateFailureForTable(f.rateLimitTable, server.FailureConditionInternalServerError)
		})
		t.Cleanup(func() {
			eng.WithBackend(func(s *server.Server) { s.EmulateFailureForTable(f.rateLimitTable, server.FailureConditionNone) })
		})
		expectAllowed(t, "2, over the limit while storage fails", f.post(t, f.alice))
		logs := f.logs.String()
		if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "fail open") || !strings.Contains(logs, "rule=messages") {
			t.Errorf("no fail-open warning in the logs:\n%s", logs)
		}
	})
	t.Run("missing table", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, ratelimit.MustParse("messages", "1/m"), func(*storetest.DB) string { return "no_such_rate_limits" })
		expectAllowed(t, "1", f.post(t, f.alice))
		expectAllowed(t, "2, over the limit", f.post(t, f.alice))
		if !strings.Contains(f.logs.String(), "fail open") {
			t.Errorf("no fail-open warning in the logs:\n%s", f.logs)
		}
	})
}

// fakeCounter counts in memory, or fails.
type fakeCounter struct {
	mu    sync.Mutex
	n     map[string]int64
	calls int
	err   error
}

func (c *fakeCounter) Hit(_ context.Context, userID, rule string, start time.Time, window time.Duration) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return 0, c.err
	}
	if c.n == nil {
		c.n = map[string]int64{}
	}
	k := userID + rule + start.String() + window.String()
	c.n[k]++
	return c.n[k], nil
}

func TestAllow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &fakeCounter{}
	now := time.Date(2026, 4, 1, 12, 59, 59, 900_000_000, time.UTC)
	l := ratelimit.New(c, func() time.Time { return now })
	rule := ratelimit.MustParse("streams", "1/h")
	if err := l.Allow(ctx, "u", rule); err != nil {
		t.Fatal(err)
	}
	err := l.Allow(ctx, "u", rule)
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.RateLimited || e.Code != "RATE_LIMITED" || e.RetryAfter != 1 {
		t.Fatalf("second request = %#v, want RateLimited with RetryAfter 1 (100 ms left rounds up)", err)
	}
	if httpapi.StatusOf(err) != http.StatusTooManyRequests {
		t.Errorf("status %d", httpapi.StatusOf(err))
	}

	// Disabled rules and a nil limiter make no call.
	calls := c.calls
	if err := l.Allow(ctx, "u", ratelimit.MustParse("streams", "0")); err != nil || c.calls != calls {
		t.Errorf("disabled rule: %v, %d calls", err, c.calls-calls)
	}
	var none *ratelimit.Limiter
	if err := none.Allow(ctx, "u", rule); err != nil {
		t.Errorf("nil limiter: %v", err)
	}

	// A failing counter allows (fail open).
	if err := ratelimit.New(&fakeCounter{err: errors.New("boom")}, nil).Allow(ctx, "u", rule); err != nil {
		t.Errorf("failing counter: %v, want nil (fail open)", err)
	}
	// No user: the middleware was applied outside auth.Require.
	if err := l.Allow(ctx, "", rule); errs.KindOf(err) != errs.Internal {
		t.Errorf("no user: %v, want an internal error", err)
	}
}

// TestLimitPassThrough: a nil limiter or a disabled rule leaves the handler
// as it is; without a session (Limit outside Require) the request fails
// loudly instead of going unlimited.
func TestLimitPassThrough(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	var none *ratelimit.Limiter
	c := &fakeCounter{}
	for name, h := range map[string]http.Handler{
		"nil limiter":   none.Limit(ratelimit.MustParse("messages", "1/m"))(ok),
		"disabled rule": ratelimit.New(c, nil).Limit(ratelimit.Rule{Name: "messages"})(ok),
	} {
		for range 3 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/", nil))
			if rec.Code != http.StatusNoContent {
				t.Errorf("%s: %d", name, rec.Code)
			}
		}
	}
	if c.calls != 0 {
		t.Errorf("%d counter calls, want 0", c.calls)
	}
	rec := httptest.NewRecorder()
	ratelimit.New(c, nil).Limit(ratelimit.MustParse("messages", "1/m"))(ok).ServeHTTP(rec, httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("outside auth.Require: %d, want 500", rec.Code)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"30/m": "30/m", " 30 / m ": "30/m", "1/s,100/h": "1/s,100/h", "20/m,500/h,5/s": "20/m,500/h,5/s",
		"0": "0", "off": "0", "OFF": "0", "1000000/h": "1000000/h",
	} {
		r, err := ratelimit.Parse("messages", spec)
		if err != nil || r.String() != want || r.Name != "messages" || r.Enabled() != (want != "0") {
			t.Errorf("Parse(%q) = %+v (%s), %v; want %s", spec, r, r, err, want)
		}
	}
	r := ratelimit.MustParse("messages", "30/m,500/h")
	if len(r.Windows) != 2 || r.Windows[0] != (ratelimit.Window{Limit: 30, Per: time.Minute}) || r.Windows[1] != (ratelimit.Window{Limit: 500, Per: time.Hour}) {
		t.Errorf("windows = %+v", r.Windows)
	}
	for _, spec := range []string{"", "30", "30/d", "-1/m", "0/m", "x/m", "30/m,40/m", "1/s,2/m,3/h,4/s", "1000001/m", "30/m,", "30 per minute"} {
		if _, err := ratelimit.Parse("messages", spec); err == nil || !strings.Contains(err.Error(), "30/m") {
			t.Errorf("Parse(%q) = %v, want an error showing the form", spec, err)
		}
	}
}
