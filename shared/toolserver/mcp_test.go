package toolserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/toolserver"
)

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	header http.Header
	base   http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h.header {
		r.Header[k] = vs
	}
	return h.base.RoundTrip(r)
}

// connect opens an MCP client session to url whose HTTP requests carry
// header.
func connect(t *testing.T, url string, base *http.Client, header http.Header) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "toolserver-test", Version: "1.0.0"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: headerTransport{header: header, base: base.Transport}},
		MaxRetries: -1,
	}
	cs, err := client.Connect(t.Context(), transport, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func TestMCPClient(t *testing.T) {
	t.Parallel()
	reg := builtinRegistry(t)
	srv := newServer(t, reg, testKey)
	url := srv.URL + toolserver.Path

	for _, auth := range []struct {
		name   string
		header http.Header
	}{
		{"X-Service-Key", http.Header{"X-Service-Key": {testKey}}},
		{"bearer", http.Header{"Authorization": {"Bearer " + testKey}}},
	} {
		t.Run(auth.name, func(t *testing.T) {
			t.Parallel()
			cs, err := connect(t, url, srv.Client(), auth.header)
			if err != nil {
				t.Fatal(err)
			}
			if got := cs.InitializeResult(); got == nil || got.ServerInfo == nil || got.ServerInfo.Name != toolserver.Implementation.Name || got.Capabilities.Tools == nil {
				t.Errorf("initialize result = %+v", got)
			}
			ctx := t.Context()

			t.Run("ListTools", func(t *testing.T) {
				res, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Tools) != builtinCount {
					t.Fatalf("%d tools, want %d", len(res.Tools), builtinCount)
				}
				var names []string
				for _, got := range res.Tools {
					names = append(names, got.Name)
					want := mustGet(t, reg, got.Name)
					if got.Title != want.Name || got.Description != want.Description {
						t.Errorf("%s: title %q, description %q", got.Name, got.Title, got.Description)
					}
					if canonical(t, mustJSON(t, got.InputSchema)) != canonical(t, want.InputSchema) {
						t.Errorf("%s: input schema %s", got.Name, mustJSON(t, got.InputSchema))
					}
					if canonical(t, mustJSON(t, got.OutputSchema)) != canonical(t, want.OutputSchema) {
						t.Errorf("%s: output schema %s", got.Name, mustJSON(t, got.OutputSchema))
					}
					a, wa := got.Annotations, want.Annotations
					if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
						t.Fatalf("%s: annotations %+v", got.Name, a)
					}
					if a.ReadOnlyHint != wa.ReadOnly || *a.DestructiveHint != wa.Destructive || a.IdempotentHint != wa.Idempotent || *a.OpenWorldHint != wa.OpenWorld {
						t.Errorf("%s: annotations %s, want %+v", got.Name, mustJSON(t, a), wa)
					}
				}
				var want []string
				for _, tool := range reg.List() {
					want = append(want, tool.ID)
				}
				slices.Sort(names)
				if !slices.Equal(names, want) {
					t.Errorf("tools = %v, want %v", names, want)
				}
				for _, tc := range []struct {
					id                 string
					readOnly, openWrld bool
				}{{"json_query", true, false}, {"http_request", false, true}} {
					i := slices.IndexFunc(res.Tools, func(x *mcp.Tool) bool { return x.Name == tc.id })
					if a := res.Tools[i].Annotations; a.ReadOnlyHint != tc.readOnly || *a.OpenWorldHint != tc.openWrld {
						t.Errorf("%s annotations = %s", tc.id, mustJSON(t, a))
					}
				}
			})

			t.Run("CallTool json_query", func(t *testing.T) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "json_query", Arguments: map[string]any{
					"input": map[string]any{"items": []any{map[string]any{"name": "a", "price": 3}, map[string]any{"name": "b", "price": 1}}},
					"query": "[.items[] | select(.price > 2) | .name]",
				}})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError {
					t.Fatalf("IsError: %s", mustJSON(t, res.Content))
				}
				if got := jsonOf(t, res.StructuredContent); got != `{"result":["a"]}` {
					t.Errorf("structured content = %s", got)
				}
				if len(res.Content) != 1 {
					t.Fatalf("content = %s", mustJSON(t, res.Content))
				}
				text, ok := res.Content[0].(*mcp.TextContent)
				if !ok || canonical(t, []byte(text.Text)) != `{"result":["a"]}` {
					t.Errorf("text content = %s", mustJSON(t, res.Content))
				}
			})

			toolErrors := []struct {
				name string
				args any
				want []string // the error text contains each
			}{
				{"missing required argument", map[string]any{"input": 1}, []string{"INVALID_PARAMS", "query"}},
				{"wrong argument type", map[string]any{"query": 5}, []string{"INVALID_PARAMS", "query"}},
				{"unknown argument", map[string]any{"query": ".", "extra": true}, []string{"INVALID_PARAMS"}},
				{"arguments not an object", []any{"."}, []string{"INVALID_PARAMS", "object"}},
				{"execution failure", map[string]any{"query": `error("boom")`}, []string{"TOOL_EXECUTION_FAILED", "boom"}},
			}
			for _, tc := range toolErrors {
				t.Run("CallTool "+tc.name, func(t *testing.T) {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "json_query", Arguments: tc.args})
					if err != nil {
						t.Fatalf("a tool error must be a result, not a protocol error: %v", err)
					}
					if !res.IsError || res.StructuredContent != nil || len(res.Content) != 1 {
						t.Fatalf("result = %s, want an error result", mustJSON(t, res))
					}
					text := res.Content[0].(*mcp.TextContent).Text
					for _, w := range tc.want {
						if !strings.Contains(text, w) {
							t.Errorf("error text %q does not contain %q", text, w)
						}
					}
				})
			}

			t.Run("CallTool unknown tool", func(t *testing.T) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
				if err == nil {
					t.Fatalf("want a protocol error, got %s", mustJSON(t, res))
				}
				if !strings.Contains(err.Error(), "no_such_tool") {
					t.Errorf("err = %v", err)
				}
			})
		})
	}

	refused := []struct {
		name   string
		header http.Header
	}{
		{"no key", nil},
		{"wrong key", http.Header{"X-Service-Key": {"wrong-key-0123456789abcdef"}}},
		{"wrong bearer", http.Header{"Authorization": {"Bearer wrong-key-0123456789abcdef"}}},
	}
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := connect(t, url, srv.Client(), tc.header)
			if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
				t.Fatalf("connect err = %v, want the initialize request refused as Unauthorized", err)
			}
		})
	}
}

