package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/bedrock"
)

const (
	haiku      = "anthropic.claude-3-5-haiku-20241022-v1:0"
	haikuID    = "bedrock/" + haiku
	llamaCross = "us.meta.llama3-2-3b-instruct-v1:0"
	profileARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0"
)

// msg is one event stream message the fake sends.
type msg struct {
	messageType string // event or exception
	typ         string // :event-type or :exception-type
	payload     string
}

func ev(typ, payload string) msg        { return msg{"event", typ, payload} }
func exception(typ, payload string) msg { return msg{"exception", typ, payload} }

// Events shaped like Bedrock's, including its "p" padding field.
var (
	evStart = ev("messageStart", `{"p":"abcdefghijk","role":"assistant"}`)
	evText  = func(i int, s string) msg {
		return ev("contentBlockDelta", jsonf(`{"contentBlockIndex":%d,"delta":{"text":%q},"p":"abc"}`, i, s))
	}
	evBlockStop = func(i int) msg { return ev("contentBlockStop", jsonf(`{"contentBlockIndex":%d,"p":"abcd"}`, i)) }
	evToolStart = func(i int, id, name string) msg {
		return ev("contentBlockStart", jsonf(`{"contentBlockIndex":%d,"start":{"toolUse":{"toolUseId":%q,"name":%q}}}`, i, id, name))
	}
	evToolInput = func(i int, s string) msg {
		return ev("contentBlockDelta", jsonf(`{"contentBlockIndex":%d,"delta":{"toolUse":{"input":%q}}}`, i, s))
	}
	evStop       = func(reason string) msg { return ev("messageStop", jsonf(`{"stopReason":%q}`, reason)) }
	evMetadata   = ev("metadata", `{"usage":{"inputTokens":12,"outputTokens":5,"totalTokens":17},"metrics":{"latencyMs":100},"p":"abcdefgh"}`)
	evThrottling = exception("throttlingException", `{"message":"Too many tokens, please wait before trying your request again."}`)
)

func jsonf(format string, args ...any) string {
	// %q of the Go strings used here is a valid JSON string.
	return fmt.Sprintf(format, args...)
}

// recorded is what the fake saw of one request.
type recorded struct {
	method, escapedPath, modelID string
	header                       http.Header
	body                         []byte
}

// fake is a local Bedrock runtime speaking the ConverseStream wire format.
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
	// gone is closed when a handler saw its client go away.
	gone     chan struct{}
	goneOnce sync.Once
}

