package toolserver_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/toolserver"
)

// internals are fragments of Go and SDK internals no answer may carry.
var internals = []string{"Go value", "jsonrpc2", "wireDecode", "unmarshal", "json:", ".go", "goroutine", "panic"}

// rpcError is a JSON-RPC error response, decoded strictly.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	} `json:"error"`
}

// checkRPCError checks that an answer is exactly a JSON-RPC error response
// with code and id, as application/json, and leaks nothing.
func checkRPCError(t *testing.T, header http.Header, body []byte, code int, id string) rpcError {
	t.Helper()
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json; body %s", ct, body)
	}
	var e rpcError
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("body %q is not a JSON-RPC error response: %v", body, err)
	}
	var members map[string]json.RawMessage
	_ = json.Unmarshal(body, &members)
	if _, ok := members["id"]; !ok || members["result"] != nil {
		t.Errorf("body %s: a JSON-RPC error response has an id (null if unknown) and no result", body)
	}
	if e.JSONRPC != "2.0" || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("body %s: want jsonrpc 2.0, code %d and a message", body, code)
	}
	if got := string(e.ID); got != id {
		t.Errorf("id = %s, want %s", got, id)
	}
	for _, leak := range internals {
		if strings.Contains(string(body), leak) {
			t.Errorf("body %s carries internals (%q)", body, leak)
		}
	}
	return e
}

// mcpHeaders are the headers of an MCP client speaking version.
func mcpHeaders(version string) map[string]string {
	h := map[string]string{
		toolserver.ServiceKeyHeader: testKey,
		"Accept":                    "application/json, text/event-stream",
	}
	if version != "" {
		h["MCP-Protocol-Version"] = version
	}
	return h
}

