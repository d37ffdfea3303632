package runs_test

import (
	"context"
	"testing"

	"github.com/workflowchat/service/shared/tools"
)

const benchSteps = 10

func benchQueryInput() map[string]any {
	return map[string]any{"input": map[string]any{"a": 1.0, "b": []any{1.0, 2.0}}, "query": ".a"}
}

// BenchmarkEngineBareTool is the floor of BenchmarkDurableRunStep: the
// same json_query call through the registry, with no engine and no
// storage.
func BenchmarkEngineBareTool(b *testing.B) {
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		b.Fatal(err)
	}
	in := benchQueryInput()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Run(context.Background(), "json_query", in); err != nil {
			b.Fatal(err)
		}
	}
}
