package toolclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

const restTestKey = "rest-test-service-key-0123456789"

// restClock is a settable clock for the cache.
type restClock struct {
	mu  sync.Mutex
	now time.Time
}

// builtinCount is the number of built-in tools the catalog lists.
var builtinCount = len(tools.Builtin(tools.Config{}))

func (c *restClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *restClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// countingToolServer is the real tool server behind a handler that counts
// the calls per method and can be switched to failing (502 from a proxy).
type countingToolServer struct {
	*httptest.Server
	failing atomic.Bool
	mu      sync.Mutex
	calls   map[string]int
}

func newCountingToolServer(t *testing.T) *countingToolServer {
	t.Helper()
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	real := toolserver.Routes(reg, restTestKey)
	s := &countingToolServer{calls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req toolclient.Request
		_ = json.Unmarshal(body, &req)
		s.mu.Lock()
		s.calls[req.Method]++
		s.mu.Unlock()
		if s.failing.Load() {
			http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		real.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// take returns the calls of method since the last take.
func (s *countingToolServer) take(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.calls[method]
	s.calls[method] = 0
	return n
}

// restFixture is the REST tool endpoints on a counting tool server, with a
// signed-in user.
type restFixture struct {
	ts     *countingToolServer
	clock  *restClock
	api    http.Handler
	cookie string
}

func newRestFixture(t *testing.T, ttl time.Duration) *restFixture {
	t.Helper()
	db := storetest.New(t)
	authn := auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, time.Now)
	me, err := authn.SignUp(context.Background(), auth.Credentials{Email: "tools@example.com", Password: "password-1x", Name: "T"})
	if err != nil {
		t.Fatal(err)
	}
	ts := newCountingToolServer(t)
	clk := &restClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	routes := toolclient.Routes(toolclient.NewCatalog(toolclient.NewClient(ts.URL, restTestKey, nil), ttl, clk.Now), authn)
	return &restFixture{
		ts: ts, clock: clk, cookie: auth.CookieName + "=" + me.Token,
		api: httpapi.Stack(routes, httpapi.Options{Logger: slog.New(slog.DiscardHandler)}),
	}
}

// restResult is a response's status and decoded body.
type restResult struct {
	status int
	body   []byte
}

func (f *restFixture) get(t *testing.T, path string, signedIn bool) restResult {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if signedIn {
		req.Header.Set("Cookie", f.cookie)
	}
	rec := httptest.NewRecorder()
	f.api.ServeHTTP(rec, req)
	return restResult{rec.Code, rec.Body.Bytes()}
}

type restListBody struct {
	Data struct {
		Tools []toolclient.ToolSummary `json:"tools"`
		Total *int                     `json:"total"`
	} `json:"data"`
}

type restErrorBody struct {
	Error, Message, Code string
	Details              []struct{ Field, Message string }
}

// check verifies status, error code (and field) or a successful list.
func (r restResult) check(t *testing.T, name string, status int, code, field string, wantTools int) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d: %s", name, r.status, status, r.body)
		return
	}
	if code != "" {
		var e restErrorBody
		if err := json.Unmarshal(r.body, &e); err != nil || e.Code != code || e.Message == "" {
			t.Errorf("%s: body %s, want code %s", name, r.body, code)
		}
		if field != "" && (len(e.Details) == 0 || e.Details[0].Field != field) {
			t.Errorf("%s: details %+v, want field %s", name, e.Details, field)
		}
		return
	}
	if wantTools >= 0 {
		var b restListBody
		if err := json.Unmarshal(r.body, &b); err != nil || len(b.Data.Tools) != wantTools {
			t.Errorf("%s: %d tools (%v), want %d: %s", name, len(b.Data.Tools), err, wantTools, r.body)
		}
	}
}

// TestRESTListCache walks the catalog cache through its lifetime on an
// injected clock: served from memory within the TTL, reloaded by
// refresh=true/1 and after the TTL, stale while the tool server fails.
func TestRESTListCache(t *testing.T) {
	t.Parallel()
	f := newRestFixture(t, 5*time.Minute)
	steps := []struct {
		name    string
		advance time.Duration
		failing bool
		query   string
		status  int
		code    string
		calls   int // listTools calls this step makes
	}{
		{"first list loads", 0, false, "", 200, "", 1},
		{"second list within the TTL is cached", 0, false, "", 200, "", 0},
		{"just before expiry still cached", 5*time.Minute - time.Second, false, "", 200, "", 0},
		{"refresh=true reloads", 0, false, "?refresh=true", 200, "", 1},
		{"refresh=1 reloads", 0, false, "?refresh=1", 200, "", 1},
		{"refresh=false does not", 0, false, "?refresh=false", 200, "", 0},
		{"refresh=0 does not", 0, false, "?refresh=0", 200, "", 0},
		{"refresh=yes is invalid", 0, false, "?refresh=yes", 400, "VALIDATION_FAILED", 0},
		{"empty refresh is invalid", 0, false, "?refresh=", 400, "VALIDATION_FAILED", 0},
		{"refresh=TRUE is invalid", 0, false, "?refresh=TRUE", 400, "VALIDATION_FAILED", 0},
		{"after the TTL it reloads", 5 * time.Minute, false, "", 200, "", 1},
		{"and is cached again", time.Minute, false, "", 200, "", 0},
		{"tool server fails after expiry: stale copy", 5 * time.Minute, true, "", 200, "", 1},
		{"right after a failure: stale without asking", 0, true, "", 200, "", 0},
		{"30 s after the failure it asks again", 30 * time.Second, true, "", 200, "", 1},
		{"refresh while failing: stale copy", 0, true, "?refresh=1", 200, "", 1},
		{"recovered: reloads once the back-off ends", 30 * time.Second, false, "", 200, "", 1},
		{"then cached", 0, false, "", 200, "", 0},
	}
	for _, s := range steps {
		f.clock.Advance(s.advance)
		f.ts.failing.Store(s.failing)
		r := f.get(t, "/api/tools"+s.query, true)
		field := ""
		if s.code == "VALIDATION_FAILED" {
			field = "refresh"
		}
		r.check(t, s.name, s.status, s.code, field, builtinCount)
		if got := f.ts.take(toolclient.MethodListTools); got != s.calls {
			t.Errorf("%s: %d listTools calls, want %d", s.name, got, s.calls)
		}
	}
}

// TestRESTListItems checks the shape of a listed tool.
func TestRESTListItems(t *testing.T) {
	t.Parallel()
	f := newRestFixture(t, time.Minute)
	r := f.get(t, "/api/tools", true)
	var b restListBody
	if err := json.Unmarshal(r.body, &b); err != nil || r.status != 200 {
		t.Fatalf("%d %s %v", r.status, r.body, err)
	}
	if strings.Contains(string(r.body), "outputSchema") || strings.Contains(string(r.body), "annotations") {
		t.Errorf("list items carry more than {id,name,description,category,inputSchema}: %s", r.body)
	}
	for _, tl := range b.Data.Tools {
		if tl.ID == "json_query" {
			if tl.Category != "data" || tl.Name == "" || tl.Description == "" || !strings.Contains(string(tl.InputSchema), `"query"`) {
				t.Errorf("json_query = %+v", tl)
			}
			return
		}
	}
	t.Errorf("json_query not listed: %s", r.body)
}

// TestRESTListUnavailable: nothing cached and the tool server down is 500
// TOOLS_UNAVAILABLE; nothing is remembered of the failure.
func TestRESTListUnavailable(t *testing.T) {
	t.Parallel()
	f := newRestFixture(t, 5*time.Minute)
	f.ts.failing.Store(true)
	f.get(t, "/api/tools", true).check(t, "down, nothing cached", 500, "TOOLS_UNAVAILABLE", "", -1)
	f.get(t, "/api/tools?refresh=true", true).check(t, "down, refresh", 500, "TOOLS_UNAVAILABLE", "", -1)
	f.ts.failing.Store(false)
	f.get(t, "/api/tools", true).check(t, "up again", 200, "", "", builtinCount)
	if got := f.ts.take(toolclient.MethodListTools); got != 3 {
		t.Errorf("%d listTools calls, want 3", got)
	}
}

// TestRESTListZeroTTL: TOOLS_CACHE_TTL=0 asks the tool server every time.
func TestRESTListZeroTTL(t *testing.T) {
	t.Parallel()
	f := newRestFixture(t, 0)
	for range 3 {
		f.get(t, "/api/tools", true).check(t, "list", 200, "", "", builtinCount)
	}
	if got := f.ts.take(toolclient.MethodListTools); got != 3 {
		t.Errorf("%d listTools calls, want 3", got)
	}
}

func TestRESTSearch(t *testing.T) {
	t.Parallel()
	f := newRestFixture(t, 5*time.Minute)
	tests := []struct {
		name, query string
		failing     bool
		status      int
		code, field string
		first       string
		calls       int
	}{
		{"json ranks json_query first", "?q=json", false, 200, "", "", "json_query", 1},
		{"surrounding blanks are trimmed", "?q=%20%20regex%20", false, 200, "", "", "regex_extract", 1},
		{"no match", "?q=zzzz-nothing", false, 200, "", "", "", 1},
		{"missing q", "", false, 400, "VALIDATION_FAILED", "q", "", 0},
		{"empty q", "?q=", false, 400, "VALIDATION_FAILED", "q", "", 0},
		{"blank q", "?q=%20%20", false, 400, "VALIDATION_FAILED", "q", "", 0},
		{"q too long", "?q=" + strings.Repeat("a", toolclient.MaxSearchQuery+1), false, 400, "VALIDATION_FAILED", "q", "", 0},
		{"tool server down", "?q=json", true, 500, "TOOLS_UNAVAILABLE", "", "", 1},
	}
	for _, tt := range tests {
		f.ts.failing.Store(tt.failing)
		r := f.get(t, "/api/tools/search"+tt.query, true)
		r.check(t, tt.name, tt.status, tt.code, tt.field, -1)
		if got := f.ts.take(toolclient.MethodSearchTools); got != tt.calls {
			t.Errorf("%s: %d searchTools calls, want %d", tt.name, got, tt.calls)
		}
		if tt.status != 200 {
			continue
		}
		var b restListBody
		if err := json.Unmarshal(r.body, &b); err != nil || b.Data.Total == nil || *b.Data.Total != len(b.Data.Tools) || b.Data.Tools == nil {
			t.Errorf("%s: body %s (%v): want tools and a matching total", tt.name, r.body, err)
			continue
		}
		if tt.first == "" && len(b.Data.Tools) != 0 || tt.first != "" && (len(b.Data.Tools) == 0 || b.Data.Tools[0].ID != tt.first) {
			t.Errorf("%s: %s, want %q first", tt.name, r.body, tt.first)
		}
	}
}

func TestRESTGet(t *testing.T) {
	t.Parallel()
	f := newRestFixture(t, 5*time.Minute)
	tests := []struct {
		name, id string
		advance  time.Duration
		failing  bool
		status   int
		code     string
		calls    int // getTool calls
	}{
		{"json_query", "json_query", 0, false, 200, "", 1},
		{"cached within the TTL", "json_query", time.Minute, false, 200, "", 0},
		{"unknown tool", "no_such_tool", 0, false, 404, "TOOL_NOT_FOUND", 1},
		{"malformed id is 404 without asking", "Bad-ID", 0, false, 404, "TOOL_NOT_FOUND", 0},
		{"overlong id is 404 without asking", strings.Repeat("a", 65), 0, false, 404, "TOOL_NOT_FOUND", 0},
		{"expired and the tool server down: stale copy", "json_query", 5 * time.Minute, true, 200, "", 1},
		{"never fetched and the tool server down", "hash", 0, true, 500, "TOOLS_UNAVAILABLE", 1},
		{"recovered", "hash", 0, false, 200, "", 1},
	}
	for _, tt := range tests {
		f.clock.Advance(tt.advance)
		f.ts.failing.Store(tt.failing)
		r := f.get(t, "/api/tools/"+tt.id, true)
		r.check(t, tt.name, tt.status, tt.code, "", -1)
		if got := f.ts.take(toolclient.MethodGetTool); got != tt.calls {
			t.Errorf("%s: %d getTool calls, want %d", tt.name, got, tt.calls)
		}
		if tt.status != 200 {
			continue
		}
		var b struct{ Data map[string]json.RawMessage }
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(b.Data))
		for k := range b.Data {
			keys = append(keys, k)
		}
		if len(keys) != 6 || string(b.Data["id"]) != `"`+tt.id+`"` || len(b.Data["outputSchema"]) == 0 || len(b.Data["category"]) == 0 {
			t.Errorf("%s: data %s, want exactly id, name, description, category, inputSchema, outputSchema", tt.name, r.body)
		}
	}
	// refresh=true reloads the tools fetched one by one too.
	f.get(t, "/api/tools?refresh=true", true).check(t, "refresh", 200, "", "", builtinCount)
	f.get(t, "/api/tools/hash", true).check(t, "after refresh", 200, "", "", -1)
	if got := f.ts.take(toolclient.MethodGetTool); got != 1 {
		t.Errorf("after refresh: %d getTool calls, want 1", got)
	}
}

