package otlp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	"github.com/workflowchat/service/shared/tracing/otlp"
	"github.com/workflowchat/service/shared/tracing/otlp/otlptest"
)

// record returns the spans a provider over a span recorder ended while f
// ran, with resource attributes res.
func record(t *testing.T, f func(tr trace.Tracer), res ...attribute.KeyValue) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := otlp.NewProvider(rec, res...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f(tp.Tracer("scope-a"))
	return rec.Ended()
}

// spansOfEveryShape are spans with every attribute type, an event, links,
// each status, each kind, a remote parent and a trace state.
func spansOfEveryShape(tr trace.Tracer) {
	ctx := context.Background()
	ts, _ := trace.ParseTraceState("vendor=value")
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	rctx, root := tr.Start(trace.ContextWithRemoteSpanContext(ctx, remote), "root", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("s", "text"), attribute.String("empty", ""), attribute.Bool("yes", true), attribute.Bool("no", false),
			attribute.Int("zero", 0), attribute.Int64("neg", -42), attribute.Float64("f", 1.5),
			attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, -2}),
			attribute.Float64Slice("fs", []float64{0.25}), attribute.StringSlice("ss", []string{"a", ""}),
			attribute.Slice("mixed", attribute.StringValue("x"), attribute.IntValue(3)),
			attribute.Map("m", attribute.String("k", "v")), attribute.ByteSlice("bytes", []byte{0, 1, 2})))
	root.AddEvent("something", trace.WithAttributes(attribute.Int("n", 7)), trace.WithTimestamp(time.Unix(100, 5)))
	root.SetStatus(codes.Error, "broke")
	for _, kind := range []trace.SpanKind{trace.SpanKindInternal, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer} {
		_, child := tr.Start(rctx, "child "+kind.String(), trace.WithSpanKind(kind),
			trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("why", "linked")}}))
		child.SetStatus(codes.Ok, "")
		child.End()
	}
	root.End()
	_, lone := tr.Start(ctx, "new root")
	lone.End()
}

// expected encodes spans with the generated OTLP types: what Marshal must
// be equal to.
func expected(spans []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	var anyValue func(v attribute.Value) *commonpb.AnyValue
	kvs := func(attrs []attribute.KeyValue) []*commonpb.KeyValue {
		var out []*commonpb.KeyValue
		for _, kv := range attrs {
			out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
		}
		return out
	}
	array := func(vs []attribute.Value) *commonpb.AnyValue {
		arr := &commonpb.ArrayValue{}
		for _, v := range vs {
			arr.Values = append(arr.Values, anyValue(v))
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: arr}}
	}
	anyValue = func(v attribute.Value) *commonpb.AnyValue {
		switch v.Type() {
		case attribute.BOOL:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
		case attribute.INT64:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
		case attribute.FLOAT64:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
		case attribute.STRING:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
		case attribute.BYTESLICE:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
		case attribute.MAP:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs(v.AsMap())}}}
		case attribute.SLICE:
			return array(v.AsSlice())
		case attribute.BOOLSLICE:
			var vs []attribute.Value
			for _, x := range v.AsBoolSlice() {
				vs = append(vs, attribute.BoolValue(x))
			}
			return array(vs)
		case attribute.INT64SLICE:
			var vs []attribute.Value
			for _, x := range v.AsInt64Slice() {
				vs = append(vs, attribute.Int64Value(x))
			}
			return array(vs)
		case attribute.FLOAT64SLICE:
			var vs []attribute.Value
			for _, x := range v.AsFloat64Slice() {
				vs = append(vs, attribute.Float64Value(x))
			}
			return array(vs)
		case attribute.STRINGSLICE:
			var vs []attribute.Value
			for _, x := range v.AsStringSlice() {
				vs = append(vs, attribute.StringValue(x))
			}
			return array(vs)
		}
		return &commonpb.AnyValue{}
	}
	flags := func(sc trace.SpanContext) uint32 {
		f := uint32(sc.TraceFlags()) | 0x100
		if sc.IsRemote() {
			f |= 0x200
		}
		return f
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	for _, s := range spans {
		rs := byRes[s.Resource().Equivalent()]
		if rs == nil {
			rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: kvs(s.Resource().Attributes())}, SchemaUrl: s.Resource().SchemaURL()}
			byRes[s.Resource().Equivalent()] = rs
			req.ResourceSpans = append(req.ResourceSpans, rs)
		}
		var ss *tracepb.ScopeSpans
		for _, x := range rs.ScopeSpans {
			if x.Scope.Name == s.InstrumentationScope().Name {
				ss = x
			}
		}
		if ss == nil {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: s.InstrumentationScope().Name, Version: s.InstrumentationScope().Version}}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		sc := s.SpanContext()
		tid, sid := sc.TraceID(), sc.SpanID()
		p := &tracepb.Span{TraceId: tid[:], SpanId: sid[:], TraceState: sc.TraceState().String(), Name: s.Name(),
			Kind: tracepb.Span_SpanKind(s.SpanKind()), StartTimeUnixNano: uint64(s.StartTime().UnixNano()), EndTimeUnixNano: uint64(s.EndTime().UnixNano()),
			Attributes: kvs(s.Attributes()), Status: &tracepb.Status{Message: s.Status().Description}}
		switch s.Status().Code {
		case codes.Ok:
			p.Status.Code = tracepb.Status_STATUS_CODE_OK
		case codes.Error:
			p.Status.Code = tracepb.Status_STATUS_CODE_ERROR
		}
		p.Flags = uint32(sc.TraceFlags()) | 0x100
		if s.Parent().IsRemote() {
			p.Flags |= 0x200
		}
		if s.Parent().SpanID().IsValid() {
			pid := s.Parent().SpanID()
			p.ParentSpanId = pid[:]
		}
		for _, e := range s.Events() {
			p.Events = append(p.Events, &tracepb.Span_Event{TimeUnixNano: uint64(e.Time.UnixNano()), Name: e.Name, Attributes: kvs(e.Attributes)})
		}
		for _, l := range s.Links() {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			p.Links = append(p.Links, &tracepb.Span_Link{TraceId: ltid[:], SpanId: lsid[:], TraceState: l.SpanContext.TraceState().String(),
				Attributes: kvs(l.Attributes), Flags: flags(l.SpanContext)})
		}
		ss.Spans = append(ss.Spans, p)
	}
	return req
}

