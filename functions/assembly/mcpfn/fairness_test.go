//go:build linux

package mcpfn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/functions/assembly/mcpfn"
	"github.com/workflowchat/service/infra/gobuild"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

const testKey = "mcpfn-test-service-key"

// userHeader names the caller in these tests. It stands in for the
// verified identity the tool server will read: like it, it ends in
// tools.WithCaller.
const userHeader = "X-Test-User"

// toolServer is the tool server as McpFunction builds it (mcpfn.Mcp and
// mcpfn.NewSandbox, sized for the function's 768 MB), with real workers
// of shared/tools' toolworker (the production worker mode on its own,
// built without the race detector), called in process.
type toolServer struct {
	pool *sandbox.Pool
	h    http.Handler
}

func newToolServer(t *testing.T) *toolServer {
	t.Helper()
	bin := gobuild.ForTest(t, "toolworker", "../../../shared/tools/internal/toolworker")
	cfg := load(t, map[string]string{"MCP_SERVICE_KEY": testKey, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "768"})
	logger := slog.New(slog.DiscardHandler)
	pool, err := mcpfn.NewSandbox(cfg, bin, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	routes, err := mcpfn.Mcp(t.Context(), cfg, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	stack := httpapi.Stack(routes, httpapi.Options{Logger: logger})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get(userHeader); u != "" {
			r = r.WithContext(tools.WithCaller(r.Context(), u))
		}
		stack.ServeHTTP(w, r)
	})
	return &toolServer{pool: pool, h: h}
}

// runTool calls runTool json_query as user ("" anonymous) under ctx.
func (s *toolServer) runTool(ctx context.Context, user string, input map[string]any) (int, string) {
	body, _ := json.Marshal(map[string]any{"method": toolserver.MethodRunTool, "params": map[string]any{"toolId": "json_query", "input": input}})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, toolserver.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(toolserver.ServiceKeyHeader, testKey)
	if user != "" {
		req.Header.Set(userHeader, user)
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// flood starts 8 endless jq evaluations (each until json_query's 10 s
// timeout) as user, and waits until 2 run and 6 wait. stop cancels them
// and waits for their answers.
func (s *toolServer) flood(t *testing.T, user string) (done <-chan string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	answers := make(chan string, 8)
	for range 8 {
		go func() {
			status, body := s.runTool(ctx, user, map[string]any{"query": "def f: f; f"})
			answers <- http.StatusText(status) + " " + body
		}()
	}
	s.waitStats(t, sandbox.Stats{Running: 2, Waiting: 6})
	return answers, func() {
		cancel()
		for range 8 {
			<-answers
		}
		s.waitStats(t, sandbox.Stats{})
	}
}

func (s *toolServer) waitStats(t *testing.T, want sandbox.Stats) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Minute); s.pool.Stats() != want; time.Sleep(5 * time.Millisecond) { // a bound for a stuck pool, not a measure
		if time.Now().After(deadline) {
			t.Fatalf("sandbox stats %+v, want %+v", s.pool.Stats(), want)
		}
	}
}

// TestOneUserCannotSlowAnother: user A keeps 8 CPU-bound jq evaluations
// going; user B's small json_query runs on the worker A cannot take, and
// is answered while A's evaluations still run and wait. Anonymous callers
// share one allowance, so there an anonymous B waits behind an anonymous
// A. Ordering is asserted, never time.
func TestOneUserCannotSlowAnother(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	small := map[string]any{"input": map[string]any{"a": 1}, "query": ".a"}

	t.Run("users", func(t *testing.T) {
		aDone, stop := s.flood(t, "user-a")
		defer stop()
		status, body := s.runTool(t.Context(), "user-b", small)
		if status != http.StatusOK || !strings.Contains(body, `"result":{"result":1}`) {
			t.Fatalf("user B's json_query: %d %s", status, body)
		}
		select {
		case a := <-aDone:
			t.Fatalf("one of user A's evaluations ended (%s) before user B's was answered", a)
		default:
		}
		if st := s.pool.Stats(); st != (sandbox.Stats{Running: 2, Waiting: 6}) {
			t.Errorf("after B's answer: %+v, want A's 2 running and 6 waiting", st)
		}
	})

	t.Run("anonymous callers share one allowance", func(t *testing.T) {
		aDone, stop := s.flood(t, "")
		bDone := make(chan string, 1)
		go func() {
			status, body := s.runTool(context.Background(), "", small)
			bDone <- http.StatusText(status) + " " + body
		}()
		s.waitStats(t, sandbox.Stats{Running: 2, Waiting: 7})
		select {
		case b := <-bDone:
			t.Fatalf("the anonymous B was answered (%s) beside the anonymous A's 2 evaluations", b)
		case a := <-aDone:
			t.Fatalf("one of A's evaluations ended (%s) too soon for the test", a)
		default:
		}
		stop()
		if b := <-bDone; !strings.HasPrefix(b, "OK ") || !strings.Contains(b, `"result":{"result":1}`) {
			t.Fatalf("the anonymous B after A stopped: %s", b)
		}
	})
}
