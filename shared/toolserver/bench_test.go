package toolserver_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/latency"
	"github.com/workflowchat/service/shared/httpapi"
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
// built without the race detector, in a pool sized as in production. The
// difference from BenchmarkRunToolOverhead is the price of the isolation.
func BenchmarkRunToolOverheadSandboxed(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("worker limits are enforced on Linux only")
	}
	bin := filepath.Join(b.TempDir(), "toolworker")
	if out, err := exec.Command("go", "build", "-o", bin, "../tools/internal/toolworker").CombinedOutput(); err != nil {
		b.Fatalf("build toolworker: %v\n%s", err, out)
	}
	pool, err := tools.NewSandbox(bin, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		b.Fatal(err)
	}
	benchRunTool(b, reg.WithSandbox(pool))
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
