package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/tracing/otlp"
)

// tracedRouter is a router of two routes: one answers 204, one fails 503.
func tracedRouter() *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("DELETE /api/chats/{chatId}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	r.Handle("GET /api/shares/{shareId}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	r.Handle("GET /api/fail", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, errs.E("test", errs.Unavailable, "", "down"))
	}))
	return r
}

// TestTraceMiddleware: with tracing on, each request through the standard
// stack is a server span named by the route it matched, continuing the
// caller's traceparent; off, nothing is recorded. Not parallel: it
// installs the process's tracer provider.
func TestTraceMiddleware(t *testing.T) {
	h := httpapi.Stack(tracedRouter(), httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	send := func(method, path, traceparent string) int {
		req := httptest.NewRequest(method, path, nil)
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	send("DELETE", "/api/chats/before", "") // off: nothing to record

	rec := tracetest.NewSpanRecorder()
	tp := otlp.NewProvider(rec)
	restore := tracing.Install(tp, tp.ForceFlush)
	defer restore()
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if code := send("DELETE", "/api/chats/c1", caller); code != http.StatusNoContent {
		t.Fatalf("status %d", code)
	}
	send("GET", "/api/fail", "")
	send("GET", "/nowhere", "")
	send("GET", "/api/shares/OMXcz3ObM_yszltTMpGKzA", "")
	restore()
	send("DELETE", "/api/chats/after", "")

	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want the 4 sent while tracing was on", len(spans))
	}
	want := []struct {
		name   string
		route  string
		path   string // url.path: a share's id, a credential, is not recorded
		status int64
		failed bool
	}{
		{"DELETE /api/chats/{chatId}", "/api/chats/{chatId}", "/api/chats/c1", 204, false},
		{"GET /api/fail", "/api/fail", "/api/fail", 503, true},
		{"GET", "", "/nowhere", 404, false},
		{"GET /api/shares/{shareId}", "/api/shares/{shareId}", "/api/shares/{shareId}", 200, false},
	}
	for i, w := range want {
		s := spans[i]
		if s.Name() != w.name || s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %d: %s (%v), want %s", i, s.Name(), s.SpanKind(), w.name)
		}
		route, path, status := "", "", int64(0)
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case tracing.HTTPRoute:
				route = kv.Value.AsString()
			case tracing.URLPath:
				path = kv.Value.AsString()
			case tracing.HTTPResponseStatusCode:
				status = kv.Value.AsInt64()
			}
		}
		if route != w.route || path != w.path || status != w.status || (s.Status().Code == codes.Error) != w.failed {
			t.Errorf("span %d: route %q path %q status %d failed %v; want %q %q %d %v", i, route, path, status, s.Status().Code == codes.Error, w.route, w.path, w.status, w.failed)
		}
	}
	if got := spans[0].Parent(); got.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || got.SpanID().String() != "00f067aa0ba902b7" || !got.IsRemote() {
		t.Fatalf("parent %v, want the caller's traceparent", got)
	}
}

// BenchmarkTraceMiddleware measures what tracing costs a request through
// the middleware: "none" is the core of the stack without the Trace
// middleware, "off" the same with it and no provider installed (how every
// function runs unless OTEL_EXPORTER_OTLP_ENDPOINT is set), "on" with the
// SDK recording every span and exporting it to nowhere. off/none is the
// cost of the tracing code when tracing is off.
func BenchmarkTraceMiddleware(b *testing.B) {
	logger := slog.New(slog.DiscardHandler)
	routes := tracedRouter()
	core := func(traced bool) http.Handler {
		mws := []httpapi.Middleware{httpapi.SecurityHeaders, httpapi.RequestID(logger)}
		if traced {
			mws = append(mws, httpapi.Trace)
		}
		mws = append(mws, httpapi.AccessLog, httpapi.Recover, httpapi.LimitBody(httpapi.MaxBodyBytes))
		return httpapi.Chain(routes, mws...)
	}
	run := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest("DELETE", "/api/chats/c1", nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusNoContent {
				b.Fatal(w.Code)
			}
		}
	}
	b.Run("none", func(b *testing.B) { run(b, core(false)) })
	b.Run("off", func(b *testing.B) { run(b, core(true)) })
	b.Run("on", func(b *testing.B) {
		tp := otlp.NewProvider(sdktrace.NewBatchSpanProcessor(discard{}))
		defer tracing.Install(tp, tp.ForceFlush)()
		defer func() { _ = tp.Shutdown(context.Background()) }()
		run(b, core(true))
	})
}

// BenchmarkTraceMiddlewareOff interleaves BenchmarkTraceMiddleware's
// "none" and "off" requests, one of each per iteration, each timed, so
// that the machine's other work weighs on both alike; it reports the
// ratio of their total times (off/none) and each one's ns per request.
func BenchmarkTraceMiddlewareOff(b *testing.B) {
	logger := slog.New(slog.DiscardHandler)
	routes := tracedRouter()
	chain := func(mws ...httpapi.Middleware) http.Handler {
		return httpapi.Chain(routes, append(mws, httpapi.AccessLog, httpapi.Recover, httpapi.LimitBody(httpapi.MaxBodyBytes))...)
	}
	none := chain(httpapi.SecurityHeaders, httpapi.RequestID(logger))
	off := chain(httpapi.SecurityHeaders, httpapi.RequestID(logger), httpapi.Trace)
	serve := func(h http.Handler) time.Duration {
		req := httptest.NewRequest("DELETE", "/api/chats/c1", nil)
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(t0)
		if w.Code != http.StatusNoContent {
			b.Fatal(w.Code)
		}
		return d
	}
	var tNone, tOff time.Duration
	i := 0
	for b.Loop() {
		// Alternate which goes first.
		if i%2 == 0 {
			tNone += serve(none)
			tOff += serve(off)
		} else {
			tOff += serve(off)
			tNone += serve(none)
		}
		i++
	}
	b.ReportMetric(float64(tOff)/float64(tNone), "off/none")
	b.ReportMetric(float64(tNone.Nanoseconds())/float64(i), "ns-none")
	b.ReportMetric(float64(tOff.Nanoseconds())/float64(i), "ns-off")
}

// BenchmarkTraceOffOverhead isolates what the Trace middleware adds to a
// request when tracing is off: a handler that does nothing, behind
// Trace ("trace") or behind a middleware that only passes the request on
// ("pass"), the same request served again and again. The difference of
// the two is the off cost per request, against BenchmarkTraceMiddleware's
// whole request.
func BenchmarkTraceOffOverhead(b *testing.B) {
	nothing := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	pass := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, r) })
	}
	req := httptest.NewRequest("GET", "/", nil)
	w := httptest.NewRecorder()
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"pass", pass(nothing)}, {"trace", httpapi.Trace(nothing)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(w, req)
			}
		})
	}
}

// discard is an exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