// newFake starts a fake whose handler answers each ConverseStream request.
// respond writes the answer; it gets the request for its context.
func newFake(t *testing.T, respond func(f *fake, w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{gone: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := recorded{method: r.Method, escapedPath: r.URL.EscapedPath(), header: r.Header.Clone(), body: body}
		// The model id is one path segment, escaped by the SDK.
		if seg, ok := strings.CutPrefix(rec.escapedPath, "/model/"); ok {
			if esc, ok := strings.CutSuffix(seg, "/converse-stream"); ok && !strings.Contains(esc, "/") {
				rec.modelID, _ = url.PathUnescape(esc)
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		if r.Method != http.MethodPost || rec.modelID == "" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		respond(f, w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// stream answers 200 with msgs, flushing after each so the client sees
// them one by one.
func stream(msgs ...msg) func(*fake, http.ResponseWriter, *http.Request) {
	return func(f *fake, w http.ResponseWriter, r *http.Request) {
		writeStream(f, w, r, msgs)
	}
}

func writeStream(f *fake, w http.ResponseWriter, r *http.Request, msgs []msg) bool {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.Header().Set("X-Amzn-Requestid", "3b0b0e2c-5d3e-4f7a-9a61-0c5d1f0e7a11")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	enc := eventstream.NewEncoder()
	for _, m := range msgs {
		var h eventstream.Headers
		h.Set(":message-type", eventstream.StringValue(m.messageType))
		if m.messageType == "exception" {
			h.Set(":exception-type", eventstream.StringValue(m.typ))
		} else {
			h.Set(":event-type", eventstream.StringValue(m.typ))
		}
		h.Set(":content-type", eventstream.StringValue("application/json"))
		if err := enc.Encode(w, eventstream.Message{Headers: h, Payload: []byte(m.payload)}); err != nil {
			f.markGone()
			return false
		}
		flusher.Flush()
		if r.Context().Err() != nil {
			f.markGone()
			return false
		}
	}
	return true
}

func (f *fake) markGone() { f.goneOnce.Do(func() { close(f.gone) }) }

// holdFor bounds how long a fake holds a stream open for a client that
// does not leave: far longer than any test waits, so a Generate that
// returns before it stopped on its own.
const holdFor = 10 * time.Minute

// streamThenHold sends msgs, then holds the response open until the client
// goes away.
func streamThenHold(msgs ...msg) func(*fake, http.ResponseWriter, *http.Request) {
	return func(f *fake, w http.ResponseWriter, r *http.Request) {
		if !writeStream(f, w, r, msgs) {
			return
		}
		select {
		case <-r.Context().Done():
			f.markGone()
		case <-time.After(holdFor):
		}
	}
}

// apiError answers like Bedrock's REST-JSON errors: the error type in
// x-amzn-ErrorType (with its namespace suffix) and a JSON message body.
func apiError(status int, errType, message string) func(*fake, http.ResponseWriter, *http.Request) {
	return func(_ *fake, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Requestid", "9c7a2f3e-1b1d-4d5e-8f7a-2b3c4d5e6f70")
		w.Header().Set("X-Amzn-Errortype", errType+":http://internal.amazon.com/coral/com.amazon.bedrock/")
		w.WriteHeader(status)
		b, _ := json.Marshal(map[string]string{"message": message})
		w.Write(b)
	}
}

func newProvider(t *testing.T, endpoint string, models ...string) *bedrock.Provider {
	t.Helper()
	if len(models) == 0 {
		models = []string{haiku}
	}
	p, err := bedrock.New(context.Background(), bedrock.Options{
		Region:      "us-east-1",
		Models:      models,
		Endpoint:    endpoint,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// collect runs Generate and returns the chunks it emitted.
func collect(ctx context.Context, p model.Provider, req model.Request) ([]string, model.Result, error) {
	var chunks []string
	res, err := p.Generate(ctx, req, func(c model.Chunk) error {
		chunks = append(chunks, c.Delta)
		return nil
	})
	return chunks, res, err
}

func userRequest(text string) model.Request {
	return model.Request{ModelID: haikuID, Messages: []model.Message{{Role: model.RoleUser, Content: text}}}
}

func TestGenerateStream(t *testing.T) {
	t.Parallel()
	usage := model.Usage{InputTokens: 12, OutputTokens: 5}
	tests := []struct {
		name      string
		msgs      []msg
		wantText  []string
		wantCalls []model.ToolCall
		wantUsage model.Usage
	}{
		{
			name:      "text in several deltas",
			msgs:      []msg{evStart, evText(0, "Hel"), evText(0, "lo, "), evText(0, "wörld \"quoted\"\n"), evBlockStop(0), evStop("end_turn"), evMetadata},
			wantText:  []string{"Hel", "lo, ", "wörld \"quoted\"\n"},
			wantUsage: usage,
		},
		{
			name: "tool use split across deltas",
			msgs: []msg{
				evStart, evToolStart(0, "tooluse_1", "json_query"),
				evToolInput(0, `{"query"`), evToolInput(0, `: ".a", "inp`), evToolInput(0, `ut": {"a": 1}}`),
				evBlockStop(0), evStop("tool_use"), evMetadata,
			},
			wantCalls: []model.ToolCall{{ID: "tooluse_1", Name: "json_query", Args: json.RawMessage(`{"query":".a","input":{"a":1}}`)}},
			wantUsage: usage,
		},
		{
			name: "text then tool uses",
			msgs: []msg{
				evStart, evText(0, "Let me "), evText(0, "check."), evBlockStop(0),
				evToolStart(1, "tooluse_1", "json_query"), evToolInput(1, `{"query"`), evToolInput(1, `:".a"}`), evBlockStop(1),
				evToolStart(2, "tooluse_2", "list_tools"), evBlockStop(2),
				evStop("tool_use"), evMetadata,
			},
			wantText: []string{"Let me ", "check."},
			wantCalls: []model.ToolCall{
				{ID: "tooluse_1", Name: "json_query", Args: json.RawMessage(`{"query":".a"}`)},
				{ID: "tooluse_2", Name: "list_tools", Args: json.RawMessage(`{}`)},
			},
			wantUsage: usage,
		},
		{
			name:     "no metadata: zero usage",
			msgs:     []msg{evStart, evText(0, "ok"), evBlockStop(0), evStop("end_turn")},
			wantText: []string{"ok"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, stream(tt.msgs...))
			p := newProvider(t, f.URL)
			chunks, res, err := collect(context.Background(), p, userRequest("hi"))
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if !reflect.DeepEqual(chunks, tt.wantText) {
				t.Errorf("chunks = %q, want %q", chunks, tt.wantText)
			}
			if len(res.ToolCalls) != len(tt.wantCalls) {
				t.Fatalf("tool calls = %+v, want %+v", res.ToolCalls, tt.wantCalls)
			}
			for i, c := range res.ToolCalls {
				w := tt.wantCalls[i]
				if c.ID != w.ID || c.Name != w.Name || string(c.Args) != string(w.Args) {
					t.Errorf("tool call %d = {%s %s %s}, want {%s %s %s}", i, c.ID, c.Name, c.Args, w.ID, w.Name, w.Args)
				}
			}
			if res.Usage != tt.wantUsage {
				t.Errorf("usage = %+v, want %+v", res.Usage, tt.wantUsage)
			}
		})
	}
}

func TestGenerateRequest(t *testing.T) {
	t.Parallel()
	f := newFake(t, stream(evStart, evText(0, "ok"), evBlockStop(0), evStop("end_turn"), evMetadata))
	p := newProvider(t, f.URL)
	req := model.Request{
		ModelID: haikuID,
		System:  "You are helpful.",
		Messages: []model.Message{
			{Role: model.RoleUser, Content: "What is a"},
			{Role: model.RoleUser, Content: "in {\"a\": 1}?"},
			{Role: model.RoleAssistant, Content: "Let me look.", ToolCalls: []model.ToolCall{
				{ID: "tooluse_1", Name: "json_query", Args: json.RawMessage(`{"query": ".a", "input": {"a": 1}}`)},
				{ID: "tooluse_2", Name: "list_tools"},
			}},
			{Role: model.RoleTool, ToolCallID: "tooluse_1", Content: "1"},
			{Role: model.RoleTool, ToolCallID: "tooluse_2", Content: ""},
			{Role: model.RoleUser, Content: "Thanks"},
			{Role: model.RoleAssistant, Content: "   "}, // blank: dropped
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "tooluse_3", Name: "list_tools", Args: json.RawMessage(`{}`)}}},
			{Role: model.RoleTool, ToolCallID: "tooluse_3", Content: "[]"},
		},
		Tools: []model.ToolSpec{
			{Name: "json_query", Description: "Runs a jq query.", InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","maxLength":200},"input":{}},"required":["query"]}`)},
			{Name: "list_tools"},
		},
		MaxTokens: 256,
	}
	if _, _, err := collect(context.Background(), p, req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(reqs))
	}
	r := reqs[0]
	if want := "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"; r.escapedPath != want {
		t.Errorf("path = %s, want %s", r.escapedPath, want)
	}
	if auth := r.header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") ||
		!strings.Contains(auth, "/us-east-1/bedrock/aws4_request") || !strings.Contains(auth, "Signature=") {
		t.Errorf("Authorization = %q, want a SigV4 signature for bedrock in us-east-1", auth)
	}
	if r.header.Get("X-Amz-Date") == "" {
		t.Error("X-Amz-Date missing")
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	want := `{
		"system": [{"text": "You are helpful."}],
		"messages": [
			{"role": "user", "content": [{"text": "What is a"}, {"text": "in {\"a\": 1}?"}]},
			{"role": "assistant", "content": [
				{"text": "Let me look."},
				{"toolUse": {"toolUseId": "tooluse_1", "name": "json_query", "input": {"query": ".a", "input": {"a": 1}}}},
				{"toolUse": {"toolUseId": "tooluse_2", "name": "list_tools", "input": {}}}
			]},
			{"role": "user", "content": [
				{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "1"}]}},
				{"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "(no output)"}]}},
				{"text": "Thanks"}
			]},
			{"role": "assistant", "content": [
				{"toolUse": {"toolUseId": "tooluse_3", "name": "list_tools", "input": {}}}
			]},
			{"role": "user", "content": [
				{"toolResult": {"toolUseId": "tooluse_3", "content": [{"text": "[]"}]}}
			]}
		],
		"toolConfig": {"tools": [
			{"toolSpec": {"name": "json_query", "description": "Runs a jq query.", "inputSchema": {"json":
				{"type": "object", "properties": {"query": {"type": "string", "maxLength": 200}, "input": {}}, "required": ["query"]}}}},
			{"toolSpec": {"name": "list_tools", "inputSchema": {"json": {"type": "object"}}}}
		]},
		"inferenceConfig": {"maxTokens": 256}
	}`
	var got, wantV any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, r.body)
	}
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantV) {
		t.Errorf("request body:\n%s\nwant:\n%s", r.body, want)
	}
	// Roles alternate, starting with the user.
	var body struct{ Messages []struct{ Role string } }
	_ = json.Unmarshal(r.body, &body)
	for i, m := range body.Messages {
		if want := []string{"user", "assistant"}[i%2]; m.Role != want {
			t.Errorf("message %d role = %s, want %s", i, m.Role, want)
		}
	}
}

func TestGenerateModelIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		model       string
		wantEscaped string
	}{
		{haiku, "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"},
		{llamaCross, "/model/us.meta.llama3-2-3b-instruct-v1%3A0/converse-stream"},
		{"amazon.nova-lite-v1:0:300k", "/model/amazon.nova-lite-v1%3A0%3A300k/converse-stream"},
		{profileARN, "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, stream(evStart, evText(0, "ok"), evStop("end_turn")))
			p := newProvider(t, f.URL, tt.model)
			req := userRequest("hi")
			req.ModelID = "bedrock/" + tt.model
			if _, _, err := collect(context.Background(), p, req); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			r := f.requests()[0]
			if r.modelID != tt.model {
				t.Errorf("model id on the wire = %q, want %q (path %s)", r.modelID, tt.model, r.escapedPath)
			}
			if r.escapedPath != tt.wantEscaped {
				t.Errorf("path = %s, want %s", r.escapedPath, tt.wantEscaped)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		respond      func(*fake, http.ResponseWriter, *http.Request)
		wantKind     errs.Kind
		wantCode     string
		wantMessage  string
		wantAttempts int
	}{
		{
			name:         "HTTP 429 throttling, retried once",
			respond:      apiError(http.StatusTooManyRequests, "ThrottlingException", "Too many requests, please wait before trying your request again."),
			wantKind:     errs.Unavailable,
			wantCode:     "MODEL_UNAVAILABLE",
			wantMessage:  "the model provider is unavailable; retry shortly",
			wantAttempts: 2,
		},
		{
			name:         "HTTP 503 service unavailable",
			respond:      apiError(http.StatusServiceUnavailable, "ServiceUnavailableException", "Service is temporarily unavailable."),
			wantKind:     errs.Unavailable,
			wantCode:     "MODEL_UNAVAILABLE",
			wantAttempts: 2,
		},
		{
			name:         "HTTP 403 access denied",
			respond:      apiError(http.StatusForbidden, "AccessDeniedException", "You don't have access to the model with the specified model ID."),
			wantKind:     errs.Internal,
			wantCode:     "MODEL_PROVIDER_ERROR",
			wantMessage:  "the service is not allowed to use this model",
			wantAttempts: 1,
		},
		{
			name:         "HTTP 400 validation",
			respond:      apiError(http.StatusBadRequest, "ValidationException", "The provided model identifier is invalid."),
			wantKind:     errs.Internal,
			wantCode:     "MODEL_PROVIDER_ERROR",
			wantAttempts: 1,
		},
		{
			name:         "HTTP 404 resource not found",
			respond:      apiError(http.StatusNotFound, "ResourceNotFoundException", "Model not found."),
			wantKind:     errs.Internal,
			wantCode:     "MODEL_PROVIDER_ERROR",
			wantAttempts: 1,
		},
		{
			name:         "throttling exception inside the stream",
			respond:      stream(evStart, evText(0, "Hel"), evThrottling),
			wantKind:     errs.Unavailable,
			wantCode:     "MODEL_UNAVAILABLE",
			wantMessage:  "the model provider is unavailable; retry shortly",
			wantAttempts: 1,
		},
		{
			name:         "model stream error inside the stream",
			respond:      stream(evStart, exception("modelStreamErrorException", `{"message":"stream failed","originalStatusCode":500}`)),
			wantKind:     errs.Unavailable,
			wantCode:     "MODEL_UNAVAILABLE",
			wantAttempts: 1,
		},
		{
			name:         "validation exception inside the stream",
			respond:      stream(evStart, exception("validationException", `{"message":"Input is too long for requested model."}`)),
			wantKind:     errs.Internal,
			wantCode:     "MODEL_PROVIDER_ERROR",
			wantAttempts: 1,
		},
		{
			name:         "stream ends before messageStop",
			respond:      stream(evStart, evText(0, "Hel")),
			wantKind:     errs.Unavailable,
			wantCode:     "MODEL_UNAVAILABLE",
			wantAttempts: 1,
		},
		{
			name:         "tool input without its start",
			respond:      stream(evStart, evToolInput(0, `{}`), evBlockStop(0), evStop("tool_use"), evMetadata),
			wantKind:     errs.Internal,
			wantCode:     "MODEL_PROVIDER_ERROR",
			wantAttempts: 1,
		},
		{
			name:         "malformed tool input",
			respond:      stream(evStart, evToolStart(0, "tooluse_1", "json_query"), evToolInput(0, `{"query":`), evBlockStop(0), evStop("max_tokens"), evMetadata),
			wantKind:     errs.Internal,
			wantCode:     "MODEL_PROVIDER_ERROR",
			wantAttempts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.respond)
			p := newProvider(t, f.URL)
			_, _, err := collect(context.Background(), p, userRequest("hi"))
			var e *errs.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *errs.Error", err, err)
			}
			if e.Kind != tt.wantKind || e.CodeOrDefault() != tt.wantCode {
				t.Errorf("err = %v, want kind %v code %s", err, tt.wantKind, tt.wantCode)
			}
			if tt.wantMessage != "" && e.Message != tt.wantMessage {
				t.Errorf("message = %q, want %q", e.Message, tt.wantMessage)
			}
			if e.Err == nil {
				t.Error("cause not kept")
			}
			for _, leak := range []string{"Too many", "access to the model", "invalid", "not found", "too long", "stream failed"} {
				if strings.Contains(e.Message, leak) {
					t.Errorf("client-safe message %q leaks the provider's text", e.Message)
				}
			}
			if n := len(f.requests()); n != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", n, tt.wantAttempts)
			}
		})
	}
}

