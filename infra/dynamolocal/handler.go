package dynamolocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

const (
	targetPrefix  = "DynamoDB_20120810."
	errTypePrefix = "com.amazonaws.dynamodb.v20120810#"
	amzJSON       = "application/x-amz-json-1.0"
	// maxBodyBytes bounds a request body; DynamoDB's own limit is 16 MB.
	maxBodyBytes = 16 << 20
)

// legacyParams lists pre-expression request parameters that minidyn silently
// ignores. They are rejected loudly instead of giving wrong answers
// (KeyConditions on Query is translated, see rewriteKeyConditions).
var legacyParams = map[string][]string{
	"Query":      {"QueryFilter", "AttributesToGet", "ConditionalOperator"},
	"Scan":       {"ScanFilter", "AttributesToGet", "ConditionalOperator"},
	"GetItem":    {"AttributesToGet"},
	"PutItem":    {"Expected", "ConditionalOperator"},
	"DeleteItem": {"Expected", "ConditionalOperator"},
	"UpdateItem": {"Expected", "AttributeUpdates", "ConditionalOperator"},
}

// apiError is an error answered to the client as an AWS JSON 1.0 error.
type apiError struct {
	status   int
	typ, msg string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func validation(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "ValidationException", msg: fmt.Sprintf(format, args...)}
}

func notFound(table string) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "ResourceNotFoundException",
		msg: fmt.Sprintf("Requested resource not found: Table: %s not found", table)}
}

// reply is a buffered backend (or synthesized) HTTP response.
type reply struct {
	status      int
	contentType string
	body        []byte
}

func jsonReply(v any) (*reply, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return &reply{status: http.StatusOK, contentType: amzJSON, body: b}, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("dynamolocal: marshal %T: %v", v, err))
	}
	return b
}

// decodeRequest decodes a request body; failures are SerializationExceptions.
func decodeRequest(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &apiError{status: http.StatusBadRequest, typ: "SerializationException", msg: err.Error()}
	}
	return nil
}

// handler is the translation layer in front of the backend.
type handler struct {
	backend http.Handler
	// lock orders access to the items and to minidyn: every write (and
	// anything else that changes minidyn's state) holds it exclusively,
	// reads share it.
	lock sync.RWMutex
	// indexes are the tables' items with their ordered key indexes
	// (index.go): the store itself, minidyn's tables stay empty;
	// guarded by lock.
	indexes map[string]*tableIndex
	// journal, when the engine has a data file, receives every write
	// (journal.go); nil otherwise, and while the journal is replayed.
	journal *journal
	mu      sync.Mutex // guards tables and stopped
	// tables is what the layer knows about tables it saw created.
	tables   map[string]*tableInfo
	stopped  bool           // set by stop: new requests are refused
	inflight sync.WaitGroup // requests being served
	// itemsRead counts the stored items read to answer Query and Scan.
	itemsRead atomic.Int64
	// probe tells that the backend may emulate a failure (probeFailure):
	// set by NewHandler, whose caller holds the backend, and by
	// Engine.WithBackend, the one way to change an engine's backend.
	probe atomic.Bool
}

// enter registers a request; false once stop was called.
func (h *handler) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	h.inflight.Add(1)
	return true
}

// stop refuses new requests and waits for the running ones.
func (h *handler) stop() {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.inflight.Wait()
}

// NewHandler returns the translation layer in front of backend (normally a
// *server.Server from github.com/truora/minidyn/server). The handler answers
// the DynamoDB JSON 1.0 protocol; see the package documentation for what it
// translates. It never fails to construct; request-level problems are
// answered as AWS JSON errors.
func NewHandler(backend http.Handler) http.Handler {
	h := newHandler(backend)
	h.probe.Store(true)
	return h
}

