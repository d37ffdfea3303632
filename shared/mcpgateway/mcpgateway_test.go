package mcpgateway

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcprpc"
)

func TestWantsProgress(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"p"}}}`:  true,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":7}}}`:    true,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":null}}}`: false,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`:                                false,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":"p"}}}`:             false,
		// Params the SDK cannot read are answered as JSON, checked whole.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,"_meta":{"progressToken":"p"}}}`: false,
	} {
		m, fault := mcprpc.Parse([]byte(body), "")
		if fault != nil {
			t.Fatalf("%s: %+v", body, fault)
		}
		if got := wantsProgress(m); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}

// TestAddToolRefusesNonObjectSchemas: a workflow whose input schema is not
// an object schema is skipped instead of panicking the server.
func TestAddToolRefusesNonObjectSchemas(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	noop := mcp.ToolHandler(nil)
	for schema, ok := range map[string]bool{
		``:                                  true,
		`{"type":"object"}`:                 true,
		`{"type":"object","properties":{}}`: true,
		`{"type":"string"}`:                 false,
		`[]`:                                false,
		`{"properties":{}}`:                 false,
	} {
		err := addTool(srv, Tool{Name: "t_" + schema, InputSchema: json.RawMessage(schema)}, noop)
		if (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", schema, err, ok)
		}
	}
}

func TestToResult(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		in              CallResult
		isError         bool
		structured, txt string
	}{
		"output":  {CallResult{Output: json.RawMessage(`{"a":1}`)}, false, `{"a":1}`, `{"a":1}`},
		"empty":   {CallResult{}, false, `{}`, `{}`},
		"failed":  {CallResult{IsError: true, Text: "boom"}, true, `null`, "boom"},
		"running": {CallResult{RunID: "r1", Status: "running"}, false, `{"runId":"r1","status":"running"}`, "The workflow run r1 is still running."},
	} {
		r := toResult(c.in)
		b, _ := json.Marshal(r.StructuredContent)
		if r.IsError != c.isError || string(b) != c.structured || r.Content[0].(*mcp.TextContent).Text != c.txt {
			t.Errorf("%s: %+v %s", name, r, b)
		}
	}
}

// TestRefusal: a refused call names every field detail once, whether or
// not the error's message already lists it.
func TestRefusal(t *testing.T) {
	t.Parallel()
	listed := &errs.Error{Kind: errs.Invalid, Code: "INVALID_INPUT",
		Message: "the run's input does not match the workflow's inputSchema: input.text: is required",
		Details: []errs.FieldError{{Field: "input.text", Message: "is required"}}}
	unlisted := &errs.Error{Kind: errs.Invalid, Code: "INVALID_INPUT", Message: "the run's input is not valid",
		Details: []errs.FieldError{{Field: "input.a", Message: "is required"}, {Field: "input.b", Message: "must be a string"}}}
	limited := &errs.Error{Kind: errs.RateLimited, Code: "RATE_LIMITED", Message: "too many requests", RetryAfter: 7}
	for name, c := range map[string]struct {
		what string
		err  error
		want string
	}{
		"details in the message": {"invalid arguments", listed,
			"invalid arguments: the run's input does not match the workflow's inputSchema: input.text: is required"},
		"details apart": {"invalid arguments", unlisted,
			"invalid arguments: the run's input is not valid; input.a: is required; input.b: must be a string"},
		"retry": {"too many workflow runs", limited, "too many workflow runs: too many requests (retry in 7 s)"},
	} {
		if got := refusal(c.what, c.err); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, c.want)
		}
	}
}
