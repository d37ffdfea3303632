// Package mcprpc is the JSON-RPC hardening in front of the go-sdk's MCP
// Streamable HTTP handlers that the service serves (the tool server's
// POST /mcp and the gateway's POST /api/mcp): one message is validated
// before the SDK sees it and handed over in a canonical form, and the
// SDK's answer is checked before it is sent, so that every refusal is a
// JSON-RPC error response with Content-Type application/json, with the
// request's id echoed exactly (or null), never plain text and never Go
// internals.
//
// The rules: a body that is not valid JSON is a parse error (-32700,
// 400); a batch (an array) is refused whole, whatever it holds (-32600,
// 400, ErrBatch); a message must be an object with jsonrpc "2.0", an id
// that is a string or an integer within ±(2^53-1) when present (the SDK
// decodes ids as float64 and would answer with another id), a non-empty
// string method the SDK serves (Methods), an id for a request and none
// for a notification, and params that are an object when present and
// present when the method needs them; a response is refused (neither
// server sends requests). Invalid requests are -32600 with 400; an
// unknown method is -32601 and invalid params -32602, for a call with
// the status of a JSON-RPC response (200, or 404 and 400 from protocol
// 2026-07-28, SEP-2575), for a notification 400. The SDK's plain-text
// refusals become JSON-RPC errors with id null and the same status, and
// its error messages that name Go types are replaced by generic ones.
package mcprpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
)

// JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// ErrBatch is the message of the JSON-RPC error a batch is answered
// with.
const ErrBatch = "JSON-RPC batches are not supported: send one message per request"

// maxSafeID bounds integer ids: the MCP SDK decodes ids as float64, which
// holds integers exactly only up to 2^53-1; a larger id would come back
// changed and the client could not match the answer.
const maxSafeID = 1<<53 - 1

// versionErrorStatus is the MCP protocol version from which an unknown
// method is 404 and invalid params 400.
const versionErrorStatus = "2026-07-28"

// method describes a method the SDK's server serves.
type method struct {
	notification bool // sent without an id, answered with 202
	needsParams  bool
}

// methods are the messages taken: those the go-sdk (v1.8.0) server
// serves, except subscriptions/listen, which holds an SSE stream open
// until the client leaves and has nothing to deliver here. Anything else
// is answered "method not found" before the SDK sees it.
var methods = map[string]method{
	"initialize":                       {needsParams: true},
	"ping":                             {},
	"server/discover":                  {},
	"tools/list":                       {},
	"tools/call":                       {needsParams: true},
	"prompts/list":                     {},
	"prompts/get":                      {needsParams: true},
	"resources/list":                   {},
	"resources/templates/list":         {},
	"resources/read":                   {needsParams: true},
	"resources/subscribe":              {needsParams: true},
	"resources/unsubscribe":            {needsParams: true},
	"completion/complete":              {needsParams: true},
	"logging/setLevel":                 {needsParams: true},
	"notifications/initialized":        {notification: true},
	"notifications/cancelled":          {notification: true},
	"notifications/progress":           {notification: true, needsParams: true},
	"notifications/roots/list_changed": {notification: true},
}

// Fault is a JSON-RPC error answer and its HTTP status.
type Fault struct {
	Status  int
	ID      json.RawMessage // nil: null
	Code    int
	Message string
}

// Message is a validated JSON-RPC request or notification.
type Message struct {
	ID     json.RawMessage // canonical; nil for a notification
	Method string
	Params json.RawMessage
	// Body is the canonical message handed to the SDK: unknown members
	// dropped, the id in canonical form.
	Body []byte
}

// wire is the canonical form of a message.
type wire struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// errorResponse is the body of a JSON-RPC error answer.
type errorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   errorObject     `json:"error"`
}

type errorObject struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Parse validates a body holding one JSON-RPC message and returns it,
// or the fault to answer instead. version is the request's
// MCP-Protocol-Version header.
func Parse(body []byte, version string) (Message, *Fault) {
	// JSON whitespace only: bytes.TrimSpace would also drop \v, \f,
	// U+0085 and U+00A0.
	trimmed := bytes.Trim(body, " \t\r\n")
	if len(trimmed) == 0 || !json.Valid(trimmed) {
		return Message{}, &Fault{Status: http.StatusBadRequest, Code: CodeParseError, Message: "the body is not valid JSON"}
	}
	if trimmed[0] == '[' {
		return Message{}, &Fault{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: ErrBatch}
	}
	req, f := parseMessage(trimmed, version)
	if f != nil {
		return Message{}, f
	}
	canonical, err := json.Marshal(req)
	if err != nil {
		return Message{}, &Fault{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "the message could not be read"}
	}
	return Message{ID: req.ID, Method: req.Method, Params: req.Params, Body: canonical}, nil
}

// integerID matches a JSON integer without fraction or exponent.
// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var integerID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`) })

