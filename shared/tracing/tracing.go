// Package tracing is the service's OpenTelemetry instrumentation, written
// against the OpenTelemetry API alone: the spans of HTTP requests (server
// and client), jobs (a chat reply, a workflow run and each attempt of it),
// workflow steps, model calls and tool calls, with the attribute names of
// the OpenTelemetry semantic conventions, and the W3C trace context
// (traceparent) that joins the tool server's spans to its callers'.
//
// Nothing is traced until a provider is installed (Install; package
// shared/tracing/otlp installs the SDK's when OTEL_EXPORTER_OTLP_ENDPOINT
// is set). Until then every helper returns at once after one atomic load:
// no span, no allocation, no header read or written.
//
// A workflow run is one trace whatever processes it crosses: its trace id
// is derived from the run id (RunTraceID), the run's first span (RunStarted,
// when the run is stored) has a span id derived from it too (RunSpanID), and
// every attempt of the run, in the runner, and every resume by the sweeper
// is a child of that span (StartAttempt, StartResume), however and wherever
// it is invoked. The span that started the run links to it (LinkRun).
//
// Attributes never carry secrets, prompts, tool inputs or outputs, model
// replies or other user content: only identifiers (run, reply and step
// indexes), names from the service's own catalogs (tool ids, model ids),
// counts, statuses and error codes.
package tracing

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/workflowchat/service/shared/errs"
)

// ScopeName is the instrumentation scope of every span of the service.
const ScopeName = "github.com/workflowchat/service"

// provider is what Install sets.
type provider struct {
	tracer trace.Tracer
	flush  func(context.Context) error
}

var installed atomic.Pointer[provider]

// Install makes tp the provider of the service's spans, and flush (nil:
// none) what Flush calls; it returns the function that puts back what was
// installed before (tests). The process's hosts call it once at start,
// through package shared/tracing/otlp.
func Install(tp trace.TracerProvider, flush func(context.Context) error) (restore func()) {
	prev := installed.Swap(&provider{tracer: tp.Tracer(ScopeName), flush: flush})
	return func() { installed.Store(prev) }
}

// Enabled reports whether a provider is installed.
func Enabled() bool { return installed.Load() != nil }

// FlushTimeout bounds Flush.
const FlushTimeout = 2 * time.Second

// Flush exports the spans that have ended (the provider's ForceFlush),
// within FlushTimeout and whatever ctx's cancellation. A Lambda handler
// calls it before its invocation returns: the process may be frozen, or
// never thawed, once it has. It does nothing when tracing is off, and
// fails with the exporter's error.
func Flush(ctx context.Context) error {
	p := installed.Load()
	if p == nil || p.flush == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
	defer cancel()
	return p.flush(ctx)
}

// off is the span every helper returns when tracing is off: it records
// nothing and ending it does nothing.
var off trace.Span = noop.Span{}

// start starts a span of kind with attrs, or returns ctx and off.
func start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	p := installed.Load()
	if p == nil {
		return ctx, off
	}
	return p.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Start starts an internal span named name, a child of ctx's span.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return start(ctx, name, trace.SpanKindInternal, attrs...)
}

// End ends span, as failed when err is not nil: status Error with err's
// code (errs.CodeOf) as its description and error.type, never err's
// message (which may quote a tool's input).
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		code := errs.CodeOf(err)
		span.SetStatus(codes.Error, code)
		span.SetAttributes(ErrorType.String(code))
	}
	span.End()
}

// TraceID returns the id of ctx's trace, "" when there is none (tracing
// off): the dev server's log lines carry it.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// w3c is the W3C trace context propagator (traceparent, tracestate).
var w3c propagation.TraceContext

