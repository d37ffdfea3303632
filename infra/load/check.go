package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/tmaxmax/go-sse"
)

// The response checkers: each takes a received response (or its decoded
// payload) and what the request implies, and returns nil only for a
// correct answer. They check what the contract (docs/openapi.yaml)
// promises and a client relies on, not every field's schema: that is the
// end-to-end tests' job.

// apiError is the service's error body.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

// checkStatus returns an error unless status is want, naming the error
// code of an error body.
func checkStatus(status int, body []byte, want int) error {
	if status == want {
		return nil
	}
	var e apiError
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		return fmt.Errorf("status %d %s (%s), want %d", status, e.Code, e.Message, want)
	}
	return fmt.Errorf("status %d, want %d: %.200q", status, want, body)
}

// decodeData checks status and decodes the {"data": ...} envelope into v.
func decodeData(status int, body []byte, want int, v any) error {
	if err := checkStatus(status, body, want); err != nil {
		return err
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("body is not JSON: %v: %.200q", err, body)
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return fmt.Errorf("no data in %.200q", body)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		return fmt.Errorf("data: %v: %.200q", err, env.Data)
	}
	return nil
}

type user struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

type sessionResponse struct {
	User    user `json:"user"`
	Session struct {
		ExpiresAt time.Time `json:"expiresAt"`
	} `json:"session"`
}

// checkSession checks a sign-up, sign-in or session answer for email (and
// userID, when known).
func checkSession(s sessionResponse, userID, email string) error {
	switch {
	case s.User.ID == "":
		return errors.New("user.id is empty")
	case userID != "" && s.User.ID != userID:
		return fmt.Errorf("user.id %q, want %q", s.User.ID, userID)
	case s.User.Email != email:
		return fmt.Errorf("user.email %q, want %q", s.User.Email, email)
	case s.User.CreatedAt.IsZero():
		return errors.New("user.createdAt is missing")
	case !s.Session.ExpiresAt.After(time.Now()):
		return fmt.Errorf("session.expiresAt %v is not in the future", s.Session.ExpiresAt)
	}
	return nil
}