// parseMessage validates one message (see the package's rules).
func parseMessage(raw json.RawMessage, version string) (wire, *Fault) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return wire{}, &Fault{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "a JSON-RPC message must be an object"}
	}
	idRaw, hasID := m["id"]
	id, idOK := validID(idRaw)
	fault := func(code int, format string, args ...any) *Fault {
		f := &Fault{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
		if idOK {
			f.ID = id
		}
		return f
	}

	var tag string
	if v, ok := m["jsonrpc"]; !ok || json.Unmarshal(v, &tag) != nil || tag != "2.0" {
		return wire{}, fault(CodeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	if hasID && !idOK {
		return wire{}, fault(CodeInvalidRequest, "id must be a string or an integer from -(2^53-1) to 2^53-1")
	}
	methodRaw, ok := m["method"]
	if !ok {
		if _, isResult := m["result"]; isResult || m["error"] != nil {
			return wire{}, fault(CodeInvalidRequest, "this server sends no requests, so it takes no responses")
		}
		return wire{}, fault(CodeInvalidRequest, "method is required")
	}
	var name string
	if json.Unmarshal(methodRaw, &name) != nil || name == "" {
		return wire{}, fault(CodeInvalidRequest, "method must be a non-empty string")
	}
	params, hasParams := m["params"]
	if hasParams {
		switch p := bytes.TrimSpace(params); {
		case len(p) > 0 && p[0] == '[':
		case len(p) > 0 && p[0] == '{':
		default:
			return wire{}, fault(CodeInvalidRequest, "params must be an object")
		}
	}

	spec, known := methods[name]
	// A call the server can read gets its answer with the status of a
	// JSON-RPC response (SEP-2575 from 2026-07-28); a notification it
	// cannot take is refused with 400.
	callStatus := func(from2026 int) int {
		switch {
		case !hasID:
			return http.StatusBadRequest
		case version >= versionErrorStatus:
			return from2026
		}
		return http.StatusOK
	}
	switch {
	case !known:
		f := fault(CodeMethodNotFound, "method %q not found", truncate(name, 64))
		f.Status = callStatus(http.StatusNotFound)
		return wire{}, f
	case spec.notification && hasID:
		return wire{}, fault(CodeInvalidRequest, "%s is a notification and takes no id", name)
	case !spec.notification && !hasID:
		return wire{}, fault(CodeInvalidRequest, "%s is a request and needs an id", name)
	case hasParams && bytes.TrimSpace(params)[0] == '[':
		f := fault(CodeInvalidParams, "params of %s must be an object", name)
		f.Status = callStatus(http.StatusBadRequest)
		return wire{}, f
	case spec.needsParams && !hasParams:
		f := fault(CodeInvalidParams, "%s needs params", name)
		f.Status = callStatus(http.StatusBadRequest)
		return wire{}, f
	}
	req := wire{JSONRPC: "2.0", Method: name, Params: params}
	if hasID {
		req.ID = id
	}
	return req, nil
}

// validID returns raw in canonical form if it is a JSON string or an
// integer within ±maxSafeID: ids equal for the SDK ("a" and "\u0061", 0
// and -0) get the same bytes.
func validID(raw json.RawMessage) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		canonical, err := json.Marshal(s)
		return canonical, err == nil
	}
	if !integerID().Match(raw) {
		return nil, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > maxSafeID || n < -maxSafeID {
		return nil, false
	}
	return json.RawMessage(strconv.FormatInt(n, 10)), true
}

// WriteFault answers f as a JSON-RPC error response.
func WriteFault(w http.ResponseWriter, r *http.Request, f Fault) {
	id := f.ID
	if id == nil {
		id = json.RawMessage("null")
	}
	logging.FromContext(r.Context()).DebugContext(r.Context(), "JSON-RPC request rejected", "status", f.Status, "rpcCode", f.Code, "message", f.Message)
	httpapi.WriteJSON(w, f.Status, errorResponse{JSONRPC: "2.0", ID: id, Error: errorObject{Code: f.Code, Message: f.Message}})
}

// Serve hands m's canonical body to h (an SDK Streamable HTTP handler)
// and sends its answer checked: a JSON answer or a refusal is buffered,
// its plain-text refusals turned into JSON-RPC errors and its messages
// naming Go internals replaced; an SSE stream (a 2xx text/event-stream)
// is passed through as it is written, flushes included. A request
// without Content-Type is read as JSON.
func Serve(w http.ResponseWriter, r *http.Request, m Message, h http.Handler) {
	r.Body = io.NopCloser(bytes.NewReader(m.Body))
	r.ContentLength = int64(len(m.Body))
	if strings.TrimSpace(r.Header.Get("Content-Type")) == "" {
		// As on the REST side, a body without Content-Type is read as
		// JSON (a declared other type never gets here: httpapi.Stack
		// answers it 415).
		r.Header.Set("Content-Type", "application/json")
	}
	a := &answer{w: w}
	h.ServeHTTP(a, r)
	a.send(r, m)
}

// answer buffers the SDK's answer so that it can be checked before it is
// sent, unless it is an SSE stream. Header is the real writer's.
type answer struct {
	w      http.ResponseWriter
	status int
	stream bool
	body   bytes.Buffer
}

func (a *answer) Header() http.Header { return a.w.Header() }

func (a *answer) WriteHeader(code int) {
	if a.status != 0 {
		return
	}
	a.status = code
	mediaType, _, _ := mime.ParseMediaType(a.w.Header().Get("Content-Type"))
	if code < 400 && mediaType == "text/event-stream" {
		a.stream = true
		a.w.WriteHeader(code)
	}
}

func (a *answer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.WriteHeader(http.StatusOK)
	}
	if a.stream {
		return a.w.Write(b)
	}
	return a.body.Write(b)
}

