package workflow

import (
	"math"
	"time"
)

// Bounds of a step's retry and timeout (docs/limits.md).
const (
	MaxStepAttempts       = 10
	DefaultBackoffSeconds = 1
	MaxBackoffSeconds     = 3600
	DefaultBackoffRate    = 2
	MaxBackoffRate        = 10
	MaxStepTimeoutSeconds = 900
	// MaxRetryWait bounds the wait before one attempt, whatever the rate.
	MaxRetryWait = time.Hour
)

// EventStepRetrying is the event of a step's failed attempt that another
// follows: {stepId, attempt, error, retryAt}.
const EventStepRetrying = "step_retrying"

// StepRetry is a step's retry policy: a failed call (its tool's error,
// a timeout, an interruption) runs again, up to MaxAttempts calls in
// all, the n-th retry BackoffSeconds*BackoffRate^(n-1) seconds after the
// failure. Nil fields take their defaults (1, 1, 2).
type StepRetry struct {
	MaxAttempts    *int     `json:"maxAttempts,omitempty"`
	BackoffSeconds *float64 `json:"backoffSeconds,omitempty"`
	BackoffRate    *float64 `json:"backoffRate,omitempty"`
}

// StepAttempt is one call of a step with a retry.
type StepAttempt struct {
	Attempt     int        `json:"attempt"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	Status      string     `json:"status"`
	Error       string     `json:"error,omitempty"`
}

// MaxAttempts returns how many calls s may make: its retry's maxAttempts
// (1 without a retry), within 1-MaxStepAttempts.
func (s Step) MaxAttempts() int {
	if s.Retry == nil || s.Retry.MaxAttempts == nil {
		return 1
	}
	return max(1, min(*s.Retry.MaxAttempts, MaxStepAttempts))
}

// RetryDelay returns the wait before the call after failed attempt n
// (1-based): backoffSeconds * backoffRate^(n-1), at most MaxRetryWait.
func (s Step) RetryDelay(n int) time.Duration {
	base, rate := float64(DefaultBackoffSeconds), float64(DefaultBackoffRate)
	if s.Retry != nil && s.Retry.BackoffSeconds != nil {
		base = *s.Retry.BackoffSeconds
	}
	if s.Retry != nil && s.Retry.BackoffRate != nil {
		rate = *s.Retry.BackoffRate
	}
	secs := base * math.Pow(rate, float64(max(n-1, 0)))
	if math.IsNaN(secs) || secs > MaxRetryWait.Seconds() {
		return MaxRetryWait
	}
	return time.Duration(max(secs, 0) * float64(time.Second))
}

// CallTimeout returns s's timeoutSeconds as a duration, or def when it
// has none.
func (s Step) CallTimeout(def time.Duration) time.Duration {
	if s.TimeoutSeconds == nil || *s.TimeoutSeconds < 1 {
		return def
	}
	return time.Duration(min(*s.TimeoutSeconds, MaxStepTimeoutSeconds)) * time.Second
}
