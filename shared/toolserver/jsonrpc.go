package toolserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
)

// JSON-RPC 2.0 error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcInternalError  = -32603
)

// maxSafeID bounds integer ids: the MCP SDK decodes ids as float64, which
// holds integers exactly only up to 2^53-1; a larger id would come back
// changed and the client could not match the answer.
const maxSafeID = 1<<53 - 1

// versionErrorStatus is the MCP protocol version from which an unknown
// method is 404 and invalid params 400.
const versionErrorStatus = "2026-07-28"

// mcpMethod describes a method the MCP handler serves.
type mcpMethod struct {
	notification bool // sent without an id, answered with 202
	needsParams  bool
}

// mcpMethods are the messages the MCP handler takes: those the go-sdk
// (v1.8.0) server serves, except subscriptions/listen, which holds an SSE
// stream open until the client leaves and has nothing to deliver here.
// Anything else is answered "method not found" before the SDK sees it.
var mcpMethods = map[string]mcpMethod{
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

// rpcFault is a JSON-RPC error answer and its HTTP status.
type rpcFault struct {
	status  int
	id      json.RawMessage // nil: null
	code    int
	message string
}

// rpcRequest is a validated JSON-RPC request or notification, in the
// canonical form handed to the SDK.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// rpcErrorResponse is the body of a JSON-RPC error answer.
type rpcErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcErrorObject  `json:"error"`
}

type rpcErrorObject struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// isJSONRPC reports whether msg is meant as a JSON-RPC message: it has a
// jsonrpc member (of any value; a wrong one is answered as JSON-RPC).
func isJSONRPC(msg map[string]json.RawMessage) bool {
	_, ok := msg["jsonrpc"]
	return ok
}

// namesServiceMethod reports whether msg's method is one of the service
// protocol's.
func namesServiceMethod(msg map[string]json.RawMessage) bool {
	var method string
	if json.Unmarshal(msg["method"], &method) != nil {
		return false
	}
	switch method {
	case MethodListTools, MethodSearchTools, MethodGetTool, MethodRunTool:
		return true
	}
	return false
}

// fromMCPClient reports whether r's headers mark it as an MCP client's:
// an MCP-Protocol-Version header, or an Accept that lists
// text/event-stream, which the Streamable HTTP transport asks of every
// POST. A body from such a client that is not valid JSON, or not an
// object, is answered as JSON-RPC.
func fromMCPClient(r *http.Request) bool {
	if r.Header.Get("MCP-Protocol-Version") != "" {
		return true
	}
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if mt, _, err := mime.ParseMediaType(part); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// parseRPC validates a JSON-RPC body (already known to be valid JSON)
// for the MCP handler and returns the canonical body to hand it, the
// call's method by id, or the fault to answer instead. version is the
// request's MCP-Protocol-Version header. A batch (an array) is refused
// whatever the version, 400 with a JSON-RPC invalid request: the versions
// after 2025-03-26 have none, and a batch let one request start any
// number of calls and answers.
func parseRPC(body []byte, version string) (canonical []byte, calls map[string]string, fault *rpcFault) {
	trimmed := bytes.Trim(body, " \t\r\n")
	if trimmed[0] == '[' {
		return nil, nil, &rpcFault{status: http.StatusBadRequest, code: rpcInvalidRequest, message: ErrBatch}
	}
	req, f := parseRPCMessage(trimmed, version)
	if f != nil {
		return nil, nil, f
	}
	calls = map[string]string{}
	if req.ID != nil {
		calls[string(req.ID)] = req.Method
	}
	canonical, err := json.Marshal(req)
	if err != nil {
		return nil, nil, &rpcFault{status: http.StatusBadRequest, code: rpcInvalidRequest, message: "the message could not be read"}
	}
	return canonical, calls, nil
}

// ErrBatch is the message of the JSON-RPC error a batch is answered
// with.
const ErrBatch = "JSON-RPC batches are not supported: send one message per request"

// integerID matches a JSON integer without fraction or exponent.
// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var integerID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`) })

// parseRPCMessage validates one message: jsonrpc "2.0"; an id, when
// present, a string or an integer within ±(2^53-1) (never null, as MCP
// asks); a known method, a request with an id and a notification without
// one; params, when present, an object, and present when the method needs
// them. Responses are refused: this server sends no requests.
func parseRPCMessage(raw json.RawMessage, version string) (rpcRequest, *rpcFault) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return rpcRequest{}, &rpcFault{status: http.StatusBadRequest, code: rpcInvalidRequest, message: "a JSON-RPC message must be an object"}
	}
	idRaw, hasID := m["id"]
	id, idOK := validID(idRaw)
	fault := func(code int, format string, args ...any) *rpcFault {
		f := &rpcFault{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
		if idOK {
			f.id = id
		}
		return f
	}

	var tag string
	if v, ok := m["jsonrpc"]; !ok || json.Unmarshal(v, &tag) != nil || tag != "2.0" {
		return rpcRequest{}, fault(rpcInvalidRequest, `jsonrpc must be "2.0"`)
	}
	if hasID && !idOK {
		return rpcRequest{}, fault(rpcInvalidRequest, "id must be a string or an integer from -(2^53-1) to 2^53-1")
	}
	methodRaw, ok := m["method"]
	if !ok {
		if _, isResult := m["result"]; isResult || m["error"] != nil {
			return rpcRequest{}, fault(rpcInvalidRequest, "this server sends no requests, so it takes no responses")
		}
		return rpcRequest{}, fault(rpcInvalidRequest, "method is required")
	}
	var method string
	if json.Unmarshal(methodRaw, &method) != nil || method == "" {
		return rpcRequest{}, fault(rpcInvalidRequest, "method must be a non-empty string")
	}
	params, hasParams := m["params"]
	if hasParams {
		switch p := bytes.TrimSpace(params); {
		case len(p) > 0 && p[0] == '[':
		case len(p) > 0 && p[0] == '{':
		default:
			return rpcRequest{}, fault(rpcInvalidRequest, "params must be an object")
		}
	}

	spec, known := mcpMethods[method]
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
		f := fault(rpcMethodNotFound, "method %q not found", truncate(method, 64))
		f.status = callStatus(http.StatusNotFound)
		return rpcRequest{}, f
	case spec.notification && hasID:
		return rpcRequest{}, fault(rpcInvalidRequest, "%s is a notification and takes no id", method)
	case !spec.notification && !hasID:
		return rpcRequest{}, fault(rpcInvalidRequest, "%s is a request and needs an id", method)
	case hasParams && bytes.TrimSpace(params)[0] == '[':
		f := fault(rpcInvalidParams, "params of %s must be an object", method)
		f.status = callStatus(http.StatusBadRequest)
		return rpcRequest{}, f
	case spec.needsParams && !hasParams:
		f := fault(rpcInvalidParams, "%s needs params", method)
		f.status = callStatus(http.StatusBadRequest)
		return rpcRequest{}, f
	}
	req := rpcRequest{JSONRPC: "2.0", Method: method, Params: params}
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