// Inject writes ctx's span context to h as traceparent (and tracestate),
// when tracing is on and ctx has one.
func Inject(ctx context.Context, h http.Header) {
	if Enabled() {
		w3c.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Extract returns ctx with the remote span context of h's traceparent,
// when tracing is on and h carries a valid one.
func Extract(ctx context.Context, h http.Header) context.Context {
	if !Enabled() {
		return ctx
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// FromMeta returns ctx with the remote span context of an MCP request's
// params._meta (its "traceparent" and "tracestate" members, strings), when
// tracing is on and meta carries a valid one; else ctx.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if !Enabled() || meta == nil {
		return ctx
	}
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return ctx
	}
	h := http.Header{}
	h.Set("traceparent", tp)
	if ts, ok := meta["tracestate"].(string); ok {
		h.Set("tracestate", ts)
	}
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.HeaderCarrier(h)))
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// StartMCPCall starts the span of an MCP tools/call the service serves,
// "tools/call" (MCP semantic conventions; the tool's name, the user's
// workflow's, is left out), of kind server: a child of the traceparent in
// the request's params._meta when the client sent one (the HTTP request's
// span is then linked), else of ctx's span.
func StartMCPCall(ctx context.Context, meta map[string]any) (context.Context, trace.Span) {
	p := installed.Load()
	if p == nil {
		return ctx, off
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(MCPMethodName.String("tools/call"))}
	if mctx := FromMeta(ctx, meta); mctx != ctx {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
		ctx = mctx
	}
	return p.tracer.Start(ctx, "tools/call", opts...)
}

// StartServer starts the server span of r, a child of the traceparent r
// carries (if any), named by its method until EndServer names it by its
// route.
func StartServer(r *http.Request) (context.Context, trace.Span) {
	if !Enabled() {
		return r.Context(), off
	}
	ctx := Extract(r.Context(), r.Header)
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return start(ctx, r.Method, trace.SpanKindServer,
		HTTPRequestMethod.String(r.Method), URLScheme.String(scheme))
}

// EndServer ends the server span of a request that matched pattern (its
// http.ServeMux pattern, "POST /api/chats/{chatId}"; "" when no route
// did), at path (the request's path as it may be recorded: the caller
// leaves out the path values that are credentials) and was answered
// status: the span is named by the pattern, as "{method} {route}", with
// http.route and url.path; a 5xx answer fails it.
func EndServer(span trace.Span, pattern, path string, status int) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(URLPath.String(path))
	if pattern != "" {
		route := pattern
		if _, path, ok := strings.Cut(pattern, " "); ok {
			route = path
		}
		if i := strings.IndexByte(route, '/'); i > 0 {
			route = route[i:] // a host in the pattern
		}
		span.SetName(pattern)
		span.SetAttributes(HTTPRoute.String(route))
	}
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(HTTPResponseStatusCode.Int(status))
	if status >= 500 {
		code := strconv.Itoa(status)
		span.SetStatus(codes.Error, code)
		span.SetAttributes(ErrorType.String(code))
	}
	span.End()
}

// StartClient starts the client span of req, a child of req's context's
// span, named "{method} {path}" with attrs, puts traceparent in req's
// headers and returns req in the span's context. The URL in url.full
// keeps no user info, query or fragment.
func StartClient(req *http.Request, attrs ...attribute.KeyValue) (*http.Request, trace.Span) {
	if !Enabled() {
		return req, off
	}
	u := *req.URL
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	all := append([]attribute.KeyValue{HTTPRequestMethod.String(req.Method), URLFull.String(u.String()),
		ServerAddress.String(u.Hostname())}, attrs...)
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err == nil {
			all = append(all, ServerPort.Int(n))
		}
	}
	ctx, span := start(req.Context(), req.Method+" "+u.Path, trace.SpanKindClient, all...)
	req = req.WithContext(ctx)
	Inject(ctx, req.Header)
	return req, span
}

// StartToolServerCall is StartClient for a call of the tool server's
// protocol: method (rpc.method) and, for runTool, the tool
// (gen_ai.tool.name).
func StartToolServerCall(req *http.Request, method, toolID string) (*http.Request, trace.Span) {
	if !Enabled() {
		return req, off
	}
	if toolID == "" {
		return StartClient(req, RPCMethod.String(method))
	}
	return StartClient(req, RPCMethod.String(method), GenAIToolName.String(ToolName(toolID)))
}

