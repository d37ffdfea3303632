package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/mcpserver/remote"
)

// callServer is a real go-sdk MCP server with the tools the call tests
// use: echo (its arguments back as text, and as structured content),
// fail (isError), big (a text of the size asked for) and slow (answers
// when its request ends).
func callServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "calls", Version: "1"}, nil)
	hang := make(chan struct{})
	obj := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + string(req.Params.Arguments)}}, StructuredContent: args}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such city"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "big", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ N int }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", args.N)}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-hang:
		}
		return nil, errors.New("stopped")
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != apiKey {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(hang) }) // first: the slow call ends, then the server closes
	return hs
}

func TestCallTool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := callServer(t)
	e := mcpserver.Endpoint{URL: hs.URL, Header: "X-Api-Key", Value: apiKey}
	r := remote.New(true)

	out, p := r.CallTool(ctx, e, "echo", map[string]any{"city": "Oslo"})
	if p != nil {
		t.Fatalf("echo: %+v", p)
	}
	if out["text"] != `echo {"city":"Oslo"}` || out["structuredContent"].(map[string]any)["city"] != "Oslo" || len(out["content"].([]any)) != 1 {
		t.Fatalf("echo = %v", out)
	}

	if _, p := r.CallTool(ctx, e, "fail", nil); p == nil || p.Code != mcpserver.CodeToolFailed || p.Message != "no such city" {
		t.Fatalf("fail: %+v", p)
	}
	if _, p := r.CallTool(ctx, e, "nope", nil); p == nil || p.Code != mcpserver.CodeToolFailed {
		t.Fatalf("unknown tool: %+v", p)
	}
	// A result at the limit of a tool result passes; over it, and far
	// over (the answer cut at the transport), is refused.
	at := mcpserver.MaxResultBytes - 200
	if out, p := r.CallTool(ctx, e, "big", map[string]any{"n": at}); p != nil || len(out["text"].(string)) != at {
		t.Fatalf("big at the limit: %+v", p)
	}
	if _, p := r.CallTool(ctx, e, "big", map[string]any{"n": mcpserver.MaxResultBytes}); p == nil || p.Code != mcpserver.CodeResultTooLarge {
		t.Fatalf("big over the limit: %+v", p)
	}
	if _, p := r.CallTool(ctx, e, "big", map[string]any{"n": 20 << 20}); p == nil || p.Code != mcpserver.CodeResponseTooLarge {
		t.Fatalf("big far over the limit: %+v", p)
	}
	if _, p := r.WithCallTimeout(2*time.Second).CallTool(ctx, e, "slow", nil); p == nil || p.Code != mcpserver.CodeRemoteTimeout {
		t.Fatalf("slow: %+v", p)
	}
	if _, p := r.CallTool(ctx, mcpserver.Endpoint{URL: hs.URL}, "echo", nil); p == nil || p.Code != mcpserver.CodeUnauthorizedByRmt {
		t.Fatalf("no key: %+v", p)
	}
}

// TestCallToolBadServers: a server that is not an MCP server, or breaks
// its answer to the call, is a problem with its code, never a hang.
func TestCallToolBadServers(t *testing.T) {
	t.Parallel()
	good := callServer(t)
	// Each answers initialize as the real server does, then breaks its
	// answer to tools/call.
	broken := func(call func(w http.ResponseWriter)) string {
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if !strings.Contains(string(body), `"tools/call"`) {
				req, _ := http.NewRequestWithContext(r.Context(), r.Method, good.URL, strings.NewReader(string(body)))
				req.Header = r.Header.Clone()
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				defer res.Body.Close()
				for k, v := range res.Header {
					w.Header()[k] = v
				}
				w.WriteHeader(res.StatusCode)
				io.Copy(w, res.Body)
				return
			}
			call(w)
		}))
		t.Cleanup(proxy.Close)
		return proxy.URL
	}
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"invalid JSON-RPC", broken(func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":`))
		}), mcpserver.CodeInvalidResponse},
		{"not an answer", broken(func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`[1,2,3]`))
		}), mcpserver.CodeInvalidResponse},
		{"50 MB", broken(func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`))
			chunk := strings.Repeat("y", 1<<20)
			for range 50 {
				if _, err := w.Write([]byte(chunk)); err != nil {
					return
				}
			}
		}), mcpserver.CodeResponseTooLarge},
		{"drops the connection mid-call", broken(func(w http.ResponseWriter) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 900\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"res"))
				conn.Close()
			}
		}), mcpserver.CodeUnreachable},
	}
	r := remote.New(true).WithCallTimeout(3 * time.Second)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, p := r.CallTool(context.Background(), mcpserver.Endpoint{URL: tt.url, Header: "X-Api-Key", Value: apiKey}, "echo", map[string]any{"a": 1})
			if p == nil {
				t.Fatal("no problem")
			}
			if p.Code != tt.want {
				t.Fatalf("problem %+v; want %s", p, tt.want)
			}
			if strings.Contains(p.Message, apiKey) {
				t.Fatalf("the problem shows the key")
			}
		})
	}
}
