// Package workflow is the user's workflows (ordered steps, each running one
// tool): the types of workflows, their chat, proposals and runs, the
// templates of step inputs ({{step.output}}, {{input.name}}, {{item}})
// and their resolution, the size of a definition, and the service that
// creates, reads, updates, deletes and lists workflows. Checking a
// definition against the tool catalog is package proposal's (it also
// edits by proposals); a run's input schema is package inputschema's; the
// `if` expressions are package condition's; running is package runs. It
// imports no tool, model provider, expression or JSON Schema code, so the
// store (which stores these types) stays light.
package workflow

import (
	"encoding/json"
	"regexp"
	"time"

	"github.com/workflowchat/service/shared/askhuman"
	"github.com/workflowchat/service/shared/runworkflow"
)

// Limits (docs/limits.md).
const (
	MaxNameLen        = 255
	MaxDescriptionLen = 1000
	MaxSteps          = 50
	// MaxDefinitionBytes bounds a workflow's definition as DefinitionSize
	// measures it (350 KiB: the stored item stays under DynamoDB's 400 KB
	// with room for its keys and attributes).
	MaxDefinitionBytes = 350 << 10
	// DefaultConcurrency and MaxConcurrency bound how many elements of a
	// forEach step run at once.
	DefaultConcurrency = 4
	MaxConcurrency     = 16
)

// Step control and reserved names (docs/decisions.md, Workflow
// definitions).
const (
	// InputRef is the reserved name templates and `if` expressions read
	// the run's input under: {{input.<name>}}, input.<name>.
	InputRef = "input"
	// ItemRef is the reserved name of the current element of a forEach
	// step: {{item}}, {{item.<field>}}.
	ItemRef = "item"
	// ForEachOutput is the one output of a forEach step: the outputs of
	// its calls, in the array's order.
	ForEachOutput = "results"
	// AskHumanToolID is the tool of a human step: the run waits for a
	// person's answer (askhuman.ID).
	AskHumanToolID = askhuman.ID
	// RunWorkflowToolID is the tool of a child-run step: the run waits,
	// holding no runner, for a child run of another of its user's
	// workflows (runworkflow.ID).
	RunWorkflowToolID = runworkflow.ID
)

// ReservedStepID reports whether id is a name templates reserve (input,
// item), which no step may take.
func ReservedStepID(id string) bool { return id == InputRef || id == ItemRef }

// Step is one step of a workflow: it runs ToolID with Inputs, whose string
// values may hold templates ({{step_id.output}}, {{input.name}}, {{item}};
// see Scope). Its control fields:
//   - If, when not empty, is a condition (package condition) over the
//     run's input and the earlier steps' outputs, evaluated before the
//     step: false skips the step.
//   - ForEach, when not empty, is one template naming an array (an
//     earlier step's output or an input property): the tool runs once per
//     element, which the inputs read as {{item}} and {{item.<field>}}, at
//     most Parallelism() at once; the step's output is {"results": [...]},
//     each call's output in the array's order.
//   - Concurrency bounds a forEach step's calls at once (1-16; nil means
//     DefaultConcurrency).
//   - ContinueOnError: a failure does not fail the run. For a forEach step
//     a failed call's result is {"error": "<message>"} and the step
//     completes; any other step is recorded failed with the output
//     {"error": "<message>"} and the run goes on.
type Step struct {
	ID              string         `json:"id"`
	ToolID          string         `json:"toolId"`
	Inputs          map[string]any `json:"inputs"`
	If              string         `json:"if,omitempty"`
	ForEach         string         `json:"forEach,omitempty"`
	Concurrency     *int           `json:"concurrency,omitempty"`
	ContinueOnError bool           `json:"continueOnError,omitempty"`
	// Outputs are the names later steps may read: the property names of
	// the tool's output schema, or ForEachOutput for a forEach step.
	Outputs []string `json:"outputs"`
	// Retry, when set, runs a failed call again (StepRetry);
	// TimeoutSeconds bounds each call of the step (1-900; nil: the
	// engine's step timeout).
	Retry          *StepRetry `json:"retry,omitempty"`
	TimeoutSeconds *int       `json:"timeoutSeconds,omitempty"`
}

// Parallelism returns how many calls of a forEach step run at once:
// Concurrency, or DefaultConcurrency when it is not set (within 1-16).
func (s Step) Parallelism() int {
	if s.Concurrency == nil {
		return DefaultConcurrency
	}
	return max(1, min(*s.Concurrency, MaxConcurrency))
}

// ToolNamePattern is the syntax of a workflow's toolName (the name its
// user's MCP clients call it by).
const ToolNamePattern = `^[a-z][a-z0-9_]{0,63}$`

var toolNameRe = regexp.MustCompile(ToolNamePattern)