type chatResource struct {
	ID         string    `json:"id"`
	UserID     string    `json:"userId"`
	Title      string    `json:"title"`
	WorkflowID string    `json:"workflowId"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// checkChat checks a chat returned for userID with title.
func checkChat(c chatResource, userID, title string) error {
	switch {
	case !isUUID(c.ID):
		return fmt.Errorf("chat id %q is not a UUID", c.ID)
	case c.UserID != userID:
		return fmt.Errorf("chat userId %q, want %q", c.UserID, userID)
	case c.Title != title:
		return fmt.Errorf("chat title %q, want %q", c.Title, title)
	case c.CreatedAt.IsZero() || c.UpdatedAt.Before(c.CreatedAt):
		return fmt.Errorf("chat times created %v updated %v", c.CreatedAt, c.UpdatedAt)
	}
	return nil
}

type chatPage struct {
	Chats []chatResource `json:"chats"`
	Total *int           `json:"total"`
}

// checkChatPage checks a page of userID's chats: every chat is theirs,
// newest first, at most limit of them, and total counts at least them and
// every chat of want (the chats this user created and has not deleted,
// when they fit on the page).
func checkChatPage(p chatPage, userID string, limit int, want []string) error {
	if p.Total == nil {
		return errors.New("total is missing")
	}
	if len(p.Chats) > limit || *p.Total < len(p.Chats) {
		return fmt.Errorf("%d chats with limit %d and total %d", len(p.Chats), limit, *p.Total)
	}
	ids := map[string]bool{}
	for i, c := range p.Chats {
		if c.UserID != userID {
			return fmt.Errorf("chat %s belongs to %q, not %q", c.ID, c.UserID, userID)
		}
		if i > 0 && c.UpdatedAt.After(p.Chats[i-1].UpdatedAt) {
			return fmt.Errorf("chats not newest first at %d", i)
		}
		ids[c.ID] = true
	}
	if len(want) <= limit {
		if *p.Total != len(want) {
			return fmt.Errorf("total %d, want %d", *p.Total, len(want))
		}
		for _, id := range want {
			if !ids[id] {
				return fmt.Errorf("chat %s missing from the list", id)
			}
		}
	}
	return nil
}

type toolCall struct {
	ToolName string          `json:"toolName"`
	ToolArgs json.RawMessage `json:"toolArgs"`
	Result   json.RawMessage `json:"result"`
}

type message struct {
	ID        string     `json:"id"`
	ChatID    string     `json:"chatId"`
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	ModelID   string     `json:"modelId"`
	ToolCalls []toolCall `json:"toolCalls"`
	CreatedAt time.Time  `json:"createdAt"`
}

type exchange struct {
	message
	Response *message `json:"response"`
}

// toolPrompt makes the built-in model call json_query; the reply then
// reports the result 1.
const toolPrompt = `run json_query with {"input": {"a": 1}, "query": ".a"}`

// checkToolCalls checks the tool calls of a reply to content: exactly the
// json_query call with result 1 for toolPrompt, none otherwise.
func checkToolCalls(calls []toolCall, content string) error {
	if content != toolPrompt {
		if len(calls) != 0 {
			return fmt.Errorf("unexpected tool calls %+v", calls)
		}
		return nil
	}
	if len(calls) != 1 || calls[0].ToolName != "json_query" {
		return fmt.Errorf("tool calls %+v, want one json_query call", calls)
	}
	var res struct {
		Result *float64 `json:"result"`
	}
	if err := json.Unmarshal(calls[0].Result, &res); err != nil || res.Result == nil || *res.Result != 1 {
		return fmt.Errorf("json_query result %s, want {\"result\":1}", calls[0].Result)
	}
	return nil
}

// checkExchange checks POST messages' answer: the stored user message with
// content and the assistant's reply.
func checkExchange(x exchange, chatID, content string) error {
	switch {
	case !isUUID(x.ID) || x.ChatID != chatID || x.Role != "user" || x.Content != content:
		return fmt.Errorf("user message %+v, want chat %s, role user, content %q", x.message, chatID, content)
	case x.Response == nil:
		return errors.New("response is missing")
	case !isUUID(x.Response.ID) || x.Response.ID == x.ID || x.Response.ChatID != chatID || x.Response.Role != "assistant":
		return fmt.Errorf("response %+v, want an assistant message of chat %s", *x.Response, chatID)
	case strings.TrimSpace(x.Response.Content) == "":
		return errors.New("response content is empty")
	case x.Response.CreatedAt.Before(x.CreatedAt):
		return errors.New("response is older than the user message")
	}
	return checkToolCalls(x.Response.ToolCalls, content)
}

// streamEvent is one event of the chat stream.
type streamEvent struct {
	Type      string          `json:"type"`
	MessageID string          `json:"messageId"`
	Delta     string          `json:"delta"`
	ToolName  string          `json:"toolName"`
	ToolArgs  json.RawMessage `json:"toolArgs"`
	Result    json.RawMessage `json:"result"`
	Error     string          `json:"error"`
	Message   string          `json:"message"`
}

// streamResult is what a correct stream announced.
type streamResult struct {
	MessageID string
	Content   string // the concatenated deltas
	ToolCalls []toolCall
}

// checkStreamHeaders checks the stream's status and headers.
func checkStreamHeaders(status int, h http.Header, body []byte) error {
	if err := checkStatus(status, body, http.StatusOK); err != nil {
		return err
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		return fmt.Errorf("Content-Type %q, want text/event-stream", h.Get("Content-Type"))
	}
	if !strings.Contains(h.Get("Cache-Control"), "no-cache") {
		return fmt.Errorf("Cache-Control %q, want no-cache", h.Get("Cache-Control"))
	}
	return nil
}

// readStream parses an SSE body with go-sse: one JSON data line per event.
func readStream(r io.Reader) ([]streamEvent, error) {
	var evs []streamEvent
	for ev, err := range sse.Read(r, nil) {
		if err != nil {
			return evs, fmt.Errorf("reading the stream after %d events: %w", len(evs), err)
		}
		var e streamEvent
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return evs, fmt.Errorf("event %d: data %.200q is not JSON: %v", len(evs), ev.Data, err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// checkStream checks the order of a stream's events: start first, end last
// with the same message id, content, and each tool_call followed by its
// tool_result, no error event; and the tool calls expected for content.
func checkStream(evs []streamEvent, content string) (streamResult, error) {
	var res streamResult
	if len(evs) < 2 {
		return res, fmt.Errorf("%d events, want at least start and end", len(evs))
	}
	first, last := evs[0], evs[len(evs)-1]
	if first.Type != "start" || !isUUID(first.MessageID) {
		return res, fmt.Errorf("first event %+v, want start with a message id", first)
	}
	if last.Type != "end" || last.MessageID != first.MessageID {
		return res, fmt.Errorf("last event %+v, want end with message id %s", last, first.MessageID)
	}
	res.MessageID = first.MessageID
	var b strings.Builder
	var pending *toolCall
	for i, e := range evs[1 : len(evs)-1] {
		switch e.Type {
		case "content":
			if e.Delta == "" {
				return res, fmt.Errorf("event %d: empty delta", i+1)
			}
			b.WriteString(e.Delta)
		case "tool_call":
			if pending != nil {
				return res, fmt.Errorf("event %d: tool_call before the tool_result of %s", i+1, pending.ToolName)
			}
			pending = &toolCall{ToolName: e.ToolName, ToolArgs: e.ToolArgs}
		case "tool_result":
			if pending == nil || pending.ToolName != e.ToolName {
				return res, fmt.Errorf("event %d: tool_result for %q without its tool_call", i+1, e.ToolName)
			}
			pending.Result = e.Result
			res.ToolCalls = append(res.ToolCalls, *pending)
			pending = nil
		case "error":
			return res, fmt.Errorf("error event %s: %s", e.Error, e.Message)
		default:
			return res, fmt.Errorf("event %d: unexpected type %q", i+1, e.Type)
		}
	}
	if pending != nil {
		return res, fmt.Errorf("tool_call %s without tool_result", pending.ToolName)
	}
	res.Content = b.String()
	if strings.TrimSpace(res.Content) == "" {
		return res, errors.New("no content")
	}
	return res, checkToolCalls(res.ToolCalls, content)
}

// checkMessages checks a chat's message list: n messages of chatID,
// alternating user and assistant, and, when last is non-nil, the last one
// is the assistant message a stream announced, with its content.
func checkMessages(ms []message, chatID string, n int, last *streamResult) error {
	if len(ms) != n {
		return fmt.Errorf("%d messages, want %d", len(ms), n)
	}
	for i, m := range ms {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		if m.ChatID != chatID || m.Role != role || !isUUID(m.ID) {
			return fmt.Errorf("message %d: %s of chat %s, want %s of chat %s", i, m.Role, m.ChatID, role, chatID)
		}
		if i > 0 && m.CreatedAt.Before(ms[i-1].CreatedAt) {
			return fmt.Errorf("message %d is older than message %d", i, i-1)
		}
	}
	if last != nil && n > 0 {
		m := ms[n-1]
		if m.ID != last.MessageID || m.Content != last.Content {
			return fmt.Errorf("last message %s %.80q, want the streamed %s %.80q", m.ID, m.Content, last.MessageID, last.Content)
		}
		if len(m.ToolCalls) != len(last.ToolCalls) {
			return fmt.Errorf("last message has %d tool calls, the stream had %d", len(m.ToolCalls), len(last.ToolCalls))
		}
	}
	return nil
}

type tool struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Category    string          `json:"category"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// builtinTools are tool ids the contract requires.
var builtinTools = []string{"http_request", "html_extract", "json_query", "csv_parse", "text_template", "regex_extract", "math_evaluate", "datetime_now", "llm_generate", "hash"}

// checkTools checks the tool catalog: every built-in tool, ordered by id,
// each with a name, category and input schema.
func checkTools(ts []tool) error {
	have := map[string]bool{}
	for i, t := range ts {
		if t.Name == "" || t.Category == "" || len(t.InputSchema) == 0 {
			return fmt.Errorf("tool %+v lacks name, category or input schema", t)
		}
		if i > 0 && t.ID <= ts[i-1].ID {
			return fmt.Errorf("tools not ordered by id at %s", t.ID)
		}
		have[t.ID] = true
	}
	for _, id := range builtinTools {
		if !have[id] {
			return fmt.Errorf("tool %s missing from %d tools", id, len(ts))
		}
	}
	return nil
}

// checkLiveness checks GET /api/liveness's unwrapped body.
func checkLiveness(status int, body []byte) error {
	if err := checkStatus(status, body, http.StatusOK); err != nil {
		return err
	}
	var l struct {
		Status    string    `json:"status"`
		Timestamp time.Time `json:"timestamp"`
	}
	if err := json.Unmarshal(body, &l); err != nil || l.Status != "ok" || l.Timestamp.IsZero() {
		return fmt.Errorf("liveness body %.200q", body)
	}
	return nil
}

// isUUID reports whether s has the canonical 8-4-4-4-12 hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}
