package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/anthropic"
)

const (
	testKey   = "sk-ant-api03-TEST-SECRET-KEY"
	testModel = "claude-sonnet-4-5"
	testID    = "anthropic/" + testModel
	// secretDetail appears in the fake's error bodies; it must never reach
	// a client-safe message.
	secretDetail = "PROVIDER-INTERNAL-DETAIL"
)

// --- A fake Anthropic Messages API speaking the real wire format. ---

// request is what the fake received.
type request struct {
	method, path string
	header       http.Header
	body         map[string]any
}

// fake records the requests it receives and answers them with handle.
type fake struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []request
	handle http.HandlerFunc
}

func newFake(t *testing.T, handle http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.reqs = append(f.reqs, request{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
		f.mu.Unlock()
		f.handle(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

func (f *fake) provider(t *testing.T) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Options{APIKey: testKey, BaseURL: f.srv.URL, Models: []string{testModel, "claude-haiku-4-5"}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

type event struct{ name, data string }

// streamHeaders writes the headers of a streamed reply, as the API does.
func streamHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_011CTestStream")
	w.WriteHeader(http.StatusOK)
}

// writeEvents writes events, flushing each one.
func writeEvents(w http.ResponseWriter, events ...event) {
	for _, e := range events {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, e.data)
		w.(http.Flusher).Flush()
	}
}

// sse answers with the events.
func sse(events ...event) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		writeEvents(w, events...)
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func messageStart(input, cacheRead int) event {
	return event{"message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":1,"service_tier":"standard"}}}`, input, cacheRead)}
}

func ping() event { return event{"ping", `{"type": "ping"}`} }

func textStart(i int) event {
	return event{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i)}
}

func textDelta(i int, s string) event {
	return event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, js(s))}
}

func toolStart(i int, id, name string) event {
	return event{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%s,"name":%s,"input":{}}}`, i, js(id), js(name))}
}

func jsonDelta(i int, partial string) event {
	return event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, js(partial))}
}

