package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/mcpserver/remote"
)

const apiKey = "k-0123456789abcdef"

// sdkServer is a real go-sdk MCP server (Streamable HTTP, stateless) with
// n tools, behind an API key header: tool 0 is read-only.
func sdkServer(t *testing.T, n int) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	for i := range n {
		tool := &mcp.Tool{Name: fmt.Sprintf("tool_%d", i), Description: "a tool",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
		if i == 0 {
			tool.Name, tool.Annotations = "echo", &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Echo"}
		}
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != apiKey {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="https://example.com/.well-known/oauth-protected-resource"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func TestListTools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := remote.New(true)
	good := sdkServer(t, 3)
	tools, p := remote.ListTools(ctx, mcpserver.Endpoint{URL: good.URL, Header: "X-Api-Key", Value: apiKey})
	if p != nil {
		t.Fatalf("ListTools: %+v", p)
	}
	if len(tools) != 3 || tools[0].Name != "echo" || tools[0].Annotations == nil || !tools[0].Annotations.ReadOnlyHint ||
		!strings.Contains(string(tools[0].InputSchema), `"q"`) {
		t.Fatalf("tools = %+v", tools)
	}
	if tools[1].Annotations != nil {
		t.Fatalf("tool without annotations got %+v", tools[1].Annotations)
	}

	// The most tools kept, and one over: the list is refused whole.
	if tools, p := remote.ListTools(ctx, mcpserver.Endpoint{URL: sdkServer(t, mcpserver.MaxTools).URL, Header: "X-Api-Key", Value: apiKey}); p != nil || len(tools) != mcpserver.MaxTools {
		t.Fatalf("%d tools: %d, %+v", mcpserver.MaxTools, len(tools), p)
	}
	for _, n := range []int{mcpserver.MaxTools + 1, 10000} {
		if _, p := remote.ListTools(ctx, mcpserver.Endpoint{URL: sdkServer(t, n).URL, Header: "X-Api-Key", Value: apiKey}); p == nil || p.Code != mcpserver.CodeToolListTooLarge {
			t.Fatalf("%d tools: %+v; want TOOL_LIST_TOO_LARGE", n, p)
		}
	}
}

// TestListToolsFailures: each way a remote server fails is a problem with
// its code, never a panic or a hang.
func TestListToolsFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	serve := func(h http.HandlerFunc) string {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}
	var redirected atomic.Int64
	target := serve(func(w http.ResponseWriter, r *http.Request) { redirected.Add(1) })
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	tests := []struct {
		name   string
		url    string
		header string
		want   string
	}{
		{"wrong key", sdkServer(t, 1).URL, "wrong", mcpserver.CodeUnauthorizedByRmt},
		{"no key", sdkServer(t, 1).URL, "", mcpserver.CodeUnauthorizedByRmt},
		{"50 MB answer", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			chunk := strings.Repeat(" ", 1<<20)
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"x":"`))
			for range 50 {
				if _, err := w.Write([]byte(chunk)); err != nil {
					return
				}
			}
		}), apiKey, mcpserver.CodeResponseTooLarge},
		{"not JSON-RPC", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"hello":"world"`))
		}), apiKey, mcpserver.CodeInvalidResponse},
		{"HTML page", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<html>hi</html>`))
		}), apiKey, mcpserver.CodeInvalidResponse},
		{"drops the connection", serve(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"jsonrpc\""))
				conn.Close()
			}
		}), apiKey, mcpserver.CodeUnreachable},
		{"redirects", serve(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, http.StatusTemporaryRedirect)
		}), apiKey, mcpserver.CodeInvalidResponse},
		{"never answers", serve(func(w http.ResponseWriter, r *http.Request) {
			// The body read whole, the server notices the client leave.
			io.Copy(io.Discard, r.Body)
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}), apiKey, mcpserver.CodeRemoteTimeout},
		{"nothing listens", "http://127.0.0.1:1/mcp", apiKey, mcpserver.CodeUnreachable},
	}
	// Checked once every subtest is done: the parallel ones run after
	// this function returns, and cleanups after them.
	t.Cleanup(func() {
		if n := redirected.Load(); n != 0 {
			t.Errorf("the redirect's target was reached %d times", n)
		}
	})
	remote := remote.New(true).WithTimeout(2 * time.Second)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := mcpserver.Endpoint{URL: tt.url}
			if tt.header != "" {
				e.Header, e.Value = "X-Api-Key", tt.header
			}
			tools, p := remote.ListTools(ctx, e)
			if p == nil || p.Code != tt.want {
				t.Fatalf("ListTools = %d tools, %+v; want %s", len(tools), p, tt.want)
			}
			if strings.Contains(p.Message, apiKey) {
				t.Fatalf("problem shows the key: %s", p.Message)
			}
		})
	}
}

// TestListToolsRefusesPrivate: without private networks, a server on
// loopback is refused at the dial (so also a name that resolves there),
// as INVALID_URL, and nothing reaches it.
func TestListToolsRefusesPrivate(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(s.Close)
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]
	for _, u := range []string{s.URL, "http://localhost:" + port, "https://127.0.0.1:" + port} {
		_, p := remote.New(false).ListTools(context.Background(), mcpserver.Endpoint{URL: u})
		if p == nil || p.Code != mcpserver.CodeInvalidURL {
			t.Errorf("%s: %+v; want INVALID_URL", u, p)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times", n)
	}
}

// listServer is a bare MCP server (JSON answers, no session) whose
// tools/list answers tools, as a server not built with the SDK may.
func listServer(t *testing.T, tools string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := `{}`
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`
		case "tools/list":
			result = `{"tools":` + tools + `}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// TestListToolsDropsUnusableTools: a tool listed twice is kept once (the
// first), and a tool whose input schema does not compile, is not an
// object schema or refers to itself in a loop is dropped, as a tool with
// an invalid name is: each would break every chat of the user (duplicate
// function names and invalid parameters are refused by the model
// providers) or the validation of a step that uses it.
func TestListToolsDropsUnusableTools(t *testing.T) {
	t.Parallel()
	u := listServer(t, `[
		{"name":"echo","description":"first","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}},
		{"name":"echo","description":"second","inputSchema":{"type":"object"}},
		{"name":"a/b","inputSchema":{"type":"object"}},
		{"name":"numeric_type","inputSchema":{"type":5}},
		{"name":"string_schema","inputSchema":{"type":"string"}},
		{"name":"type_list","inputSchema":{"type":["object","null"]}},
		{"name":"bad_pattern","inputSchema":{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=x)["}}}},
		{"name":"bad_pattern_no_type","inputSchema":{"pattern":"(?<=x)["}},
		{"name":"cycle","inputSchema":{"type":"object","$defs":{"x":{"$ref":"#/$defs/x"}},"properties":{"a":{"$ref":"#/$defs/x"}}}},
		{"name":"self","inputSchema":{"type":"object","$ref":"#"}},
		{"name":"no_type","inputSchema":{"properties":{"n":{"type":"integer"}}}},
		{"name":"tree","inputSchema":{"type":"object","$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"properties":{"root":{"$ref":"#/$defs/n"}}}}
	]`)
	tools, p := remote.New(true).ListTools(context.Background(), mcpserver.Endpoint{URL: u})
	if p != nil {
		t.Fatalf("ListTools: %+v", p)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if got, want := strings.Join(names, " "), "echo no_type tree"; got != want {
		t.Fatalf("tools = %s, want %s", got, want)
	}
	if tools[0].Description != "first" {
		t.Errorf("echo kept is %q, want the first listed", tools[0].Description)
	}
}
