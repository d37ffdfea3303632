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
}

var fuzzCodePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// FuzzDispatch POSTs arbitrary bodies, with the service key, to the tool
// server behind the standard middleware (httpapi.Stack) and checks:
//   - no panic, and no 5xx but TOOL_EXECUTION_FAILED (500) or TOOL_TIMEOUT
//     (504) for a service-protocol runTool body;
//   - every other non-2xx response to a body that is not JSON-RPC is the
//     standard error body: JSON content type, exactly {error, message,
//     code[, details]}, error the status text, code UPPER_SNAKE and among
//     the protocol's codes with its status; a body that is not valid JSON
//     is 400 INVALID_JSON;
//   - a 2xx response to a service-protocol body is 200 {"data": ...} for
//     one of the four methods: listTools lists every tool, searchTools
//     returns tools of the registry, getTool the tool asked for, runTool a
//     result matching the tool's output schema;
//   - a JSON-RPC body may go to the MCP SDK, whose errors may be plain
//     text, but it never gets a 5xx and its non-empty 2xx bodies are JSON.
func FuzzDispatch(f *testing.F) {
	reg := fuzzRegistry(f)
	h := httpapi.Stack(toolserver.Routes(reg, fuzzKey), httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	for _, s := range fuzzDispatchSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, toolserver.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(toolserver.ServiceKeyHeader, fuzzKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		status, out := rec.Code, rec.Body.Bytes()
		rpc := fuzzLooksLikeJSONRPC(body)
		// The request as the server reads it: exact member names.
		var msg, params map[string]json.RawMessage
		var method, toolID string
		service := !rpc && json.Unmarshal(body, &msg) == nil && json.Unmarshal(msg["method"], &method) == nil
		if service && json.Unmarshal(msg["params"], &params) == nil {
			_ = json.Unmarshal(params["toolId"], &toolID)
		}
		runTool := service && method == toolserver.MethodRunTool

		if rpc {
			if status >= 500 {
				t.Fatalf("JSON-RPC body %q: status %d %q", body, status, fuzzClip(out))
			}
			if status < 300 && len(bytes.TrimSpace(out)) > 0 && !json.Valid(out) {
				t.Fatalf("JSON-RPC body %q: %d with a body that is not JSON: %q", body, status, fuzzClip(out))
			}
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
	})
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

// fuzzLooksLikeJSONRPC reports whether body is a JSON-RPC 2.0 message or a
// batch whose first element is one: the bodies the tool server may hand to
// the MCP SDK.
func fuzzLooksLikeJSONRPC(body []byte) bool {
	isMsg := func(raw []byte) bool {
		var m map[string]json.RawMessage
		var v string
		return json.Unmarshal(raw, &m) == nil && json.Unmarshal(m["jsonrpc"], &v) == nil && v == "2.0"
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

// clip shortens a response body for a failure message.
func fuzzClip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