func TestGenerateNetworkError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	endpoint := srv.URL
	srv.Close() // nothing listens there any more
	p := newProvider(t, endpoint)
	_, _, err := collect(context.Background(), p, userRequest("hi"))
	if !errs.Is(err, errs.Unavailable) || errs.CodeOf(err) != "MODEL_UNAVAILABLE" {
		t.Fatalf("err = %v, want Unavailable MODEL_UNAVAILABLE", err)
	}
}

func TestGenerateStopsMidStream(t *testing.T) {
	t.Parallel()
	errStop := errors.New("client went away")
	tests := []struct {
		name string
		// ctx returns Generate's context; firstChunk is closed once emit got
		// the first chunk.
		ctx     func(t *testing.T, firstChunk <-chan struct{}) context.Context
		emitErr error
		wantErr error
	}{
		{
			name: "context cancelled while the stream is open",
			ctx: func(t *testing.T, firstChunk <-chan struct{}) context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				go func() {
					<-firstChunk
					time.Sleep(50 * time.Millisecond) // Generate is now waiting for the next event
					cancel()
				}()
				return ctx
			},
			wantErr: context.Canceled,
		},
		{
			name: "deadline while the stream is open",
			ctx: func(t *testing.T, _ <-chan struct{}) context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name:    "emit fails",
			ctx:     func(*testing.T, <-chan struct{}) context.Context { return context.Background() },
			emitErr: errStop,
			wantErr: errStop,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, streamThenHold(evStart, evText(0, "Hel"), evText(0, "lo")))
			p := newProvider(t, f.URL)
			firstChunk := make(chan struct{})
			var once sync.Once
			var emitted atomic.Int32
			ctx := tt.ctx(t, firstChunk)
			start := time.Now()
			_, err := p.Generate(ctx, userRequest("hi"), func(model.Chunk) error {
				emitted.Add(1)
				once.Do(func() { close(firstChunk) })
				return tt.emitErr
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if d := time.Since(start); d >= holdFor {
				t.Errorf("Generate took %v: it waited for the stream to end instead of stopping", d)
			}
			if tt.emitErr != nil && emitted.Load() != 1 {
				t.Errorf("emit called %d times after failing, want 1", emitted.Load())
			}
			// The stream is closed: the fake sees its client go away.
			select {
			case <-f.gone:
			case <-time.After(holdFor / 2):
				t.Error("the response stream was not closed")
			}
		})
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "http://127.0.0.1:1", haiku, " "+llamaCross+" ", profileARN)
	want := []model.Model{
		{ID: haikuID, Name: haiku + " (Bedrock)", Provider: "bedrock", Input: model.Input{Documents: true}},
		{ID: "bedrock/" + llamaCross, Name: llamaCross + " (Bedrock)", Provider: "bedrock"},
		{ID: "bedrock/" + profileARN, Name: profileARN + " (Bedrock)", Provider: "bedrock", Input: model.Input{Documents: true}},
	}
	got := p.Models()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Models() = %+v, want %+v", got, want)
	}
	got[0].ID = "changed"
	if p.Models()[0].ID != haikuID {
		t.Error("Models() exposes the provider's slice")
	}
	// The registry accepts the provider beside others.
	if _, err := model.NewRegistry(p); err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
}

