package toolserver

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/mcprpc"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
)

// Path is the tool server's endpoint.
const Path = "/mcp"

// Error codes of the service protocol besides the Registry's
// (tools.CodeToolNotFound, tools.CodeInvalidParams, tools.CodeToolTimeout,
// tools.CodeToolExecutionFailed) and the common ones (UNAUTHORIZED,
// INVALID_JSON, PAYLOAD_TOO_LARGE).
const (
	CodeInvalidRequest = "INVALID_REQUEST"
	CodeMethodNotFound = "METHOD_NOT_FOUND"
	CodeUnauthorized   = "UNAUTHORIZED"
	CodeInvalidJSON    = "INVALID_JSON"
)

// Routes returns the tool server's handler (McpFunction): POST /mcp, protected by the service key.
//
// Every request must carry the service key, in X-Service-Key or (for MCP
// clients) as "Authorization: Bearer <key>"; an empty serviceKey refuses
// every request. The body (at most httpapi.MaxBodyBytes) is then
// dispatched: a JSON-RPC message (an object with a jsonrpc member, or a
// batch array of them) is validated and goes to a stateless MCP Streamable
// HTTP handler serving reg's tools, every refusal answered as a JSON-RPC
// error; anything else is the service protocol ({"method", "params"} in,
// {"data"} out), except that an MCP client's body (by its headers) that is
// not JSON, not an object or names no service method is answered as
// JSON-RPC. GET and DELETE /mcp are 405: a stateless
// server offers no standalone SSE stream and no sessions to delete.
//
// With WithBlobs, runTool takes an input by reference (params.inputRef, a
// blob under blob.PrefixCalls) and answers a result larger than
// toolclient.InlineBytes by reference to a caller that takes it
// (params.resultByRef); no input or result may pass
// toolclient.MaxValueBytes.
func Routes(reg *tools.Registry, serviceKey string, opts ...Option) *httpapi.Router {
	s := &server{
		reg:    reg,
		keySet: serviceKey != "",
		key:    sha256.Sum256([]byte(serviceKey)),
		idKey:  toolclient.NewIdentityKey(serviceKey),
		// The MCP server (every tool's schemas marshalled into it) is
		// built on the first JSON-RPC request, not at a cold start.
		mcp: sync.OnceValue(func() http.Handler { return newMCPHandler(reg) }),
		now: time.Now,
	}
	for _, o := range opts {
		o(s)
	}
	rt := httpapi.NewRouter()
	rt.Handle("POST "+Path, s)
	return rt
}

// Option configures Routes.
type Option func(*server)

// WithBlobs lets runTool pass large inputs and results by reference
// through b (blob.PrefixCalls).
func WithBlobs(b blob.Backend) Option { return func(s *server) { s.blobs = b } }

// server is the POST /mcp handler.
type server struct {
	reg    *tools.Registry
	keySet bool
	key    [sha256.Size]byte // SHA-256 of the service key
	idKey  toolclient.IdentityKey
	mcp    func() http.Handler
	now    func() time.Time
	blobs  blob.Backend
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const op = "toolserver.ServeHTTP"
	if !s.authorized(r) {
		httpapi.WriteError(w, r, errs.E(op, errs.Unauthenticated, CodeUnauthorized, "invalid or missing service key"))
		return
	}
	r, err := s.caller(r)
	if err != nil {
		httpapi.WriteError(w, r, errs.E(op, errs.Unauthenticated, CodeUnauthorized, "invalid or expired caller identity").WithCause(err))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpapi.WriteError(w, r, httpapi.BodyTooLarge(op, tooLarge.Limit))
			return
		}
		httpapi.WriteError(w, r, errs.E(op, errs.Invalid, "INVALID_BODY", "could not read the request body").WithCause(err))
		return
	}
	msg, isRPC, err := parseBody(body)
	if err != nil {
		if fromMCPClient(r) {
			// An MCP client's body that is not JSON, or not an object.
			f := mcprpc.Fault{Status: http.StatusBadRequest, Code: mcprpc.CodeInvalidRequest, Message: "a JSON-RPC message must be an object, or a batch array of them"}
			if errs.CodeOf(err) == CodeInvalidJSON {
				f.Code, f.Message = mcprpc.CodeParseError, "the body is not valid JSON"
			}
			mcprpc.WriteFault(w, r, f)
			return
		}
		httpapi.WriteError(w, r, err)
		return
	}
	if isRPC || fromMCPClient(r) && !namesServiceMethod(msg) {
		// An MCP client's object that names no service-protocol method is
		// a JSON-RPC message missing its jsonrpc member.
		s.serveRPC(w, r, body)
		return
	}
	data, err := s.call(r, msg)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.Respond(w, http.StatusOK, data)
}

// serveRPC validates a JSON-RPC body (mcprpc) and hands its canonical
// form to the MCP handler, answering as JSON-RPC whatever either refuses.
func (s *server) serveRPC(w http.ResponseWriter, r *http.Request, body []byte) {
	m, fault := mcprpc.Parse(body, r.Header.Get("MCP-Protocol-Version"))
	if fault != nil {
		mcprpc.WriteFault(w, r, *fault)
		return
	}
	mcprpc.Serve(w, r, m, s.mcp())
}

