package toolserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/gobuild"
	"github.com/workflowchat/service/infra/latency"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// benchInput is the json_query input of both benchmarks; it is the input of
// shared/tools' BenchmarkJSONQuery.
func benchInput() map[string]any {
	return map[string]any{
		"input": map[string]any{"items": []any{
			map[string]any{"name": "a", "price": 3.0},
			map[string]any{"name": "b", "price": 1.0},
		}},
		"query": "[.items[] | select(.price > 2) | .name]",
	}
}

// BenchmarkRunToolOverhead is runTool of json_query through the whole
// handler, in process: the standard middleware, key check, body read and
// dispatch, request and params decoding, schema validation, the run under
// the tool's timeout, and response encoding. Compare it with
// BenchmarkBareJSONQuery (the floor) to see the serving overhead.
func BenchmarkRunToolOverhead(b *testing.B) {
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		b.Fatal(err)
	}
	benchRunTool(b, reg)
}

// BenchmarkRunToolOverheadSandboxed is the same call with json_query run in
// a sandbox worker, as McpFunction and the dev server run it: the worker
// is shared/tools' toolworker (the production worker mode on its own),
// built without the race detector, in a pool sized as McpFunction's (3
// workers, 2 per caller). The difference from BenchmarkRunToolOverhead is
// the price of the isolation, the per-caller admission included.
func BenchmarkRunToolOverheadSandboxed(b *testing.B) {
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		b.Fatal(err)
	}
	benchRunTool(b, reg.WithSandbox(benchSandbox(b)))
}

// benchSandbox builds shared/tools' toolworker (once per benchmark) and
// returns a pool of it sized as McpFunction's, closed at the end.
func benchSandbox(b *testing.B) *sandbox.Pool {
	b.Helper()
	if runtime.GOOS != "linux" {
		b.Skip("worker limits are enforced on Linux only")
	}
	bin := gobuild.ForTest(b, "toolworker", "../tools/internal/toolworker")
	pool, err := tools.NewSandbox(bin, tools.SandboxSize{Workers: 3, PerUser: 2}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	return pool
}

// BenchmarkRunToolUnderLoad is user B's runTool json_query (`.a` on a
// tiny input) while user A keeps 8 endless jq evaluations (`def f: f;
// f`, each until json_query's 10 s timeout, then again) in flight on the
// same sandbox, sized as McpFunction's. The caller reaches the tools as
// the tool server will set it, through tools.WithCaller.
//   - alone: B with no load, the floor;
//   - other_user: B beside A's load: A holds at most 2 of the 3 workers,
//     and B is admitted ahead of A's waiting evaluations;
//   - same_allowance: B and A both anonymous, one allowance, one queue,
//     which is what every caller had before the admission per caller: B
//     waits behind A's evaluations, often until its own 10 s timeout
//     (timeouts/op; run it with -benchtime 3x).
func BenchmarkRunToolUnderLoad(b *testing.B) {
	small := map[string]any{"input": map[string]any{"a": 1}, "query": ".a"}
	for _, bc := range []struct {
		name, loadUser, user string
		load, same           bool
	}{
		{"alone", "", "user-b", false, false},
		{"other_user", "user-a", "user-b", true, false},
		{"same_allowance", "", "", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pool := benchSandbox(b)
			reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
			if err != nil {
				b.Fatal(err)
			}
			h := asCaller(httpapi.Stack(toolserver.Routes(reg.WithSandbox(pool), testKey), httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
			if code, body := callRunTool(context.Background(), h, bc.user, small); code != http.StatusOK {
				b.Fatalf("warm-up: %d %s", code, body)
			}
			if bc.load {
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						for ctx.Err() == nil {
							callRunTool(ctx, h, bc.loadUser, map[string]any{"query": "def f: f; f"})
						}
					})
				}
				b.Cleanup(func() { cancel(); wg.Wait() })
				for st := pool.Stats(); st.Running < 2 || st.Waiting < 6; st = pool.Stats() {
					time.Sleep(time.Millisecond)
				}
			}
			var durations []time.Duration
			timeouts := 0
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				code, body := callRunTool(context.Background(), h, bc.user, small)
				durations = append(durations, time.Since(start))
				switch {
				case code == http.StatusGatewayTimeout && bc.same:
					timeouts++ // it waited out its own timeout behind the load
				case code != http.StatusOK || !strings.Contains(body, `"result":{"result":1}`):
					b.Fatalf("runTool = %d %s", code, body)
				}
			}
			latency.Report(b, durations)
			b.ReportMetric(float64(timeouts)/float64(len(durations)), "timeouts/op")
		})
	}
}

// asCaller puts the caller named by the X-Bench-User header in the
// request's context, as the tool server does with a verified identity.
func asCaller(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get("X-Bench-User"); u != "" {
			r = r.WithContext(tools.WithCaller(r.Context(), u))
		}
		h.ServeHTTP(w, r)
	})
}

// callRunTool posts runTool json_query with input to h as user ("":
// anonymous) under ctx.
func callRunTool(ctx context.Context, h http.Handler, user string, input map[string]any) (int, string) {
	body, _ := json.Marshal(map[string]any{"method": toolserver.MethodRunTool, "params": map[string]any{"toolId": "json_query", "input": input}})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, toolserver.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(toolserver.ServiceKeyHeader, testKey)
	if user != "" {
		req.Header.Set("X-Bench-User", user)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// benchRunTool times POST /mcp runTool json_query on reg, after one
// untimed call (which, sandboxed, waits for the first worker to start).
func benchRunTool(b *testing.B, reg *tools.Registry) {
	h := httpapi.Stack(toolserver.Routes(reg, testKey), httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	body := []byte(jsonOf(b, map[string]any{"method": toolserver.MethodRunTool, "params": map[string]any{"toolId": "json_query", "input": benchInput()}}))
	want := []byte(`"result":{"result":["a"]}`)
	call := func() {
		req := httptest.NewRequest(http.MethodPost, toolserver.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(toolserver.ServiceKeyHeader, testKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), want) {
			b.Fatalf("runTool = %d %s", rec.Code, rec.Body)
		}
	}
	call()

	var durations []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		call()
		durations = append(durations, time.Since(start))
	}
	latency.Report(b, durations)
}

// BenchmarkBareJSONQuery is the floor: the json_query tool's Run called
// directly on the same input (no registry, validation, timeout or HTTP), as
// shared/tools' BenchmarkJSONQuery does.
func BenchmarkBareJSONQuery(b *testing.B) {
	var tool *tools.Tool
	for _, t := range tools.Builtin(tools.Config{}) {
		if t.ID == "json_query" {
			tool = t
		}
	}
	if tool == nil {
		b.Fatal("no json_query tool")
	}
	input := benchInput()
	ctx := context.Background()

	var durations []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		out, err := tool.Run(ctx, input)
		durations = append(durations, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if r, ok := out["result"].([]any); !ok || len(r) != 1 || r[0] != "a" {
			b.Fatalf("unexpected result %v", out)
		}
	}
	latency.Report(b, durations)
}
