package mcpgateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/mcpgateway"
	"github.com/workflowchat/service/shared/oauth/bearer"
)

// oneToken takes the token "good" as user u1's.
type oneToken struct{}

func (oneToken) Verify(_ context.Context, token string, _ *http.Request) (bearer.Principal, error) {
	if token != "good" {
		return bearer.Principal{}, errs.E("test", errs.Unauthenticated, "UNAUTHORIZED", "bad token")
	}
	return bearer.Principal{UserID: "u1"}, nil
}

// echoTools is one tool, echo, answering its arguments, with a progress
// step when asked for one.
type echoTools struct{}

func (echoTools) Tools(context.Context, string) ([]mcpgateway.Tool, error) {
	return []mcpgateway.Tool{{Name: "echo", Title: "Echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil
}

func (echoTools) Call(_ context.Context, _, _ string, args json.RawMessage, progress func(mcpgateway.Progress)) (mcpgateway.CallResult, error) {
	if progress != nil {
		progress(mcpgateway.Progress{Step: 1, Total: 1, Message: "echoed"})
	}
	return mcpgateway.CallResult{Output: args}, nil
}

func newGateway(t *testing.T) *httptest.Server {
	t.Helper()
	h := httpapi.Stack(mcpgateway.Routes(mcpgateway.Options{Tools: echoTools{}, Verifier: oneToken{}, BaseURL: "http://svc.example"}), httpapi.Options{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// post sends body to /api/mcp as an MCP client speaking version would.
func post(t *testing.T, srv *httptest.Server, version, body string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer good")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// internals are fragments of Go and SDK internals no answer may carry.
var internals = []string{"Go value", "jsonrpc2", "wireDecode", "unmarshal", "json:", ".go", "mcp.", "map[", "interface {}", "goroutine", "panic"}

// TestGatewayJSONRPCErrors: /api/mcp validates a message as the tool
// server does: every refusal is a JSON-RPC error as application/json
// with the code and status of its kind, the request's id echoed exactly
// (null when it is not a string or an integer within ±(2^53-1)), and no
// Go type names; a response from the client is refused, not taken (202).
func TestGatewayJSONRPCErrors(t *testing.T) {
	t.Parallel()
	srv := newGateway(t)
	const v2025, v2026 = "2025-06-18", "2026-07-28"
	for _, tc := range []struct {
		name, version, body string
		header              map[string]string
		status, code        int
		id                  string
	}{
		// The reproductions.
		{"fractional id", v2025, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, nil, 400, -32600, "null"},
		{"a string body", v2025, `"x"`, nil, 400, -32600, "null"},
		{"an object id", v2025, `{"id":{}}`, nil, 400, -32600, "null"},
		{"an object id with a method", v2025, `{"jsonrpc":"2.0","id":{},"method":"ping"}`, nil, 400, -32600, "null"},
		{"tools/call with array params", v2025, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}`, nil, 200, -32602, "7"},
		{"tools/call with a numeric name", v2025, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":5}}`, nil, 200, -32602, "8"},
		{"tools/call with a numeric name and progress", v2025,
			`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5,"_meta":{"progressToken":1}}}`, nil, 200, -32602, "9"},
		{"a response from the client", v2025, `{"jsonrpc":"2.0","id":1,"result":{}}`, nil, 400, -32600, "1"},

		// The rest of the rules.
		{"not JSON", v2025, `ping`, nil, 400, -32700, "null"},
		{"truncated", v2025, `{"jsonrpc":"2.0","id":1,`, nil, 400, -32700, "null"},
		{"empty", v2025, ``, nil, 400, -32700, "null"},
		{"null", v2025, `null`, nil, 400, -32600, "null"},
		{"batch", v2025, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, nil, 400, -32600, "null"},
		{"missing jsonrpc", v2025, `{"id":1,"method":"ping"}`, nil, 400, -32600, "1"},
		{"id null", v2025, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, nil, 400, -32600, "null"},
		{"id with exponent", v2025, `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, nil, 400, -32600, "null"},
		{"id beyond 2^53-1", v2025, `{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`, nil, 400, -32600, "null"},
		{"id a boolean", v2025, `{"jsonrpc":"2.0","id":true,"method":"ping"}`, nil, 400, -32600, "null"},
		{"string id kept", v2025, `{"jsonrpc":"2.0","id":"x-1","method":"tools/nuke"}`, nil, 200, -32601, `"x-1"`},
		{"params null", v2025, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":null}`, nil, 400, -32600, "2"},
		{"unknown method, 2026", v2026, `{"jsonrpc":"2.0","id":4,"method":"tools/nuke"}`, map[string]string{"Mcp-Method": "tools/nuke"}, 404, -32601, "4"},
		{"tools/call without params", v2025, `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`, nil, 200, -32602, "5"},
		{"request without an id", v2025, `{"jsonrpc":"2.0","method":"tools/list"}`, nil, 400, -32600, "null"},
		{"notification with an id", v2025, `{"jsonrpc":"2.0","id":6,"method":"notifications/initialized"}`, nil, 400, -32600, "6"},
		{"logging/setLevel with a numeric level", v2025, `{"jsonrpc":"2.0","id":10,"method":"logging/setLevel","params":{"level":5}}`, nil, 200, -32602, "10"},
		{"unsupported protocol version", "1999-01-01", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil, 400, -32600, "null"},
		{"Accept without text/event-stream", v2025, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Accept": "application/json"}, 400, -32600, "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, header, body := post(t, srv, tc.version, tc.body, tc.header)
			if status != tc.status {
				t.Errorf("status = %d, want %d; body %.300s", status, tc.status, body)
			}
			if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json; body %.300s", ct, body)
			}
			var e struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil {
				t.Fatalf("body %q is not a JSON-RPC error response: %v", body, err)
			}
			if e.JSONRPC != "2.0" || e.Error.Code != tc.code || e.Error.Message == "" || string(e.ID) != tc.id {
				t.Errorf("body %s: want jsonrpc 2.0, code %d, a message and id %s", body, tc.code, tc.id)
			}
			for _, leak := range internals {
				if strings.Contains(string(body), leak) {
					t.Errorf("body %s carries internals (%q)", body, leak)
				}
			}
		})
	}
}

// TestGatewayJSONRPCAccepted: what the validation lets through still
// works: ids echoed exactly, notifications 202 without a body, a body
// without Content-Type, and a tools/call with a progress token answered
// as an SSE stream with its progress notification.
func TestGatewayJSONRPCAccepted(t *testing.T) {
	t.Parallel()
	srv := newGateway(t)
	for _, tc := range []struct {
		name, body string
		header     map[string]string
		status     int
		want       string
	}{
		{"string id", `{"jsonrpc":"2.0","id":"abc","method":"ping"}`, nil, 200, `"id":"abc"`},
		{"zero id", `{"jsonrpc":"2.0","id":0,"method":"ping"}`, nil, 200, `"id":0`},
		{"largest id", `{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"}`, nil, 200, `"id":9007199254740991`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, 202, ""},
		{"no Content-Type", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Content-Type": ""}, 200, `"name":"echo"`},
		{"tools/call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`, nil, 200, `"structuredContent":{"a":1}`},
		{"tools/call with progress", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"_meta":{"progressToken":"p"}}}`,
			nil, 200, `"method":"notifications/progress"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, header, body := post(t, srv, "2025-06-18", tc.body, tc.header)
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%d %.400s, want %d with %s", status, body, tc.status, tc.want)
			}
			if tc.status == 202 && len(body) != 0 {
				t.Errorf("202 with a body %q", body)
			}
			if strings.Contains(tc.name, "progress") {
				if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || !strings.Contains(string(body), `"structuredContent":{"a":1}`) {
					t.Errorf("Content-Type %q, body %.400s: want an SSE stream with the progress and the result", ct, body)
				}
			}
		})
	}
}
