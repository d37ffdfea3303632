package openai_test

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
	"github.com/workflowchat/service/shared/model/openai"
)

const testKey = "sk-proj-TESTKEY0123456789abcdefABCDEF"

// received is what the fake server saw of one request.
type received struct {
	Method, Path, Authorization string
	Body                        map[string]any
}

// fake is a local server speaking OpenAI's Chat Completions wire format.
type fake struct {
	*httptest.Server
	mu       sync.Mutex
	requests []received
}

// newFake starts a fake whose handler answers every POST
// /v1/chat/completions; the request is recorded first.
func newFake(t *testing.T, handler func(w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.requests = append(f.requests, received{r.Method, r.URL.Path, r.Header.Get("Authorization"), body})
		f.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			writeError(w, http.StatusNotFound, `{"error":{"message":"Invalid URL (`+r.Method+` `+r.URL.Path+`)","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		handler(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.requests...)
}

func writeError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// stream answers with the given SSE data payloads, flushing each one as
// the real API does.
func stream(payloads ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		startStream(w)
		for _, p := range payloads {
			send(w, p)
		}
	}
}

func startStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Request-Id", "req_9f8e7d6c5b4a")
	w.WriteHeader(http.StatusOK)
}

func send(w http.ResponseWriter, payload string) {
	_, _ = fmt.Fprintf(w, "data: %s\n\n", payload)
	w.(http.Flusher).Flush()
}

const completionID = "chatcmpl-BZ3qj8bS7wVvGxuK2mY1cT0pQe9Rn"

// chunk is a chat.completion.chunk with one choice, as OpenAI streams it.
func chunk(delta map[string]any, finish any) string {
	b, err := json.Marshal(map[string]any{
		"id": completionID, "object": "chat.completion.chunk", "created": 1747240000,
		"model": "gpt-4o-mini-2024-07-18", "service_tier": "default", "system_fingerprint": "fp_0392822090",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		"usage":   nil,
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func content(s string) string { return chunk(map[string]any{"content": s}, nil) }

func first() string {
	return chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
}

func finish(reason string) string { return chunk(map[string]any{}, reason) }

// usage is the last chunk when stream_options.include_usage is set.
func usage(in, out int) string {
	return fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","created":1747240000,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_0392822090","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		completionID, in, out, in+out)
}

// toolStart opens tool call index with its id and name and empty
// arguments; toolArgs continues its arguments.
func toolStart(index int, id, name string) map[string]any {
	return map[string]any{"index": index, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": ""}}
}

func toolArgs(index int, args string) map[string]any {
	return map[string]any{"index": index, "function": map[string]any{"arguments": args}}
}

func toolDelta(calls ...map[string]any) string {
	d := map[string]any{"tool_calls": calls}
	return chunk(d, nil)
}

// viaFake returns a client that sends what is addressed to OpenAI
// (https://api.openai.com) to the fake instead, so that the provider's
// default-URL behaviour is tested.
func viaFake(f *fake) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Host != "api.openai.com" {
			return nil, fmt.Errorf("unexpected host %s", r.URL.Host)
		}
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = "http", strings.TrimPrefix(f.URL, "http://"), ""
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func newProvider(t *testing.T, f *fake, o openai.Options) *openai.Provider {
	t.Helper()
	if o.BaseURL == "" && o.HTTPClient == nil {
		o.BaseURL = f.URL + "/v1"
	}
	if o.Models == nil {
		o.Models = []string{"gpt-4o-mini"}
	}
	p, err := openai.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func userRequest(text string) model.Request {
	return model.Request{ModelID: "openai/gpt-4o-mini", Messages: []model.Message{{Role: model.RoleUser, Content: text}}}
}

// collect runs Generate and returns the emitted deltas.
func collect(ctx context.Context, p *openai.Provider, req model.Request) ([]string, model.Result, error) {
	var deltas []string
	res, err := p.Generate(ctx, req, func(c model.Chunk) error {
		deltas = append(deltas, c.Delta)
		return nil
	})
	return deltas, res, err
}

func TestGenerateStreams(t *testing.T) {
	t.Parallel()
	weather := model.ToolCall{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Args: json.RawMessage(`{"location":"Paris, France","unit":"celsius"}`)}
	tests := []struct {
		name       string
		payloads   []string
		wantDeltas []string
		wantCalls  []model.ToolCall
		wantUsage  model.Usage
	}{
		{
			name: "plain text in several deltas",
			payloads: []string{first(), content("Hello"), content("!"), content(" How can"), content(" I help"),
				content(" you today?"), finish("stop"), usage(19, 9), "[DONE]"},
			wantDeltas: []string{"Hello", "!", " How can", " I help", " you today?"},
			wantUsage:  model.Usage{InputTokens: 19, OutputTokens: 9},
		},
		{
			name: "tool call with arguments in fragments",
			payloads: []string{
				chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{toolStart(0, weather.ID, "get_weather")}, "refusal": nil}, nil),
				toolDelta(toolArgs(0, `{"`)), toolDelta(toolArgs(0, `location`)), toolDelta(toolArgs(0, `":"`)),
				toolDelta(toolArgs(0, `Paris`)), toolDelta(toolArgs(0, `, France`)), toolDelta(toolArgs(0, `","`)),
				toolDelta(toolArgs(0, `unit`)), toolDelta(toolArgs(0, `":"`)), toolDelta(toolArgs(0, `celsius`)),
				toolDelta(toolArgs(0, `"}`)), finish("tool_calls"), usage(82, 25), "[DONE]",
			},
			wantCalls: []model.ToolCall{weather},
			wantUsage: model.Usage{InputTokens: 82, OutputTokens: 25},
		},
		{
			name: "text then two parallel tool calls",
			payloads: []string{
				first(), content("Let me check"), content(" both."),
				toolDelta(toolStart(0, "call_a1B2c3", "get_weather")), toolDelta(toolArgs(0, `{"location":`)),
				toolDelta(toolArgs(0, ` "Paris"}`)),
				toolDelta(toolStart(1, "call_d4E5f6", "json_query")), toolDelta(toolArgs(1, `{"query":".a",`)),
				toolDelta(toolArgs(1, `"input":{"a":1}}`)),
				finish("tool_calls"), usage(120, 48), "[DONE]",
			},
			wantDeltas: []string{"Let me check", " both."},
			wantCalls: []model.ToolCall{
				{ID: "call_a1B2c3", Name: "get_weather", Args: json.RawMessage(`{"location":"Paris"}`)},
				{ID: "call_d4E5f6", Name: "json_query", Args: json.RawMessage(`{"query":".a","input":{"a":1}}`)},
			},
			wantUsage: model.Usage{InputTokens: 120, OutputTokens: 48},
		},
		{
			name: "tool call without arguments",
			payloads: []string{
				toolDelta(toolStart(0, "call_n0Args", "list_tools")), finish("tool_calls"), usage(30, 7), "[DONE]",
			},
			wantCalls: []model.ToolCall{{ID: "call_n0Args", Name: "list_tools", Args: json.RawMessage(`{}`)}},
			wantUsage: model.Usage{InputTokens: 30, OutputTokens: 7},
		},
		{
			name:       "refusal is shown",
			payloads:   []string{first(), chunk(map[string]any{"refusal": "I can't help"}, nil), chunk(map[string]any{"refusal": " with that."}, nil), finish("stop"), usage(12, 6), "[DONE]"},
			wantDeltas: []string{"I can't help", " with that."},
			wantUsage:  model.Usage{InputTokens: 12, OutputTokens: 6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, stream(tt.payloads...))
			p := newProvider(t, f, openai.Options{APIKey: testKey})
			deltas, res, err := collect(t.Context(), p, userRequest("What's the weather in Paris?"))
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas = %q, want %q", deltas, tt.wantDeltas)
			}
			if got, want := strings.Join(deltas, ""), strings.Join(tt.wantDeltas, ""); got != want {
				t.Errorf("text = %q, want %q", got, want)
			}
			if len(res.ToolCalls) != len(tt.wantCalls) {
				t.Fatalf("tool calls = %+v, want %+v", res.ToolCalls, tt.wantCalls)
			}
			for i, c := range res.ToolCalls {
				w := tt.wantCalls[i]
				if c.ID != w.ID || c.Name != w.Name || string(c.Args) != string(w.Args) {
					t.Errorf("tool call %d = {%s %s %s}, want {%s %s %s}", i, c.ID, c.Name, c.Args, w.ID, w.Name, w.Args)
				}
				var obj map[string]any
				if err := json.Unmarshal(c.Args, &obj); err != nil || obj == nil {
					t.Errorf("tool call %d args %s are not a JSON object: %v", i, c.Args, err)
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
	f := newFake(t, stream(first(), content("It is 18°C in Paris."), finish("stop"), usage(140, 8), "[DONE]"))
	tests := []struct {
		name      string
		opts      openai.Options
		maxTokens int
		check     func(t *testing.T, body map[string]any)
	}{
		{"openai sends max_completion_tokens", openai.Options{APIKey: testKey, HTTPClient: viaFake(f)}, 512, func(t *testing.T, body map[string]any) {
			if body["max_completion_tokens"] != 512.0 || body["max_tokens"] != nil {
				t.Errorf("max_completion_tokens = %v, max_tokens = %v; want 512 and none", body["max_completion_tokens"], body["max_tokens"])
			}
		}},
		{"compatible server gets max_tokens", openai.Options{APIKey: testKey}, 300, func(t *testing.T, body map[string]any) {
			if body["max_tokens"] != 300.0 || body["max_completion_tokens"] != nil {
				t.Errorf("max_tokens = %v, max_completion_tokens = %v; want 300 and none", body["max_tokens"], body["max_completion_tokens"])
			}
		}},
		{"no limit sends none", openai.Options{APIKey: testKey}, 0, func(t *testing.T, body map[string]any) {
			if body["max_completion_tokens"] != nil || body["max_tokens"] != nil {
				t.Errorf("a token limit was sent: %v %v", body["max_completion_tokens"], body["max_tokens"])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the subtests share the fake's request log.
			before := len(f.received())
			p := newProvider(t, f, tt.opts)
			req := model.Request{
				ModelID: "openai/gpt-4o-mini",
				System:  "You are a helpful assistant.",
				Messages: []model.Message{
					{Role: model.RoleUser, Content: "What's the weather in Paris?"},
					{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_abc123", Name: "get_weather", Args: json.RawMessage(`{"location":"Paris"}`)}}},
					{Role: model.RoleTool, ToolCallID: "call_abc123", Content: `{"temperature":18,"unit":"celsius"}`},
				},
				Tools: []model.ToolSpec{{
					Name: "get_weather", Description: "Get the current weather for a location.",
					InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`),
				}},
				MaxTokens: tt.maxTokens,
			}
			deltas, res, err := collect(t.Context(), p, req)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(deltas, "") != "It is 18°C in Paris." || res.Usage != (model.Usage{InputTokens: 140, OutputTokens: 8}) {
				t.Errorf("reply %q usage %+v", deltas, res.Usage)
			}
			reqs := f.received()[before:]
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
				t.Errorf("request %s %s", r.Method, r.Path)
			}
			if r.Authorization != "Bearer "+testKey {
				t.Errorf("Authorization = %q", r.Authorization)
			}
			body := r.Body
			if body["model"] != "gpt-4o-mini" || body["stream"] != true {
				t.Errorf("model = %v, stream = %v", body["model"], body["stream"])
			}
			if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
				t.Errorf("stream_options = %v", body["stream_options"])
			}
			wantMessages := `[{"content":"You are a helpful assistant.","role":"system"},` +
				`{"content":"What's the weather in Paris?","role":"user"},` +
				`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"location\":\"Paris\"}","name":"get_weather"},"id":"call_abc123","type":"function"}]},` +
				`{"content":"{\"temperature\":18,\"unit\":\"celsius\"}","role":"tool","tool_call_id":"call_abc123"}]`
			if got := canonical(t, body["messages"]); got != canonical(t, wantMessages) {
				t.Errorf("messages =\n%s\nwant\n%s", got, canonical(t, wantMessages))
			}
			wantTools := `[{"type":"function","function":{"name":"get_weather","description":"Get the current weather for a location.",` +
				`"parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}]`
			if got := canonical(t, body["tools"]); got != canonical(t, wantTools) {
				t.Errorf("tools =\n%s\nwant\n%s", got, canonical(t, wantTools))
			}
			tt.check(t, body)
		})
	}
}

// canonical returns v (a JSON string or a decoded value) re-encoded with
// sorted keys.
func canonical(t *testing.T, v any) string {
	t.Helper()
	if s, ok := v.(string); ok {
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("bad JSON %s: %v", s, err)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		handler        func(w http.ResponseWriter, r *http.Request)
		closed         bool // the server is gone: a network failure
		wantKind       errs.Kind
		wantCode       string
		wantMessage    string
		wantRetryAfter int
		wantRequests   int // 0: not checked
	}{
		{
			name: "429 rate limited",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "20")
				writeError(w, http.StatusTooManyRequests, `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
			},
			wantKind: errs.Unavailable, wantCode: "MODEL_UNAVAILABLE", wantMessage: "the model provider is unavailable; retry shortly",
			wantRetryAfter: 20, wantRequests: 1, // the wait is too long for the SDK's single retry
		},
		{
			name: "500 server error",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusInternalServerError, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`)
			},
			wantKind: errs.Unavailable, wantCode: "MODEL_UNAVAILABLE", wantMessage: "the model provider is unavailable; retry shortly",
			wantRequests: 2, // one retry, no more
		},
		{
			name: "503 with retry-after-ms",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After-Ms", "2500")
				w.Header().Set("X-Should-Retry", "false")
				writeError(w, http.StatusServiceUnavailable, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`)
			},
			wantKind: errs.Unavailable, wantCode: "MODEL_UNAVAILABLE", wantRetryAfter: 3, wantRequests: 1,
		},
		{
			name: "502 HTML from a gateway",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusBadGateway)
				_, _ = io.WriteString(w, "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>")
			},
			wantKind: errs.Unavailable, wantCode: "MODEL_UNAVAILABLE", wantMessage: "the model provider is unavailable; retry shortly",
		},
		{
			name: "401 from vLLM",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusUnauthorized, `{"error":"Unauthorized"}`)
			},
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model provider rejected the service's credentials",
		},
		{
			name: "400 from vLLM",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusBadRequest, `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"BadRequestError","param":null,"code":400}}`)
			},
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model provider could not handle the request",
		},
		{
			name: "400 from an older vLLM",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusBadRequest, `{"object":"error","message":"The model `+"`gpt-4o-mini`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`)
			},
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model provider could not handle the request",
		},
		{
			name: "500 plain text",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Should-Retry", "false")
				http.Error(w, "Internal Server Error", http.StatusInternalServerError)
			},
			wantKind: errs.Unavailable, wantCode: "MODEL_UNAVAILABLE", wantMessage: "the model provider is unavailable; retry shortly",
		},
		{
			name: "401 invalid key",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusUnauthorized, `{"error":{"message":"Incorrect API key provided: `+testKey+`. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
			},
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model provider rejected the service's credentials",
			wantRequests: 1,
		},
		{
			name: "403 forbidden",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusForbidden, `{"error":{"message":"Project proj_abc does not have access to model gpt-4o-mini","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
			},
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model provider rejected the service's credentials",
		},
		{
			name: "400 bad request",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusBadRequest, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
			},
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model provider could not handle the request",
			wantRequests: 1,
		},
		{
			name: "404 unknown model",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusNotFound, `{"error":{"message":"The model `+"`gpt-4o-mini`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
			},
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model provider could not handle the request",
		},
		{
			name:     "malformed chunk",
			handler:  stream(first(), content("Hel"), `{"id":"chatcmpl-x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"`, "[DONE]"),
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model provider sent a malformed reply",
		},
		{
			name: "error event mid-stream",
			handler: stream(first(), content("Hel"),
				`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`),
			wantKind: errs.Unavailable, wantCode: "MODEL_UNAVAILABLE", wantMessage: "the model provider is unavailable; retry shortly",
		},
		{
			name:     "stream cut before the reply finished",
			handler:  stream(first(), content("Hel")),
			wantKind: errs.Unavailable, wantCode: "MODEL_UNAVAILABLE",
		},
		{
			name: "tool arguments not JSON",
			handler: stream(toolDelta(toolStart(0, "call_bad", "get_weather")), toolDelta(toolArgs(0, `{"location": Paris}`)),
				finish("tool_calls"), usage(10, 5), "[DONE]"),
			wantKind: errs.Internal, wantCode: "MODEL_PROVIDER_ERROR", wantMessage: "the model produced malformed tool call arguments",
		},
		{
			name:     "network failure",
			closed:   true,
			wantKind: errs.Unavailable, wantCode: "MODEL_UNAVAILABLE", wantMessage: "the model provider is unavailable; retry shortly",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.handler)
			p := newProvider(t, f, openai.Options{APIKey: testKey})
			if tt.closed {
				f.Close()
			}
			_, res, err := collect(t.Context(), p, userRequest("Hello"))
			if err == nil {
				t.Fatalf("no error; result %+v", res)
			}
			t.Logf("logged as: %v", err)
			var e *errs.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *errs.Error", err, err)
			}
			if e.Kind != tt.wantKind || e.CodeOrDefault() != tt.wantCode {
				t.Errorf("kind, code = %v, %s; want %v, %s (%v)", e.Kind, e.CodeOrDefault(), tt.wantKind, tt.wantCode, err)
			}
			if tt.wantMessage != "" && e.Message != tt.wantMessage {
				t.Errorf("message = %q, want %q", e.Message, tt.wantMessage)
			}
			if e.RetryAfter != tt.wantRetryAfter {
				t.Errorf("RetryAfter = %d, want %d", e.RetryAfter, tt.wantRetryAfter)
			}
			if e.Err == nil {
				t.Error("the cause is lost")
			}
			// Neither the client-safe message nor the logged error carries
			// the key or the provider's body.
			for _, s := range []string{e.Message, err.Error()} {
				if strings.Contains(s, testKey) || strings.Contains(s, "TESTKEY") {
					t.Errorf("the API key leaked: %q", s)
				}
			}
			for _, leak := range []string{"Incorrect API key", "invalid_request_error", "{"} {
				if strings.Contains(e.Message, leak) {
					t.Errorf("message %q carries the provider's body", e.Message)
				}
			}
			if tt.wantRequests > 0 {
				if n := len(f.received()); n != tt.wantRequests {
					t.Errorf("%d requests, want %d", n, tt.wantRequests)
				}
			}
		})
	}
}

// holdFor bounds how long a fake holds a stream open for a client that
// does not leave: far longer than any test waits, so a Generate that
// returns before it stopped on its own.
const holdFor = 10 * time.Minute

func TestGenerateCancelledMidStream(t *testing.T) {
	t.Parallel()
	released := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(released)
		startStream(w)
		send(w, first())
		send(w, content("Once upon a time"))
		// Hold the stream open, as a slow model would.
		select {
		case <-r.Context().Done():
		case <-time.After(holdFor):
		}
	})
	p := newProvider(t, f, openai.Options{APIKey: testKey})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var deltas []string
	start := time.Now()
	_, err := p.Generate(ctx, userRequest("Tell me a story"), func(c model.Chunk) error {
		deltas = append(deltas, c.Delta)
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d >= holdFor {
		t.Errorf("Generate took %v: it waited for the stream to end instead of stopping", d)
	}
	if !reflect.DeepEqual(deltas, []string{"Once upon a time"}) {
		t.Errorf("deltas = %q", deltas)
	}
	select {
	case <-released: // the connection was closed
	case <-time.After(holdFor / 2):
		t.Error("the stream was not closed")
	}
}

func TestGenerateEmitError(t *testing.T) {
	t.Parallel()
	f := newFake(t, stream(first(), content("one"), content("two"), content("three"), finish("stop"), usage(3, 3), "[DONE]"))
	p := newProvider(t, f, openai.Options{APIKey: testKey})
	stop := errors.New("client went away")
	calls := 0
	_, err := p.Generate(t.Context(), userRequest("count"), func(c model.Chunk) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want emit's error", err)
	}
	if calls != 1 {
		t.Errorf("emit called %d times after failing", calls)
	}
}

func TestGenerateUnknownModel(t *testing.T) {
	t.Parallel()
	f := newFake(t, stream())
	p := newProvider(t, f, openai.Options{APIKey: testKey})
	for _, id := range []string{"gpt-4o-mini", "openai/gpt-5", "anthropic/gpt-4o-mini"} {
		_, _, err := collect(t.Context(), p, model.Request{ModelID: id, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
		if !errs.Is(err, errs.Invalid) || errs.CodeOf(err) != "INVALID_MODEL" {
			t.Errorf("%s: err = %v, want Invalid INVALID_MODEL", id, err)
		}
	}
	if n := len(f.received()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestOllamaStyle covers an OpenAI-compatible server without an API key:
// no Authorization header is sent, even when OPENAI_API_KEY is set in the
// environment (the SDK reads it; New overrides it). It is not parallel
// because it sets an environment variable.
func TestOllamaStyle(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	// Ollama's chunks: whole tool calls in one chunk, its own fingerprint.
	ollama := func(delta map[string]any, finish any) string {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-417", "object": "chat.completion.chunk", "created": 1747240000, "model": "llama3.2",
			"system_fingerprint": "fp_ollama",
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		return string(b)
	}
	f := newFake(t, stream(
		ollama(map[string]any{"role": "assistant", "content": "Sure"}, nil),
		ollama(map[string]any{"role": "assistant", "content": "."}, nil),
		ollama(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
			map[string]any{"id": "call_k3x9q1", "index": 0, "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"location":"Paris"}`}},
		}}, nil),
		ollama(map[string]any{"role": "assistant", "content": ""}, "tool_calls"),
		`{"id":"chatcmpl-417","object":"chat.completion.chunk","created":1747240000,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":160,"completion_tokens":21,"total_tokens":181}}`,
		"[DONE]",
	))
	p := newProvider(t, f, openai.Options{Models: []string{"llama3.2"}})
	if ms := p.Models(); len(ms) != 1 || ms[0] != (model.Model{ID: "openai/llama3.2", Name: "llama3.2 (OpenAI-compatible)", Provider: "openai"}) {
		t.Errorf("Models() = %+v", ms)
	}
	req := model.Request{ModelID: "openai/llama3.2", Messages: []model.Message{{Role: model.RoleUser, Content: "Weather in Paris?"}}, MaxTokens: 256}
	deltas, res, err := collect(t.Context(), p, req)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(deltas, "") != "Sure." {
		t.Errorf("deltas = %q", deltas)
	}
	want := []model.ToolCall{{ID: "call_k3x9q1", Name: "get_weather", Args: json.RawMessage(`{"location":"Paris"}`)}}
	if !reflect.DeepEqual(res.ToolCalls, want) {
		t.Errorf("tool calls = %+v", res.ToolCalls)
	}
	if res.Usage != (model.Usage{InputTokens: 160, OutputTokens: 21}) {
		t.Errorf("usage = %+v", res.Usage)
	}
	reqs := f.received()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if reqs[0].Authorization != "" {
		t.Errorf("Authorization = %q, want none", reqs[0].Authorization)
	}
	if reqs[0].Body["model"] != "llama3.2" || reqs[0].Body["max_tokens"] != 256.0 || reqs[0].Body["max_completion_tokens"] != nil {
		t.Errorf("model = %v, max_tokens = %v, max_completion_tokens = %v", reqs[0].Body["model"], reqs[0].Body["max_tokens"], reqs[0].Body["max_completion_tokens"])
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	p, err := openai.New(openai.Options{APIKey: testKey, Models: []string{"gpt-4o-mini", " gpt-4.1 "}})
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Model{
		{ID: "openai/gpt-4o-mini", Name: "gpt-4o-mini (OpenAI)", Provider: "openai", Input: model.Input{Images: true}},
		{ID: "openai/gpt-4.1", Name: "gpt-4.1 (OpenAI)", Provider: "openai", Input: model.Input{Images: true}},
	}
	got := p.Models()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Models() = %+v, want %+v", got, want)
	}
	got[0].ID = "changed"
	if p.Models()[0].ID != "openai/gpt-4o-mini" {
		t.Error("Models() returned the provider's own slice")
	}
	if _, err := model.NewRegistry(model.Builtin{}, p); err != nil {
		t.Errorf("NewRegistry: %v", err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    openai.Options
		wantErr string // "" means success
	}{
		{"api key", openai.Options{APIKey: testKey, Models: []string{"gpt-4o-mini"}}, ""},
		{"base url without key", openai.Options{BaseURL: "http://localhost:11434/v1", Models: []string{"llama3.2"}}, ""},
		{"base url and key", openai.Options{APIKey: "token", BaseURL: "https://vllm.internal:8000/v1/", Models: []string{"meta-llama/Llama-3.1-8B-Instruct"}}, ""},
		{"no models", openai.Options{APIKey: testKey}, "at least one model"},
		{"neither key nor base url", openai.Options{Models: []string{"gpt-4o-mini"}}, "API key is required"},
		{"blank key and no base url", openai.Options{APIKey: "  ", Models: []string{"gpt-4o-mini"}}, "API key is required"},
		{"blank model", openai.Options{APIKey: testKey, Models: []string{"gpt-4o-mini", " "}}, "blank model"},
		{"repeated model", openai.Options{APIKey: testKey, Models: []string{"gpt-4o-mini", "gpt-4o-mini"}}, "listed twice"},
		{"base url not http", openai.Options{BaseURL: "ftp://example.com/v1", Models: []string{"m"}}, "absolute http(s) URL"},
		{"base url relative", openai.Options{BaseURL: "localhost:11434", Models: []string{"m"}}, "absolute http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := openai.New(tt.opts)
			if tt.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("the key leaked: %v", err)
			}
		})
	}
}

// TestBaseURLTrailingSlash checks that a base URL with a trailing slash
// still reaches /v1/chat/completions.
func TestBaseURLTrailingSlash(t *testing.T) {
	t.Parallel()
	f := newFake(t, stream(first(), content("ok"), finish("stop"), usage(1, 1), "[DONE]"))
	p := newProvider(t, f, openai.Options{APIKey: testKey, BaseURL: f.URL + "/v1/"})
	if _, _, err := collect(t.Context(), p, userRequest("hi")); err != nil {
		t.Fatal(err)
	}
	if r := f.received(); len(r) != 1 || r[0].Path != "/v1/chat/completions" {
		t.Errorf("requests = %+v", r)
	}
}

// TestGenerateAttachments: images go as image_url data URLs before the
// text, which carries text files as context; a model without vision gets
// notes instead, and PDFs always do.
func TestGenerateAttachments(t *testing.T) {
	t.Parallel()
	f := newFake(t, stream(first(), content("A cat."), finish("stop"), usage(90, 3), "[DONE]"))
	img := model.Attachment{Name: "cat.png", ContentType: "image/png", Size: 4, Data: []byte("\x89PNG")}
	doc := model.Attachment{Name: "notes.txt", ContentType: "text/plain", Size: 5, Text: "hello"}
	pdf := model.Attachment{Name: "paper.pdf", ContentType: "application/pdf", Size: 8, Data: []byte("%PDF-1.7")}
	p := newProvider(t, f, openai.Options{APIKey: testKey, Models: []string{"gpt-4o-mini", "gpt-3.5-turbo"}})
	msgs := func(id string) model.Request {
		return model.Request{ModelID: id, Messages: []model.Message{{Role: model.RoleUser, Content: "What is this?", Attachments: []model.Attachment{img, doc, pdf}}}}
	}
	if _, _, err := collect(t.Context(), p, msgs("openai/gpt-4o-mini")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := collect(t.Context(), p, msgs("openai/gpt-3.5-turbo")); err != nil {
		t.Fatal(err)
	}
	reqs := f.received()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	vision := reqs[0].Body["messages"].([]any)[0].(map[string]any)
	parts, ok := vision["content"].([]any)
	if !ok || len(parts) != 2 {
		t.Fatalf("vision model's content %v, want two parts", vision["content"])
	}
	image := parts[0].(map[string]any)
	if image["type"] != "image_url" || image["image_url"].(map[string]any)["url"] != "data:image/png;base64,iVBORw==" {
		t.Errorf("image part %v", image)
	}
	text := parts[1].(map[string]any)
	if text["type"] != "text" || !strings.Contains(text["text"].(string), "<attachment name=\"notes.txt\"") ||
		!strings.Contains(text["text"].(string), `[Attached document "paper.pdf"`) || !strings.HasSuffix(text["text"].(string), "What is this?") {
		t.Errorf("text part %v", text)
	}
	plain := reqs[1].Body["messages"].([]any)[0].(map[string]any)
	content, ok := plain["content"].(string)
	if !ok || !strings.Contains(content, `[Attached image "cat.png" (image/png, 4 B): this model does not take images`) ||
		!strings.Contains(content, "hello") || !strings.HasSuffix(content, "What is this?") {
		t.Errorf("text-only model's content %v", plain["content"])
	}
}

func TestDefaultInput(t *testing.T) {
	t.Parallel()
	for name, images := range map[string]bool{"gpt-4o": true, "gpt-4o-mini": true, "gpt-4.1-nano": true, "gpt-5": true, "o3": true, "o3-mini": false,
		"o1-mini": false, "o4-mini": true, "gpt-3.5-turbo": false, "gpt-4": false, "llava:13b": true, "llama3.2-vision": true, "qwen2.5vl:7b": true,
		"qwen2.5-vl-7b": true, "llama3.2": false, "gemma3:4b": true} {
		if got := openai.DefaultInput(name); got.Images != images || got.Documents {
			t.Errorf("DefaultInput(%q) = %+v, want images %v, no documents", name, got, images)
		}
	}
}