// writeRPCFault answers f as a JSON-RPC error response.
func writeRPCFault(w http.ResponseWriter, r *http.Request, f rpcFault) {
	id := f.id
	if id == nil {
		id = json.RawMessage("null")
	}
	logging.FromContext(r.Context()).DebugContext(r.Context(), "JSON-RPC request rejected", "status", f.status, "rpcCode", f.code, "message", f.message)
	httpapi.WriteJSON(w, f.status, rpcErrorResponse{JSONRPC: "2.0", ID: id, Error: rpcErrorObject{Code: f.code, Message: f.message}})
}

// rpcAnswer buffers the MCP handler's answer (one JSON body: the handler
// serves JSON, not SSE) so that it can be checked before it is sent.
// Header is the real writer's.
type rpcAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *rpcAnswer) Header() http.Header { return a.header }

func (a *rpcAnswer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

func (a *rpcAnswer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
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

// send writes the buffered answer to w: a plain-text refusal of the SDK
// becomes a JSON-RPC error (id null: it concerns the HTTP request, not a
// call) with the same status, and SDK error messages that carry Go
// internals are replaced; anything else is sent as it is.
func (a *rpcAnswer) send(w http.ResponseWriter, r *http.Request, calls map[string]string) {
	status := a.status
	if status == 0 {
		status = http.StatusOK
	}
	body := a.body.Bytes()
	mediaType, _, _ := mime.ParseMediaType(a.header.Get("Content-Type"))
	if status >= 400 && mediaType != "application/json" {
		text := strings.TrimSpace(string(body))
		message := fmt.Sprintf("the MCP transport refused the request (%d %s)", status, http.StatusText(status))
		for _, prefix := range sdkRefusals {
			if strings.HasPrefix(text, prefix) && len(text) <= 300 {
				message = text
			}
		}
		code := rpcInvalidRequest
		if status >= 500 {
			code = rpcInternalError
		}
		a.header.Del("Content-Length")
		writeRPCFault(w, r, rpcFault{status: status, code: code, message: message})
		return
	}
	if mediaType == "application/json" {
		body = sanitizeRPCErrors(body, calls)
		a.header.Del("Content-Length")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// leaks are fragments of SDK error messages that expose Go internals
// (decoding errors name Go types and packages).
var leaks = []string{"Go value", "unmarshal", "json:", "mcp.", "jsonrpc2", ".go:"}

// sanitizeRPCErrors replaces, in a JSON-RPC response or batch of them,
// every error message that carries Go internals with a generic message for
// its code (naming the call's method when known). Other bytes are kept.
func sanitizeRPCErrors(body []byte, calls map[string]string) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(trimmed, &items) != nil {
			return body
		}
		changed := false
		for i, it := range items {
			if clean, ok := sanitizeRPCError(it, calls); ok {
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
	if clean, ok := sanitizeRPCError(trimmed, calls); ok {
		return clean
	}
	return body
}

// sanitizeRPCError returns resp with a generic error message, and true,
// when its error message carries Go internals.
func sanitizeRPCError(resp json.RawMessage, calls map[string]string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(resp, &m) != nil || m["error"] == nil {
		return nil, false
	}
	var e rpcErrorObject
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
	method := calls[string(bytes.TrimSpace(m["id"]))]
	switch {
	case e.Code == rpcInvalidParams || strings.Contains(e.Message, "unmarshal"):
		// A decoding error (the SDK sends some with code 0).
		e.Code, e.Message = rpcInvalidParams, "invalid params"
		if method != "" {
			e.Message = "invalid params for " + method + ": they do not match the method's schema"
		}
	case e.Code == rpcMethodNotFound:
		e.Message = "method not found"
	case e.Code == rpcInvalidRequest:
		e.Message = "invalid request"
	default:
		if e.Code == 0 {
			e.Code = rpcInternalError
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