func TestGenerateUnknownModel(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "http://127.0.0.1:1")
	for _, id := range []string{haiku, "bedrock/other.model-v1:0", "openai/" + haiku} {
		req := userRequest("hi")
		req.ModelID = id
		_, _, err := collect(context.Background(), p, req)
		if !errs.Is(err, errs.Invalid) || errs.CodeOf(err) != "INVALID_MODEL" {
			t.Errorf("Generate(%q) err = %v, want Invalid INVALID_MODEL", id, err)
		}
	}
}

func TestNewValidation(t *testing.T) {
	t.Parallel()
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	tests := []struct {
		name    string
		opts    bedrock.Options
		wantErr string
	}{
		{"no models", bedrock.Options{Region: "us-east-1", Credentials: creds}, "no models"},
		{"blank model", bedrock.Options{Region: "us-east-1", Credentials: creds, Models: []string{haiku, " "}}, "blank model id"},
		{"duplicate model", bedrock.Options{Region: "us-east-1", Credentials: creds, Models: []string{haiku, haiku}}, "duplicate model id"},
		{"no region", bedrock.Options{Credentials: creds, Models: []string{haiku}}, "region"},
		{"valid", bedrock.Options{Region: "eu-central-1", Credentials: creds, Models: []string{haiku}, HTTPClient: &http.Client{}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := bedrock.New(context.Background(), tt.opts)
			if tt.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New err = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// TestNewDefaultConfig uses the default credential chain, here the
// environment; it cannot run in parallel because it sets the environment.
func TestNewDefaultConfig(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-from-env")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	f := newFake(t, stream(evStart, evText(0, "ok"), evStop("end_turn"), evMetadata))
	p, err := bedrock.New(context.Background(), bedrock.Options{Region: "us-west-2", Models: []string{haiku}, Endpoint: f.URL + "/", HTTPClient: f.Client()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	chunks, res, err := collect(context.Background(), p, userRequest("hi"))
	if err != nil || strings.Join(chunks, "") != "ok" || res.Usage.OutputTokens != 5 {
		t.Fatalf("Generate = %q, %+v, %v", chunks, res, err)
	}
	auth := f.requests()[0].header.Get("Authorization")
	if !strings.Contains(auth, "Credential=AKIDFROMENV/") || !strings.Contains(auth, "/us-west-2/bedrock/") {
		t.Errorf("Authorization = %q, want the environment's key and region", auth)
	}
}

// TestGenerateAttachments: Converse image blocks (bytes, base64 on the
// wire) and document blocks with a Converse-safe unique name, before the
// text, which carries text files as context; notes for what a model does
// not take.
func TestGenerateAttachments(t *testing.T) {
	t.Parallel()
	f := newFake(t, stream(evStart, evText(0, "ok"), evBlockStop(0), evStop("end_turn"), evMetadata))
	const sonnet, micro = "anthropic.claude-sonnet-4-20250514-v1:0", "amazon.nova-micro-v1:0"
	p := newProvider(t, f.URL, sonnet, micro)
	atts := []model.Attachment{
		{Name: "cat.png", ContentType: "image/png", Size: 4, Data: []byte("\x89PNG")},
		{Name: "notes.txt", ContentType: "text/plain", Size: 5, Text: "hello"},
		{Name: "my report, v2!.pdf", ContentType: "application/pdf", Size: 8, Data: []byte("%PDF-1.7")},
		{Name: "my report v2.pdf", ContentType: "application/pdf", Size: 8, Data: []byte("%PDF-1.7")},
	}
	for _, id := range []string{sonnet, micro} {
		req := model.Request{ModelID: "bedrock/" + id, Messages: []model.Message{{Role: model.RoleUser, Content: "What is this?", Attachments: atts}}}
		if _, _, err := collect(context.Background(), p, req); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	reqs := f.requests()
	text := "<attachment name=\"notes.txt\" type=\"text/plain\" size=\"5 B\">\nhello\n</attachment>\n\nWhat is this?"
	want := `{"messages": [{"role": "user", "content": [
		{"image": {"format": "png", "source": {"bytes": "iVBORw=="}}},
		{"document": {"format": "pdf", "name": "my report v2", "source": {"bytes": "JVBERi0xLjc="}}},
		{"document": {"format": "pdf", "name": "my report v2 (2)", "source": {"bytes": "JVBERi0xLjc="}}},
		{"text": ` + strconv.Quote(text) + `}
	]}]}`
	var got, wantV any
	if err := json.Unmarshal(reqs[0].body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantV) {
		t.Errorf("vision model's request:\n%s\nwant:\n%s", reqs[0].body, want)
	}
	// Nova Micro takes documents but no images.
	var micBody struct {
		Messages []struct{ Content []map[string]any }
	}
	if err := json.Unmarshal(reqs[1].body, &micBody); err != nil {
		t.Fatal(err)
	}
	blocks := micBody.Messages[0].Content
	if len(blocks) != 3 || blocks[0]["document"] == nil || blocks[1]["document"] == nil {
		t.Fatalf("nova micro's blocks %v", blocks)
	}
	if s, _ := blocks[2]["text"].(string); !strings.Contains(s, `[Attached image "cat.png" (image/png, 4 B): this model does not take images`) {
		t.Errorf("nova micro's text %q", s)
	}
}

func TestDefaultInput(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]model.Input{
		"anthropic.claude-sonnet-4-20250514-v1:0":      {Images: true, Documents: true},
		"us.anthropic.claude-3-7-sonnet-20250219-v1:0": {Images: true, Documents: true},
		haiku:                                {Documents: true},
		"anthropic.claude-v2:1":              {},
		"amazon.nova-pro-v1:0":               {Images: true, Documents: true},
		"amazon.nova-micro-v1:0":             {Documents: true},
		"us.meta.llama3-2-90b-instruct-v1:0": {Images: true},
		llamaCross:                           {},
		"mistral.mistral-large-2402-v1:0":    {},
	} {
		if got := bedrock.DefaultInput(id); got != want {
			t.Errorf("DefaultInput(%q) = %+v, want %+v", id, got, want)
		}
	}
}
