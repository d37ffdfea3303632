package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tmaxmax/go-sse"
)

// streamEvent is one event of the chat stream (docs/openapi.yaml, StreamEvent).
type streamEvent struct {
	Type      string          `json:"type"`
	MessageID string          `json:"messageId"`
	Delta     string          `json:"delta"`
	ToolName  string          `json:"toolName"`
	ToolArgs  json.RawMessage `json:"toolArgs"`
	Result    json.RawMessage `json:"result"`
	Error     string          `json:"error"`
	Message   string          `json:"message"`
	Reason    string          `json:"reason"`
	// Content is the reply as saved, on error INTERRUPTED.
	Content *string `json:"content"`
	// ToolCallID names the call of a tool_approval event.
	ToolCallID string `json:"toolCallId"`
	// Truncated and ResultSize, on a tool_result, say that its result
	// was cut and how large it is whole.
	Truncated  bool  `json:"truncated"`
	ResultSize int64 `json:"resultSize"`
	// Citations, on an end event, are the reply's citations.
	Citations []citationJSON `json:"citations"`
	// ID is the event's SSE id, <messageId>:<seq>.
	ID string `json:"-"`
	// Size is the length of the event's data, its JSON.
	Size int `json:"-"`
}

// eventIDPattern is the form of an event's SSE id.
var eventIDPattern = regexp.MustCompile(`^[0-9a-f-]{36}:[1-9][0-9]*$`)

// eventSchemas names the schema of docs/openapi.yaml of each event type.
var eventSchemas = map[string]string{
	"start":         "StartEvent",
	"content":       "ContentEvent",
	"tool_call":     "ToolCallEvent",
	"tool_result":   "ToolResultEvent",
	"end":           "EndEvent",
	"error":         "ErrorEvent",
	"tool_approval": "ToolApprovalEvent",
}

// openStream posts body to the stream of chatID as an SSE client does. The
// caller closes the response body.
func (c *client) openStream(ctx context.Context, chatID string, body any) *http.Response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/api/chats/"+chatID+"/messages/stream", rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("stream: %v", err)
	}
	return resp
}

// streamResult is a stream read to its end, or the JSON error answered
// instead of a stream.
type streamResult struct {
	Status int
	Header http.Header
	Events []streamEvent
	// Body is the body of a non-200 answer.
	Body []byte
}

func (r streamResult) response() response {
	return response{Status: r.Status, Header: r.Header, Body: r.Body}
}

// stream posts body to the stream of chatID and reads every event until
// the server ends the stream.
func (c *client) stream(chatID string, body any) streamResult {
	c.t.Helper()
	return c.readStream(c.openStream(context.Background(), chatID, body))
}

// readStream reads resp, a stream or its JSON error, to its end and
// closes it.
func (c *client) readStream(resp *http.Response) streamResult {
	c.t.Helper()
	defer resp.Body.Close()
	res := streamResult{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		res.Body, _ = io.ReadAll(resp.Body)
		return res
	}
	expectStreamHeaders(c.t, resp.Header)
	for e, err := range readEvents(c.t, resp.Body) {
		if err != nil {
			c.t.Fatalf("reading the stream: %v", err)
		}
		res.Events = append(res.Events, e)
	}
	return res
}

// readEvents parses r with go-sse's reader and yields each event, decoded
// after its JSON was validated against the event schemas of the OpenAPI
// document (StreamEvent, and the schema its type names).
func readEvents(t *testing.T, r io.Reader) func(func(streamEvent, error) bool) {
	return func(yield func(streamEvent, error) bool) {
		for ev, err := range sse.Read(r, nil) {
			if err != nil {
				yield(streamEvent{}, err)
				return
			}
			if ev.Type != "" || !eventIDPattern.MatchString(ev.LastEventID) || strings.Contains(ev.Data, "\n") {
				t.Errorf("event %+v: want one data line, an id <messageId>:<seq> and no event field", ev)
			}
			var e streamEvent
			if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
				t.Errorf("event data %q is not JSON: %v", ev.Data, err)
				continue
			}
			if err := spec.ValidateSchema("StreamEvent", []byte(ev.Data)); err != nil {
				t.Errorf("event %s: %v", ev.Data, err)
			}
			if name, ok := eventSchemas[e.Type]; !ok {
				t.Errorf("event %s: unknown type %q", ev.Data, e.Type)
			} else if err := spec.ValidateSchema(name, []byte(ev.Data)); err != nil {
				t.Errorf("event %s: %v", ev.Data, err)
			}
			e.ID, e.Size = ev.LastEventID, len(ev.Data)
			if !yield(e, nil) {
				return
			}
		}
	}
}

