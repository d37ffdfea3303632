package toolclient

import "encoding/json"

// The service protocol's methods.
const (
	MethodListTools   = "listTools"
	MethodSearchTools = "searchTools"
	MethodGetTool     = "getTool"
	MethodRunTool     = "runTool"
)

// ServiceKeyHeader carries the service key.
const ServiceKeyHeader = "X-Service-Key"

// Request is a service-protocol call.
type Request struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// SearchParams are the params of searchTools.
type SearchParams struct {
	Query string `json:"query"`
}

// GetParams are the params of getTool.
type GetParams struct {
	ToolID string `json:"toolId"`
}

// RunParams are the params of runTool. A large input travels by
// reference: InputRef, instead of Input, is the key of a blob under
// blob.PrefixCalls holding the input's JSON (the tool server's request
// stays within 1 MiB). ResultByRef says the caller takes a large result
// by reference (RunResult.ResultRef).
type RunParams struct {
	ToolID      string         `json:"toolId"`
	Input       map[string]any `json:"input"`
	InputRef    string         `json:"inputRef,omitempty"`
	ResultByRef bool           `json:"resultByRef,omitempty"`
}

// Transit bounds: values larger than InlineBytes go by reference (when
// both sides have the blob store), and no tool input or result may pass
// MaxValueBytes of JSON.
const (
	InlineBytes   = 512 << 10
	MaxValueBytes = 8 << 20
)

// ToolSummary is an item of listTools and searchTools: the protocol's {id,
// name, description}, plus the category and input schema (additive fields,
// so that one listTools call yields the REST catalog).
type ToolSummary struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Category    string          `json:"category"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ToolsResult is the data of listTools and searchTools.
type ToolsResult struct {
	Tools []ToolSummary `json:"tools"`
}

// Annotations are a tool's MCP behaviour hints, as getTool reports them.
type Annotations struct {
	ReadOnlyHint    bool `json:"readOnlyHint"`
	DestructiveHint bool `json:"destructiveHint"`
	IdempotentHint  bool `json:"idempotentHint"`
	OpenWorldHint   bool `json:"openWorldHint"`
}

// ComputeOnly reports whether a tool with these hints only computes from
// its input: read-only, idempotent, not destructive, closed world.
func (a Annotations) ComputeOnly() bool {
	return a.ReadOnlyHint && a.IdempotentHint && !a.DestructiveHint && !a.OpenWorldHint
}

// ToolDetail is the data of getTool: the protocol's {id, name, description,
// inputSchema}, plus category, outputSchema, outputs and annotations.
type ToolDetail struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Category     string          `json:"category"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Outputs      []string        `json:"outputs"`
	Annotations  Annotations     `json:"annotations"`
	// Metered is true for a tool that calls a language model for its
	// caller (llm_generate): the service reserves the caller's token
	// budget before each call, sends the output cap in the caller's
	// identity, and settles to the usage runTool reports.
	Metered bool `json:"metered"`
}

// RunResult is the data of runTool. ExecutionTime is whole milliseconds.
// Usage is what a metered tool's model calls spent (absent for the other
// tools, and for a metered tool that called no model).
type RunResult struct {
	Result        map[string]any `json:"result"`
	ExecutionTime int64          `json:"executionTime"`
	Usage         *Usage         `json:"usage,omitempty"`
	// ResultRef, for a caller that takes it (RunParams.ResultByRef), is
	// the key of a blob under blob.PrefixCalls holding a result larger
	// than InlineBytes; Result is then absent.
	ResultRef string `json:"resultRef,omitempty"`
}

// Usage is a metered tool run's model usage, in runTool's answer.
type Usage struct {
	ModelID      string `json:"modelId"`
	InputTokens  int    `json:"inputTokens"`
	OutputTokens int    `json:"outputTokens"`
}

// The tool server's error codes the client and the catalog act on.
const (
	// CodeToolsUnavailable: the tool server cannot be reached, does not
	// answer in time, or answers with something that is not the service
	// protocol; also the catalog's error when nothing cached can stand in.
	CodeToolsUnavailable = "TOOLS_UNAVAILABLE"
	CodeToolNotFound     = "TOOL_NOT_FOUND"
	CodeInvalidParams    = "INVALID_PARAMS"
	CodeToolTimeout      = "TOOL_TIMEOUT"
	// CodeValueTooLarge: a tool input or result over MaxValueBytes.
	CodeValueTooLarge = "TOOL_VALUE_TOO_LARGE"
)