func TestRESTRoutesRequireASession(t *testing.T) {
	t.Parallel()
	f := newRestFixture(t, time.Minute)
	for _, p := range []string{"/api/tools", "/api/tools?refresh=true", "/api/tools/search?q=json", "/api/tools/search", "/api/tools/json_query", "/api/tools/nope"} {
		f.get(t, p, false).check(t, "anonymous "+p, 401, "UNAUTHORIZED", "", -1)
	}
	for _, m := range []string{toolclient.MethodListTools, toolclient.MethodSearchTools, toolclient.MethodGetTool} {
		if got := f.ts.take(m); got != 0 {
			t.Errorf("anonymous requests reached the tool server: %d %s calls", got, m)
		}
	}
}

// blockingCatalog is a Catalog whose ListTools waits for release and
// counts its calls.
type blockingCatalog struct {
	calls   atomic.Int32
	release chan struct{}
}

func (b *blockingCatalog) ListTools(context.Context) ([]toolclient.ToolSummary, error) {
	b.calls.Add(1)
	<-b.release
	return []toolclient.ToolSummary{{ID: "a", Name: "A", Description: "a", Category: "util", InputSchema: json.RawMessage(`{}`)}}, nil
}

func (b *blockingCatalog) SearchTools(context.Context, string) ([]toolclient.ToolSummary, error) {
	return nil, nil
}