func expectStreamHeaders(t *testing.T, h http.Header) {
	t.Helper()
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", h.Get("Content-Type"))
	}
	if cc := h.Get("Cache-Control"); !strings.Contains(cc, "no-cache") {
		t.Errorf("Cache-Control %q, want no-cache", cc)
	}
	if h.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
}

// checkOrder checks the order of a complete stream: start first, end last
// with start's message id, no error, each tool_call directly followed by
// its tool_result. It returns the message id and the concatenated deltas.
func checkOrder(t *testing.T, events []streamEvent) (id, content string) {
	t.Helper()
	if len(events) < 2 || events[0].Type != "start" || events[len(events)-1].Type != "end" {
		t.Fatalf("events %+v: want start first and end last", events)
	}
	id = events[0].MessageID
	if end := events[len(events)-1]; end.MessageID != id {
		t.Errorf("end.messageId %q != start.messageId %q", end.MessageID, id)
	}
	var b strings.Builder
	for i, e := range events[1 : len(events)-1] {
		switch e.Type {
		case "content":
			b.WriteString(e.Delta)
		case "tool_call":
			if next := events[i+2]; next.Type != "tool_result" || next.ToolName != e.ToolName {
				t.Errorf("tool_call %+v is followed by %+v, want its tool_result", e, next)
			}
		case "tool_result":
			if prev := events[i]; prev.Type != "tool_call" {
				t.Errorf("tool_result %+v follows %+v, want its tool_call", e, prev)
			}
		default:
			t.Errorf("event %d: %+v in the middle of the stream", i+1, e)
		}
	}
	return id, b.String()
}

