package workflow

import "github.com/workflowchat/service/shared/ratelimit"

// Limits are the per-user rate limits of the workflow routes that call a
// model or follow runs. The zero value limits nothing (a nil Limiter).
// Starting runs is limited by the run service itself (runs.Options), on
// every path that starts one.
type Limits struct {
	Limiter *ratelimit.Limiter
	// Messages limits POST /api/workflows/{workflowId}/messages (it shares
	// its count with chat messages: the same rule).
	Messages ratelimit.Rule
	// Resumes limits following a run's events (an EventSource reconnects
	// by itself); the chat's resumed streams share the rule.
	Resumes ratelimit.Rule
}