func blockStop(i int) event {
	return event{"content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i)}
}

func messageDelta(stop string, output int) event {
	return event{"message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%s,"stop_sequence":null},"usage":{"output_tokens":%d}}`, js(stop), output)}
}

func messageStop() event { return event{"message_stop", `{"type":"message_stop"}`} }

func errorEvent(typ, msg string) event {
	return event{"error", fmt.Sprintf(`{"type":"error","error":{"type":%s,"message":%s},"request_id":"req_011CTestStream"}`, js(typ), js(msg))}
}

// errorReply answers with an API error response.
func errorReply(status int, typ string, header map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CTestError")
		w.Header().Set("x-should-retry", "true")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%s,"message":"%s: something went wrong"},"request_id":"req_011CTestError"}`, js(typ), secretDetail)
	}
}

// generate runs p.Generate, collecting the chunks.
func generate(ctx context.Context, p *anthropic.Provider, req model.Request) ([]string, model.Result, error) {
	var chunks []string
	res, err := p.Generate(ctx, req, func(c model.Chunk) error {
		chunks = append(chunks, c.Delta)
		return nil
	})
	return chunks, res, err
}

func userRequest(text string) model.Request {
	return model.Request{ModelID: testID, Messages: []model.Message{{Role: model.RoleUser, Content: text}}}
}

func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("invalid JSON %s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// --- Tests. ---

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    anthropic.Options
		wantErr string
	}{
		{"valid", anthropic.Options{APIKey: testKey, Models: []string{testModel}}, ""},
		{"valid with base URL", anthropic.Options{APIKey: testKey, BaseURL: "http://127.0.0.1:9/", Models: []string{testModel}}, ""},
		{"no key", anthropic.Options{Models: []string{testModel}}, "API key"},
		{"blank key", anthropic.Options{APIKey: "  ", Models: []string{testModel}}, "API key"},
		{"no models", anthropic.Options{APIKey: testKey}, "model"},
		{"blank model", anthropic.Options{APIKey: testKey, Models: []string{testModel, " "}}, "blank model"},
		{"duplicate model", anthropic.Options{APIKey: testKey, Models: []string{testModel, testModel}}, "twice"},
		{"relative base URL", anthropic.Options{APIKey: testKey, BaseURL: "api.anthropic.com", Models: []string{testModel}}, "base URL"},
		{"ftp base URL", anthropic.Options{APIKey: testKey, BaseURL: "ftp://example.com", Models: []string{testModel}}, "base URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := anthropic.New(tt.opts)
			if tt.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("New = %v, %v; want a provider", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v; want one mentioning %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("New error %q reveals the key", err)
			}
		})
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	p, err := anthropic.New(anthropic.Options{APIKey: testKey, Models: []string{"claude-sonnet-4-5", "claude-haiku-4-5"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Model{
		{ID: "anthropic/claude-sonnet-4-5", Name: "claude-sonnet-4-5 (Anthropic)", Provider: "anthropic", Input: model.Input{Images: true, Documents: true}},
		{ID: "anthropic/claude-haiku-4-5", Name: "claude-haiku-4-5 (Anthropic)", Provider: "anthropic", Input: model.Input{Images: true, Documents: true}},
	}
	got := p.Models()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Models() = %+v; want %+v", got, want)
	}
	got[0].ID = "changed"
	if p.Models()[0].ID != want[0].ID {
		t.Error("Models() returns the provider's own slice")
	}
	// The ids work in a registry beside the built-in model.
	reg, err := model.NewRegistry(model.Builtin{}, p)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := reg.Lookup("anthropic/claude-haiku-4-5"); err != nil || m.Provider != "anthropic" {
		t.Fatalf("Lookup = %+v, %v", m, err)
	}
}

func TestGenerateStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		events     []event
		wantChunks []string
		wantCalls  []model.ToolCall
		wantUsage  model.Usage
	}{
		{
			name: "text in several deltas",
			events: []event{
				messageStart(25, 0), textStart(0), ping(),
				textDelta(0, "Hel"), textDelta(0, "lo, "), textDelta(0, "wörld! \"quoted\"\n"), textDelta(0, "Bye."),
				blockStop(0), messageDelta("end_turn", 12), messageStop(),
			},
			wantChunks: []string{"Hel", "lo, ", "wörld! \"quoted\"\n", "Bye."},
			wantUsage:  model.Usage{InputTokens: 25, OutputTokens: 12},
		},
		{
			name: "tool call with JSON split across deltas",
			events: []event{
				messageStart(410, 0), toolStart(0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "json_query"), ping(),
				jsonDelta(0, ""), jsonDelta(0, `{"query": ".`), jsonDelta(0, `a", "inp`), jsonDelta(0, `ut": {"a": 1`), jsonDelta(0, `}}`),
				blockStop(0), messageDelta("tool_use", 57), messageStop(),
			},
			wantCalls: []model.ToolCall{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "json_query", Args: json.RawMessage(`{"query":".a","input":{"a":1}}`)}},
			wantUsage: model.Usage{InputTokens: 410, OutputTokens: 57},
		},
		{
			name: "text followed by two tool calls",
			events: []event{
				messageStart(500, 0), textStart(0), textDelta(0, "Let me "), textDelta(0, "check that."), blockStop(0),
				toolStart(1, "toolu_01A", "json_query"), jsonDelta(1, ""), jsonDelta(1, `{"query":".b",`), jsonDelta(1, `"input":{"b":[1,2]}}`), blockStop(1),
				toolStart(2, "toolu_01B", "http_get"), jsonDelta(2, `{"url": "https://example.com/?q=a&b=c"}`), blockStop(2),
				messageDelta("tool_use", 99), messageStop(),
			},
			wantChunks: []string{"Let me ", "check that."},
			wantCalls: []model.ToolCall{
				{ID: "toolu_01A", Name: "json_query", Args: json.RawMessage(`{"query":".b","input":{"b":[1,2]}}`)},
				{ID: "toolu_01B", Name: "http_get", Args: json.RawMessage(`{"url":"https://example.com/?q=a&b=c"}`)},
			},
			wantUsage: model.Usage{InputTokens: 500, OutputTokens: 99},
		},
		{
			name: "tool call without arguments",
			events: []event{
				messageStart(30, 0), toolStart(0, "toolu_01C", "list_things"), jsonDelta(0, ""), blockStop(0),
				messageDelta("tool_use", 20), messageStop(),
			},
			wantCalls: []model.ToolCall{{ID: "toolu_01C", Name: "list_things", Args: json.RawMessage(`{}`)}},
			wantUsage: model.Usage{InputTokens: 30, OutputTokens: 20},
		},
		{
			name: "cached input tokens count as input",
			events: []event{
				messageStart(10, 90), textStart(0), textDelta(0, "ok"), blockStop(0),
				messageDelta("end_turn", 2), messageStop(),
			},
			wantChunks: []string{"ok"},
			wantUsage:  model.Usage{InputTokens: 100, OutputTokens: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, sse(tt.events...))
			chunks, res, err := generate(t.Context(), f.provider(t), userRequest("hi"))
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if !reflect.DeepEqual(chunks, tt.wantChunks) {
				t.Errorf("chunks = %q; want %q", chunks, tt.wantChunks)
			}
			if len(res.ToolCalls) != len(tt.wantCalls) {
				t.Fatalf("ToolCalls = %+v; want %+v", res.ToolCalls, tt.wantCalls)
			}
			for i, c := range res.ToolCalls {
				w := tt.wantCalls[i]
				if c.ID != w.ID || c.Name != w.Name || !jsonEqual(t, c.Args, w.Args) {
					t.Errorf("ToolCalls[%d] = {%s %s %s}; want {%s %s %s}", i, c.ID, c.Name, c.Args, w.ID, w.Name, w.Args)
				}
			}
			if res.Usage != tt.wantUsage {
				t.Errorf("Usage = %+v; want %+v", res.Usage, tt.wantUsage)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("the fake got %d requests; want 1", n)
			}
		})
	}
}

func TestGenerateRequest(t *testing.T) {
	t.Parallel()
	jqSchema := `{"type":"object","properties":{"query":{"type":"string","description":"a jq query"},"input":{}},"required":["query"],"additionalProperties":false}`
	tests := []struct {
		name string
		req  model.Request
		want string // the expected request body
	}{
		{
			name: "conversation with tool calls",
			req: model.Request{
				ModelID: testID,
				System:  "You are a helpful assistant.",
				Messages: []model.Message{
					{Role: model.RoleUser, Content: "What is .a of {\"a\": 1}?"},
					{Role: model.RoleAssistant, Content: "Let me run it.", ToolCalls: []model.ToolCall{
						{ID: "toolu_1", Name: "json_query", Args: json.RawMessage(`{"query":".a","input":{"a":1}}`)},
						{ID: "toolu_2", Name: "http_get", Args: json.RawMessage(`{"url":"https://example.com"}`)},
					}},
					{Role: model.RoleTool, ToolCallID: "toolu_1", Content: "1"},
					{Role: model.RoleTool, ToolCallID: "toolu_2", Content: `{"status":200}`},
					{Role: model.RoleUser, Content: "Thanks. And now?"},
					{Role: model.RoleUser, Content: "Also this."},
					{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "toolu_3", Name: "json_query"}}},
					{Role: model.RoleTool, ToolCallID: "toolu_3"},
				},
				Tools: []model.ToolSpec{
					{Name: "json_query", Description: "Runs a jq query on JSON.", InputSchema: json.RawMessage(jqSchema)},
					{Name: "http_get"},
				},
			},
			want: `{
				"model": "claude-sonnet-4-5",
				"max_tokens": 4096,
				"stream": true,
				"system": [{"type": "text", "text": "You are a helpful assistant."}],
				"messages": [
					{"role": "user", "content": [{"type": "text", "text": "What is .a of {\"a\": 1}?"}]},
					{"role": "assistant", "content": [
						{"type": "text", "text": "Let me run it."},
						{"type": "tool_use", "id": "toolu_1", "name": "json_query", "input": {"query": ".a", "input": {"a": 1}}},
						{"type": "tool_use", "id": "toolu_2", "name": "http_get", "input": {"url": "https://example.com"}}
					]},
					{"role": "user", "content": [
						{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "1"}]},
						{"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "{\"status\":200}"}]},
						{"type": "text", "text": "Thanks. And now?"},
						{"type": "text", "text": "Also this."}
					]},
					{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_3", "name": "json_query", "input": {}}]},
					{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_3"}]}
				],
				"tools": [
					{"name": "json_query", "description": "Runs a jq query on JSON.", "input_schema": ` + jqSchema + `},
					{"name": "http_get", "input_schema": {"type": "object", "properties": {}}}
				]
			}`,
		},
		{
			name: "attachments: image and PDF blocks, text files as context",
			req: model.Request{
				ModelID: testID,
				Messages: []model.Message{{Role: model.RoleUser, Content: "What is this?", Attachments: []model.Attachment{
					{Name: "cat.png", ContentType: "image/png", Size: 4, Data: []byte("\x89PNG")},
					{Name: "notes.txt", ContentType: "text/plain", Size: 5, Text: "hello"},
					{Name: "paper.pdf", ContentType: "application/pdf", Size: 8, Data: []byte("%PDF-1.7")},
				}}},
			},
			want: `{
				"model": "claude-sonnet-4-5",
				"max_tokens": 4096,
				"stream": true,
				"messages": [{"role": "user", "content": [
					{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
					{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjc="}, "title": "paper.pdf", "citations": {"enabled": false}},
					{"type": "text", "text": "<attachment name=\"notes.txt\" type=\"text/plain\" size=\"5 B\">\nhello\n</attachment>\n\nWhat is this?"}
				]}]
			}`,
		},
		{
			name: "max tokens, no system, no tools",
			req: model.Request{
				ModelID:   "anthropic/claude-haiku-4-5",
				MaxTokens: 1000,
				Messages:  []model.Message{{Role: model.RoleUser, Content: "Hello"}},
			},
			want: `{
				"model": "claude-haiku-4-5",
				"max_tokens": 1000,
				"stream": true,
				"messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
			}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, sse(messageStart(5, 0), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", 1), messageStop()))
			if _, _, err := generate(t.Context(), f.provider(t), tt.req); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("the fake got %d requests; want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != http.MethodPost || r.path != "/v1/messages" {
				t.Errorf("request = %s %s; want POST /v1/messages", r.method, r.path)
			}
			for k, want := range map[string]string{"X-Api-Key": testKey, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json"} {
				if got := r.header.Get(k); got != want {
					t.Errorf("header %s = %q; want %q", k, got, want)
				}
			}
			if got := r.header.Get("Authorization"); got != "" {
				t.Errorf("Authorization header = %q; want none", got)
			}
			got, _ := json.Marshal(r.body)
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Errorf("request body =\n%s\nwant\n%s", got, tt.want)
			}
			// The roles alternate, starting with the user.
			msgs, _ := r.body["messages"].([]any)
			for i, m := range msgs {
				role := m.(map[string]any)["role"]
				if want := []string{"user", "assistant"}[i%2]; role != want {
					t.Errorf("messages[%d].role = %v; want %s", i, role, want)
				}
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		handle         http.HandlerFunc
		wantKind       errs.Kind
		wantCode       string
		wantMessage    string
		wantRetryAfter int
		wantChunks     []string
	}{
		{
			name:           "429 rate limited",
			handle:         errorReply(http.StatusTooManyRequests, "rate_limit_error", map[string]string{"retry-after": "7"}),
			wantKind:       errs.Unavailable,
			wantCode:       "MODEL_UNAVAILABLE",
			wantMessage:    "the model provider is unavailable; retry shortly",
			wantRetryAfter: 7,
		},
		{
			name:        "529 overloaded",
			handle:      errorReply(529, "overloaded_error", nil),
			wantKind:    errs.Unavailable,
			wantCode:    "MODEL_UNAVAILABLE",
			wantMessage: "the model provider is unavailable; retry shortly",
		},
		{
			name:        "500 api error",
			handle:      errorReply(http.StatusInternalServerError, "api_error", nil),
			wantKind:    errs.Unavailable,
			wantCode:    "MODEL_UNAVAILABLE",
			wantMessage: "the model provider is unavailable; retry shortly",
		},
		{
			name: "503 from a proxy, not JSON, retry-after as a date",
			handle: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", time.Now().Add(90*time.Second).UTC().Format(http.TimeFormat))
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, "<html>"+secretDetail+"</html>")
			},
			wantKind:       errs.Unavailable,
			wantCode:       "MODEL_UNAVAILABLE",
			wantMessage:    "the model provider is unavailable; retry shortly",
			wantRetryAfter: -1, // between 80 and 91
		},
		{
			name:        "401 invalid key",
			handle:      errorReply(http.StatusUnauthorized, "authentication_error", nil),
			wantKind:    errs.Internal,
			wantCode:    "MODEL_PROVIDER_ERROR",
			wantMessage: "the model provider rejected the service's credentials",
		},
		{
			name:        "403 permission",
			handle:      errorReply(http.StatusForbidden, "permission_error", nil),
			wantKind:    errs.Internal,
			wantCode:    "MODEL_PROVIDER_ERROR",
			wantMessage: "the model provider rejected the service's credentials",
		},
		{
			name:        "400 invalid request",
			handle:      errorReply(http.StatusBadRequest, "invalid_request_error", nil),
			wantKind:    errs.Internal,
			wantCode:    "MODEL_PROVIDER_ERROR",
			wantMessage: "the model provider could not handle the request",
		},
		{
			name:        "404 unknown model",
			handle:      errorReply(http.StatusNotFound, "not_found_error", nil),
			wantKind:    errs.Internal,
			wantCode:    "MODEL_PROVIDER_ERROR",
			wantMessage: "the model provider could not handle the request",
		},
		{
			name:        "overloaded error event mid-stream",
			handle:      sse(messageStart(25, 0), textStart(0), textDelta(0, "Hello"), ping(), errorEvent("overloaded_error", secretDetail+": Overloaded")),
			wantKind:    errs.Unavailable,
			wantCode:    "MODEL_UNAVAILABLE",
			wantMessage: "the model provider is unavailable; retry shortly",
			wantChunks:  []string{"Hello"},
		},
		{
			name:        "invalid request error event mid-stream",
			handle:      sse(messageStart(25, 0), errorEvent("invalid_request_error", secretDetail)),
			wantKind:    errs.Internal,
			wantCode:    "MODEL_PROVIDER_ERROR",
			wantMessage: "the model provider could not handle the request",
		},
		{
			name:        "stream cut before message_stop",
			handle:      sse(messageStart(25, 0), textStart(0), textDelta(0, "Hel")),
			wantKind:    errs.Unavailable,
			wantCode:    "MODEL_UNAVAILABLE",
			wantMessage: "the model provider is unavailable; retry shortly",
			wantChunks:  []string{"Hel"},
		},
		{
			name:        "malformed event",
			handle:      sse(messageStart(25, 0), event{"content_block_start", `{"type":"content_block_start","index":0,` + secretDetail}),
			wantKind:    errs.Internal,
			wantCode:    "MODEL_PROVIDER_ERROR",
			wantMessage: "the model provider sent a malformed reply",
		},
		{
			name: "max tokens reached in a tool call",
			handle: sse(messageStart(25, 0), toolStart(0, "toolu_01D", "json_query"), jsonDelta(0, `{"query": ".a", "inp`), blockStop(0),
				messageDelta("max_tokens", 4096), messageStop()),
			wantKind:    errs.Internal,
			wantCode:    "MODEL_PROVIDER_ERROR",
			wantMessage: "the model's reply reached the token limit in the middle of a tool call",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.handle)
			chunks, _, err := generate(t.Context(), f.provider(t), userRequest("hi"))
			checkError(t, err, tt.wantKind, tt.wantCode, tt.wantMessage)
			var e *errs.Error
			errors.As(err, &e)
			switch {
			case tt.wantRetryAfter >= 0 && e.RetryAfter != tt.wantRetryAfter:
				t.Errorf("RetryAfter = %d; want %d", e.RetryAfter, tt.wantRetryAfter)
			case tt.wantRetryAfter < 0 && (e.RetryAfter < 80 || e.RetryAfter > 91):
				t.Errorf("RetryAfter = %d; want about 90", e.RetryAfter)
			}
			if !reflect.DeepEqual(chunks, tt.wantChunks) {
				t.Errorf("chunks = %q; want %q", chunks, tt.wantChunks)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("the fake got %d requests; want 1 (no retries)", n)
			}
		})
	}
}

