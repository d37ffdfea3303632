package tools

import (
	"context"
	"sync"
)

// A metered tool (Tool.Metered) calls a language model for its caller.
// The service reserves the caller's token budget before the call and
// settles it after, so the tool must keep to the output cap it is given
// (MaxOutput) and say what it spent (ReportModelUsage); the tool server
// returns that as runTool's usage.

type maxOutputKey struct{}

// WithMaxOutput returns ctx carrying n as the output tokens a metered
// tool's model call may produce (0: the model's default).
func WithMaxOutput(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, maxOutputKey{}, n)
}

// MaxOutput returns the output cap of ctx's metered call, 0 when none.
func MaxOutput(ctx context.Context) int {
	n, _ := ctx.Value(maxOutputKey{}).(int)
	return max(n, 0)
}

// ModelUsage is what a metered tool's model calls spent.
type ModelUsage struct {
	// ModelID is the model called (the last one, if there were several).
	ModelID      string
	InputTokens  int
	OutputTokens int
}

// UsageReport collects the ModelUsage of one tool run. It is safe for
// concurrent use.
type UsageReport struct {
	mu       sync.Mutex
	u        ModelUsage
	reported bool
}

// Usage returns the sum of what was reported, and whether anything was.
func (r *UsageReport) Usage() (ModelUsage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.u, r.reported
}

type usageKey struct{}

// WithUsageReport returns ctx collecting the model usage the tool run in
// it reports, and the report.
func WithUsageReport(ctx context.Context) (context.Context, *UsageReport) {
	r := &UsageReport{}
	return context.WithValue(ctx, usageKey{}, r), r
}

// ReportModelUsage adds u to ctx's usage report; without one it does
// nothing.
func ReportModelUsage(ctx context.Context, u ModelUsage) {
	r, ok := ctx.Value(usageKey{}).(*UsageReport)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.u.ModelID = u.ModelID
	r.u.InputTokens += u.InputTokens
	r.u.OutputTokens += u.OutputTokens
	r.reported = true
}
