// Package otlptest is an OTLP/HTTP traces receiver for tests: an httptest
// server that decodes each export (protobuf) with the generated OTLP types
// (go.opentelemetry.io/proto/otlp), as a collector does, and keeps the
// spans. It links gRPC through those types: tests only.
package otlptest

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, its ids in hex.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Attrs                         map[string]any // string, bool, int64, float64, []any, map[string]any, []byte
	Links                         []Link
	Status                        tracepb.Status_StatusCode
	StatusMessage                 string
	StartNano, EndNano            uint64
	Flags                         uint32
	// Service is the resource's service.name; Scope the instrumentation
	// scope's name.
	Service, Scope string
	// Resource holds the resource's attributes.
	Resource map[string]any
}

// Link is a span's link.
type Link struct{ TraceID, SpanID string }

// Receiver is a running OTLP/HTTP receiver.
type Receiver struct {
	// URL is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string
	mu  sync.Mutex
	// spans holds every span received.
	spans []Span
	// requests counts the exports; contentTypes are their Content-Types.
	requests     int
	contentTypes []string
	headers      []http.Header
	// fail, when set, is the status of the next answers (and is
	// decremented per answer while failN > 0).
	failStatus int
	failN      int
}

// NewReceiver starts a receiver serving POST /v1/traces; it stops when
// the test ends. A body that does not decode is answered 400 and fails
// the test.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.requests++
		r.contentTypes = append(r.contentTypes, req.Header.Get("Content-Type"))
		r.headers = append(r.headers, req.Header.Clone())
		if r.failN > 0 {
			r.failN--
			status := r.failStatus
			r.mu.Unlock()
			w.WriteHeader(status)
			return
		}
		r.mu.Unlock()
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			t.Errorf("otlptest: the export does not decode: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		spans := Decode(&msg)
		r.mu.Lock()
		r.spans = append(r.spans, spans...)
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// FailNext makes the next n exports answered status, unread.
func (r *Receiver) FailNext(n, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failN, r.failStatus = n, status
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Requests returns how many exports were posted, their Content-Types and
// headers.
func (r *Receiver) Requests() (int, []string, []http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, slices.Clone(r.contentTypes), slices.Clone(r.headers)
}

// Decode flattens an export into its spans.
func Decode(msg *coltracepb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		service, _ := res["service.name"].(string)
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
					Attrs: attrs(s.GetAttributes()), Status: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
					StartNano: s.GetStartTimeUnixNano(), EndNano: s.GetEndTimeUnixNano(), Flags: s.GetFlags(),
					Service: service, Scope: ss.GetScope().GetName(), Resource: res}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return attrs(x.KvlistValue.GetValues())
	}
	return nil
}

// Tree renders the spans of trace traceID as an indented tree, children
// under their parent in start order, one line per span: its name, and its
// parent's id when the parent is not among the spans (a remote parent).
// attrs names the attributes shown after the name (those the span has).
func Tree(spans []Span, traceID string, attrs ...string) string {
	byID := map[string]bool{}
	children := map[string][]Span{}
	var in []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			in = append(in, s)
			byID[s.SpanID] = true
		}
	}
	sort.SliceStable(in, func(i, j int) bool { return in[i].StartNano < in[j].StartNano })
	var roots []Span
	for _, s := range in {
		if s.ParentSpanID == "" || !byID[s.ParentSpanID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
	}
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		fmt.Fprintf(&b, "%s%s [%s]", strings.Repeat("  ", depth), s.Name, s.Service)
		for _, a := range attrs {
			if v, ok := s.Attrs[a]; ok {
				fmt.Fprintf(&b, " %s=%v", a, v)
			}
		}
		if s.ParentSpanID != "" && !byID[s.ParentSpanID] {
			fmt.Fprintf(&b, " (parent %s)", s.ParentSpanID)
		}
		b.WriteString("\n")
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