// FlushError flushes a stream (http.ResponseController); a buffered
// answer is sent whole at the end.
func (a *answer) FlushError() error {
	if !a.stream {
		return nil
	}
	return http.NewResponseController(a.w).Flush()
}

// sdkRefusals are the plain-text refusals of the SDK whose text is safe
// and useful to pass on; any other is replaced by a generic message.
var sdkRefusals = []string{
	"Bad Request: Unsupported protocol version",
	"Accept must contain",
	"Content-Type must be",
	"JSON-RPC batching is not supported",
	"can't send Last-Event-ID",
}

// send writes the buffered answer: a plain-text refusal of the SDK
// becomes a JSON-RPC error (id null: it concerns the HTTP request, not a
// call) with the same status, and SDK error messages that carry Go
// internals are replaced; anything else is sent as it is.
func (a *answer) send(r *http.Request, m Message) {
	if a.stream {
		return
	}
	w := a.w
	status := a.status
	if status == 0 {
		status = http.StatusOK
	}
	body := a.body.Bytes()
	mediaType, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
	if status >= 400 && mediaType != "application/json" {
		text := strings.TrimSpace(string(body))
		message := fmt.Sprintf("the MCP transport refused the request (%d %s)", status, http.StatusText(status))
		for _, prefix := range sdkRefusals {
			if strings.HasPrefix(text, prefix) && len(text) <= 300 {
				message = text
			}
		}
		code := CodeInvalidRequest
		if status >= 500 {
			code = CodeInternalError
		}
		w.Header().Del("Content-Length")
		WriteFault(w, r, Fault{Status: status, Code: code, Message: message})
		return
	}
	if mediaType == "application/json" {
		body = Sanitize(body, m.Method)
		w.Header().Del("Content-Length")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// leaks are fragments of SDK error messages that expose Go internals
// (decoding errors name Go types and packages).
var leaks = []string{"Go value", "unmarshal", "json:", "mcp.", "jsonrpc2", ".go:"}

// Sanitize replaces, in a JSON-RPC response (or batch of them), every
// error message that carries Go internals with a generic message for its
// code, naming method (the request's, "" when unknown) for invalid params.
// Other bytes are kept.
func Sanitize(body []byte, method string) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(trimmed, &items) != nil {
			return body
		}
		changed := false
		for i, it := range items {
			if clean, ok := sanitizeOne(it, method); ok {
				items[i], changed = clean, true
			}
		}
		if !changed {
			return body
		}
		if out, err := json.Marshal(items); err == nil {
			return out
		}
		return body
	}
	if clean, ok := sanitizeOne(trimmed, method); ok {
		return clean
	}
	return body
}

// sanitizeOne returns resp with a generic error message, and true, when
// its error message carries Go internals.
func sanitizeOne(resp json.RawMessage, method string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(resp, &m) != nil || m["error"] == nil {
		return nil, false
	}
	var e errorObject
	if json.Unmarshal(m["error"], &e) != nil {
		return nil, false
	}
	leaky := false
	for _, l := range leaks {
		leaky = leaky || strings.Contains(e.Message, l)
	}
	if !leaky {
		return nil, false
	}
	switch {
	case e.Code == CodeInvalidParams || strings.Contains(e.Message, "unmarshal"):
		// A decoding error (the SDK sends some with code 0).
		e.Code, e.Message = CodeInvalidParams, "invalid params"
		if method != "" {
			e.Message = "invalid params for " + method + ": they do not match the method's schema"
		}
	case e.Code == CodeMethodNotFound:
		e.Message = "method not found"
	case e.Code == CodeInvalidRequest:
		e.Message = "invalid request"
	default:
		if e.Code == 0 {
			e.Code = CodeInternalError
		}
		e.Message = "internal error"
	}
	errJSON, err := json.Marshal(e)
	if err != nil {
		return nil, false
	}
	m["error"] = errJSON
	out, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	return out, true
}

// truncate shortens s to at most n runes.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
