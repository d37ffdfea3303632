package toolclient_test

import (
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

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

const clientTestKey = "client-test-service-key-0123456789"

// clientTestRegistry is the real built-in catalog plus a tool that outlives
// its own short timeout, for TOOL_TIMEOUT.
func clientTestRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	slow := &tools.Tool{
		ID: "client_test_sleep", Name: "Sleep", Description: "Waits until its deadline.", Category: tools.CategoryUtil,
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout:      20 * time.Millisecond,
		Run: func(ctx context.Context, _ map[string]any) (map[string]any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}
	reg, err := tools.NewRegistry(append(tools.Builtin(tools.Config{}), slow)...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// startClientTestServer serves the real tool server over HTTP.
func startClientTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	h := httpapi.Stack(toolserver.Routes(clientTestRegistry(t), clientTestKey), httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// wantClientError checks err's kind, code and message, and that the key
// leaks into none of it.
func wantClientError(t *testing.T, err error, kind errs.Kind, code, msg string) *errs.Error {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *errs.Error", err, err)
	}
	if e.Kind != kind || e.CodeOrDefault() != code || !strings.Contains(e.Message, msg) {
		t.Errorf("err = kind %v code %s message %q, want kind %v code %s message containing %q", e.Kind, e.CodeOrDefault(), e.Message, kind, code, msg)
	}
	if strings.Contains(err.Error(), clientTestKey) || strings.Contains(e.Message, clientTestKey) {
		t.Errorf("error leaks the service key: %v", err)
	}
	return e
}

func TestClientMethods(t *testing.T) {
	t.Parallel()
	srv := startClientTestServer(t)
	c := toolclient.NewClient(srv.URL+"/", clientTestKey, nil) // trailing slash is fine
	ctx := context.Background()

	list, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(tools.Builtin(tools.Config{})) + 1; len(list) != want {
		t.Errorf("ListTools: %d tools, want %d (the built-in ones and the test tool)", len(list), want)
	}
	var jq *toolserver.ToolSummary
	for i := range list {
		if list[i].ID == "json_query" {
			jq = &list[i]
		}
	}
	if jq == nil || jq.Category != tools.CategoryData || !json.Valid(jq.InputSchema) || !strings.Contains(string(jq.InputSchema), `"query"`) {
		t.Fatalf("ListTools: json_query = %+v", jq)
	}

	found, err := c.SearchTools(ctx, "json")
	if err != nil || len(found) == 0 || found[0].ID != "json_query" {
		t.Errorf("SearchTools(json) = %+v, %v; want json_query first", found, err)
	}
	none, err := c.SearchTools(ctx, "no tool is called this")
	if err != nil || none == nil || len(none) != 0 {
		t.Errorf("SearchTools(no match) = %#v, %v; want an empty, non-nil list", none, err)
	}

	d, err := c.GetTool(ctx, "json_query")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "json_query" || d.Category != tools.CategoryData || !strings.Contains(string(d.OutputSchema), `"result"`) || !strings.Contains(string(d.InputSchema), `"query"`) {
		t.Errorf("GetTool = %+v", d)
	}

	run, err := c.RunTool(ctx, "json_query", map[string]any{"input": map[string]any{"a": []any{1, 2, 3}}, "query": ".a | add"})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := run.Result["result"].(float64); !ok || got != 6 || run.ExecutionTime < 0 {
		t.Errorf("RunTool = %+v, want result 6", run)
	}
	h, err := c.RunTool(ctx, "hash", map[string]any{"text": "abc", "algorithm": "sha256"})
	if err != nil || h.Result["digest"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("RunTool(hash) = %+v, %v", h, err)
	}
}

// TestClientCatalog checks the client as the Source of the catalog, which
// the REST endpoints use.
func TestClientCatalog(t *testing.T) {
	t.Parallel()
	srv := startClientTestServer(t)
	var cat toolclient.Source = toolclient.NewClient(srv.URL, clientTestKey, nil)
	ctx := context.Background()
	list, err := cat.ListTools(ctx)
	if err != nil || len(list) != len(tools.Builtin(tools.Config{}))+1 || list[0].ID == "" || len(list[0].InputSchema) == 0 {
		t.Fatalf("ListTools = %+v, %v", list, err)
	}
	found, err := cat.SearchTools(ctx, "regex")
	if err != nil || len(found) == 0 || found[0].ID != "regex_extract" || found[0].Category != tools.CategoryText {
		t.Errorf("SearchTools = %+v, %v", found, err)
	}
	d, err := cat.GetTool(ctx, "hash")
	if err != nil || d.ID != "hash" || !strings.Contains(string(d.OutputSchema), `"digest"`) {
		t.Errorf("GetTool = %+v, %v", d, err)
	}
	_, err = cat.GetTool(ctx, "no_such_tool")
	wantClientError(t, err, errs.NotFound, tools.CodeToolNotFound, "no_such_tool")
}

// TestClientMapsServerErrors: each error of the tool server comes back as
// the *errs.Error it was, kind, code, message and details.
func TestClientMapsServerErrors(t *testing.T) {
	t.Parallel()
	srv := startClientTestServer(t)
	c := toolclient.NewClient(srv.URL, clientTestKey, nil)
	wrongKey := toolclient.NewClient(srv.URL, "wrong-key-wrong-key-wrong", nil)
	ctx := context.Background()
	tests := []struct {
		name   string
		call   func() error
		kind   errs.Kind
		code   string
		msg    string
		detail string // a field named in details
	}{
		{"get unknown tool", func() error { _, err := c.GetTool(ctx, "nope"); return err }, errs.NotFound, "TOOL_NOT_FOUND", "nope", ""},
		{"run unknown tool", func() error { _, err := c.RunTool(ctx, "nope", nil); return err }, errs.NotFound, "TOOL_NOT_FOUND", "nope", ""},
		{"invalid input", func() error {
			_, err := c.RunTool(ctx, "json_query", map[string]any{"input": 1})
			return err
		}, errs.Invalid, "INVALID_PARAMS", "", "query"},
		{"blank tool id", func() error { _, err := c.GetTool(ctx, " "); return err }, errs.Invalid, "INVALID_PARAMS", "toolId", "toolId"},
		{"blank search query", func() error { _, err := c.SearchTools(ctx, ""); return err }, errs.Invalid, "INVALID_PARAMS", "query", "query"},
		{"execution failed", func() error {
			_, err := c.RunTool(ctx, "json_query", map[string]any{"input": map[string]any{}, "query": `error("boom")`})
			return err
		}, errs.Internal, "TOOL_EXECUTION_FAILED", "boom", ""},
		{"tool timeout", func() error { _, err := c.RunTool(ctx, "client_test_sleep", nil); return err }, errs.Timeout, "TOOL_TIMEOUT", "client_test_sleep", ""},
		{"wrong key is a misconfiguration, not the user's 401", func() error { _, err := wrongKey.ListTools(ctx); return err }, errs.Internal, "INTERNAL_ERROR", "tool server rejected the service key", ""},
		{"no key", func() error {
			_, err := toolclient.NewClient(srv.URL, "", nil).ListTools(ctx)
			return err
		}, errs.Internal, "INTERNAL_ERROR", "tool server rejected the service key", ""},
		{"base URL that is not the tool server's", func() error {
			_, err := toolclient.NewClient(srv.URL+"/api", clientTestKey, nil).ListTools(ctx)
			return err
		}, errs.Internal, "INTERNAL_ERROR", "does not serve POST /mcp", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := wantClientError(t, tt.call(), tt.kind, tt.code, tt.msg)
			if tt.detail != "" && (len(e.Details) == 0 || !strings.Contains(e.Details[0].Field, tt.detail)) {
				t.Errorf("details = %+v, want field %q", e.Details, tt.detail)
			}
			if got := httpapi.StatusOf(e); tt.kind == errs.Internal && got != http.StatusInternalServerError {
				t.Errorf("status = %d", got)
			}
		})
	}
}

// TestClientUnavailable: a tool server that is down, slow, or answers
// something other than the service protocol is Unavailable
// TOOLS_UNAVAILABLE, with the cause kept.
func TestClientUnavailable(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // nothing listens there any more

	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-block:
		}
	}))
	t.Cleanup(func() { close(block); slow.Close() })

	var (
		mu                  sync.Mutex
		seenKey, seenMethod string
	)
	canned := func(status int, ctype, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req toolserver.Request
			_ = json.NewDecoder(r.Body).Decode(&req)
			mu.Lock()
			seenKey, seenMethod = r.Header.Get(toolserver.ServiceKeyHeader), req.Method
			mu.Unlock()
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	redirect := httptest.NewServer(http.RedirectHandler("http://203.0.113.1/steal", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)

	tests := []struct {
		name string
		url  string
		hc   *http.Client
		msg  string
	}{
		{"server down", downURL, nil, "could not be reached"},
		{"slow server, short client timeout", slow.URL, &http.Client{Timeout: 50 * time.Millisecond}, "did not respond in time"},
		{"200 that is not JSON", canned(200, "text/html", "<html>hi</html>"), nil, "unusable response"},
		{"200 without data", canned(200, "application/json", `{"tools":[]}`), nil, "unusable response"},
		{"200 with data of the wrong shape", canned(200, "application/json", `{"data":{"tools":"many"}}`), nil, "unusable response"},
		{"502 from a proxy", canned(502, "text/html", "<html>Bad Gateway</html>"), nil, "unusable response"},
		{"503 error body", canned(503, "application/json", `{"error":"Service Unavailable","message":"busy","code":"SERVICE_UNAVAILABLE"}`), nil, "unusable response"},
		{"error status without an error body", canned(500, "application/json", `{}`), nil, "unusable response"},
		{"oversized response", canned(200, "application/json", `{"data":{"tools":[],"pad":"`+strings.Repeat("x", toolclient.MaxResponseBytes)+`"}}`), nil, "unusable response"},
		{"redirect is not followed", redirect.URL, nil, "unusable response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := toolclient.NewClient(tt.url, clientTestKey, tt.hc)
			start := time.Now()
			_, err := c.ListTools(context.Background())
			e := wantClientError(t, err, errs.Unavailable, toolclient.CodeToolsUnavailable, tt.msg)
			if e.Err == nil {
				t.Error("the cause is not kept")
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %s", time.Since(start))
			}
		})
	}
	mu.Lock()
	if seenKey != clientTestKey || seenMethod != toolserver.MethodListTools {
		t.Errorf("the canned server saw key %q method %q", seenKey, seenMethod)
	}
	mu.Unlock()

	// The caller's cancellation stays visible in the chain.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := toolclient.NewClient(slow.URL, clientTestKey, nil).RunTool(ctx, "hash", nil)
	wantClientError(t, err, errs.Unavailable, toolclient.CodeToolsUnavailable, "")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want it to wrap context.Canceled", err)
	}
}

// TestSpecsLeaveOutStepOnlyTools: a chat offers models every tool but
// ask_human and agent, which only a workflow run carries out; the catalog
// still lists them (proposals and the REST list need them).
func TestSpecsLeaveOutStepOnlyTools(t *testing.T) {
	t.Parallel()
	srv := startClientTestServer(t)
	cat := toolclient.NewCatalog(toolclient.NewClient(srv.URL, clientTestKey, nil), time.Minute, nil)
	specs, err := cat.Specs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	list, err := cat.List(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != len(list)-3 {
		t.Errorf("%d specs for %d tools, want three fewer (ask_human, agent, run_workflow)", len(specs), len(list))
	}
	for _, s := range specs {
		if s.Name == tools.AskHumanID || s.Name == tools.AgentID || s.Name == tools.RunWorkflowID {
			t.Errorf("Specs offers %s to models", s.Name)
		}
	}
	if !slicesContainsID(list, tools.AskHumanID) {
		t.Errorf("the catalog does not list %s", tools.AskHumanID)
	}
}

func slicesContainsID(list []toolclient.ToolSummary, id string) bool {
	for _, s := range list {
		if s.ID == id {
			return true
		}
	}
	return false
}
