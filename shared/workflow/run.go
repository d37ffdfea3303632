package workflow

import (
	"encoding/json"
	"time"

	"github.com/workflowchat/service/shared/truncate"
)

// Error codes of the workflow run operations.
const (
	CodeRunNotFound  = "RUN_NOT_FOUND"
	CodeRunNotActive = "RUN_NOT_ACTIVE"
	// CodeRunStateChanged is the code of a run write whose condition on
	// the stored status failed (the run was cancelled, or is gone).
	CodeRunStateChanged = "RUN_STATE_CHANGED"
	// CodeRunExists is the Conflict of a start with the id of a run that
	// exists (a trigger's run started twice).
	CodeRunExists = "RUN_EXISTS"
	// CodeRunActive is the Conflict of a retry of a run still active.
	CodeRunActive = "RUN_ACTIVE"
	// CodeRunNotRetryable is the Invalid of a retry of a completed run,
	// or of a run recorded without a snapshot of its steps.
	CodeRunNotRetryable = "RUN_NOT_RETRYABLE"
	// CodeInterrupted is the error of a step whose execution was cut by
	// the death of its process and that cannot safely run again.
	CodeInterrupted = "INTERRUPTED"
)

// RunKind is the job kind of a run (package job): the kind of its event
// log and lease; the sweeper resumes the runs whose lease expired.
const RunKind = "run"

// Event types of a run's log.
const (
	EventRunStarted    = "run_started"
	EventStepStarted   = "step_started"
	EventStepCompleted = "step_completed"
	EventStepFailed    = "step_failed"
	// EventStepWaiting: a human step waits for an answer; Input is the
	// request (message, inputSchema, timeoutSeconds, onTimeout) and
	// ExpiresAt when it stops waiting.
	EventStepWaiting  = "step_waiting"
	EventStepSkipped  = "step_skipped"
	EventRunCompleted = "run_completed"
	EventRunFailed    = "run_failed"
	EventRunCancelled = "run_cancelled"
)

// RunEvent is one event of a run's log: what GET .../events sends, and
// what a chat stream renders as tool_call and tool_result. StepID and
// ToolID name the step of the step events; Input is a started step's
// input, Output a completed step's output, Error a failed step's or run's
// error.
type RunEvent struct {
	Type    string         `json:"type"`
	RunID   string         `json:"runId"`
	Attempt int            `json:"attempt,omitempty"`
	StepID  string         `json:"stepId,omitempty"`
	ToolID  string         `json:"toolId,omitempty"`
	Input   map[string]any `json:"input,omitempty"`
	Output  map[string]any `json:"output,omitempty"`
	Error   string         `json:"error,omitempty"`
	// ExpiresAt is a step_waiting's deadline, when it has one.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// RetryAt is a step_retrying's next attempt (Attempt is the one that
	// failed, Error its error).
	RetryAt *time.Time `json:"retryAt,omitempty"`
	// ChildRunID is the child run a run_workflow step's step_waiting
	// waits for.
	ChildRunID string `json:"childRunId,omitempty"`
	// Reason, MCPServerID and AuthorizationURL are a step_waiting's for
	// the authorization of a remote server (workflow.WaitAuthorization).
	Reason           string `json:"reason,omitempty"`
	MCPServerID      string `json:"mcpServerId,omitempty"`
	AuthorizationURL string `json:"authorizationUrl,omitempty"`
}

// Last reports whether e is a run's final event.
func (e RunEvent) Last() bool {
	return e.Type == EventRunCompleted || e.Type == EventRunFailed || e.Type == EventRunCancelled
}

// MaxRunAttempts bounds the executions of a durable run: the sweeper
// fails a run whose lease expired after its last attempt.
const MaxRunAttempts = 3

// Step statuses besides the run statuses: a step is pending, running,
// waiting (a human step), completed, failed, skipped or cancelled.
const (
	StepPending   = RunPending
	StepRunning   = RunRunning
	StepWaiting   = RunWaiting
	StepCompleted = RunCompleted
	StepFailed    = RunFailed
	StepCancelled = RunCancelled
)

// CodeStepNotWaiting is the Conflict of an answer to a step that is not
// waiting for one.
const CodeStepNotWaiting = "STEP_NOT_WAITING"

// Active reports whether a run in status may still change: pending,
// running or waiting.
func Active(status string) bool {
	return status == RunPending || status == RunRunning || status == RunWaiting
}

// CancelRun marks r cancelled at now: its status, completedAt and error,
// and every step not finished (pending or running) cancelled.
func CancelRun(r *Run, now time.Time) {
	MarkRest(r, StepCancelled)
	r.Status, r.Error = RunCancelled, "the run was cancelled"
	t := now.UTC()
	r.CompletedAt = &t
}

// Bound cuts the inputs and outputs recorded in r so that the run fits
// one stored item and any response: a value over truncate.MaxValue, and
// the largest values while they together pass truncate.MaxItem, become
// {"truncated": true, "preview": "..."} with the step's Truncated set. The
// engine keeps the whole outputs for the later steps' inputs; only the
// record is cut. Values already cut stay as they are. Values c
// remembers are not encoded again (nil c: every value is).
func Bound(r *Run, c *ValueJSON) {
	vals := make([]json.RawMessage, 0, 2*len(r.Steps))
	for _, s := range r.Steps {
		in, _ := c.Encode(s.Input)
		out, _ := c.Encode(s.Output)
		vals = append(vals, in, out)
	}
	cut := truncate.Fit(vals, truncate.MaxItem)
	if !truncate.Any(cut) {
		return
	}
	for i := range r.Steps {
		s := &r.Steps[i]
		if cut[2*i] {
			s.Input, s.Truncated = asMap(vals[2*i]), true
		}
		if cut[2*i+1] {
			s.Output, s.Truncated = asMap(vals[2*i+1]), true
		}
	}
}

func asMap(v json.RawMessage) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(v, &m) // a cut value is an object
	return m
}

// MarkRest sets every step that has not finished to status: pending steps
// to status, a running or waiting step to cancelled.
func MarkRest(run *Run, status string) {
	for i := range run.Steps {
		switch run.Steps[i].Status {
		case StepPending:
			run.Steps[i].Status = status
		case StepRunning, StepWaiting:
			run.Steps[i].Status = StepCancelled
			run.Steps[i].Elements, run.Steps[i].ExpiresAt = nil, nil
		}
	}
}

// AuthWait is a run waiting for the authorization of a user's remote
// server (package runs: its wait item).
type AuthWait struct {
	UserID, ServerID, RunID string
	// ExpiresAt is when the item may go (the step's deadline and more).
	ExpiresAt time.Time
}

// MaxAuthWaits bounds the wait items one authorization reads.
const MaxAuthWaits = 100
