package toolgate_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolgate"
)

// BenchmarkGateRunTool is json_query run for a user through the tool
// gate, against the same call made straight through the catalog (direct,
// the floor): the client's HTTP round trip to the tool server (in
// process, over loopback) with the user's signed identity, the tool
// server's handler and the tool. The gate adds the policy (a chat call
// reads the user's policy from the embedded DynamoDB engine; a workflow
// step reads only the user's own override) and, with a budget, the tool's
// declaration from the catalog's cache (json_query is not metered, so
// nothing is reserved). p50-ns is the figure to compare; ns/op also
// carries the machine's noise.
func BenchmarkGateRunTool(b *testing.B) {
	e := newEnv(b)
	input := map[string]any{"input": map[string]any{"a": 1}, "query": ".a"}
	user := e.user(b, "json_query", "", 0)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		run  func() error
	}{
		{"direct", func() error {
			_, err := e.catalog.RunAs(ctx, "json_query", input, toolclient.Identity{UserID: user})
			return err
		}},
		{"chat", func() error {
			out, err := e.unbudgeted.Run(ctx, toolgate.Call{Origin: toolgate.Chat, UserID: user, ToolID: "json_query", Input: input})
			if err == nil {
				err = out.Err()
			}
			return err
		}},
		{"step_budgeted", func() error {
			out, err := e.budgeted.Run(ctx, toolgate.Call{Origin: toolgate.Workflow, UserID: user, ToolID: "json_query", Input: input})
			if err == nil {
				err = out.Err()
			}
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if err := bc.run(); err != nil { // warm the catalog and connections
				b.Fatal(err)
			}
			var durations []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if err := bc.run(); err != nil {
					b.Fatal(err)
				}
				durations = append(durations, time.Since(start))
			}
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
		})
	}
}
