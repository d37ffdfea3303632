package usertools_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/usertools"
)

// keyed adds the API key header to every request of the direct client.
type keyed struct{ next http.RoundTripper }

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Api-Key", apiKey)
	return k.next.RoundTrip(r)
}

func p50(b *testing.B, run func() error) {
	b.Helper()
	if err := run(); err != nil { // warm connections and caches
		b.Fatal(err)
	}
	var ds []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := run(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkRemoteCall is a remote tool (mcp/files/read on a go-sdk server
// in process, over loopback) called through the tool gate as a workflow
// step and as a chat call, against the same call made directly with the
// SDK (direct, the floor: a Streamable HTTP client session connected and
// the tool called, as the service does for each call). The gate adds the
// policy read (embedded DynamoDB), the read of the user's servers from the
// store, the vault's opening of the API key and the SSRF-safe client.
func BenchmarkRemoteCall(b *testing.B) {
	e := newEnv(b)
	e.add(b, "u1", "files")
	ctx := auth.ActingFor(context.Background(), "u1")
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	hc := &http.Client{Transport: keyed{next: http.DefaultTransport}}
	args := map[string]any{"path": "a.txt"}
	b.Run("direct_sdk", func(b *testing.B) {
		p50(b, func() error {
			s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.remote.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
			if err != nil {
				return err
			}
			defer s.Close()
			_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: args})
			return err
		})
	})
	b.Run("gate_step", func(b *testing.B) {
		p50(b, func() error {
			_, err := e.gate.Steps().Run(ctx, "mcp/files/read", args)
			return err
		})
	})
	b.Run("gate_chat", func(b *testing.B) {
		p50(b, func() error {
			out, err := e.gate.Run(ctx, toolgate.Call{Origin: toolgate.Chat, UserID: "u1", ToolID: "mcp/files/read", Input: args})
			if err == nil {
				err = out.Err()
			}
			return err
		})
	})
}

// BenchmarkSpecs20Servers is what a chat message pays for the tools it
// offers when its user has 20 servers of 2 tools each (40 remote tools): the built-in
// catalog alone (the floor), the user's tools from the memory's copy
// (cached, what a chat does within the TTL) and from the store (store: one
// Query of the user's 20 server items). remote-calls/op counts the
// requests the remote server got while measuring: none.
func BenchmarkSpecs20Servers(b *testing.B) {
	e := newEnv(b)
	var hits atomic.Int64
	inner := e.remote.Config.Handler
	e.remote.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); inner.ServeHTTP(w, r) })
	for i := range 20 {
		e.add(b, "u1", fmt.Sprintf("s%d", i))
	}
	ctx := auth.ActingFor(context.Background(), "u1")
	cached := usertools.New(usertools.Options{Builtin: e.builtin, Servers: e.servers, TTL: time.Hour})
	for _, bc := range []struct {
		name string
		run  func() (int, error)
	}{
		{"builtin_only", func() (int, error) { s, err := e.builtin.Specs(ctx); return len(s), err }},
		{"cached", func() (int, error) { s, err := cached.Specs(ctx); return len(s), err }},
		{"store", func() (int, error) { s, err := e.catalog.Specs(ctx); return len(s), err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			before := hits.Load()
			n := 0
			p50(b, func() error {
				var err error
				n, err = bc.run()
				return err
			})
			b.ReportMetric(float64(n), "tools")
			b.ReportMetric(float64(hits.Load()-before)/float64(b.N), "remote-calls/op")
		})
	}
}
