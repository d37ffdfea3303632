package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/latency"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/webhook"
	"github.com/workflowchat/service/shared/workflow"
)

// benchDefinition is a one-step workflow exposed as the MCP tool "inc":
// json_query adding one to its input's n.
const benchDefinition = `{
  "description": "Adds one",
  "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
  "steps": [{"id": "inc", "toolId": "json_query", "inputs": {"input": "{{input.n}}", "query": ". + 1"}}],
  "exposeAsTool": true, "toolName": "inc"}`

// serve makes one request through the stack's API and returns its answer.
func (f *fixture) serve(tb testing.TB, method, path, body string, header ...string) *httptest.ResponseRecorder {
	tb.Helper()
	r := f.request(method, path, body)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	f.stack.API.ServeHTTP(rec, r)
	return rec
}

// data decodes the "data" member of rec's JSON body into v, which must
// have the status want.
func data(tb testing.TB, rec *httptest.ResponseRecorder, want int, v any) {
	tb.Helper()
	if rec.Code != want {
		tb.Fatalf("status %d, want %d: %.500s", rec.Code, want, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &struct{ Data any }{v}); err != nil {
		tb.Fatalf("%v: %.500s", err, rec.Body)
	}
}

// benchWorkflow defines benchDefinition for the fixture's user through the
// REST API and returns its id.
func (f *fixture) benchWorkflow(tb testing.TB) string {
	tb.Helper()
	var w struct{ ID string }
	data(tb, f.serve(tb, "POST", "/api/workflows", `{"userId":"`+f.userID+`","name":"inc"}`), 201, &w)
	data(tb, f.serve(tb, "PATCH", "/api/workflows/"+w.ID, benchDefinition), 200, &struct{}{})
	return w.ID
}

// BenchmarkWebhookToRunStarted measures a signed POST /hooks/{id} (the
// signature verified, the trigger read, the run stored and handed to the
// in-process runner) to its 202, then to the run's run_started event being
// readable in its log (one strongly consistent read per poll, as a
// follower reads it). Its floor is that read alone, of the same log once
// the run has started, measured in the same iteration: the p50s are
// compared (x-floor-read is the ratio of accept-to-run_started's p50 over
// the read's).
func BenchmarkWebhookToRunStarted(b *testing.B) {
	f := newFixture(b)
	wfID := f.benchWorkflow(b)
	var tr struct{ ID, Secret string }
	data(b, f.serve(b, "POST", "/api/workflows/"+wfID+"/triggers", `{"type":"webhook","enabled":true}`), 201, &tr)
	jobs := store.NewJobs(f.stack.DB, f.cfg.DataTable)
	ctx := context.Background()
	var toAccepted, toStarted, floor []time.Duration
	for i := 0; b.Loop(); i++ {
		body := fmt.Sprintf(`{"n": %d}`, i)
		t0 := time.Now()
		rec := f.serve(b, "POST", "/hooks/"+tr.ID, body, webhook.Header, webhook.Sign(tr.Secret, time.Now(), []byte(body)))
		var a struct{ RunID string }
		data(b, rec, 202, &a)
		toAccepted = append(toAccepted, time.Since(t0))
		ref := job.Ref{Kind: workflow.RunKind, Collection: a.RunID, ID: a.RunID}
		for {
			recs, _, err := jobs.Read(ctx, ref, 0)
			if err != nil {
				b.Fatal(err)
			}
			if len(recs) > 0 {
				break
			}
		}
		toStarted = append(toStarted, time.Since(t0))
		f.stack.Runner.Wait()
		t0 = time.Now()
		if _, _, err := jobs.Read(ctx, ref, 0); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(t0))
	}
	started, read := latency.Percentile(toStarted, 0.5), latency.Percentile(floor, 0.5)
	b.ReportMetric(float64(latency.Percentile(toAccepted, 0.5).Nanoseconds()), "to-202-p50-ns")
	b.ReportMetric(float64(started.Nanoseconds()), "to-run_started-p50-ns")
	b.ReportMetric(float64(latency.Percentile(toStarted, 0.99).Nanoseconds()), "to-run_started-p99-ns")
	b.ReportMetric(float64(read.Nanoseconds()), "floor-read-p50-ns")
	b.ReportMetric(float64(started)/float64(read), "x-floor-read")
}

// BenchmarkMCPToolsCall runs the same one-step workflow to its end in
// turn through the REST API (POST /api/chats/{chatId}/workflow-runs with
// the session cookie, which waits for the run and answers 201 with it)
// and as an MCP tool (POST /api/mcp tools/call with a personal access
// token, which waits for the run and answers its result), in every
// iteration, and reports both p50s and mcp/rest, the ratio of the MCP
// call's p50 over the REST start's: the gateway's overhead (the bearer
// token's validation, a fresh MCP server with the user's exposed tools,
// JSON-RPC) over the same run.
func BenchmarkMCPToolsCall(b *testing.B) {
	f := newFixture(b)
	wfID := f.benchWorkflow(b)
	var pat struct{ Token string }
	data(b, f.serve(b, "POST", "/api/users/"+f.userID+"/tokens", `{"name":"bench","expiresInDays":1}`), 201, &pat)
	var rest, mcp []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		var run struct {
			Status string
			Steps  []struct{ Output map[string]any }
		}
		data(b, f.serve(b, "POST", "/api/chats/"+f.chatID+"/workflow-runs", fmt.Sprintf(`{"workflowId":%q,"input":{"n":%d}}`, wfID, i)), 201, &run)
		rest = append(rest, time.Since(t0))
		if run.Status != "completed" || run.Steps[0].Output["result"] != float64(i+1) {
			b.Fatalf("REST run: %+v", run)
		}
		f.stack.Runner.Wait()

		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"inc","arguments":{"n":%d}}}`, i)
		t0 = time.Now()
		rec := f.serve(b, "POST", "/api/mcp", call, "Authorization", "Bearer "+pat.Token, "Accept", "application/json, text/event-stream", "Content-Type", "application/json", "Cookie", "")
		mcp = append(mcp, time.Since(t0))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), fmt.Sprintf(`"result":%d`, i+1)) || strings.Contains(rec.Body.String(), `"isError":true`) {
			b.Fatalf("tools/call: %d %.500s", rec.Code, rec.Body)
		}
		f.stack.Runner.Wait()
	}
	r, m := latency.Percentile(rest, 0.5), latency.Percentile(mcp, 0.5)
	b.ReportMetric(float64(r.Nanoseconds()), "rest-p50-ns")
	b.ReportMetric(float64(m.Nanoseconds()), "mcp-p50-ns")
	b.ReportMetric(float64(m)/float64(r), "mcp/rest")
}
