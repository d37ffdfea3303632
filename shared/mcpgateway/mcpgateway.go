// Package mcpgateway is POST /api/mcp: a stateless Streamable HTTP MCP
// server per user (go-sdk), whose tools are the user's workflows exposed
// as tools, behind bearer authentication (an OAuth access token issued for
// this resource, or a personal access token).
//
// Each request is answered by a fresh mcp.Server built for the token's
// user from WorkflowTools.Tools: nothing is kept between requests, so any
// instance answers any request. The answer is application/json, unless a
// tools/call carries a progressToken: then it is an SSE stream carrying a
// progress notification per workflow step before the result.
//
// A request without a valid token is 401 with
// `WWW-Authenticate: Bearer resource_metadata="<origin>/.well-known/oauth-protected-resource/api/mcp"`
// (RFC 9728 section 5.1), which is how an MCP client finds the
// authorization server.
package mcpgateway

import (
	"context"
	"encoding/json"
	"time"
)

// Tool is one workflow exposed as an MCP tool.
type Tool struct {
	// Name is the workflow's toolName (^[a-z][a-z0-9_]{0,63}$, unique per
	// user).
	Name        string
	Title       string
	Description string
	// InputSchema is a JSON Schema of "type": "object" (empty: any
	// object); OutputSchema, when set, describes the structured output.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
}

// Progress is one step of a running tool call.
type Progress struct {
	// Step counts the steps done so far (1 after the first); Total is the
	// number of steps, 0 when unknown.
	Step    int
	Total   int
	Message string
}

// CallResult is the outcome of a tool call, one of three kinds:
//   - a finished run: Output is its structured output (a JSON object);
//   - a failed run: IsError is true and Text says why;
//   - a run still going when the wait bound passed: RunID and Status name
//     it, and Text says where to follow it.
type CallResult struct {
	Output  json.RawMessage
	IsError bool
	Text    string
	RunID   string
	Status  string
}

// WorkflowTools is what the gateway needs of the workflow engine.
type WorkflowTools interface {
	// Tools lists userID's workflows exposed as tools.
	Tools(ctx context.Context, userID string) ([]Tool, error)
	// Call runs the tool named name for userID with args (the JSON object
	// the client sent; the engine validates it against the input schema
	// and reports a mismatch as an IsError result). progress, when not
	// nil, is told of each step as it ends. It returns the run's outcome
	// (see CallResult); an error is for failures of the service itself
	// (storage, an unknown tool), which the client sees as a JSON-RPC
	// error.
	Call(ctx context.Context, userID, name string, args json.RawMessage, progress func(Progress)) (CallResult, error)
}

// NoTools is the WorkflowTools of a deployment whose workflow engine is
// not wired to the gateway: it lists no tools, and every call is an
// unknown tool.
type NoTools struct{}

// Tools returns no tools.
func (NoTools) Tools(context.Context, string) ([]Tool, error) { return nil, nil }

// Call fails: there is no tool to call.
func (NoTools) Call(context.Context, string, string, json.RawMessage, func(Progress)) (CallResult, error) {
	return CallResult{}, errUnknownTool
}

// MaxCallWait is how long a tools/call waits for its run before it answers
// with the run's id and status; the function's timeout and the CloudFront
// origin read timeout are sized for it.
const MaxCallWait = 50 * time.Second