// ValidToolName reports whether s matches ToolNamePattern.
func ValidToolName(s string) bool { return toolNameRe.MatchString(s) }

// Workflow is a user's workflow. Version increases with every change
// (optimistic concurrency).
type Workflow struct {
	ID          string `json:"id"`
	UserID      string `json:"userId"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema ("type": "object") of a run's input;
	// empty: runs take no input.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Steps       []Step          `json:"steps"`
	// ExposeAsTool offers the workflow to its user's MCP clients as the
	// tool ToolName (which it then requires).
	ExposeAsTool bool `json:"exposeAsTool"`
	// ToolName is unique among its user's workflows; empty: none.
	ToolName  string    `json:"toolName,omitempty"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// VersionsFrom is the first version the store kept as a Version: 1
	// for a workflow created with versions, 0 for one stored before them
	// (the store keeps its current definition at its next write).
	VersionsFrom int `json:"-"`
}

// DefinitionSize returns the size in bytes of w's definition as the
// service measures it against MaxDefinitionBytes: the encoding/json
// encoding (the store's) of the object {name, description, inputSchema,
// steps, exposeAsTool, toolName}, each step with its outputs, as stored.
func DefinitionSize(w Workflow) int {
	b, err := json.Marshal(struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
		Steps        []Step          `json:"steps"`
		ExposeAsTool bool            `json:"exposeAsTool"`
		ToolName     string          `json:"toolName,omitempty"`
	}{w.Name, w.Description, w.InputSchema, w.Steps, w.ExposeAsTool, w.ToolName})
	if err != nil {
		// A value json cannot encode cannot be stored either.
		return MaxDefinitionBytes + 1
	}
	return len(b)
}