// TestStreamEventSchemas makes sure the event schemas the stream is
// checked against are strict: a permissive schema would let anything pass.
func TestStreamEventSchemas(t *testing.T) {
	t.Parallel()
	const id = "0b7c7c8e-3f57-4c2e-9a55-5d7c9d3f0a11"
	for _, ok := range []string{
		`{"type":"start","messageId":"` + id + `"}`,
		`{"type":"content","delta":"Hi"}`,
		`{"type":"tool_call","toolName":"json_query","toolArgs":{"query":".a"}}`,
		`{"type":"tool_result","toolName":"json_query","result":{"result":1}}`,
		`{"type":"end","messageId":"` + id + `","reason":"completed"}`,
		`{"type":"error","error":"MODEL_UNAVAILABLE","message":"retry shortly"}`,
	} {
		if err := spec.ValidateSchema("StreamEvent", []byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`{"type":"start"}`,
		`{"type":"start","messageId":"42"}`,
		`{"type":"start","messageId":"` + id + `","delta":"x"}`,
		`{"type":"content","delta":""}`,
		`{"type":"content"}`,
		`{"type":"tool_call","toolName":"json_query"}`,
		`{"type":"tool_call","toolName":"json_query","toolArgs":"{}"}`,
		`{"type":"tool_result","toolName":"json_query"}`,
		`{"type":"end","messageId":null}`,
		`{"type":"end","messageId":"` + id + `"}`,
		`{"type":"end","messageId":"` + id + `","reason":"done"}`,
		`{"type":"error","error":"oops","message":"m"}`,
		`{"type":"error","message":"m"}`,
		`{"type":"done"}`,
		`{"messageId":"` + id + `"}`,
	} {
		if err := spec.ValidateSchema("StreamEvent", []byte(bad)); err == nil {
			t.Errorf("%s: StreamEvent accepts it", bad)
		}
	}
}

// TestStream streams replies of the built-in model through the dev server
// and checks every event, their order, the stored messages, and the JSON
// errors answered before a stream starts.
func TestStream(t *testing.T) {
	t.Parallel()
	srv := startServer(t)

	t.Run("reply", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, srv.API)
		userID := signUpChatUser(t, c, "stream.reply@example.com")
		chat := newChat(t, c, map[string]any{})

		res := c.stream(chat.ID, map[string]any{"content": "Tell me about streams, please.", "modelId": "builtin", "userId": userID})
		if res.Status != 200 {
			t.Fatalf("stream: %d %s", res.Status, res.Body)
		}
		id, content := checkOrder(t, res.Events)
		if n := len(res.Events) - 2; n < 3 {
			t.Errorf("%d content events, want the reply in several chunks", n)
		}
		if !strings.Contains(content, "Tell me about streams, please.") {
			t.Errorf("reply %q does not quote the message", content)
		}

		// The user message and the reply are stored, the reply with the
		// announced id and the streamed content.
		msgs := getMessages(t, c, chat.ID)
		if len(msgs) != 2 {
			t.Fatalf("%d messages stored, want 2: %+v", len(msgs), msgs)
		}
		if u := msgs[0]; u.Role != "user" || u.Content != "Tell me about streams, please." || u.ChatID != chat.ID {
			t.Errorf("user message: %+v", u)
		}
		if a := msgs[1]; a.ID != id || a.Role != "assistant" || a.Content != content || a.ModelID != "builtin" || a.ChatID != chat.ID || a.CreatedAt.Before(msgs[0].CreatedAt) {
			t.Errorf("assistant message: %+v, want id %s and content %q", a, id, content)
		}

		// A second turn continues the conversation in order.
		res = c.stream(chat.ID, map[string]any{"content": "And again.", "modelId": "builtin", "userId": userID})
		if res.Status != 200 {
			t.Fatalf("second stream: %d %s", res.Status, res.Body)
		}
		id2, content2 := checkOrder(t, res.Events)
		msgs = getMessages(t, c, chat.ID)
		if len(msgs) != 4 || msgs[2].Role != "user" || msgs[2].Content != "And again." || msgs[3].ID != id2 || msgs[3].Content != content2 || id2 == id {
			t.Errorf("after the second stream: %+v", msgs)
		}
		// Streaming moved the chat to the top of the list.
		other := newChat(t, c, map[string]any{"title": "newer"})
		if res := c.stream(chat.ID, map[string]any{"content": "bump", "modelId": "builtin", "userId": userID}); res.Status != 200 {
			t.Fatalf("third stream: %d %s", res.Status, res.Body)
		}
		expectChats(t, "list after a stream", listChats(t, c, userID, ""), 2, chat, other)
	})

	t.Run("tool call", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, srv.API)
		userID := signUpChatUser(t, c, "stream.tools@example.com")
		chat := newChat(t, c, map[string]any{})

		res := c.stream(chat.ID, map[string]any{"content": `run json_query with {"query": ".a", "input": {"a": 1}}`, "modelId": "builtin", "userId": userID})
		if res.Status != 200 {
			t.Fatalf("stream: %d %s", res.Status, res.Body)
		}
		id, content := checkOrder(t, res.Events)
		call, result := -1, -1
		for i, e := range res.Events {
			switch e.Type {
			case "tool_call":
				call = i
				if e.ToolName != "json_query" || !jsonEqual(t, e.ToolArgs, []byte(`{"query":".a","input":{"a":1}}`)) {
					t.Errorf("tool_call %+v, want json_query with the prompt's arguments", e)
				}
			case "tool_result":
				result = i
				if e.ToolName != "json_query" || !jsonEqual(t, e.Result, []byte(`{"result":1}`)) {
					t.Errorf("tool_result %+v, want json_query's result {\"result\":1}", e)
				}
			}
		}
		if call < 2 || result != call+1 || res.Events[call-1].Type != "content" || res.Events[result+1].Type != "content" {
			t.Errorf("events %+v: want content, tool_call, tool_result, content", res.Events)
		}
		if !strings.Contains(content, `{"result":1}`) {
			t.Errorf("reply %q does not report the result", content)
		}
		msgs := getMessages(t, c, chat.ID)
		if len(msgs) != 2 || msgs[1].ID != id || msgs[1].Content != content || len(msgs[1].ToolCalls) != 1 ||
			msgs[1].ToolCalls[0].ToolName != "json_query" || !jsonEqual(t, msgs[1].ToolCalls[0].Result, []byte(`{"result":1}`)) ||
			!jsonEqual(t, msgs[1].ToolCalls[0].ToolArgs, []byte(`{"query":".a","input":{"a":1}}`)) {
			t.Errorf("stored messages: %+v", msgs)
		}
	})

	t.Run("errors before the stream", func(t *testing.T) {
		t.Parallel()
		ada, eve, anon := newClient(t, srv.API), newClient(t, srv.API), newClient(t, srv.API)
		adaID := signUpChatUser(t, ada, "stream.ada@example.com")
		eveID := signUpChatUser(t, eve, "stream.eve@example.com")
		chat := newChat(t, ada, map[string]any{})
		ok := func(extra ...any) map[string]any {
			b := map[string]any{"content": "hi", "modelId": "builtin", "userId": adaID}
			for i := 0; i+1 < len(extra); i += 2 {
				if extra[i+1] == nil {
					delete(b, extra[i].(string))
				} else {
					b[extra[i].(string)] = extra[i+1]
				}
			}
			return b
		}
		for _, tt := range []struct {
			name   string
			c      *client
			chatID string
			body   any
			status int
			code   string
			field  string
		}{
			{"missing modelId", ada, chat.ID, ok("modelId", nil), 400, "VALIDATION_FAILED", "modelId"},
			{"empty modelId", ada, chat.ID, ok("modelId", ""), 400, "VALIDATION_FAILED", "modelId"},
			{"missing userId", ada, chat.ID, ok("userId", nil), 400, "VALIDATION_FAILED", "userId"},
			{"missing content", ada, chat.ID, ok("content", nil), 400, "VALIDATION_FAILED", "content"},
			{"blank content", ada, chat.ID, ok("content", "   "), 400, "VALIDATION_FAILED", "content"},
			{"content over 32000", ada, chat.ID, ok("content", strings.Repeat("x", 32001)), 400, "VALIDATION_FAILED", "content"},
			{"workflowId not a UUID", ada, chat.ID, ok("workflowId", "nope"), 400, "VALIDATION_FAILED", "workflowId"},
			{"malformed JSON", ada, chat.ID, `{"content":`, 400, "INVALID_JSON", ""},
			{"unknown model", ada, chat.ID, ok("modelId", "no-such-model"), 400, "INVALID_MODEL", "modelId"},
			{"bad chat id", ada, "nope", ok(), 400, "INVALID_ID", "chatId"},
			{"anonymous", anon, chat.ID, ok(), 401, "UNAUTHORIZED", ""},
			{"another user's chat", eve, chat.ID, ok("userId", eveID), 403, "FORBIDDEN", ""},
			{"userId not the caller", ada, chat.ID, ok("userId", eveID), 403, "FORBIDDEN", ""},
			{"unknown chat", ada, unknownUUID, ok(), 404, "CHAT_NOT_FOUND", ""},
			{"body over 1 MiB", ada, chat.ID, ok("content", strings.Repeat("x", 1<<20)), 413, "PAYLOAD_TOO_LARGE", ""},
		} {
			res := tt.c.stream(tt.chatID, tt.body)
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("%s: Content-Type %q, want a JSON error", tt.name, ct)
			}
			e := expectError(t, tt.name, res.response(), tt.status, tt.code)
			if tt.field != "" {
				expectField(t, tt.name, e, tt.field)
			}
		}
		// An unknown workflow: 404 where the deployment runs workflows, 400
		// WORKFLOWS_UNAVAILABLE where it cannot.
		res := ada.stream(chat.ID, ok("workflowId", unknownUUID))
		var e errorBody
		res.response().decode(t, &e)
		if !(res.Status == 404 && e.Code == "WORKFLOW_NOT_FOUND") && !(res.Status == 400 && e.Code == "WORKFLOWS_UNAVAILABLE") {
			t.Errorf("unknown workflowId: %d %s, want 404 WORKFLOW_NOT_FOUND or 400 WORKFLOWS_UNAVAILABLE", res.Status, res.Body)
		}
		if msgs := getMessages(t, ada, chat.ID); len(msgs) != 0 {
			t.Errorf("refused streams stored messages: %+v", msgs)
		}
	})
}