func TestMarshalIsTheOTLPEncoding(t *testing.T) {
	t.Parallel()
	spans := record(t, spansOfEveryShape, attribute.String("service.name", "one"))
	spans = append(spans, record(t, func(tr trace.Tracer) {
		_, s := tr.Start(context.Background(), "other process")
		s.End()
	}, attribute.String("service.name", "two"), attribute.Int("n", 2))...)
	var got coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(otlp.Marshal(spans), &got); err != nil {
		t.Fatalf("the generated types do not decode Marshal's output: %v", err)
	}
	if diff := cmp.Diff(expected(spans), &got, protocmp.Transform()); diff != "" {
		t.Fatalf("Marshal differs from the generated types' encoding (-want +got):\n%s", diff)
	}
	if n := len(got.ResourceSpans); n != 2 {
		t.Fatalf("%d resource spans, want 2 (one per resource)", n)
	}
	if len(otlp.Marshal(nil)) != 0 {
		t.Fatal("no spans must be an empty request")
	}
}

// export sends one span through an Exporter to url.
func export(t *testing.T, e *otlp.Exporter, name string) error {
	t.Helper()
	spans := record(t, func(tr trace.Tracer) {
		_, s := tr.Start(context.Background(), name)
		s.End()
	})
	return e.ExportSpans(context.Background(), spans)
}