func TestGenerateNetworkError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p, err := anthropic.New(anthropic.Options{APIKey: testKey, BaseURL: url, Models: []string{testModel}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = generate(t.Context(), p, userRequest("hi"))
	checkError(t, err, errs.Unavailable, "MODEL_UNAVAILABLE", "the model provider is unavailable; retry shortly")
}

// checkError checks err's kind, code and client-safe message, and that
// neither the message nor the log text reveal the key, and that the message
// reveals nothing of the provider's reply.
func checkError(t *testing.T, err error, kind errs.Kind, code, message string) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T); want an *errs.Error", err, err)
	}
	if e.Kind != kind || e.CodeOrDefault() != code || e.Message != message {
		t.Errorf("error = %s %s %q; want %s %s %q", e.Kind, e.CodeOrDefault(), e.Message, kind, code, message)
	}
	if e.Err == nil {
		t.Error("the error keeps no cause for the logs")
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q reveals the API key", err)
	}
	if strings.Contains(e.Message, secretDetail) {
		t.Errorf("client-safe message %q reveals the provider's reply", e.Message)
	}
}

func TestGenerateCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// handle answers; it returns when the client goes away.
		handle http.HandlerFunc
		// cancelOnChunk cancels when the first chunk arrives; otherwise
		// after a short delay.
		cancelOnChunk bool
	}{
		{
			name: "mid-stream",
			handle: func(w http.ResponseWriter, r *http.Request) {
				streamHeaders(w)
				writeEvents(w, messageStart(25, 0), textStart(0), textDelta(0, "first"))
				<-r.Context().Done() // hold the stream open
			},
			cancelOnChunk: true,
		},
		{
			name: "before the response headers",
			handle: func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.handle)
			p := f.provider(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if !tt.cancelOnChunk {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			var chunks []string
			done := make(chan error, 1)
			go func() {
				_, err := p.Generate(ctx, userRequest("hi"), func(c model.Chunk) error {
					chunks = append(chunks, c.Delta)
					if tt.cancelOnChunk {
						cancel()
					}
					return nil
				})
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Generate error = %v; want context.Canceled", err)
				}
				if tt.cancelOnChunk {
					if !reflect.DeepEqual(chunks, []string{"first"}) {
						t.Errorf("chunks = %q; want [first]", chunks)
					}
				}
			case <-time.After(5 * time.Minute): // the fake holds the stream until the client leaves
				t.Fatal("Generate did not return after ctx was cancelled")
			}
		})
	}
}

