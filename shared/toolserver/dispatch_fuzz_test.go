package toolserver_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

const fuzzKey = "fuzz-service-key"

// fuzzRegistry is the built-in catalog without http_request (the one tool
// that reaches the network: no fuzz input may make a request leave this
// process) and with a short timeout, so that a slow input costs seconds,
// not the fuzzing run. llm_generate stays: without a generator it fails
// without any network use.
func fuzzRegistry(tb testing.TB) *tools.Registry {
	tb.Helper()
	var ts []*tools.Tool
	for _, t := range tools.Builtin(tools.Config{}) {
		if t.ID == "http_request" {
			continue
		}
		t.Timeout = 2 * time.Second
		ts = append(ts, t)
	}
	reg, err := tools.NewRegistry(ts...)
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// fuzzDispatchSeeds are request bodies of every method and tool, malformed
// service-protocol requests, and JSON-RPC (MCP) messages (testdata/fuzz has
// more).
var fuzzDispatchSeeds = []string{
	`{"method":"listTools","params":{}}`,
	`{"method":"searchTools","params":{"query":"json"}}`,
	`{"method":"searchTools","params":{"query":"  "}}`,
	`{"method":"getTool","params":{"toolId":"hash"}}`,
	`{"method":"getTool","params":{"toolId":"nope"}}`,
	`{"method":"runTool","params":{"toolId":"json_query","input":{"input":{"items":[{"name":"a","price":3}]},"query":"[.items[] | select(.price > 2) | .name]"}}}`,
	`{"method":"runTool","params":{"toolId":"json_query","input":{"input":null,"query":"error(\"x\")"}}}`,
	`{"method":"runTool","params":{"toolId":"hash","input":{"text":"hello","algorithm":"sha256"}}}`,
	`{"method":"runTool","params":{"toolId":"hash","input":{"text":"hello","algorithm":"crc"}}}`,
	`{"method":"runTool","params":{"toolId":"regex_extract","input":{"text":"a=1, b=22","pattern":"(?P<key>\\w+)=(?P<value>\\d+)"}}}`,
	`{"method":"runTool","params":{"toolId":"regex_extract","input":{"text":"x","pattern":"("}}}`,
	`{"method":"runTool","params":{"toolId":"text_template","input":{"template":"Hello {{.name}}!","values":{"name":"Ada"}}}}`,
	`{"method":"runTool","params":{"toolId":"math_evaluate","input":{"expression":"sqrt(x) + 1","variables":{"x":16}}}}`,
	`{"method":"runTool","params":{"toolId":"csv_parse","input":{"text":"a,b\n1,2"}}}`,
	`{"method":"runTool","params":{"toolId":"html_extract","input":{"html":"<p class=x>hi</p>","selector":"p.x"}}}`,
	`{"method":"runTool","params":{"toolId":"datetime_now","input":{}}}`,
	`{"method":"runTool","params":{"toolId":"llm_generate","input":{"prompt":"hi"}}}`,
	`{"method":"runTool","params":{"toolId":"http_request","input":{"url":"http://127.0.0.1:1/"}}}`,
	`{"method":"runTool","params":{"toolId":"hash","input":"text"}}`,
	`{"method":"runTool","params":{"toolId":"hash"}}`,
	`{"method":"runTool","params":[]}`,
	`{"method":"explode","params":{}}`,
	`{"method":7,"params":{}}`,
	`{"params":{}}`,
	`{"method":"listTools","params":{}} trailing`,
	`[{"method":"listTools","params":{}}]`,
	`"listTools"`,
	``,
	`{`,
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a","algorithm":"md5"}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"json_query","arguments":"x"}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`[{"jsonrpc":"2.0","id":5,"method":"tools/list"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`,
	`{"jsonrpc":"1.0","method":"listTools","params":{}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}},5]`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/nuke","params":{}}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}`,
	`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":5}}`,
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","method":"notifications/nuke"}`,
	`{"id":1,"method":"tools/list"}`,
}

var fuzzCodePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// FuzzDispatch POSTs arbitrary bodies, with the service key, to the tool
// server behind the standard middleware (httpapi.Stack), once as a
// service-protocol client and once as an MCP client (Accept listing
// text/event-stream), and checks:
//   - no panic, and no 5xx but TOOL_EXECUTION_FAILED (500) or TOOL_TIMEOUT
//     (504) for a service-protocol runTool body;
//   - a body answered by the service protocol gets, when it fails, the
//     standard error body: JSON content type, exactly {error, message,
//     code[, details]}, error the status text, code UPPER_SNAKE and among
//     the protocol's codes with its status; a body that is not valid JSON
//     is 400 INVALID_JSON;
//   - a 2xx response to a service-protocol body is 200 {"data": ...} for
//     one of the four methods: listTools lists every tool, searchTools
//     returns tools of the registry, getTool the tool asked for, runTool a
//     result matching the tool's output schema;
//   - a body answered as JSON-RPC (a JSON-RPC message or batch; from the
//     MCP client also malformed JSON, non-objects and objects naming no
//     service method) gets no 5xx, and either 202 with no body or JSON-RPC
//     responses as JSON, each exactly {jsonrpc, id, result | error}, errors
//     with a code and a message free of Go internals, a 4xx a single error.
func FuzzDispatch(f *testing.F) {
	reg := fuzzRegistry(f)
	h := httpapi.Stack(toolserver.Routes(reg, fuzzKey), httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	for _, s := range fuzzDispatchSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, mcpClient := range []bool{false, true} {
			req := httptest.NewRequest(http.MethodPost, toolserver.Path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			if mcpClient {
				req.Header.Set("Accept", "application/json, text/event-stream")
			}
			req.Header.Set(toolserver.ServiceKeyHeader, fuzzKey)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			fuzzCheckAnswer(t, reg, body, mcpClient, rec)
		}
	})
}

// fuzzCheckAnswer checks the answer rec to body (see FuzzDispatch).
func fuzzCheckAnswer(t *testing.T, reg *tools.Registry, body []byte, mcpClient bool, rec *httptest.ResponseRecorder) {
	t.Helper()
	status, out := rec.Code, rec.Body.Bytes()
	// The request as the server reads it: exact member names.
	var msg, params map[string]json.RawMessage
	var method, toolID string
	object := json.Unmarshal(body, &msg) == nil && msg != nil && fuzzIsJSONObject(body)
	_, hasVersion := msg["jsonrpc"]
	_ = json.Unmarshal(msg["method"], &method)
	serviceMethod := method == toolserver.MethodListTools || method == toolserver.MethodSearchTools ||
		method == toolserver.MethodGetTool || method == toolserver.MethodRunTool
	rpc := fuzzLooksLikeJSONRPC(body) || mcpClient && !(object && !hasVersion && serviceMethod)
	service := !rpc && object && json.Unmarshal(msg["method"], &method) == nil
	if service && json.Unmarshal(msg["params"], &params) == nil {
		_ = json.Unmarshal(params["toolId"], &toolID)
	}
	runTool := service && method == toolserver.MethodRunTool

	if rpc {
		fuzzCheckRPCAnswer(t, body, rec)
		return
	}

	if status >= 300 {
		e := fuzzCheckErrorBody(t, body, rec)
		if status >= 500 && !(runTool && (e.Code == tools.CodeToolExecutionFailed && status == 500 || e.Code == tools.CodeToolTimeout && status == 504)) {
			t.Fatalf("body %q: %d %s, a 5xx that is not a runTool failure", body, status, e.Code)
		}
		if !json.Valid(body) && (status != 400 || e.Code != toolserver.CodeInvalidJSON) {
			t.Fatalf("malformed body %q: %d %s, want 400 INVALID_JSON", body, status, e.Code)
		}
		return
	}

	if status != http.StatusOK || !service {
		t.Fatalf("body %q: %d %q, want 200 for a service-protocol request", body, status, fuzzClip(out))
	}
	fuzzCheckJSONContentType(t, rec)
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := fuzzStrictUnmarshal(out, &env); err != nil || len(env.Data) == 0 || env.Data[0] != '{' {
		t.Fatalf("body %q: 200 %q is not {\"data\": {...}} (%v)", body, fuzzClip(out), err)
	}
	switch method {
	case toolserver.MethodListTools, toolserver.MethodSearchTools:
		var res toolserver.ToolsResult
		if err := fuzzStrictUnmarshal(env.Data, &res); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if method == toolserver.MethodListTools && len(res.Tools) != len(reg.List()) {
			t.Fatalf("listTools returned %d tools, the registry has %d", len(res.Tools), len(reg.List()))
		}
		for _, tl := range res.Tools {
			if _, err := reg.Get(tl.ID); err != nil {
				t.Fatalf("%s returned %q, not a tool of the registry", method, tl.ID)
			}
		}
	case toolserver.MethodGetTool:
		var d toolserver.ToolDetail
		if err := fuzzStrictUnmarshal(env.Data, &d); err != nil || d.ID != toolID {
			t.Fatalf("getTool %q returned %q (%v)", toolID, d.ID, err)
		}
	case toolserver.MethodRunTool:
		var r toolserver.RunResult
		if err := fuzzStrictUnmarshal(env.Data, &r); err != nil || r.Result == nil || r.ExecutionTime < 0 {
			t.Fatalf("runTool %q returned %s (%v)", toolID, fuzzClip(env.Data), err)
		}
		if err := reg.ValidateOutput(toolID, r.Result); err != nil {
			t.Fatalf("runTool %q on %q: output %s does not match the output schema: %v", toolID, body, fuzzClip(env.Data), err)
		}
	default:
		t.Fatalf("method %q answered 200", method)
	}
}

// fuzzInternals are fragments of Go internals no JSON-RPC error may carry.
var fuzzInternals = []string{"Go value", "jsonrpc2", "wireDecode", "unmarshal", "json:", ".go:", "goroutine"}

// fuzzCheckRPCAnswer checks a JSON-RPC answer (see FuzzDispatch).
func fuzzCheckRPCAnswer(t *testing.T, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	status, out := rec.Code, rec.Body.Bytes()
	if status >= 500 {
		t.Fatalf("JSON-RPC body %q: status %d %q", body, status, fuzzClip(out))
	}
	if status == http.StatusAccepted {
		if len(out) != 0 {
			t.Fatalf("JSON-RPC body %q: 202 with a body %q", body, fuzzClip(out))
		}
		return
	}
	fuzzCheckJSONContentType(t, rec)
	trimmed := bytes.TrimSpace(out)
	var items []json.RawMessage
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if status >= 300 {
			t.Fatalf("JSON-RPC body %q: %d with a batch answer %q", body, status, fuzzClip(out))
		}
		if err := json.Unmarshal(trimmed, &items); err != nil || len(items) == 0 {
			t.Fatalf("JSON-RPC body %q: answer %q is not a batch (%v)", body, fuzzClip(out), err)
		}
	} else {
		items = []json.RawMessage{trimmed}
	}
	for _, it := range items {
		var resp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *struct {
				Code    int             `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if err := fuzzStrictUnmarshal(it, &resp); err != nil {
			t.Fatalf("JSON-RPC body %q: %d answer %q is not a JSON-RPC response: %v", body, status, fuzzClip(out), err)
		}
		if resp.JSONRPC != "2.0" || len(resp.ID) == 0 || (resp.Error == nil) == (len(resp.Result) == 0) {
			t.Fatalf("JSON-RPC body %q: answer %q needs jsonrpc 2.0, an id, and a result or an error", body, fuzzClip(it))
		}
		if status >= 300 && resp.Error == nil {
			t.Fatalf("JSON-RPC body %q: %d without an error %q", body, status, fuzzClip(it))
		}
		if resp.Error == nil {
			continue
		}
		if resp.Error.Code == 0 || resp.Error.Message == "" {
			t.Fatalf("JSON-RPC body %q: error %q without a code or a message", body, fuzzClip(it))
		}
		for _, leak := range fuzzInternals {
			if strings.Contains(resp.Error.Message, leak) {
				t.Fatalf("JSON-RPC body %q: error message %q carries internals (%q)", body, resp.Error.Message, leak)
			}
		}
	}
}

// fuzzErrorStatus is the status of each error code the tool server may answer
// a service-protocol request with.
var fuzzErrorStatus = map[string]int{
	toolserver.CodeInvalidJSON:    400,
	toolserver.CodeInvalidRequest: 400,
	toolserver.CodeMethodNotFound: 400,
	tools.CodeInvalidParams:       400,
	tools.CodeToolNotFound:        404,
	"PAYLOAD_TOO_LARGE":           413,
	tools.CodeToolExecutionFailed: 500,
	tools.CodeToolTimeout:         504,
}

// fuzzCheckErrorBody checks that rec is the standard error response.
func fuzzCheckErrorBody(t *testing.T, body []byte, rec *httptest.ResponseRecorder) httpapi.ErrorBody {
	t.Helper()
	fuzzCheckJSONContentType(t, rec)
	var e httpapi.ErrorBody
	if err := fuzzStrictUnmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("body %q: %d %q is not the standard error body: %v", body, rec.Code, fuzzClip(rec.Body.Bytes()), err)
	}
	if e.Error != http.StatusText(rec.Code) || e.Message == "" || !fuzzCodePattern.MatchString(e.Code) {
		t.Fatalf("body %q: %d error body %+v", body, rec.Code, e)
	}
	if want, ok := fuzzErrorStatus[e.Code]; !ok || want != rec.Code {
		t.Fatalf("body %q: %d %s, not a code of the protocol with its status", body, rec.Code, e.Code)
	}
	for _, d := range e.Details {
		if d.Message == "" {
			t.Fatalf("body %q: detail %+v without a message", body, d)
		}
	}
	return e
}

func fuzzCheckJSONContentType(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	mt, _, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	if err != nil || mt != "application/json" {
		t.Fatalf("%d response with Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// fuzzStrictUnmarshal decodes exactly one JSON value with no unknown fields.
func fuzzStrictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errs.E("fuzzStrictUnmarshal", errs.Invalid, "", "trailing data")
	}
	return nil
}

// fuzzLooksLikeJSONRPC reports whether body is a JSON-RPC message (an
// object with a jsonrpc member) or a batch whose first element is one: the
// bodies the tool server answers as JSON-RPC whoever sends them.
func fuzzLooksLikeJSONRPC(body []byte) bool {
	isMsg := func(raw []byte) bool {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || !fuzzIsJSONObject(raw) {
			return false
		}
		_, ok := m["jsonrpc"]
		return ok
	}
	trimmed := bytes.Trim(body, " \t\r\n") // JSON whitespace
	switch {
	case strings.HasPrefix(string(trimmed), "{"):
		return isMsg(trimmed)
	case strings.HasPrefix(string(trimmed), "["):
		var batch []json.RawMessage
		return json.Unmarshal(trimmed, &batch) == nil && len(batch) > 0 && isMsg(batch[0])
	}
	return false
}

// fuzzIsJSONObject reports whether b is a JSON object (JSON whitespace
// around it allowed).
func fuzzIsJSONObject(b []byte) bool {
	t := bytes.Trim(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// clip shortens a response body for a failure message.
func fuzzClip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