// authorized reports whether r carries the service key: X-Service-Key when
// present, else an "Authorization: Bearer" credential. The digests of the
// presented and expected keys are compared in constant time, so neither the
// key's content nor its length leaks through timing.
func (s *server) authorized(r *http.Request) bool {
	key, ok := presentedKey(r)
	if !ok || !s.keySet {
		return false
	}
	got := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare(got[:], s.key[:]) == 1
}

// caller returns r with the user its signed identity (IdentityHeader)
// vouches for in its context (tools.WithCaller) and the identity's output
// cap (tools.WithMaxOutput); r itself when it carries none (an anonymous
// call). It fails when the identity is present but malformed, wrongly
// signed or expired (toolclient.IdentityKey.Verify).
func (s *server) caller(r *http.Request) (*http.Request, error) {
	vs := r.Header.Values(toolclient.IdentityHeader)
	if len(vs) == 0 {
		return r, nil
	}
	id, err := s.idKey.Verify(vs[0], s.now())
	if err != nil {
		return r, err
	}
	ctx := tools.WithMaxOutput(tools.WithCaller(r.Context(), id.UserID), id.MaxOutput)
	return r.WithContext(ctx), nil
}

// presentedKey returns the key r presents, if any.
func presentedKey(r *http.Request) (string, bool) {
	if vs := r.Header.Values(ServiceKeyHeader); len(vs) > 0 {
		return vs[0], vs[0] != ""
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}

// parseBody classifies a request body: a JSON-RPC message (an object with
// a jsonrpc member) or batch (an array whose first element is one),
// reported as isRPC and validated later, or an object, returned as its
// members. It fails with INVALID_JSON for malformed JSON and
// INVALID_REQUEST for valid JSON that is neither.
func parseBody(body []byte) (msg map[string]json.RawMessage, isRPC bool, err error) {
	const op = "toolserver.parseBody"
	// JSON whitespace only: bytes.TrimSpace would also drop \v, \f, U+0085
	// and U+00A0, making a body such as "{...}\v" pass for valid JSON.
	trimmed := bytes.Trim(body, " \t\r\n")
	malformed := errs.E(op, errs.Invalid, CodeInvalidJSON, "request body is not valid JSON")
	notObject := errs.E(op, errs.Invalid, CodeInvalidRequest, "request body must be a JSON object with a string method and an object params")
	if len(trimmed) == 0 {
		return nil, false, malformed
	}
	switch trimmed[0] {
	case '{': // the common case: decoding validates the whole body, trailing data included
		if err := json.Unmarshal(trimmed, &msg); err != nil {
			return nil, false, malformed.WithCause(err)
		}
		return msg, isJSONRPC(msg), nil
	case '[':
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			return nil, false, malformed.WithCause(err)
		}
		if len(batch) > 0 {
			var first map[string]json.RawMessage
			if json.Unmarshal(batch[0], &first) == nil && isJSONRPC(first) {
				return nil, true, nil
			}
		}
		return nil, false, notObject
	}
	if !json.Valid(trimmed) {
		return nil, false, malformed
	}
	return nil, false, notObject
}