func TestGenerateEmitError(t *testing.T) {
	t.Parallel()
	f := newFake(t, sse(messageStart(25, 0), textStart(0), textDelta(0, "one"), textDelta(0, "two"), blockStop(0), messageDelta("end_turn", 2), messageStop()))
	stop := errors.New("client went away")
	calls := 0
	_, err := f.provider(t).Generate(t.Context(), userRequest("hi"), func(c model.Chunk) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Generate error = %v; want emit's error", err)
	}
	if calls != 1 {
		t.Errorf("emit called %d times; want 1", calls)
	}
}

func TestGenerateRejectsBadRequests(t *testing.T) {
	t.Parallel()
	user := []model.Message{{Role: model.RoleUser, Content: "hi"}}
	tests := []struct {
		name     string
		req      model.Request
		wantKind errs.Kind
		wantCode string
	}{
		{"model of another provider", model.Request{ModelID: "openai/" + testModel, Messages: user}, errs.Invalid, "INVALID_MODEL"},
		{"model without prefix", model.Request{ModelID: testModel, Messages: user}, errs.Invalid, "INVALID_MODEL"},
		{"model not configured", model.Request{ModelID: "anthropic/claude-opus-4-1", Messages: user}, errs.Invalid, "INVALID_MODEL"},
		{"unknown role", model.Request{ModelID: testID, Messages: []model.Message{{Role: "system", Content: "x"}}}, errs.Internal, "MODEL_PROVIDER_ERROR"},
		{"tool result without id", model.Request{ModelID: testID, Messages: []model.Message{{Role: model.RoleTool, Content: "x"}}}, errs.Internal, "MODEL_PROVIDER_ERROR"},
		{"tool call with bad args", model.Request{ModelID: testID, Messages: []model.Message{
			{Role: model.RoleUser, Content: "x"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "t1", Name: "a", Args: json.RawMessage(`[1]`)}}},
		}}, errs.Internal, "MODEL_PROVIDER_ERROR"},
		{"tool with bad schema", model.Request{ModelID: testID, Messages: user, Tools: []model.ToolSpec{{Name: "a", InputSchema: json.RawMessage(`"x"`)}}}, errs.Internal, "MODEL_PROVIDER_ERROR"},
		{"no messages", model.Request{ModelID: testID}, errs.Internal, "MODEL_PROVIDER_ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, sse())
			_, _, err := generate(t.Context(), f.provider(t), tt.req)
			if errs.KindOf(err) != tt.wantKind || errs.CodeOf(err) != tt.wantCode {
				t.Fatalf("Generate error = %v; want %s %s", err, tt.wantKind, tt.wantCode)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("the fake got %d requests; want none", n)
			}
		})
	}
}