// TestStreamDisconnect leaves a stream after its first content event: the
// server goes on generating and saves the whole reply, under the id
// announced in start, as the same reply streamed to its end. BUILTIN_CHUNK_DELAY paces the built-in model so that
// the reply takes long enough to be interrupted.
//
// The keep-alive comment (": ping" after 15 s of silence) is not tested
// end to end: the dev server's ping interval is fixed at 15 s, which would
// make this suite slow, and changing that would need a production change.
// shared/chat's TestStreamKeepAlive covers it in process with a short
// interval.
func TestStreamDisconnect(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "BUILTIN_CHUNK_DELAY=40ms")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "stream.leaver@example.com")
	full, cut := newChat(t, c, map[string]any{"title": "full"}), newChat(t, c, map[string]any{"title": "cut"})
	// About 200 characters, no tool name with JSON: a long plain reply in
	// many chunks.
	content := strings.Repeat("Please describe how a streamed reply is delivered. ", 4)
	body := map[string]any{"content": content, "modelId": "builtin", "userId": userID}

	// Both chats stream at once: "full" to the end, for the whole reply,
	// and "cut", which leaves after the first content event.
	var whole, first, id string
	chunks := 0
	t.Run("streams", func(t *testing.T) {
		t.Run("full", func(t *testing.T) {
			t.Parallel()
			res := c.stream(full.ID, body)
			if res.Status != 200 {
				t.Fatalf("full stream: %d %s", res.Status, res.Body)
			}
			_, whole = checkOrder(t, res.Events)
			chunks = len(res.Events) - 2
		})
		t.Run("cut", func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := c.openStream(ctx, cut.ID, body)
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("stream: %d %s", resp.StatusCode, b)
			}
			expectStreamHeaders(t, resp.Header)
			var got []streamEvent
			for e, err := range readEvents(t, resp.Body) {
				if err != nil {
					t.Fatalf("reading the stream: %v", err)
				}
				got = append(got, e)
				if e.Type != "start" {
					break
				}
			}
			// Leave: cancel the request and close the connection.
			cancel()
			resp.Body.Close()
			if len(got) != 2 || got[0].Type != "start" || got[1].Type != "content" {
				t.Fatalf("events %+v, want start then content", got)
			}
			id, first = got[0].MessageID, got[1].Delta
		})
	})
	if t.Failed() {
		return
	}
	if chunks < 10 {
		t.Fatalf("the full reply came in %d chunks, want many: %q", chunks, whole)
	}

	// The user message and the streaming reply are stored before start;
	// the reply is saved whole when it ends.
	var msgs []messageJSON
	deadline := time.Now().Add(patience)
	for {
		msgs = getMessages(t, c, cut.ID)
		if (len(msgs) == 2 && msgs[1].Status != "streaming") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(msgs) != 2 || msgs[1].Status != "completed" {
		t.Fatalf("after the disconnect: %+v, want the user message and the completed reply", msgs)
	}
	if u := msgs[0]; u.Role != "user" || u.Content != content {
		t.Errorf("user message: %+v", u)
	}
	a := msgs[1]
	if a.ID != id || a.Role != "assistant" || a.ModelID != "builtin" {
		t.Errorf("partial reply %+v, want the assistant message %s announced in start", a, id)
	}
	if !strings.HasPrefix(a.Content, first) || a.Content != whole {
		t.Errorf("reply %q: want the full reply %q, starting with the first delta %q", a.Content, whole, first)
	}
}