// TestJSONRPCOverHTTP sends raw JSON-RPC requests: stateless, no session,
// tools/list without initialize, JSON (not SSE) responses.
func TestJSONRPCOverHTTP(t *testing.T) {
	t.Parallel()
	srv := newServer(t, builtinRegistry(t), testKey)
	rpcHeaders := map[string]string{
		toolserver.ServiceKeyHeader: testKey,
		"Accept":                    "application/json, text/event-stream",
		"MCP-Protocol-Version":      "2025-06-18",
	}
	tests := []struct {
		name   string
		body   string
		status int
		check  func(t *testing.T, resp map[string]json.RawMessage)
	}{
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`, 200,
			func(t *testing.T, resp map[string]json.RawMessage) {
				var r struct {
					ProtocolVersion string
					ServerInfo      mcp.Implementation
					Capabilities    struct{ Tools json.RawMessage }
				}
				if err := json.Unmarshal(resp["result"], &r); err != nil || r.ServerInfo.Name != toolserver.Implementation.Name || r.Capabilities.Tools == nil || r.ProtocolVersion == "" {
					t.Errorf("initialize result = %s (%v)", resp["result"], err)
				}
			}},
		{"tools/list without initialize", `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`, 200,
			func(t *testing.T, resp map[string]json.RawMessage) {
				var r struct{ Tools []mcp.Tool }
				if err := json.Unmarshal(resp["result"], &r); err != nil || len(r.Tools) != builtinCount {
					t.Errorf("tools/list result = %s (%v)", resp["result"], err)
				}
				if string(resp["id"]) != `"a"` {
					t.Errorf("id = %s", resp["id"])
				}
			}},
		{"tools/call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"abc","algorithm":"md5"}}}`, 200,
			func(t *testing.T, resp map[string]json.RawMessage) {
				var r struct {
					StructuredContent map[string]any
					IsError           bool
				}
				if err := json.Unmarshal(resp["result"], &r); err != nil || r.IsError || r.StructuredContent["digest"] != "900150983cd24fb0d6963f7d28e17f72" {
					t.Errorf("tools/call result = %s (%v)", resp["result"], err)
				}
			}},
		{"tools/call unknown tool", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, 200,
			func(t *testing.T, resp map[string]json.RawMessage) {
				var e struct {
					Code    int
					Message string
				}
				if err := json.Unmarshal(resp["error"], &e); err != nil || e.Code != -32602 || !strings.Contains(e.Message, "nope") {
					t.Errorf("error = %s (%v)", resp["error"], err)
				}
			}},
		{"unknown JSON-RPC method", `{"jsonrpc":"2.0","id":4,"method":"tools/delete","params":{}}`, 200,
			func(t *testing.T, resp map[string]json.RawMessage) {
				var e struct {
					Code    int
					Message string
				}
				if err := json.Unmarshal(resp["error"], &e); err != nil || e.Code != -32601 || !strings.Contains(e.Message, "tools/delete") || string(resp["id"]) != "4" {
					t.Errorf("error = %s, id %s (%v)", resp["error"], resp["id"], err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, header, body := post(t, srv, rpcHeaders, strings.NewReader(tc.body))
			if status != tc.status {
				t.Fatalf("status = %d, want %d: %s", status, tc.status, body)
			}
			if tc.check == nil {
				return
			}
			if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			if sid := header.Get("Mcp-Session-Id"); sid != "" {
				t.Errorf("stateless server set Mcp-Session-Id %q", sid)
			}
			var resp map[string]json.RawMessage
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if string(resp["jsonrpc"]) != `"2.0"` {
				t.Errorf("response %s is not JSON-RPC 2.0", body)
			}
			tc.check(t, resp)
		})
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestJSONRPCBatch checks that a batch array is refused as JSON-RPC (not
// as the service protocol's INVALID_REQUEST) for every protocol version,
// the 2025-03-26 one that had batches included, and that none of its
// calls runs.
func TestJSONRPCBatch(t *testing.T) {
	t.Parallel()
	srv := newServer(t, builtinRegistry(t), testKey)
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a","algorithm":"md5"}}}]`
	for _, version := range []string{"", "2025-03-26", "2025-06-18", "2025-11-25"} {
		h := map[string]string{toolserver.ServiceKeyHeader: testKey, "Accept": "application/json, text/event-stream"}
		if version != "" {
			h["MCP-Protocol-Version"] = version
		}
		status, _, body := post(t, srv, h, strings.NewReader(batch))
		if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32600`) ||
			!strings.Contains(string(body), toolserver.ErrBatch) || strings.Contains(string(body), "0cc175b9c0f1b6a831c399e269772661") {
			t.Errorf("version %q: %d %s, want a JSON-RPC invalid request naming batches", version, status, body)
		}
	}
}