func TestExporter(t *testing.T) {
	t.Parallel()
	t.Run("posts protobuf with the headers", func(t *testing.T) {
		t.Parallel()
		r := otlptest.NewReceiver(t)
		e := otlp.NewExporter(r.URL+"/v1/traces", http.Header{"Authorization": {"Basic c2VjcmV0"}}, time.Second)
		if err := export(t, e, "hello"); err != nil {
			t.Fatal(err)
		}
		n, types, headers := r.Requests()
		if n != 1 || types[0] != "application/x-protobuf" || headers[0].Get("Authorization") != "Basic c2VjcmV0" {
			t.Fatalf("%d requests, types %v, headers %v", n, types, headers)
		}
		if s := r.Spans(); len(s) != 1 || s[0].Name != "hello" {
			t.Fatalf("received %+v", s)
		}
	})
	t.Run("retries what OTLP calls retryable", func(t *testing.T) {
		t.Parallel()
		r := otlptest.NewReceiver(t)
		r.FailNext(2, http.StatusServiceUnavailable)
		e := otlp.NewExporter(r.URL+"/v1/traces", nil, time.Second)
		if err := export(t, e, "again"); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := r.Requests(); n != 3 || len(r.Spans()) != 1 {
			t.Fatalf("%d requests, %d spans: want 3 and 1", n, len(r.Spans()))
		}
	})
	t.Run("gives up after three tries", func(t *testing.T) {
		t.Parallel()
		r := otlptest.NewReceiver(t)
		r.FailNext(5, http.StatusTooManyRequests)
		e := otlp.NewExporter(r.URL+"/v1/traces", http.Header{"X-Key": {"s3cr3t"}}, time.Second)
		err := export(t, e, "never")
		if err == nil || !strings.Contains(err.Error(), "429") || strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("error %v: want the status, never a header's value", err)
		}
		if n, _, _ := r.Requests(); n != 3 {
			t.Fatalf("%d requests, want 3", n)
		}
	})
	t.Run("does not retry a refusal", func(t *testing.T) {
		t.Parallel()
		r := otlptest.NewReceiver(t)
		r.FailNext(1, http.StatusBadRequest)
		e := otlp.NewExporter(r.URL+"/v1/traces", nil, time.Second)
		if err := export(t, e, "bad"); err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("error %v, want the 400", err)
		}
		if n, _, _ := r.Requests(); n != 1 {
			t.Fatalf("%d requests, want 1", n)
		}
	})
	t.Run("fails after shutdown", func(t *testing.T) {
		t.Parallel()
		r := otlptest.NewReceiver(t)
		e := otlp.NewExporter(r.URL+"/v1/traces", nil, time.Second)
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := export(t, e, "late"); err == nil {
			t.Fatal("an export after Shutdown succeeded")
		}
		if n, _, _ := r.Requests(); n != 0 {
			t.Fatalf("%d requests after Shutdown", n)
		}
	})
	t.Run("an unreachable collector is an error", func(t *testing.T) {
		t.Parallel()
		e := otlp.NewExporter("http://127.0.0.1:1/v1/traces", nil, time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		spans := record(t, func(tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "x")
			s.End()
		})
		if err := e.ExportSpans(ctx, spans); err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "post spans") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestReadSettings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     map[string]string
		service string
		on      bool
		url     string
		wantSvc string
		err     string
	}{
		{name: "off without an endpoint", env: map[string]string{}},
		{name: "off when disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "base endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, service: "dev",
			on: true, url: "http://localhost:4318/v1/traces", wantSvc: "dev"},
		{name: "base endpoint with a path and a slash", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example.com/otlp/"},
			on: true, url: "https://collector.example.com/otlp/v1/traces", wantSvc: otlp.DefaultServiceName},
		{name: "traces endpoint as given", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:1",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://localhost:4318/custom"}, on: true, url: "http://localhost:4318/custom", wantSvc: otlp.DefaultServiceName},
		{name: "the Lambda function names the service", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318",
			"AWS_LAMBDA_FUNCTION_NAME": "stack-RunnerFunction-1"}, on: true, url: "http://localhost:4318/v1/traces", wantSvc: "stack-RunnerFunction-1"},
		{name: "OTEL_SERVICE_NAME wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318",
			"AWS_LAMBDA_FUNCTION_NAME": "f", "OTEL_SERVICE_NAME": "mine"}, service: "dev", on: true, url: "http://localhost:4318/v1/traces", wantSvc: "mine"},
		{name: "protobuf is fine", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			on: true, url: "http://localhost:4318/v1/traces", wantSvc: otlp.DefaultServiceName},
		{name: "not a URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, err: "OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL"},
		{name: "gRPC refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: "only http/protobuf"},
		{name: "JSON refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{name: "malformed headers", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "OTEL_EXPORTER_OTLP_HEADERS": "a=1,secretvalue"},
			err: "OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not key=value"},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "-5"},
			err: "OTEL_EXPORTER_OTLP_TIMEOUT must be a positive number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, on, err := otlp.ReadSettings(func(k string) string { return tc.env[k] }, tc.service)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "secretvalue") {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || on != tc.on {
				t.Fatalf("on %v, err %v; want on %v", on, err, tc.on)
			}
			if !on {
				return
			}
			if s.URL != tc.url || s.Resource[0] != attribute.String("service.name", tc.wantSvc) || s.Timeout != otlp.DefaultTimeout {
				t.Fatalf("settings %+v, want URL %s, service %s", s, tc.url, tc.wantSvc)
			}
		})
	}
	s, _, err := otlp.ReadSettings(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, other = c ",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "other=d", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}[k]
	}, "")
	if err != nil || s.Headers.Get("Api-Key") != "a b" || s.Headers.Get("Other") != "d" || s.Timeout != 2500*time.Millisecond {
		t.Fatalf("headers %v, timeout %v, err %v", s.Headers, s.Timeout, err)
	}
}
