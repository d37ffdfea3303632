// Package otlp turns tracing on: the OpenTelemetry SDK's tracer provider,
// batching the spans of package tracing and exporting them over OTLP/HTTP
// in protobuf (Exporter), installed with tracing.Install. The hosts call
// FromEnv at start: the Lambda bootstraps (functions/assembly, and the
// tool server's main) and the dev server. Without
// OTEL_EXPORTER_OTLP_ENDPOINT nothing is built and nothing is traced.
//
// In AWS the endpoint is the AWS Distro for OpenTelemetry collector's
// Lambda layer on localhost:4318, which forwards to X-Ray; since a Lambda
// process may be frozen as soon as an invocation returns, every handler
// flushes the spans before it returns (tracing.Flush).
//
// Only this package and the hosts link the SDK; the domain packages use
// the OpenTelemetry API through package tracing.
package otlp

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/workflowchat/service/shared/tracing"
)

// Settings are what FromEnv reads.
type Settings struct {
	// URL is where spans are posted: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
	// else OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended.
	URL string
	// Headers are sent with every export (OTEL_EXPORTER_OTLP_HEADERS,
	// then OTEL_EXPORTER_OTLP_TRACES_HEADERS). They may hold credentials:
	// never logged, never in an error.
	Headers http.Header
	// Timeout bounds one export (OTEL_EXPORTER_OTLP_TIMEOUT, in ms;
	// default 10 s).
	Timeout time.Duration
	// Resource describes the process: service.name and, in Lambda, the
	// function (faas.name, faas.version, cloud.region).
	Resource []attribute.KeyValue
}

// DefaultTimeout bounds one export unless OTEL_EXPORTER_OTLP_TIMEOUT says
// otherwise.
const DefaultTimeout = 10 * time.Second

// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME, the
// host nor AWS_LAMBDA_FUNCTION_NAME names the process.
const DefaultServiceName = "workflowchat"

// ReadSettings reads the OTLP exporter's standard variables from getenv;
// service.name is OTEL_SERVICE_NAME, else service, else the Lambda
// function's name (AWS_LAMBDA_FUNCTION_NAME), else DefaultServiceName. ok is false
// when tracing is off: no endpoint, or OTEL_SDK_DISABLED=true. It fails
// when a variable is malformed: an endpoint that is not an http(s) URL, a
// protocol other than http/protobuf (the only one exported), headers
// that are not key=value pairs, a timeout that is not a positive number
// of milliseconds. No error quotes a header's value.
func ReadSettings(getenv func(string) string, service string) (s Settings, ok bool, err error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Settings{}, false, nil
	}
	first := func(names ...string) (string, string) {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return names[len(names)-1], ""
	}
	name, endpoint := first("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" {
		return Settings{}, false, nil
	}
	u, perr := url.Parse(endpoint)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Settings{}, false, fmt.Errorf("%s must be an http(s) URL, e.g. http://localhost:4318", name)
	}
	if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	s.URL = u.String()
	if pname, p := first("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return Settings{}, false, fmt.Errorf("%s is %q: only http/protobuf is supported", pname, p)
	}
	s.Headers = http.Header{}
	for _, n := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := parseHeaders(getenv(n), s.Headers); err != nil {
			return Settings{}, false, fmt.Errorf("%s: %w", n, err)
		}
	}
	s.Timeout = DefaultTimeout
	if tname, t := first("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return Settings{}, false, fmt.Errorf("%s must be a positive number of milliseconds", tname)
		}
		s.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch n := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); {
	case n != "":
		service = n
	case service == "" && getenv("AWS_LAMBDA_FUNCTION_NAME") != "":
		service = getenv("AWS_LAMBDA_FUNCTION_NAME")
	case service == "":
		service = DefaultServiceName
	}
	s.Resource = []attribute.KeyValue{attribute.String("service.name", service)}
	if fn := getenv("AWS_LAMBDA_FUNCTION_NAME"); fn != "" {
		s.Resource = append(s.Resource, attribute.String("cloud.provider", "aws"), attribute.String("cloud.platform", "aws_lambda"),
			attribute.String("faas.name", fn))
		if v := getenv("AWS_LAMBDA_FUNCTION_VERSION"); v != "" {
			s.Resource = append(s.Resource, attribute.String("faas.version", v))
		}
		if r := getenv("AWS_REGION"); r != "" {
			s.Resource = append(s.Resource, attribute.String("cloud.region", r))
		}
	}
	return s, true, nil
}

// parseHeaders adds the headers of the OTLP list format
// ("key1=value1,key2=value2", values URL-encoded) to h.
func parseHeaders(list string, h http.Header) error {
	for i, pair := range strings.Split(list, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("entry %d is not key=value", i+1)
		}
		dv, err := url.QueryUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("the value of %s is not URL-encoded", k)
		}
		h.Set(k, dv)
	}
	return nil
}

// FromEnv installs the exporting tracer provider when getenv configures
// an endpoint (ReadSettings; service names the process, "" for the Lambda
// function's name) and returns its
// shutdown, which exports what is left; off, it builds nothing and
// returns a shutdown that does nothing. Export failures are logged to
// logger (nil: slog.Default()). It fails with ReadSettings' errors.
func FromEnv(getenv func(string) string, service string, logger *slog.Logger) (shutdown func(context.Context) error, err error) {
	s, ok, err := ReadSettings(getenv, service)
	if err != nil || !ok {
		return func(context.Context) error { return nil }, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: spans were not exported", "err", err.Error())
	}))
	tp := NewProvider(sdktrace.NewBatchSpanProcessor(NewExporter(s.URL, s.Headers, s.Timeout)), s.Resource...)
	tracing.Install(tp, tp.ForceFlush)
	return tp.Shutdown, nil
}

// NewProvider returns the SDK tracer provider of the service's spans,
// ending in processor (the batching one over an Exporter; tests pass a
// synchronous one over an in-memory exporter): every trace sampled, its
// root spans' ids random or, for a run's first span, the ones
// tracing.RootIDs asks for. Install it with tracing.Install(tp,
// tp.ForceFlush).
func NewProvider(processor sdktrace.SpanProcessor, res ...attribute.KeyValue) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(processor),
		sdktrace.WithResource(resource.NewSchemaless(res...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
}

// idGenerator makes random ids, except for a root span whose context
// asks for given ones (tracing.RootIDs).
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if t, s, ok := tracing.RootIDs(ctx); ok && t.IsValid() && s.IsValid() {
		return t, s
	}
	var t trace.TraceID
	for !t.IsValid() {
		binary.LittleEndian.PutUint64(t[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.LittleEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}