// TestAttachmentsForATextOnlyModel: a model that takes no images or PDFs
// gets notes naming them, and the text files as context.
func TestAttachmentsForATextOnlyModel(t *testing.T) {
	t.Parallel()
	f := newFake(t, sse(messageStart(5, 0), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", 1), messageStop()))
	p, err := anthropic.New(anthropic.Options{APIKey: testKey, BaseURL: f.srv.URL, Models: []string{"claude-2.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if in := p.Models()[0].Input; in.Images || in.Documents {
		t.Fatalf("claude-2.1 takes %+v", in)
	}
	req := model.Request{ModelID: "anthropic/claude-2.1", Messages: []model.Message{{Role: model.RoleUser, Content: "What is this?", Attachments: []model.Attachment{
		{Name: "cat.png", ContentType: "image/png", Size: 4, Data: []byte("\x89PNG")},
		{Name: "paper.pdf", ContentType: "application/pdf", Size: 8, Data: []byte("%PDF-1.7")},
	}}}}
	if _, _, err := generate(t.Context(), p, req); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(f.requests()[0].body["messages"])
	want := `[{"role":"user","content":[{"type":"text","text":"[Attached image \"cat.png\" (image/png, 4 B): this model does not take images, so it was not sent.]\n\n` +
		`[Attached document \"paper.pdf\" (application/pdf, 8 B): this model does not take documents, so it was not sent.]\n\nWhat is this?"}]}]`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("messages =\n%s\nwant\n%s", got, want)
	}
}