// EndClient ends a client span: answered status, or failed with err (no
// answer: status is ignored). A 4xx or 5xx answer fails it.
func EndClient(span trace.Span, status int, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch {
	case err != nil:
		End(span, err)
		return
	case status >= 400:
		code := strconv.Itoa(status)
		span.SetStatus(codes.Error, code)
		span.SetAttributes(ErrorType.String(code))
	}
	span.SetAttributes(HTTPResponseStatusCode.Int(status))
	span.End()
}

// toolIDPattern is the form of a tool id of the catalog; a name of
// another form (a model's invention, a client's typo) is not put in a
// span.
var toolIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`) })

// ToolName returns id when it has the form of a tool id, else "other".
func ToolName(id string) string {
	if toolIDPattern().MatchString(id) {
		return id
	}
	return "other"
}

// StartTool starts the span of one tool call through the tool gate,
// "execute_tool {tool}" (GenAI semantic conventions).
func StartTool(ctx context.Context, toolID string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, off
	}
	name := ToolName(toolID)
	return start(ctx, "execute_tool "+name, trace.SpanKindInternal,
		GenAIOperationName.String("execute_tool"), GenAIToolName.String(name), GenAIToolType.String("function"))
}

// StartToolRun starts the tool server's span of running one tool of its
// registry, "run_tool {tool}".
func StartToolRun(ctx context.Context, toolID string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, off
	}
	name := ToolName(toolID)
	return start(ctx, "run_tool "+name, trace.SpanKindInternal,
		GenAIOperationName.String("execute_tool"), GenAIToolName.String(name))
}

// providerNames maps the model registry's provider names to the GenAI
// semantic conventions' gen_ai.provider.name values.
var providerNames = map[string]string{"bedrock": "aws.bedrock", "openai": "openai", "anthropic": "anthropic"}

// StartModelCall starts the span of one model call, "chat {model}" (GenAI
// semantic conventions: gen_ai.operation.name chat, the provider, the
// model, the output cap when set).
func StartModelCall(ctx context.Context, provider, modelID string, maxTokens int) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, off
	}
	name, ok := providerNames[provider]
	if !ok {
		name = "workflowchat." + provider // the built-in model
	}
	attrs := []attribute.KeyValue{GenAIOperationName.String("chat"), GenAIProviderName.String(name), GenAIRequestModel.String(modelID)}
	if maxTokens > 0 {
		attrs = append(attrs, GenAIRequestMaxTokens.Int(maxTokens))
	}
	return start(ctx, "chat "+modelID, trace.SpanKindClient, attrs...)
}

// EndModelCall ends a model call's span with the tokens the provider
// reported (gen_ai.usage.input_tokens, gen_ai.usage.output_tokens), as
// failed when err is not nil.
func EndModelCall(span trace.Span, inputTokens, outputTokens int, err error) {
	if span.IsRecording() {
		span.SetAttributes(GenAIUsageInputTokens.Int(inputTokens), GenAIUsageOutputTokens.Int(outputTokens))
	}
	End(span, err)
}

// StartJob starts the span of a job of kind ("reply") and id, named
// "{kind} job".
func StartJob(ctx context.Context, kind, id string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, off
	}
	return start(ctx, kind+" job", trace.SpanKindInternal, JobKind.String(kind), JobID.String(id))
}

// StartStep starts the span of step index (from 0) of a run, running
// toolID: "workflow.step {tool}".
func StartStep(ctx context.Context, index int, toolID string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, off
	}
	name := ToolName(toolID)
	return start(ctx, "workflow.step "+name, trace.SpanKindInternal, StepIndex.Int(index), GenAIToolName.String(name))
}

// EndStep ends a step's span with the step's status ("completed",
// "failed", ...); a failed step fails the span.
func EndStep(span trace.Span, status string) {
	if span.IsRecording() {
		span.SetAttributes(StepStatus.String(status))
		if status == "failed" {
			span.SetStatus(codes.Error, "step failed")
		}
	}
	span.End()
}