func newHandler(backend http.Handler) *handler {
	return &handler{backend: backend, tables: map[string]*tableInfo{}, indexes: map[string]*tableIndex{}}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.enter() {
		writeError(w, &apiError{status: http.StatusServiceUnavailable, typ: "ServiceUnavailable", msg: "the local engine is shutting down"})
		return
	}
	defer h.inflight.Done()
	if r.Method != http.MethodPost {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, typ: "UnknownOperationException", msg: "only POST is supported"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		writeError(w, &apiError{status: status, typ: "ValidationException",
			msg: fmt.Sprintf("read request body (limit %d bytes): %v", maxBodyBytes, err)})
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	if !ok {
		writeError(w, &apiError{status: http.StatusBadRequest, typ: "UnknownOperationException",
			msg: fmt.Sprintf("unknown X-Amz-Target %q", r.Header.Get("X-Amz-Target"))})
		return
	}
	rep, err := h.dispatch(r.Context(), op, body, regionOf(r))
	if err == nil {
		err = h.settle()
	}
	if err != nil {
		writeError(w, err)
		return
	}
	rep = finish(op, rep)
	w.Header().Set("Content-Type", rep.contentType)
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// settle returns once every write the request may have seen is on disk:
// a write is applied, under the lock, before its journal record is
// synced (writes.go), so a read (or a condition that failed on a write's
// item) served meanwhile can see it. Answering only after the sync means
// that nothing a client saw, whatever it asked, is lost by a crash
// (kill -9) that the journal would otherwise survive. The last record
// appended after the request was served covers everything it saw
// (records are appended under the lock, in the order their writes were
// applied); with nothing pending this is one check. An engine without a
// data file has no journal and nothing to wait for.
func (h *handler) settle() error {
	j := h.journal
	if j == nil {
		return nil
	}
	if err := j.wait(j.lastLSN()); err != nil {
		return journalError(err)
	}
	return nil
}

func (h *handler) dispatch(ctx context.Context, op string, body []byte, region string) (*reply, error) {
	if err := rejectLegacy(op, body); err != nil {
		return nil, err
	}
	switch op {
	case "Query", "Scan":
		return h.search(ctx, op, body)
	case "CreateTable", "UpdateTable", "DeleteTable", "DescribeTable":
		return h.tableOp(ctx, op, body, region)
	case "UpdateTimeToLive":
		return h.updateTTL(ctx, body)
	case "DescribeTimeToLive":
		return h.describeTTL(ctx, body)
	case "ListTables":
		return h.listTables(ctx, body)
	case "PutItem":
		return h.putItem(ctx, body)
	case "UpdateItem":
		return h.updateItem(ctx, body)
	case "DeleteItem":
		return h.deleteItem(ctx, body)
	case "BatchWriteItem":
		return h.batchWrite(ctx, body)
	case "TransactWriteItems":
		return h.transactWrite(ctx, body)
	case "GetItem", "BatchGetItem", "TransactGetItems":
		return h.readItems(ctx, op, body)
	}
	return h.shared(ctx, op, body), nil
}

// rejectLegacy refuses a request that has one of its operation's
// legacy parameters, and a body that is not JSON (as decodeRequest
// does). A body that is an object without a \u escape (the other
// escapes spell no letter, so no key can spell a parameter through one)
// and without any parameter's name is not decoded here: the operation's own decoding fails it with the same error if it
// is not JSON (encoding/json checks the whole syntax before decoding).
func rejectLegacy(op string, body []byte) error {
	params := legacyParams[op]
	if len(params) == 0 {
		return nil
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '{' && !bytes.Contains(body, []byte(`\u`)) &&
		!slices.ContainsFunc(params, func(p string) bool { return bytes.Contains(body, []byte(p)) }) {
		return nil
	}
	var req map[string]json.RawMessage
	if err := decodeRequest(body, &req); err != nil {
		return err
	}
	for _, p := range params {
		if _, ok := req[p]; ok {
			return validation("dynamolocal: legacy parameter %s is not supported by the local engine; use the expression parameters", p)
		}
	}
	return nil
}

// call runs one backend request without locking. A backend panic (minidyn
// has some, e.g. an unknown index) becomes a 500 InternalServerError.
func (h *handler) call(ctx context.Context, op string, body []byte) (rep *reply) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("dynamolocal: backend panicked", "op", op, "panic", p)
			rep = errorReply(&apiError{status: http.StatusInternalServerError, typ: "InternalServerError",
				msg: fmt.Sprintf("local engine failed in %s: %v", op, p)})
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(body))
	if err != nil {
		return errorReply(&apiError{status: http.StatusInternalServerError, typ: "InternalServerError", msg: err.Error()})
	}
	req.Header.Set("X-Amz-Target", targetPrefix+op)
	req.Header.Set("Content-Type", amzJSON)
	rec := httptest.NewRecorder()
	h.backend.ServeHTTP(rec, req)
	return &reply{status: rec.Code, contentType: rec.Header().Get("Content-Type"), body: rec.Body.Bytes()}
}

// shared runs a backend request that changes nothing, under the shared
// lock.
func (h *handler) shared(ctx context.Context, op string, body []byte) *reply {
	h.lock.RLock()
	defer h.lock.RUnlock()
	return h.call(ctx, op, body)
}

// regionOf extracts the region from a SigV4 Authorization header's credential
// scope, for ARNs; it falls back to us-east-1.
func regionOf(r *http.Request) string {
	_, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if parts := strings.Split(cred, "/"); ok && len(parts) > 2 && parts[2] != "" {
		return parts[2]
	}
	return "us-east-1"
}

func errorReply(e *apiError) *reply {
	return &reply{status: e.status, contentType: amzJSON,
		body: mustJSON(map[string]string{"__type": errTypePrefix + e.typ, "message": e.msg})}
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		slog.Error("dynamolocal: internal error", "err", err)
		ae = &apiError{status: http.StatusInternalServerError, typ: "InternalServerError", msg: err.Error()}
	}
	rep := errorReply(ae)
	w.Header().Set("Content-Type", rep.contentType)
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// itemOps are the successful answers finish repairs, with where their
// items are.
var itemOps = map[string]bool{"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true,
	"BatchGetItem": true, "TransactGetItems": true}

// finish normalizes a reply before it goes to the client: plain-text backend
// errors become AWS JSON errors, error types get the full AWS prefix, and
// attribute values minidyn encodes as {} (empty L, M or B) become NULL.
func finish(op string, rep *reply) *reply {
	failed := rep.status >= 400
	if !failed && (!itemOps[op] || !bytes.Contains(rep.body, []byte("{}"))) {
		return rep
	}
	if failed && !strings.HasPrefix(rep.contentType, amzJSON) {
		msg := strings.TrimSpace(string(rep.body))
		e := &apiError{status: rep.status, typ: "ValidationException", msg: msg}
		switch {
		case msg == "unsupported operation":
			e.typ, e.msg = "UnknownOperationException", "the local engine does not support "+op
		case rep.status >= 500:
			e.typ = "InternalServerError"
		}
		return errorReply(e)
	}
	dec := json.NewDecoder(bytes.NewReader(rep.body))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return rep
	}
	var items []any
	switch {
	case failed:
		if typ, _ := out["__type"].(string); typ != "" && !strings.Contains(typ, "#") {
			out["__type"] = errTypePrefix + typ
		}
		items = append(items, out["Item"]) // ConditionalCheckFailedException with ALL_OLD
		for _, r := range asSlice(out["CancellationReasons"]) {
			items = append(items, asMap(r)["Item"])
		}
	case op == "GetItem":
		items = append(items, out["Item"])
	case op == "BatchGetItem":
		for _, tableItems := range asMap(out["Responses"]) {
			items = append(items, asSlice(tableItems)...)
		}
	case op == "TransactGetItems":
		for _, r := range asSlice(out["Responses"]) {
			items = append(items, asMap(r)["Item"])
		}
	default: // PutItem, UpdateItem, DeleteItem
		items = append(items, out["Attributes"])
	}
	for _, item := range items {
		repairItem(item)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return rep
	}
	return &reply{status: rep.status, contentType: amzJSON, body: b}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// repairItem replaces, in a wire-format item, attribute values encoded as {}
// by {"NULL":true}: the SDK would otherwise decode {} as BOOL false.
func repairItem(item any) {
	m := asMap(item)
	for k, av := range m {
		m[k] = repairAV(av)
	}
}

func repairAV(av any) any {
	m, ok := av.(map[string]any)
	if !ok {
		return av
	}
	if len(m) == 0 {
		return map[string]any{"NULL": true}
	}
	for i, v := range asSlice(m["L"]) {
		m["L"].([]any)[i] = repairAV(v)
	}
	repairItem(m["M"])
	return m
}
