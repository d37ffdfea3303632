package workflow

import "github.com/workflowchat/service/shared/ratelimit"

// Limits are the per-user rate limits of the workflow routes that call a
// model or run tools. The zero value limits nothing (a nil Limiter).
type Limits struct {
	Limiter *ratelimit.Limiter
	// Messages limits POST /api/workflows/{workflowId}/messages (it shares
	// its count with chat messages: the same rule).
	Messages ratelimit.Rule
	// Runs limits POST /api/chats/{chatId}/workflow-runs.
	Runs ratelimit.Rule
	// Resumes limits following a run's events (an EventSource reconnects
	// by itself); the chat's resumed streams share the rule.
	Resumes ratelimit.Rule
}
