package tracing

import (
	"context"
	"crypto/sha256"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// RunTraceID is the trace id of the workflow run runID: the run id's 16
// bytes when it is a UUID (every run id the service makes is), else the
// first 16 bytes of its SHA-256. Every process derives the same id from
// the run id alone, so the attempts of a run, in whatever function and
// however invoked, join one trace.
func RunTraceID(runID string) trace.TraceID {
	if u, err := uuid.Parse(runID); err == nil && u != uuid.Nil {
		return trace.TraceID(u)
	}
	sum := sha256.Sum256([]byte("workflowchat.run.trace:" + runID))
	return trace.TraceID(sum[:16])
}

// RunSpanID is the span id of the run's first span (RunStarted), the
// parent of all its attempts: the first 8 bytes of the SHA-256 of the run
// id (never zero).
func RunSpanID(runID string) trace.SpanID {
	sum := sha256.Sum256([]byte("workflowchat.run.span:" + runID))
	id := trace.SpanID(sum[:8])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// RunSpanContext is the span context of the run's first span, remote and
// sampled: the parent of its attempts, the target of LinkRun.
func RunSpanContext(runID string) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: RunTraceID(runID), SpanID: RunSpanID(runID),
		TraceFlags: trace.FlagsSampled, Remote: true})
}

// rootIDsKey carries the ids the next root span must take.
type rootIDsKey struct{}

type rootIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// RootIDs returns the trace and span ids that a root span started in ctx
// must take, when ctx asks for them (RunStarted does). The SDK's id
// generator (package shared/tracing/otlp) honours it; another gives the
// run's first span ids of its own, and only that span is then apart from
// the run's trace.
func RootIDs(ctx context.Context) (trace.TraceID, trace.SpanID, bool) {
	ids, ok := ctx.Value(rootIDsKey{}).(rootIDs)
	return ids.trace, ids.span, ok
}

// RunStarted records the start of workflow run runID, which was just
// stored: the first span of the run's trace (RunTraceID), "workflow.run",
// with the span id RunSpanID, linked to ctx's span (the request, reply or
// sweep that started the run), which links back to it. It ends at once:
// the run's attempts, its children, carry the time.
func RunStarted(ctx context.Context, runID string) {
	p := installed.Load()
	if p == nil {
		return
	}
	from := trace.SpanContextFromContext(ctx)
	rctx := context.WithValue(context.Background(), rootIDsKey{}, rootIDs{trace: RunTraceID(runID), span: RunSpanID(runID)})
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(RunID.String(runID), JobKind.String("run"))}
	if from.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: from}))
	}
	_, span := p.tracer.Start(rctx, "workflow.run", opts...)
	span.End()
	LinkRun(ctx, runID)
}

// LinkRun links ctx's span to the run's first span, and gives it the run
// id, unless it is of the run's trace already.
func LinkRun(ctx context.Context, runID string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	run := RunSpanContext(runID)
	if span.SpanContext().TraceID() == run.TraceID() {
		return
	}
	span.AddLink(trace.Link{SpanContext: run})
	span.SetAttributes(RunID.String(runID))
}

// StartAttempt starts the span of attempt (from 1) of run runID,
// "workflow.run.attempt", a child of the run's first span in the run's
// trace whatever ctx holds; a span in ctx (the invoker's, in process) is
// linked.
func StartAttempt(ctx context.Context, runID string, attempt int) (context.Context, trace.Span) {
	return startInRun(ctx, "workflow.run.attempt", runID, RunAttempt.Int(attempt))
}

// StartResume starts the span of the sweeper's handling of run runID,
// whose lease expired, "workflow.run.resume", in the run's trace as
// StartAttempt; the sweep's span is linked.
func StartResume(ctx context.Context, runID string) (context.Context, trace.Span) {
	return startInRun(ctx, "workflow.run.resume", runID)
}

func startInRun(ctx context.Context, name, runID string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	p := installed.Load()
	if p == nil {
		return ctx, off
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append([]attribute.KeyValue{RunID.String(runID), JobKind.String("run")}, attrs...)...)}
	if from := trace.SpanContextFromContext(ctx); from.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: from}))
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, RunSpanContext(runID))
	return p.tracer.Start(ctx, name, opts...)
}