// call runs one service-protocol request and returns its data.
func (s *server) call(r *http.Request, msg map[string]json.RawMessage) (any, error) {
	const op = "toolserver.call"
	var details errs.FieldErrors
	var method string
	if raw, ok := msg["method"]; !ok || isNull(raw) {
		details.Add("method", "is required")
	} else if json.Unmarshal(raw, &method) != nil {
		details.Add("method", "must be a string")
	} else if method == "" {
		details.Add("method", "must not be empty")
	}
	params, ok := msg["params"]
	switch {
	case !ok || isNull(params):
		details.Add("params", "is required")
	case !isObject(params):
		details.Add("params", "must be an object")
	}
	if len(details) > 0 {
		return nil, invalidRequest(op, details)
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidRequest(op, errs.FieldErrors{{Field: "params", Message: "must be an object"}})
	}

	switch method {
	case MethodListTools:
		return toolsResult(s.reg.List()), nil
	case MethodSearchTools:
		var query string
		stringParam(p, "query", &query, &details)
		if err := invalidParams(op, details); err != nil {
			return nil, err
		}
		return toolsResult(s.reg.Search(query)), nil
	case MethodGetTool:
		var id string
		stringParam(p, "toolId", &id, &details)
		if err := invalidParams(op, details); err != nil {
			return nil, err
		}
		t, err := s.reg.Get(id)
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		return Detail(t), nil
	case MethodRunTool:
		var id string
		stringParam(p, "toolId", &id, &details)
		var input map[string]any
		if raw, ok := p["input"]; ok && !isNull(raw) {
			if !isObject(raw) || json.Unmarshal(raw, &input) != nil {
				details.Add("input", "must be an object")
			}
		}
		var ref string
		var byRef bool
		if raw, ok := p["inputRef"]; ok && !isNull(raw) {
			if json.Unmarshal(raw, &ref) != nil || !strings.HasPrefix(ref, blob.PrefixCalls) || blob.CheckKey(ref) != nil {
				details.Add("inputRef", "must be a key under "+blob.PrefixCalls)
			} else if input != nil {
				details.Add("inputRef", "must not come with input")
			}
		}
		if raw, ok := p["resultByRef"]; ok && !isNull(raw) && json.Unmarshal(raw, &byRef) != nil {
			details.Add("resultByRef", "must be a boolean")
		}
		if err := invalidParams(op, details); err != nil {
			return nil, err
		}
		if ref != "" {
			var err error
			if input, err = s.inputByRef(r, op, ref); err != nil {
				return nil, err
			}
		}
		start := time.Now()
		ctx, report := tools.WithUsageReport(r.Context())
		out, err := s.reg.Run(ctx, id, input)
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		res := RunResult{Result: out, ExecutionTime: time.Since(start).Milliseconds()}
		if u, ok := report.Usage(); ok {
			res.Usage = &toolclient.Usage{ModelID: u.ModelID, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
		}
		return s.resultByRef(r, op, res, byRef)
	default:
		return nil, errs.E(op, errs.Invalid, CodeMethodNotFound, fmt.Sprintf("unknown method %q; the methods are %s, %s, %s and %s",
			truncate(method, 64), MethodListTools, MethodSearchTools, MethodGetTool, MethodRunTool))
	}
}

// inputByRef reads a runTool input passed by reference. Invalid
// INVALID_PARAMS when there is no blob store, no such blob, or not a JSON
// object; TooLarge TOOL_VALUE_TOO_LARGE past toolclient.MaxValueBytes.
func (s *server) inputByRef(r *http.Request, op, key string) (map[string]any, error) {
	if s.blobs == nil {
		return nil, errs.E(op, errs.Invalid, tools.CodeInvalidParams, "this tool server takes no input by reference")
	}
	b, err := toolclient.ReadValue(r.Context(), s.blobs, op, key)
	switch {
	case errs.Is(err, errs.NotFound):
		return nil, errs.E(op, errs.Invalid, tools.CodeInvalidParams, "inputRef names no stored input")
	case err != nil:
		return nil, err
	}
	var input map[string]any
	if json.Unmarshal(b, &input) != nil || input == nil {
		return nil, errs.E(op, errs.Invalid, tools.CodeInvalidParams, "the input by reference is not a JSON object")
	}
	return input, nil
}

// resultByRef answers res, its result by reference when the caller takes
// it and it is larger than toolclient.InlineBytes. A result over
// toolclient.MaxValueBytes is refused (TooLarge TOOL_VALUE_TOO_LARGE):
// no caller may keep it.
func (s *server) resultByRef(r *http.Request, op string, res RunResult, byRef bool) (RunResult, error) {
	b, err := json.Marshal(res.Result)
	if err != nil {
		return RunResult{}, errs.Wrap(op, err)
	}
	if err := toolclient.CheckValueSize(op, "the tool's output", len(b)); err != nil {
		return RunResult{}, err
	}
	if !byRef || s.blobs == nil || len(b) <= toolclient.InlineBytes {
		return res, nil
	}
	key := toolclient.NewValueKey()
	if _, err := blob.PutBytes(r.Context(), s.blobs, key, b, "application/json"); err != nil {
		return RunResult{}, errs.Wrap(op, err)
	}
	res.Result, res.ResultRef = nil, key
	return res, nil
}

// toolsResult is the data of listTools and searchTools.
func toolsResult(ts []*tools.Tool) ToolsResult {
	out := ToolsResult{Tools: make([]ToolSummary, 0, len(ts))}
	for _, t := range ts {
		out.Tools = append(out.Tools, Summary(t))
	}
	return out
}

// stringParam reads the required, non-blank string param name into dst,
// recording a problem in details.
func stringParam(p map[string]json.RawMessage, name string, dst *string, details *errs.FieldErrors) {
	raw, ok := p[name]
	switch {
	case !ok || isNull(raw):
		details.Add(name, "is required")
	case json.Unmarshal(raw, dst) != nil:
		details.Add(name, "must be a string")
	case strings.TrimSpace(*dst) == "":
		details.Add(name, "must not be empty")
	}
}

// invalidRequest is the INVALID_REQUEST error listing details.
func invalidRequest(op string, details errs.FieldErrors) error {
	return &errs.Error{Op: op, Kind: errs.Invalid, Code: CodeInvalidRequest, Message: fieldsMessage("invalid request", details), Details: details}
}

// invalidParams is the INVALID_PARAMS error listing details, or nil when
// there are none.
func invalidParams(op string, details errs.FieldErrors) error {
	if len(details) == 0 {
		return nil
	}
	return &errs.Error{Op: op, Kind: errs.Invalid, Code: tools.CodeInvalidParams, Message: fieldsMessage("invalid params", details), Details: details}
}

func fieldsMessage(prefix string, details errs.FieldErrors) string {
	parts := make([]string, len(details))
	for i, d := range details {
		parts[i] = d.Field + ": " + d.Message
	}
	return prefix + ": " + strings.Join(parts, "; ")
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// truncate shortens s to at most n runes.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
