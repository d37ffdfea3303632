// Package tools is the built-in tool catalog: tool definitions with JSON
// Schemas for their inputs and outputs, a Registry that validates inputs and
// runs tools under a timeout, and the built-in tools themselves (Builtin).
//
// The tool server and the REST tool endpoints are built on the Registry;
// workflow steps name tools by id and use Tool.Outputs as their outputs.
//
// Errors from a Registry are *errs.Error values with these codes:
// TOOL_NOT_FOUND (NotFound), INVALID_PARAMS (Invalid, with Details),
// TOOL_TIMEOUT (Timeout), TOOL_EXECUTION_FAILED (Internal, with a
// client-safe Message written by the tool) and TOOL_RESOURCE_LIMIT
// (Internal: an isolated tool ran out of memory, CPU time or output room).
//
// The tools that evaluate a program or document from their input (jq,
// expressions, templates, regular expressions, CSV, HTML) are Isolated: a
// Registry given a Sandbox (WithSandbox) runs them in worker processes
// with kernel-enforced memory and CPU limits (package sandbox; see
// NewSandbox and ServeWorker), so that no input can exhaust the service's
// own process.
package tools

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Error codes reported by the Registry. They are part of the tool server's
// API contract.
const (
	CodeToolNotFound        = "TOOL_NOT_FOUND"
	CodeInvalidParams       = "INVALID_PARAMS"
	CodeToolTimeout         = "TOOL_TIMEOUT"
	CodeToolExecutionFailed = "TOOL_EXECUTION_FAILED"
	CodeToolResourceLimit   = "TOOL_RESOURCE_LIMIT"
)

// Tool categories.
const (
	CategoryWeb  = "web"
	CategoryData = "data"
	CategoryText = "text"
	CategoryMath = "math"
	CategoryTime = "time"
	CategoryAI   = "ai"
	CategoryUtil = "util"
)

// DefaultTimeout is the execution timeout of a tool whose Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Categories returns the valid tool categories, sorted.
func Categories() []string {
	return []string{CategoryAI, CategoryData, CategoryMath, CategoryText, CategoryTime, CategoryUtil, CategoryWeb}
}

// Annotations are the Model Context Protocol tool annotations (hints to a
// client about a tool's behaviour). Each built-in tool declares them
// truthfully.
type Annotations struct {
	// ReadOnly: the tool does not modify its environment.
	ReadOnly bool
	// Destructive: the tool may perform destructive updates (meaningful
	// only when not ReadOnly).
	Destructive bool
	// Idempotent: calling it again with the same input has no additional
	// effect on its environment.
	Idempotent bool
	// OpenWorld: the tool interacts with an open world of external entities
	// (e.g. arbitrary web servers).
	OpenWorld bool
}

// ComputeOnly reports whether a tool with these annotations only computes
// from its input: read-only, idempotent, not destructive, closed world.
// Running it again is harmless, so a durable run may record a step of it
// with fewer writes.
func (a Annotations) ComputeOnly() bool {
	return a.ReadOnly && a.Idempotent && !a.Destructive && !a.OpenWorld
}

// Tool is one tool definition.
type Tool struct {
	// ID matches ^[a-z][a-z0-9_]{0,63}$.
	ID string
	// Name is a short display name.
	Name string
	// Description tells a model what the tool does, what its fields mean,
	// and gives an example.
	Description string
	// Category is one of Categories().
	Category string
	// InputSchema and OutputSchema are JSON Schema (draft 2020-12)
	// documents with "type": "object" at the top.
	InputSchema, OutputSchema json.RawMessage
	// Annotations are the MCP behaviour hints.
	Annotations Annotations
	// Metered marks a tool that calls a language model for its caller:
	// the service reserves the caller's token budget before each call, and
	// Run keeps to MaxOutput(ctx) and reports what it spent
	// (ReportModelUsage). The tool server declares it in getTool.
	Metered bool
	// Timeout bounds one execution; zero means DefaultTimeout.
	Timeout time.Duration
	// Isolated marks a tool whose memory and CPU use its input controls
	// (it evaluates a program or parses a document). A Registry with a
	// Sandbox runs it in a worker process, where Run must work from its
	// input alone: the worker knows only the tools Builtin(Config{})
	// returns.
	Isolated bool
	// Run executes the tool on an input that has been validated against
	// InputSchema and returns an output matching OutputSchema. Its ctx
	// carries the tool's deadline. An *errs.Error of kind Invalid reports
	// bad input; any other error is an execution failure whose text is shown
	// to the client, so it must never contain secrets.
	Run func(ctx context.Context, input map[string]any) (map[string]any, error)
}

// Outputs returns the property names of t's OutputSchema, sorted. A
// workflow step that runs t declares these as its outputs. It returns nil
// when the schema has no properties or does not parse.
func (t *Tool) Outputs() []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(t.OutputSchema, &s); err != nil || len(s.Properties) == 0 {
		return nil
	}
	out := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// timeout returns t's execution timeout.
func (t *Tool) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultTimeout
}
