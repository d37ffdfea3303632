package runs

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/workflow"
)

// stepSpan is the span of the step Continue is running (package tracing):
// start ends the previous step's span and starts the next one's, end ends
// the last one when Continue returns, each with its step's status then.
type stepSpan struct {
	span trace.Span
	step *workflow.RunStep
}

// start ends the previous step's span and returns ctx in step i's, rs.
func (s *stepSpan) start(ctx context.Context, i int, rs *workflow.RunStep) context.Context {
	s.end()
	ctx, s.span = tracing.StartStep(ctx, i, rs.ToolID)
	s.step = rs
	return ctx
}

// end ends the current step's span, if any.
func (s *stepSpan) end() {
	if s.span != nil {
		tracing.EndStep(s.span, s.step.Status)
		s.span = nil
	}
}