// ToolEntry is a workflow as its user's MCP server lists it: the item
// that reserves the workflow's ToolName, kept in step with the workflow
// by every write of it (store.Workflows.ExposedTools, ExposedTool).
type ToolEntry struct {
	UserID      string          `json:"userId"`
	ToolName    string          `json:"toolName"`
	WorkflowID  string          `json:"workflowId"`
	Exposed     bool            `json:"exposed"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// LastStepID, LastToolID and LastForEach describe the last step,
	// whose output is the run's result (a forEach step's is {results});
	// empty when the workflow has no steps.
	LastStepID  string    `json:"lastStepId,omitempty"`
	LastToolID  string    `json:"lastToolId,omitempty"`
	LastForEach bool      `json:"lastForEach,omitempty"`
	Version     int       `json:"version"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// Entry returns w's ToolEntry (meaningful when w has a ToolName).
func (w Workflow) Entry() ToolEntry {
	e := ToolEntry{UserID: w.UserID, ToolName: w.ToolName, WorkflowID: w.ID, Exposed: w.ExposeAsTool, Name: w.Name,
		Description: w.Description, InputSchema: w.InputSchema, Version: w.Version, UpdatedAt: w.UpdatedAt}
	if n := len(w.Steps); n > 0 {
		last := w.Steps[n-1]
		e.LastStepID, e.LastToolID, e.LastForEach = last.ID, last.ToolID, last.ForEach != ""
	}
	return e
}

// Change types of a proposal (docs/openapi.yaml, WorkflowChange).
const (
	ChangeAddStep        = "add_step"
	ChangeUpdateStep     = "update_step"
	ChangeRemoveStep     = "remove_step"
	ChangeMoveStep       = "move_step"
	ChangeUpdateWorkflow = "update_workflow"
)

// StepSpec is the step of an add_step change (Step's fields but Outputs).
type StepSpec struct {
	ID              string         `json:"id"`
	ToolID          string         `json:"toolId"`
	Inputs          map[string]any `json:"inputs"`
	If              string         `json:"if,omitempty"`
	ForEach         string         `json:"forEach,omitempty"`
	Concurrency     *int           `json:"concurrency,omitempty"`
	ContinueOnError bool           `json:"continueOnError,omitempty"`
}

// Change is one proposed change to a workflow.
type Change struct {
	Type string `json:"type"`
	// add_step
	Step     *StepSpec `json:"step,omitempty"`
	Position *int      `json:"position,omitempty"` // add_step (default: append), move_step
	// update_step, remove_step, move_step
	StepID string `json:"stepId,omitempty"`
	// update_step: the fields given replace the step's; an empty If or
	// ForEach removes it (removing ForEach also resets Concurrency).
	ToolID          *string         `json:"toolId,omitempty"`
	Inputs          *map[string]any `json:"inputs,omitempty"`
	If              *string         `json:"if,omitempty"`
	ForEach         *string         `json:"forEach,omitempty"`
	Concurrency     *int            `json:"concurrency,omitempty"`
	ContinueOnError *bool           `json:"continueOnError,omitempty"`
	// update_workflow; InputSchema JSON null removes the input schema.
	Name        *string         `json:"name,omitempty"`
	Description *string         `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
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

// Run states, of a run and of its steps (steps also use StepSkipped). A
// run is waiting while one of its steps (a human step) waits for an
// answer: no runner holds it, and it is still active.
const (
	RunPending   = "pending"
	RunRunning   = "running"
	RunWaiting   = "waiting"
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
	// RetryRoot is the first run of the chain of retries this one is in
	// (the run RetryOf names, or the one it retries, and so on): retries
	// of any run of a chain are started one at a time, by the root's
	// LatestRetry. Empty for a run that retries none.
	RetryRoot string `json:"-"`
	// LatestRetry, on a chain's root (or a run that retries none), is the
	// id of the last retry started in the chain, if any: another retry in
	// the chain waits until that one has finished.
	LatestRetry string `json:"-"`
	// Trigger says what started the run.
	Trigger *Trigger `json:"trigger,omitempty"`
	// Input is the run's input, which steps read as {{input.<name>}}.
	Input map[string]any `json:"input,omitempty"`
	// InputFiles are the input's properties of format attachment: each
	// holds an attachment's id, and steps read the file's text.
	InputFiles []string `json:"-"`
	// Plan is the snapshot of the workflow's steps the run executes, so
	// that a resume or a retry runs what the run started with. PlanRef,
	// when set, is its key in the blob store (a large workflow's), and
	// Plan is empty until read from there.
	Plan    []Step `json:"-"`
	PlanRef string `json:"-"`
	// ParentRunID is the run whose run_workflow step started this one (a
	// child run, trigger type workflow); Depth is how deep it nests (0
	// for a run with no parent, at most runworkflow.MaxDepth); Lineage
	// are the workflows of its ancestors, the root's first, so that a
	// child of one of them is refused as a cycle.
	ParentRunID string   `json:"parentRunId,omitempty"`
	Depth       int      `json:"depth,omitempty"`
	Lineage     []string `json:"-"`
}

// Trigger types: what started a run.
const (
	TriggerManual   = "manual"
	TriggerSchedule = "schedule"
	TriggerWebhook  = "webhook"
	TriggerMCP      = "mcp"
	// TriggerWorkflow: a parent run's run_workflow step (Run.ParentRunID).
	TriggerWorkflow = "workflow"
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
	// Elements is a running forEach step's progress as the engine holds
	// it: the output of each element's call that finished, by the
	// element's index in the array. Each is recorded apart from the run
	// as it finishes (one small item), so that a resume runs only the
	// others; the run's record never holds them. ElementsDone is how many
	// have finished, as a read of a running forEach step shows it.
	Elements     map[int]map[string]any `json:"-"`
	ElementsDone *int                   `json:"elementsDone,omitempty"`
	// InputURL and OutputURL, on a read, are presigned URLs of the whole
	// input and output when they were too large for the run's record
	// (Input or Output is then their cut form, see Spilled).
	InputURL  string `json:"inputUrl,omitempty"`
	OutputURL string `json:"outputUrl,omitempty"`
	// ExpiresAt is when a waiting human step stops waiting (its
	// timeoutSeconds); nil when it waits without limit.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Attempts are the calls of a step with a retry, in order; RetryAt,
	// on a pending step whose attempt failed, is when the next starts.
	Attempts []StepAttempt `json:"attempts,omitempty"`
	RetryAt  *time.Time    `json:"retryAt,omitempty"`
	// ChildRunID is the child run a run_workflow step started, which it
	// waits for.
	ChildRunID string `json:"childRunId,omitempty"`
	// Reason is why a waiting step that is not a person's waits:
	// WaitAuthorization for a remote tool whose server the user has to
	// authorize (MCPServerID), at AuthorizationURL.
	Reason           string `json:"reason,omitempty"`
	MCPServerID      string `json:"mcpServerId,omitempty"`
	AuthorizationURL string `json:"authorizationUrl,omitempty"`
	// AuthorizationWaitedMs is how long the step waited for its server's
	// authorization, its waits summed (milliseconds): time left out of
	// the run's time limit, as a person's or a child run's.
	AuthorizationWaitedMs int64 `json:"authorizationWaitedMs,omitempty"`
	// RetryWaitedMs is how long the step waited between its attempts
	// (its retry's backoffs, to when each next attempt was due and picked
	// up), summed in milliseconds: time left out of the run's time limit,
	// as an authorization's.
	RetryWaitedMs int64 `json:"retryWaitedMs,omitempty"`
}

// WaitAuthorization is the Reason of a step that waits for the user to
// authorize the remote MCP server of its tool.
const WaitAuthorization = "authorization"
