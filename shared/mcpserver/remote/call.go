package remote

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/mcpserver"
)

// maxToolMessage bounds the part of a remote tool's own error message (or
// of its server's JSON-RPC error) that is kept.
const maxToolMessage = 1000

// CallTool calls the tool name of the server at e with args, bounded by
// mcpserver.CallTimeout, every answer cut at
// mcpserver.MaxCallResponseBytes. Its result is the call's
// CallToolResult as JSON ({content, structuredContent?}) with text: the
// text of its text content, joined by newlines. A failure is a
// *mcpserver.Problem: the transport's as ListTools's, CodeToolFailed for
// a result with isError or a JSON-RPC error of the server (its message,
// cut), CodeResultTooLarge for a result over mcpserver.MaxResultBytes.
func (r *Remote) CallTool(ctx context.Context, e mcpserver.Endpoint, name string, args map[string]any) (map[string]any, *mcpserver.Problem) {
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	seen := &observed{ctx: ctx}
	session, err := r.connect(ctx, r.calls, e, seen)
	if err != nil {
		return nil, seen.problem(ctx, err)
	}
	defer session.Close()
	if args == nil {
		args = map[string]any{}
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) && ctx.Err() == nil {
			return nil, &mcpserver.Problem{Code: mcpserver.CodeToolFailed, Message: "the server refused the call: " + cut(we.Message, maxToolMessage)}
		}
		return nil, seen.problem(ctx, err)
	}
	var text []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	if res.IsError {
		msg := strings.Join(text, "\n")
		if msg == "" {
			msg = "the tool failed"
		}
		return nil, &mcpserver.Problem{Code: mcpserver.CodeToolFailed, Message: cut(msg, maxToolMessage)}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, &mcpserver.Problem{Code: mcpserver.CodeInvalidResponse, Message: "the server's result cannot be encoded"}
	}
	if len(b) > mcpserver.MaxResultBytes {
		return nil, &mcpserver.Problem{Code: mcpserver.CodeResultTooLarge, Message: "the tool's result is over the 8 MiB limit of a tool result"}
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, &mcpserver.Problem{Code: mcpserver.CodeInvalidResponse, Message: "the server's result is not a JSON object"}
	}
	delete(out, "_meta")
	out["text"] = strings.Join(text, "\n")
	return out, nil
}
