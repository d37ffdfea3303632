package toolserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

// Implementation identifies the tool server to MCP clients.
var Implementation = mcp.Implementation{Name: "workflowchat-tools", Title: "Workflow Chat tools", Version: "1.0.0"}

// NewMCPServer returns an MCP server offering every tool of reg. Each
// tools/call validates its arguments and runs the tool through reg.Run (so
// under the tool's timeout); the result is the output object as structured
// content plus its JSON as text content. A tool failure (invalid arguments,
// execution failure, timeout) is a result with isError set and the
// client-safe message as text, as MCP asks, not a protocol error; an
// unknown tool is the SDK's protocol error.
func NewMCPServer(reg *tools.Registry) *mcp.Server {
	impl := Implementation
	srv := mcp.NewServer(&impl, &mcp.ServerOptions{
		Instructions: "Workflow Chat's built-in tools: web requests, HTML extraction, jq, CSV, templates, regular expressions, math, time, text generation and hashing. Every tool takes a JSON object described by its input schema and returns an object described by its output schema.",
	})
	for _, t := range reg.List() {
		a := t.Annotations
		srv.AddTool(&mcp.Tool{
			Name:         t.ID,
			Title:        t.Name,
			Description:  t.Description,
			InputSchema:  json.RawMessage(t.InputSchema),
			OutputSchema: json.RawMessage(t.OutputSchema),
			Annotations: &mcp.ToolAnnotations{
				Title:           t.Name,
				ReadOnlyHint:    a.ReadOnly,
				DestructiveHint: new(a.Destructive),
				IdempotentHint:  a.Idempotent,
				OpenWorldHint:   new(a.OpenWorld),
			},
		}, mcpToolHandler(reg, t.ID))
	}
	return srv
}

// newMCPHandler serves NewMCPServer(reg) over stateless Streamable HTTP
// with JSON (not SSE) responses, which suits a buffered Lambda response.
func newMCPHandler(reg *tools.Registry) http.Handler {
	srv := NewMCPServer(reg)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// mcpToolHandler runs tool id for tools/call.
func mcpToolHandler(reg *tools.Registry, id string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		if raw := req.Params.Arguments; len(raw) > 0 && !isNull(raw) {
			if !isObject(raw) || json.Unmarshal(raw, &args) != nil {
				return toolErrorResult(errs.E("toolserver.mcp", errs.Invalid, tools.CodeInvalidParams, "arguments must be a JSON object")), nil
			}
		}
		out, err := reg.Run(ctx, id, args)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return nil, err // the request is gone; nobody reads a result
			}
			return toolErrorResult(err), nil
		}
		text, err := json.Marshal(out)
		if err != nil {
			return toolErrorResult(errs.E("toolserver.mcp", errs.Internal, tools.CodeToolExecutionFailed, "tool "+id+" produced output that is not JSON").WithCause(err)), nil
		}
		return &mcp.CallToolResult{
			StructuredContent: out,
			Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
		}, nil
	}
}

// toolErrorResult is the isError result for err: its client-safe message
// (never the cause), prefixed with its code.
func toolErrorResult(err error) *mcp.CallToolResult {
	msg := "internal error"
	var e *errs.Error
	if errors.As(err, &e) && e.Message != "" {
		msg = e.Message
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: errs.CodeOf(err) + ": " + msg}}}
	res.SetError(err)
	return res
}
