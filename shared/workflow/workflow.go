// Package workflow is the user's workflows (ordered steps, each running one
// tool): the types of workflows, their chat, proposals and runs, the
// {{step.output}} templates, and the service that creates, reads,
// updates, deletes and lists workflows. Editing by proposals is package
// proposal; running is package runs. It imports no tool, model provider
// or JSON Schema code, so the store (which stores these types) stays light.
package workflow

import (
	"time"
)

// Limits (README.md, Limits).
const (
	MaxNameLen        = 255
	MaxDescriptionLen = 1000
	MaxSteps          = 50
)

// Step is one step of a workflow: it runs ToolID with Inputs, whose string
// values may reference an earlier step's output as {{step_id.output}}.
type Step struct {
	ID     string         `json:"id"`
	ToolID string         `json:"toolId"`
	Inputs map[string]any `json:"inputs"`
	// Outputs are the property names of the tool's output schema.
	Outputs []string `json:"outputs"`
}

// Workflow is a user's workflow. Version increases with every change
// (optimistic concurrency).
type Workflow struct {
	ID          string    `json:"id"`
	UserID      string    `json:"userId"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Steps       []Step    `json:"steps"`
	Version     int       `json:"version"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// Change types of a proposal (docs/openapi.yaml, WorkflowChange).
const (
	ChangeAddStep        = "add_step"
	ChangeUpdateStep     = "update_step"
	ChangeRemoveStep     = "remove_step"
	ChangeMoveStep       = "move_step"
	ChangeUpdateWorkflow = "update_workflow"
)

// StepSpec is the step of an add_step change.
type StepSpec struct {
	ID     string         `json:"id"`
	ToolID string         `json:"toolId"`
	Inputs map[string]any `json:"inputs"`
}

// Change is one proposed change to a workflow.
type Change struct {
	Type string `json:"type"`
	// add_step
	Step     *StepSpec `json:"step,omitempty"`
	Position *int      `json:"position,omitempty"` // add_step (default: append), move_step
	// update_step, remove_step, move_step
	StepID string `json:"stepId,omitempty"`
	// update_step
	ToolID *string         `json:"toolId,omitempty"`
	Inputs *map[string]any `json:"inputs,omitempty"`
	// update_workflow
	Name        *string `json:"name,omitempty"`
	Description *string `json:"description,omitempty"`
}

// Proposal states.
const (
	ProposalPending  = "pending"
	ProposalApplied  = "applied"
	ProposalRejected = "rejected"
)

// Proposal is a set of changes the assistant proposed, made against
// BaseVersion of the workflow.
type Proposal struct {
	ID          string     `json:"id"`
	WorkflowID  string     `json:"workflowId"`
	MessageID   string     `json:"messageId"`
	Status      string     `json:"status"`
	Changes     []Change   `json:"changes"`
	BaseVersion int        `json:"baseVersion"`
	CreatedAt   time.Time  `json:"createdAt"`
	AppliedAt   *time.Time `json:"appliedAt,omitempty"`
	RejectedAt  *time.Time `json:"rejectedAt,omitempty"`
}

// Message is a message of a workflow's chat; assistant messages may carry
// a proposal.
type Message struct {
	ID         string    `json:"id"`
	WorkflowID string    `json:"workflowId"`
	Role       string    `json:"role"`
	Content    string    `json:"content"`
	Proposal   *Proposal `json:"proposal,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
}

// Run states, of a run and of its steps (steps also use StepSkipped).
const (
	RunPending   = "pending"
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	StepSkipped  = "skipped"
)

// Run is one execution of a workflow, recorded in a chat.
type Run struct {
	ID string `json:"id"`
	// ChatID is the chat the run was started in; empty for a run started
	// otherwise (a schedule, a webhook, an MCP client).
	ChatID      string     `json:"chatId,omitempty"`
	WorkflowID  string     `json:"workflowId"`
	UserID      string     `json:"userId"`
	Status      string     `json:"status"`
	Steps       []RunStep  `json:"steps"`
	Error       string     `json:"error,omitempty"`
	StartedAt   time.Time  `json:"startedAt"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	// Attempt counts the executions of the run: 1, then one more each
	// time the sweeper resumes it (at most MaxRunAttempts).
	Attempt int `json:"attempt"`
	// WorkflowVersion is the version of the workflow the run's steps
	// were taken from.
	WorkflowVersion int `json:"workflowVersion"`
	// RetryOf is the id of the run this one retries.
	RetryOf string `json:"retryOf,omitempty"`
	// Trigger says what started the run.
	Trigger *Trigger `json:"trigger,omitempty"`
	// Input is the run's input, which steps read as {{input.<name>}}.
	Input map[string]any `json:"input,omitempty"`
	// Plan is the snapshot of the workflow's steps the run executes, so
	// that a resume or a retry runs what the run started with.
	Plan []Step `json:"-"`
}

// Trigger types: what started a run.
const (
	TriggerManual   = "manual"
	TriggerSchedule = "schedule"
	TriggerWebhook  = "webhook"
	TriggerMCP      = "mcp"
)

// Trigger records what started a run: a person (manual), one of the
// workflow's triggers (schedule, webhook: TriggerID names it) or an MCP
// client.
type Trigger struct {
	Type      string `json:"type"`
	TriggerID string `json:"triggerId,omitempty"`
}

// RunStep is the record of one step of a run.
type RunStep struct {
	ID          string         `json:"id"`
	ToolID      string         `json:"toolId"`
	Status      string         `json:"status"`
	StartedAt   *time.Time     `json:"startedAt,omitempty"`
	CompletedAt *time.Time     `json:"completedAt,omitempty"`
	Input       map[string]any `json:"input,omitempty"`
	Output      map[string]any `json:"output,omitempty"`
	Error       string         `json:"error,omitempty"`
	// Truncated is true when Input or Output was too large to record: it
	// is then {"truncated": true, "preview": "..."} (see Bound).
	Truncated bool `json:"truncated,omitempty"`
	// Reused is true for a step of a retry that did not run: its output
	// is the one the retried run saved.
	Reused bool `json:"reused,omitempty"`
}