// TestJSONRPCErrors sends malformed and unanswerable JSON-RPC messages:
// each gets a JSON-RPC error response (parse error -32700, invalid request
// -32600, method not found -32601, invalid params -32602) as JSON, with
// the status MCP's Streamable HTTP transport gives it: 400 for input the
// server cannot accept; for a call it can read, the status of a JSON-RPC
// response (200 up to protocol 2025-11-25; from 2026-07-28, 404 for an
// unknown method and 400 for invalid params).
func TestJSONRPCErrors(t *testing.T) {
	t.Parallel()
	srv := newServer(t, builtinRegistry(t), testKey)
	const (
		v2025  = "2025-06-18"
		vBatch = "2025-03-26" // the last version with batches
		v2026  = "2026-07-28"
	)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	tests := []struct {
		name, version, body string
		header              map[string]string
		status, code        int
		id                  string
	}{
		// The reproductions.
		{"batch with a number", vBatch, `[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}},5]`, nil, 400, -32600, "null"},
		{"unknown method", v2025, `{"jsonrpc":"2.0","id":4,"method":"tools/nuke","params":{}}`, nil, 200, -32601, "4"},

		// Parse errors.
		{"truncated", v2025, `{"jsonrpc":"2.0","id":1,`, nil, 400, -32700, "null"},
		{"trailing data", v2025, list + ` {}`, nil, 400, -32700, "null"},
		{"not JSON", v2025, `tools/list`, nil, 400, -32700, "null"},
		{"empty", v2025, ``, nil, 400, -32700, "null"},

		// Not a request object.
		{"string", v2025, `"tools/list"`, nil, 400, -32600, "null"},
		{"null", v2025, `null`, nil, 400, -32600, "null"},
		{"empty batch", vBatch, `[]`, nil, 400, -32600, "null"},
		{"missing jsonrpc", v2025, `{"id":1,"method":"tools/list","params":{}}`, nil, 400, -32600, "1"},
		{"wrong version", v2025, `{"jsonrpc":"1.0","id":1,"method":"tools/list","params":{}}`, nil, 400, -32600, "1"},
		{"version as a number", v2025, `{"jsonrpc":2.0,"id":1,"method":"tools/list","params":{}}`, nil, 400, -32600, "1"},
		{"missing method", v2025, `{"jsonrpc":"2.0","id":1,"params":{}}`, nil, 400, -32600, "1"},
		{"method a number", v2025, `{"jsonrpc":"2.0","id":1,"method":5}`, nil, 400, -32600, "1"},
		{"empty method", v2025, `{"jsonrpc":"2.0","id":1,"method":""}`, nil, 400, -32600, "1"},
		{"params a string", v2025, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"x"}`, nil, 400, -32600, "1"},
		{"params a number", v2025, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":7}`, nil, 400, -32600, "1"},
		{"params null", v2025, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}`, nil, 400, -32600, "1"},
		{"a response from the client", v2025, `{"jsonrpc":"2.0","id":1,"result":{}}`, nil, 400, -32600, "1"},
		{"missing jsonrpc and method", v2025, `{"id":1}`, nil, 400, -32600, "1"},

		// Ids.
		{"id null", v2025, `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, nil, 400, -32600, "null"},
		{"id fractional", v2025, `{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`, nil, 400, -32600, "null"},
		{"id with exponent", v2025, `{"jsonrpc":"2.0","id":1e3,"method":"tools/list"}`, nil, 400, -32600, "null"},
		{"id beyond int64", v2025, `{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/list"}`, nil, 400, -32600, "null"},
		{"id beyond 2^53-1", v2025, `{"jsonrpc":"2.0","id":9007199254740992,"method":"tools/list"}`, nil, 400, -32600, "null"},
		{"id a boolean", v2025, `{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, nil, 400, -32600, "null"},
		{"id an object", v2025, `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, nil, 400, -32600, "null"},
		{"id an array", v2025, `{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`, nil, 400, -32600, "null"},
		{"string id kept", v2025, `{"jsonrpc":"2.0","id":"x-1","method":"tools/nuke"}`, nil, 200, -32601, `"x-1"`},
		{"negative id kept", v2025, `{"jsonrpc":"2.0","id":-7,"method":"tools/nuke"}`, nil, 200, -32601, "-7"},

		// SDK errors whose messages named Go types.
		{"tools/call with a numeric name", v2025, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}`, nil, 200, -32602, "7"},
		{"logging/setLevel with a numeric level", v2025, `{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":5}}`, nil, 200, -32602, "8"},
		{"initialize with a numeric version", v2025, `{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":5}}`, nil, 200, -32602, "9"},

		// Methods and params of calls the server can read.
		{"unknown method, 2026", v2026, `{"jsonrpc":"2.0","id":4,"method":"tools/nuke","params":{}}`, map[string]string{"Mcp-Method": "tools/nuke"}, 404, -32601, "4"},
		{"reserved rpc. method", v2025, `{"jsonrpc":"2.0","id":2,"method":"rpc.discover"}`, nil, 200, -32601, "2"},
		{"params an array", v2025, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}`, nil, 200, -32602, "3"},
		{"params an array, 2026", v2026, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}`, map[string]string{"Mcp-Method": "tools/list"}, 400, -32602, "3"},
		{"tools/call without params", v2025, `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`, nil, 200, -32602, "5"},
		{"request sent as a notification", v2025, `{"jsonrpc":"2.0","method":"tools/list","params":{}}`, nil, 400, -32600, "null"},

		// Notifications.
		{"unknown notification", v2025, `{"jsonrpc":"2.0","method":"notifications/nuke"}`, nil, 400, -32601, "null"},
		{"notification with an id", v2025, `{"jsonrpc":"2.0","id":6,"method":"notifications/initialized"}`, nil, 400, -32600, "6"},

		// Batches: refused whole, whatever the version and content.
		{"batch with a bad version", vBatch, `[` + list + `,{"jsonrpc":"1.0","id":2,"method":"ping"}]`, nil, 400, -32600, "null"},
		{"batch with an unknown method", vBatch, `[` + list + `,{"jsonrpc":"2.0","id":2,"method":"tools/nuke"}]`, nil, 400, -32600, "null"},
		{"batch of one", vBatch, `[` + list + `]`, nil, 400, -32600, "null"},
		{"batch without a version header", "", batchOfPings(2), nil, 400, -32600, "null"},
		{"batch of a batch", vBatch, `[[` + list + `]]`, nil, 400, -32600, "null"},
		{"batch after 2025-03-26", v2025, `[` + list + `]`, nil, 400, -32600, "null"},
		{"long batch", vBatch, batchOfPings(18000), nil, 400, -32600, "null"},

		// Transport-level refusals, answered as JSON-RPC too.
		{"unsupported protocol version", "1999-01-01", list, nil, 400, -32600, "null"},
		{"Accept without text/event-stream", v2025, list, map[string]string{"Accept": "application/json", "MCP-Protocol-Version": v2025}, 400, -32600, "null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := mcpHeaders(tc.version)
			for k, v := range tc.header {
				h[k] = v
			}
			status, header, body := post(t, srv, h, strings.NewReader(tc.body))
			if status != tc.status {
				t.Errorf("status = %d, want %d; body %.300s", status, tc.status, body)
			}
			checkRPCError(t, header, body, tc.code, tc.id)
		})
	}
}