// TestStreamToolCallAnnouncedBeforeResult calls a slow tool (http_request
// to a local server that answers only once the client has read the
// tool_call event): the tool_call event ("a tool is being called") must
// reach the client while the tool runs, not together with its result.
// Waiting for the event, not timing it, holds on a loaded machine: a
// tool_call held back until the result would leave the tool waiting until
// its timeout, and the result an error.
func TestStreamToolCallAnnouncedBeforeResult(t *testing.T) {
	t.Parallel()
	announced := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-announced:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"slow":true}`)
	}))
	defer slow.Close()
	srv := startServer(t, "TOOLS_ALLOW_PRIVATE_NETWORKS=true")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "stream.slowtool@example.com")
	chat := newChat(t, c, map[string]any{})
	// http_request asks for approval by default: allow it up front.
	if r := c.do("PUT", "/api/users/"+userID+"/tool-permissions/http_request", map[string]string{"policy": "allow"}); r.Status != 200 {
		t.Fatalf("allow http_request: %d %s", r.Status, r.Body)
	}

	resp := c.openStream(context.Background(), chat.ID, map[string]any{
		"content": `run http_request with {"url": "` + slow.URL + `/data"}`, "modelId": "builtin", "userId": userID})
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	var events []streamEvent
	for e, err := range readEvents(t, resp.Body) {
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		events = append(events, e)
		if e.Type == "tool_call" {
			select {
			case <-announced:
			default:
				close(announced) // the tool may answer now
			}
		}
	}
	checkOrder(t, events)
	var result struct {
		Status int
		JSON   map[string]any
	}
	for _, e := range events {
		if e.Type == "tool_result" {
			_ = json.Unmarshal(e.Result, &result)
		}
	}
	if result.Status != 200 || result.JSON["slow"] != true {
		t.Fatalf("events %+v: want http_request's result with the slow server's answer, which it gives once the client has read tool_call "+
			"(an error here: tool_call did not reach the client while the tool ran)", events)
	}
}
