package otlp

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Marshal encodes spans as an OTLP ExportTraceServiceRequest in the
// protocol buffers wire format (opentelemetry/proto/collector/trace/v1),
// the body of an OTLP/HTTP export: one ResourceSpans per resource, one
// ScopeSpans per instrumentation scope in it, in the order they first
// appear.
//
// It writes the wire format itself rather than through the generated OTLP
// types: those (go.opentelemetry.io/proto/otlp/collector/trace/v1) link
// gRPC and the gRPC gateway into every function, whose package
// initialization alone would cost each cold start more than all of the
// tracing does. The tests decode its output with the generated types.
func Marshal(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct{ name, version, schemaURL string }
	type group struct {
		res    *resource.Resource
		scopes []scopeKey
		spans  map[scopeKey][]sdktrace.ReadOnlySpan
		scope  map[scopeKey]instrumentation.Scope
	}
	var groups []*group
	byRes := map[attribute.Distinct]*group{}
	for _, s := range spans {
		res := s.Resource()
		k := res.Equivalent()
		g := byRes[k]
		if g == nil {
			g = &group{res: res, spans: map[scopeKey][]sdktrace.ReadOnlySpan{}, scope: map[scopeKey]instrumentation.Scope{}}
			byRes[k] = g
			groups = append(groups, g)
		}
		sc := s.InstrumentationScope()
		sk := scopeKey{sc.Name, sc.Version, sc.SchemaURL}
		if _, ok := g.spans[sk]; !ok {
			g.scopes = append(g.scopes, sk)
			g.scope[sk] = sc
		}
		g.spans[sk] = append(g.spans[sk], s)
	}
	var out []byte
	for _, g := range groups {
		var rs []byte
		rs = appendMessage(rs, 1, resourceMessage(g.res))
		for _, sk := range g.scopes {
			var ss []byte
			ss = appendMessage(ss, 1, scopeMessage(g.scope[sk]))
			for _, s := range g.spans[sk] {
				ss = appendMessage(ss, 2, spanMessage(s))
			}
			ss = appendString(ss, 3, sk.schemaURL)
			rs = appendMessage(rs, 2, ss)
		}
		if g.res != nil {
			rs = appendString(rs, 3, g.res.SchemaURL())
		}
		out = appendMessage(out, 1, rs)
	}
	return out
}

// Wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

// appendMessage appends a length-delimited field, also when msg is empty
// (a present but empty message).
func appendMessage(b []byte, field int, msg []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(msg)))
	return append(b, msg...)
}

// appendBytes appends a bytes field unless it is empty (proto3 default).
func appendBytes(b []byte, field int, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return appendMessage(b, field, v)
}

// appendString appends a string field unless it is empty.
func appendString(b []byte, field int, v string) []byte {
	if v == "" {
		return b
	}
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendUvarint appends a varint field unless it is zero.
func appendUvarint(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(appendTag(b, field, wireVarint), v)
}

// appendFixed64 appends a fixed64 field unless it is zero.
func appendFixed64(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint64(appendTag(b, field, wireFixed64), v)
}

// appendFixed32 appends a fixed32 field unless it is zero.
func appendFixed32(b []byte, field int, v uint32) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint32(appendTag(b, field, wireFixed32), v)
}

// resourceMessage is a Resource {attributes = 1}.
func resourceMessage(r *resource.Resource) []byte {
	if r == nil {
		return nil
	}
	return appendAttributes(nil, 1, r.Attributes())
}

// scopeMessage is an InstrumentationScope {name = 1, version = 2,
// attributes = 3}.
func scopeMessage(s instrumentation.Scope) []byte {
	var b []byte
	b = appendString(b, 1, s.Name)
	b = appendString(b, 2, s.Version)
	return appendAttributes(b, 3, s.Attributes.ToSlice())
}