// TestJSONRPCAccepted checks the messages the validation must let through:
// a notification (202, no body), ids of every allowed kind, a body
// without Content-Type.
func TestJSONRPCAccepted(t *testing.T) {
	t.Parallel()
	srv := newServer(t, builtinRegistry(t), testKey)
	tests := []struct {
		name, version, body string
		noContentType       bool
		status              int
		want                string // a fragment of the body
	}{
		{"notification", "2025-06-18", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, 202, ""},
		{"cancel notification", "2025-06-18", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, false, 202, ""},
		{"string id", "2025-06-18", `{"jsonrpc":"2.0","id":"abc","method":"ping"}`, false, 200, `"id":"abc"`},
		{"zero id", "2025-06-18", `{"jsonrpc":"2.0","id":0,"method":"ping"}`, false, 200, `"id":0`},
		{"largest id", "2025-06-18", `{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"}`, false, 200, `"id":9007199254740991`},
		{"smallest id", "2025-06-18", `{"jsonrpc":"2.0","id":-9007199254740991,"method":"ping"}`, false, 200, `"id":-9007199254740991`},
		{"service protocol from an MCP client", "2025-06-18", `{"method":"getTool","params":{"toolId":"hash"},"id":1}`, false, 200, `"data":{"id":"hash"`},
		{"no params", "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, 200, `"tools":[`},
		{"unknown members ignored", "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"ping","extra":true}`, false, 200, `"result":{}`},
		{"no Content-Type", "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, true, 200, `"result":{}`},
		{"no protocol version header", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, false, 200, `"result":{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(http.MethodPost, srv.URL+toolserver.Path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range mcpHeaders(tc.version) {
				req.Header.Set(k, v)
			}
			if !tc.noContentType {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%d %.300s, want %d with %s", resp.StatusCode, body, tc.status, tc.want)
			}
			if tc.status == 202 && len(body) != 0 {
				t.Errorf("202 with a body %q", body)
			}
			if len(body) > 0 && !json.Valid(body) {
				t.Errorf("body %q is not JSON", body)
			}
		})
	}
}

func batchOfPings(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"ping"}`
	}
	return "[" + strings.Join(items, ",") + "]"
}

// methodRewriter renames one JSON-RPC method in the bodies a client sends,
// to make a real client call a method the server does not have.
type methodRewriter struct {
	from, to string
	base     http.RoundTripper
}

func (m methodRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil {
		return m.base.RoundTrip(r)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	b = bytes.ReplaceAll(b, []byte(`"method":"`+m.from+`"`), []byte(`"method":"`+m.to+`"`))
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	if r.Header.Get("Mcp-Method") == m.from {
		r.Header.Set("Mcp-Method", m.to)
	}
	return m.base.RoundTrip(r)
}

// TestMCPClientSurvivesErrors makes the official go-sdk client call a
// method the server does not have, at the protocol versions it speaks: the
// call fails with JSON-RPC's method not found and the session goes on
// working (a plain-text answer made the client close the connection).
func TestMCPClientSurvivesErrors(t *testing.T) {
	t.Parallel()
	srv := newServer(t, builtinRegistry(t), testKey)
	for _, version := range []string{"2025-06-18", "2025-11-25", ""} {
		name := version
		if name == "" {
			name = "latest"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			client := mcp.NewClient(&mcp.Implementation{Name: "toolserver-test", Version: "1.0.0"}, nil)
			transport := &mcp.StreamableClientTransport{
				Endpoint: srv.URL + toolserver.Path,
				HTTPClient: &http.Client{Transport: headerTransport{
					header: http.Header{toolserver.ServiceKeyHeader: {testKey}},
					base:   methodRewriter{from: "prompts/list", to: "prompts/nuke", base: srv.Client().Transport},
				}},
				MaxRetries: -1,
			}
			cs, err := client.Connect(t.Context(), transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			_, err = cs.ListPrompts(t.Context(), nil)
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeMethodNotFound {
				t.Fatalf("unknown method: err = %v, want a JSON-RPC method-not-found error", err)
			}
			for _, leak := range internals {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q carries internals (%q)", err, leak)
				}
			}
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil || len(res.Tools) != builtinCount {
				t.Fatalf("after the error: ListTools = %v, %v; the session should still work", res, err)
			}
		})
	}
}
