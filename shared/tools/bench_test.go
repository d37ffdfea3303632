package tools_test

import (
	"context"
	"testing"

	"github.com/workflowchat/service/shared/tools"
)

// BenchmarkJSONQuery measures a bare call of the json_query tool's Run on a
// small input: no registry, no validation, no timeout goroutine. The tool
// server's benchmark is compared against it to see the serving overhead.
func BenchmarkJSONQuery(b *testing.B) {
	tool := findTool(b, tools.Builtin(tools.Config{}), "json_query")
	input := map[string]any{
		"input": map[string]any{"items": []any{
			map[string]any{"name": "a", "price": 3.0},
			map[string]any{"name": "b", "price": 1.0},
		}},
		"query": "[.items[] | select(.price > 2) | .name]",
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out, err := tool.Run(ctx, input)
		if err != nil {
			b.Fatal(err)
		}
		if r, ok := out["result"].([]any); !ok || len(r) != 1 || r[0] != "a" {
			b.Fatalf("unexpected result %v", out)
		}
	}
}

// BenchmarkRegistryRunJSONQuery is the same call through Registry.Run
// (schema validation and the timeout goroutine included).
func BenchmarkRegistryRunJSONQuery(b *testing.B) {
	r := newRegistry(b, tools.Config{})
	input := map[string]any{
		"input": map[string]any{"items": []any{
			map[string]any{"name": "a", "price": 3.0},
			map[string]any{"name": "b", "price": 1.0},
		}},
		"query": "[.items[] | select(.price > 2) | .name]",
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Run(ctx, "json_query", input); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegistryRunJSONQuerySandboxed is the same call through
// Registry.Run with the isolated tools in sandbox workers, as the tool
// server runs them: the difference from BenchmarkRegistryRunJSONQuery is
// the price of the isolation (encoding the call, a round trip over the
// worker's pipes, decoding the result).
func BenchmarkRegistryRunJSONQuerySandboxed(b *testing.B) {
	r := newRegistry(b, tools.Config{}).WithSandbox(testSandbox(b))
	input := map[string]any{
		"input": map[string]any{"items": []any{
			map[string]any{"name": "a", "price": 3.0},
			map[string]any{"name": "b", "price": 1.0},
		}},
		"query": "[.items[] | select(.price > 2) | .name]",
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Run(ctx, "json_query", input); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegistryRunCodeSandboxed is the json_query benchmarks' query
// written as a code step's JavaScript, through Registry.Run with sandbox
// workers: against BenchmarkRegistryRunJSONQuerySandboxed it is a code
// step's overhead over a json_query step (a fresh JavaScript runtime per
// call, the watchdog, the result's checks). The InProcess variant leaves
// the worker round trip out.
func BenchmarkRegistryRunCodeSandboxed(b *testing.B) {
	benchmarkCode(b, newRegistry(b, tools.Config{}).WithSandbox(testSandbox(b)))
}

func BenchmarkRegistryRunCodeInProcess(b *testing.B) {
	benchmarkCode(b, newRegistry(b, tools.Config{}))
}

func benchmarkCode(b *testing.B, r *tools.Registry) {
	input := map[string]any{
		"language": "javascript",
		"input": map[string]any{"items": []any{
			map[string]any{"name": "a", "price": 3.0},
			map[string]any{"name": "b", "price": 1.0},
		}},
		"source": "return input.items.filter(i => i.price > 2).map(i => i.name);",
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Run(ctx, "code", input); err != nil {
			b.Fatal(err)
		}
	}
}
