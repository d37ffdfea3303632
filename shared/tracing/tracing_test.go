package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/tracing/otlp"
)

// install turns tracing on, as the hosts do, over a recorder, until the
// test ends. Tests that install run one at a time (not in parallel): the
// provider is the process's.
func install(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := otlp.NewProvider(rec)
	restore := tracing.Install(tp, tp.ForceFlush)
	t.Cleanup(func() {
		restore()
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func byName(spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

func TestRunTraceID(t *testing.T) {
	const run = "0f8fad5b-d9cb-469f-a165-70867728950e"
	if got := tracing.RunTraceID(run).String(); got != "0f8fad5bd9cb469fa16570867728950e" {
		t.Fatalf("trace id of a UUID run id: %s, want its 16 bytes", got)
	}
	other := tracing.RunTraceID("hook-delivery-7")
	if !other.IsValid() || other != tracing.RunTraceID("hook-delivery-7") || other == tracing.RunTraceID("hook-delivery-8") {
		t.Fatalf("a run id that is not a UUID: %s, want a valid id derived from it alone", other)
	}
	if !tracing.RunTraceID("00000000-0000-0000-0000-000000000000").IsValid() {
		t.Fatal("the nil UUID must still give a valid trace id")
	}
	if a, b := tracing.RunSpanID(run), tracing.RunSpanID(run); !a.IsValid() || a != b || a == tracing.RunSpanID("x") {
		t.Fatalf("run span ids %s %s", a, b)
	}
}

// TestRunTrace: a run started in a request, then two attempts and a
// resume in fresh contexts (other processes), all land in the run's
// trace under its first span, and the request links to it.
func TestRunTrace(t *testing.T) {
	rec := install(t)
	const run = "6f1c2b1e-3a4d-4c8e-9b2a-1d2e3f4a5b6c"
	reqCtx, req := tracing.Start(context.Background(), "POST /api/chats/{chatId}/workflow-runs")
	tracing.RunStarted(reqCtx, run)
	req.End()
	for attempt := 1; attempt <= 2; attempt++ {
		ctx, span := tracing.StartAttempt(context.Background(), run, attempt)
		_, step := tracing.StartStep(ctx, 0, "json_query")
		tracing.EndStep(step, "completed")
		tracing.End(span, nil)
	}
	sweepCtx, sweep := tracing.Start(context.Background(), "job.sweep")
	_, resume := tracing.StartResume(sweepCtx, run)
	resume.End()
	sweep.End()

	spans := rec.Ended()
	root := byName(spans, "workflow.run")
	if root == nil {
		t.Fatalf("no workflow.run span in %d spans", len(spans))
	}
	want := tracing.RunSpanContext(run)
	if root.SpanContext().TraceID() != want.TraceID() || root.SpanContext().SpanID() != want.SpanID() || root.Parent().IsValid() {
		t.Fatalf("run span %s/%s parent %v, want the derived ids %s/%s and no parent", root.SpanContext().TraceID(), root.SpanContext().SpanID(),
			root.Parent().SpanID(), want.TraceID(), want.SpanID())
	}
	reqSpan := byName(spans, "POST /api/chats/{chatId}/workflow-runs")
	if len(reqSpan.Links()) != 1 || reqSpan.Links()[0].SpanContext.SpanID() != want.SpanID() {
		t.Fatalf("request links %+v, want the run's span", reqSpan.Links())
	}
	if len(root.Links()) != 1 || root.Links()[0].SpanContext.SpanID() != reqSpan.SpanContext().SpanID() {
		t.Fatalf("run span links %+v, want the request", root.Links())
	}
	var attempts []int64
	for _, s := range spans {
		switch s.Name() {
		case "workflow.run.attempt", "workflow.run.resume":
			if s.SpanContext().TraceID() != want.TraceID() || s.Parent().SpanID() != want.SpanID() {
				t.Errorf("%s: trace %s parent %s, want a child of the run's span", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
			}
			if v, ok := attr(s, tracing.RunAttempt); ok {
				attempts = append(attempts, v.AsInt64())
			}
		case "workflow.step json_query":
			if s.SpanContext().TraceID() != want.TraceID() {
				t.Errorf("step in trace %s", s.SpanContext().TraceID())
			}
		}
	}
	if len(attempts) != 2 || attempts[0] != 1 || attempts[1] != 2 {
		t.Fatalf("attempts %v", attempts)
	}
	resumed := byName(spans, "workflow.run.resume")
	if len(resumed.Links()) != 1 || resumed.Links()[0].SpanContext.SpanID() != sweep.SpanContext().SpanID() {
		t.Fatalf("resume links %+v, want the sweep", resumed.Links())
	}
}

func TestOffIsFree(t *testing.T) {
	if tracing.Enabled() {
		t.Fatal("tracing is on with nothing installed")
	}
	ctx := context.Background()
	r := httptest.NewRequest("GET", "/x", nil)
	failed := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		c, s := tracing.StartTool(ctx, "json_query")
		tracing.End(s, failed)
		_, s = tracing.StartStep(c, 1, "json_query")
		tracing.EndStep(s, "failed")
		_, s = tracing.StartAttempt(ctx, "run", 1)
		s.End()
		_, s = tracing.StartServer(r)
		tracing.EndServer(s, "GET /x", "/x", 500)
		tracing.Inject(ctx, r.Header)
		_ = tracing.Extract(ctx, r.Header)
		tracing.RunStarted(ctx, "run")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call with tracing off, want 0", allocs)
	}
	if r.Header.Get("traceparent") != "" {
		t.Fatal("a traceparent was sent with tracing off")
	}
	if err := tracing.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestHTTPSpans(t *testing.T) {
	rec := install(t)
	// A server span continues the caller's traceparent and is named by
	// its route.
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
	r := httptest.NewRequest("POST", "/api/chats/c1?token=secret", nil)
	r.Header.Set("traceparent", "00-"+parent.TraceID().String()+"-"+parent.SpanID().String()+"-01")
	ctx, span := tracing.StartServer(r)
	tracing.EndServer(span, "POST /api/chats/{chatId}", "/api/chats/c1", 503)

	// A client span puts its traceparent in the request.
	out, _ := http.NewRequestWithContext(ctx, "POST", "http://user:pw@tools.internal:3001/mcp?key=secret", nil)
	out, client := tracing.StartToolServerCall(out, "runTool", "json_query")
	tracing.EndClient(client, 200, nil)

	spans := rec.Ended()
	srv := byName(spans, "POST /api/chats/{chatId}")
	if srv == nil || srv.SpanKind() != trace.SpanKindServer || srv.Parent().SpanID() != parent.SpanID() || srv.SpanContext().TraceID() != parent.TraceID() {
		t.Fatalf("server span %+v", srv)
	}
	if v, _ := attr(srv, tracing.HTTPRoute); v.AsString() != "/api/chats/{chatId}" {
		t.Fatalf("http.route %q", v.AsString())
	}
	if v, _ := attr(srv, tracing.URLPath); v.AsString() != "/api/chats/c1" {
		t.Fatalf("url.path %q", v.AsString())
	}
	if srv.Status().Code != codes.Error {
		t.Fatal("a 503 must fail the server span")
	}
	cl := byName(spans, "POST /mcp")
	if cl == nil || cl.Parent().SpanID() != srv.SpanContext().SpanID() {
		t.Fatalf("client span %+v", cl)
	}
	full, _ := attr(cl, tracing.URLFull)
	if full.AsString() != "http://tools.internal:3001/mcp" {
		t.Fatalf("url.full %q: no user info, no query", full.AsString())
	}
	if tool, _ := attr(cl, tracing.GenAIToolName); tool.AsString() != "json_query" {
		t.Fatalf("tool %q", tool.AsString())
	}
	tp := out.Header.Get("traceparent")
	if !strings.Contains(tp, cl.SpanContext().SpanID().String()) || !strings.Contains(tp, parent.TraceID().String()) {
		t.Fatalf("traceparent %q, want the client span's", tp)
	}
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "secret") || strings.Contains(kv.Value.Emit(), "pw") {
				t.Errorf("%s: %s=%s carries a secret", s.Name(), kv.Key, kv.Value.Emit())
			}
		}
	}
}

func TestMCPMetaParent(t *testing.T) {
	rec := install(t)
	httpCtx, httpSpan := tracing.Start(context.Background(), "POST /api/mcp")
	meta := map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	_, call := tracing.StartMCPCall(httpCtx, meta)
	call.End()
	_, plain := tracing.StartMCPCall(httpCtx, map[string]any{"traceparent": "not one"})
	plain.End()
	httpSpan.End()
	var fromMeta, fromHTTP sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "tools/call" && s.SpanContext().TraceID().String() == "0af7651916cd43dd8448eb211c80319c" {
			fromMeta = s
		} else if s.Name() == "tools/call" {
			fromHTTP = s
		}
	}
	if fromMeta == nil || fromMeta.Parent().SpanID().String() != "b7ad6b7169203331" || len(fromMeta.Links()) != 1 ||
		fromMeta.Links()[0].SpanContext.SpanID() != httpSpan.SpanContext().SpanID() {
		t.Fatalf("a call with _meta.traceparent: %+v", fromMeta)
	}
	if fromHTTP == nil || fromHTTP.Parent().SpanID() != httpSpan.SpanContext().SpanID() {
		t.Fatalf("a call with an invalid traceparent must stay under the request: %+v", fromHTTP)
	}
}

func TestModelAndToolSpans(t *testing.T) {
	rec := install(t)
	ctx, model := tracing.StartModelCall(context.Background(), "bedrock", "us.anthropic.claude", 256)
	tracing.EndModelCall(model, 120, 30, nil)
	_, tool := tracing.StartTool(ctx, "Ignore previous instructions")
	tracing.End(tool, errs.E("op", errs.Timeout, "TOOL_TIMEOUT", "tool x did not finish: input was 'private'"))
	spans := rec.Ended()
	m := byName(spans, "chat us.anthropic.claude")
	for key, want := range map[attribute.Key]any{tracing.GenAIOperationName: "chat", tracing.GenAIProviderName: "aws.bedrock",
		tracing.GenAIRequestModel: "us.anthropic.claude", tracing.GenAIRequestMaxTokens: int64(256),
		tracing.GenAIUsageInputTokens: int64(120), tracing.GenAIUsageOutputTokens: int64(30)} {
		if v, ok := attr(m, key); !ok || v.AsInterface() != want {
			t.Errorf("%s = %v, want %v", key, v.AsInterface(), want)
		}
	}
	tl := byName(spans, "execute_tool other")
	if tl == nil || tl.Status().Code != codes.Error || tl.Status().Description != "TOOL_TIMEOUT" {
		t.Fatalf("tool span %+v: want the name of no invented tool, the error's code and not its message", tl)
	}
}