func (b *blockingCatalog) GetTool(context.Context, string) (toolclient.ToolDetail, error) {
	return toolclient.ToolDetail{}, nil
}

func (b *blockingCatalog) RunToolAs(context.Context, string, map[string]any, toolclient.Identity) (toolclient.RunResult, error) {
	return toolclient.RunResult{}, nil
}

// TestConcurrentRefreshesCoalesce: many forced reloads at once make one
// call to the tool server, and a caller going away does not fail the
// others.
func TestConcurrentRefreshesCoalesce(t *testing.T) {
	t.Parallel()
	src := &blockingCatalog{release: make(chan struct{})}
	c := toolclient.NewCatalog(src, time.Minute, nil)
	const n = 20
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	errc := make(chan error, n)
	first, cancelFirst := context.WithCancel(context.Background())
	for i := range n {
		ctx := context.Background()
		if i == 0 {
			ctx = first
		}
		go func() {
			defer done.Done()
			started.Done()
			list, err := c.List(ctx, true)
			if err == nil && len(list) != 1 {
				err = io.ErrUnexpectedEOF
			}
			errc <- err
		}()
	}
	started.Wait()
	// Let every goroutine reach the shared load before it finishes.
	for src.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	cancelFirst()
	close(src.release)
	done.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Errorf("List: %v", err)
		}
	}
	// Nothing shows when a caller has joined the load in flight: one the
	// scheduler held back past the release (a loaded machine) starts the
	// next load. Coalescing is what is checked: a handful of calls, not
	// one per caller.
	if got := src.calls.Load(); got < 1 || got > n/4 {
		t.Errorf("%d concurrent refreshes made %d ListTools calls, want them coalesced (1, a few at most)", n, got)
	}
}