// OTLP span flags: the W3C trace flags in the low byte, then whether the
// parent is known to be remote, and whether it is.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// spanMessage is a Span.
func spanMessage(s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	var b []byte
	b = appendBytes(b, 1, tid[:])
	b = appendBytes(b, 2, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	parent := s.Parent()
	if parent.SpanID().IsValid() {
		pid := parent.SpanID()
		b = appendBytes(b, 4, pid[:])
	}
	b = appendString(b, 5, s.Name())
	b = appendUvarint(b, 6, uint64(spanKind(s.SpanKind())))
	b = appendFixed64(b, 7, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, 8, unixNano(s.EndTime().UnixNano()))
	b = appendAttributes(b, 9, s.Attributes())
	b = appendUvarint(b, 10, uint64(max(s.DroppedAttributes(), 0)))
	for _, e := range s.Events() {
		var m []byte
		m = appendFixed64(m, 1, unixNano(e.Time.UnixNano()))
		m = appendString(m, 2, e.Name)
		m = appendAttributes(m, 3, e.Attributes)
		m = appendUvarint(m, 4, uint64(max(e.DroppedAttributeCount, 0)))
		b = appendMessage(b, 11, m)
	}
	b = appendUvarint(b, 12, uint64(max(s.DroppedEvents(), 0)))
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		var m []byte
		m = appendBytes(m, 1, ltid[:])
		m = appendBytes(m, 2, lsid[:])
		m = appendString(m, 3, l.SpanContext.TraceState().String())
		m = appendAttributes(m, 4, l.Attributes)
		m = appendUvarint(m, 5, uint64(max(l.DroppedAttributeCount, 0)))
		m = appendFixed32(m, 6, flags(l.SpanContext))
		b = appendMessage(b, 13, m)
	}
	b = appendUvarint(b, 14, uint64(max(s.DroppedLinks(), 0)))
	var st []byte
	status := s.Status()
	st = appendString(st, 2, status.Description)
	st = appendUvarint(st, 3, uint64(statusCode(status.Code)))
	b = appendMessage(b, 15, st)
	f := uint32(sc.TraceFlags()) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return appendFixed32(b, 16, f)
}

// flags are a link's flags: its W3C trace flags and whether it is remote.
func flags(sc trace.SpanContext) uint32 {
	f := uint32(sc.TraceFlags()) | flagHasIsRemote
	if sc.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func unixNano(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// spanKind maps the API's span kinds to OTLP's (the same numbers: internal
// 1, server 2, client 3, producer 4, consumer 5).
func spanKind(k trace.SpanKind) int {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 0
	}
	return int(k)
}

// statusCode maps the API's status codes (Unset 0, Error 1, Ok 2) to OTLP's
// (unset 0, ok 1, error 2).
func statusCode(c codes.Code) int {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

// appendAttributes appends each attribute as a KeyValue {key = 1,
// value = 2} in field.
func appendAttributes(b []byte, field int, attrs []attribute.KeyValue) []byte {
	for _, kv := range attrs {
		var m []byte
		m = appendString(m, 1, string(kv.Key))
		m = appendMessage(m, 2, anyValue(kv.Value))
		b = appendMessage(b, field, m)
	}
	return b
}

// anyValue is an AnyValue {string_value = 1, bool_value = 2, int_value =
// 3, double_value = 4, array_value = 5, kvlist_value = 6, bytes_value =
// 7}; a slice is an ArrayValue {values = 1}, a map a KeyValueList
// {values = 1}; an empty value is an empty AnyValue. Unlike the other fields, the oneof's member is written even when
// it holds its type's zero value.
func anyValue(v attribute.Value) []byte {
	var b []byte
	switch v.Type() {
	case attribute.BOOL:
		x := uint64(0)
		if v.AsBool() {
			x = 1
		}
		b = binary.AppendUvarint(appendTag(b, 2, wireVarint), x)
	case attribute.INT64:
		b = binary.AppendUvarint(appendTag(b, 3, wireVarint), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = binary.LittleEndian.AppendUint64(appendTag(b, 4, wireFixed64), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		s := v.AsString()
		b = appendTag(b, 1, wireBytes)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	case attribute.BOOLSLICE:
		b = appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		b = appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		b = appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		b = appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.BYTESLICE:
		bs := v.AsByteSlice()
		b = appendTag(b, 7, wireBytes)
		b = binary.AppendUvarint(b, uint64(len(bs)))
		b = append(b, bs...)
	case attribute.SLICE:
		b = appendArray(b, v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	case attribute.MAP:
		b = appendMessage(b, 6, appendAttributes(nil, 1, v.AsMap()))
	}
	return b
}

func appendArray[T any](b []byte, xs []T, value func(T) attribute.Value) []byte {
	var arr []byte
	for _, x := range xs {
		arr = appendMessage(arr, 1, anyValue(value(x)))
	}
	return appendMessage(b, 5, arr)
}
