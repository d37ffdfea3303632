package e2e_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// chatJSON is a chat as the API returns it.
type chatJSON struct {
	ID         string    `json:"id"`
	UserID     string    `json:"userId"`
	Title      string    `json:"title"`
	WorkflowID string    `json:"workflowId"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// messageJSON is a chat message as the API returns it.
type messageJSON struct {
	ID           string         `json:"id"`
	ChatID       string         `json:"chatId"`
	Role         string         `json:"role"`
	Content      string         `json:"content"`
	ModelID      string         `json:"modelId"`
	ReplyTo      string         `json:"replyTo"`
	ToolCalls    []toolCallJSON `json:"toolCalls"`
	InputTokens  int            `json:"inputTokens"`
	OutputTokens int            `json:"outputTokens"`
	Truncated    bool           `json:"truncated"`
	Status       string         `json:"status"`
	CreatedAt    time.Time      `json:"createdAt"`
	// AttachmentIDs are the files a user message carried.
	AttachmentIDs []string `json:"attachmentIds"`
}

type toolCallJSON struct {
	ToolName  string          `json:"toolName"`
	ToolArgs  json.RawMessage `json:"toolArgs"`
	Result    json.RawMessage `json:"result"`
	Truncated bool            `json:"truncated"`
	// ResultURL (a signed GET) and ResultSize come with a result kept
	// whole in the blob store.
	ResultURL  string `json:"resultUrl"`
	ResultSize int64  `json:"resultSize"`
}

// exchangeJSON is the answer of POST /api/chats/{chatId}/messages.
type exchangeJSON struct {
	messageJSON
	Response messageJSON `json:"response"`
}

type chatPageJSON struct {
	Chats []chatJSON `json:"chats"`
	Total int        `json:"total"`
}

// signUpChatUser signs c up as a new user and returns the user's id.
func signUpChatUser(t *testing.T, c *client, email string) string {
	t.Helper()
	r := c.do("POST", "/api/auth/sign-up/email", map[string]string{"email": email, "password": "chat-password-1", "name": strings.Split(email, "@")[0]})
	if r.Status != 200 {
		t.Fatalf("sign-up %s: %d %s", email, r.Status, r.Body)
	}
	var s sessionBody
	r.decode(t, &s)
	if s.Data.User.ID == "" {
		t.Fatalf("sign-up %s: no user id in %s", email, r.Body)
	}
	return s.Data.User.ID
}

// newChat creates a chat with body and returns it; it fails the test
// unless the answer is 201.
func newChat(t *testing.T, c *client, body any) chatJSON {
	t.Helper()
	r := c.do("POST", "/api/chats", body)
	if r.Status != 201 {
		t.Fatalf("create chat %v: %d %s", body, r.Status, r.Body)
	}
	var out struct{ Data chatJSON }
	r.decode(t, &out)
	return out.Data
}

// listChats returns the page at query (e.g. "?limit=2") of userID's chats.
func listChats(t *testing.T, c *client, userID, query string) chatPageJSON {
	t.Helper()
	r := c.do("GET", "/api/users/"+userID+"/chats"+query, nil)
	if r.Status != 200 {
		t.Fatalf("list chats%s: %d %s", query, r.Status, r.Body)
	}
	var out struct{ Data chatPageJSON }
	r.decode(t, &out)
	return out.Data
}

func chatIDs(chats []chatJSON) []string {
	ids := make([]string, len(chats))
	for i, c := range chats {
		ids[i] = c.ID
	}
	return ids
}

// expectChats checks the ids of a page, in order, and its total.
func expectChats(t *testing.T, name string, got chatPageJSON, total int, want ...chatJSON) {
	t.Helper()
	if got.Total != total || !reflect.DeepEqual(chatIDs(got.Chats), chatIDs(want)) || got.Chats == nil {
		t.Errorf("%s: chats %q total %d, want %q total %d", name, chatIDs(got.Chats), got.Total, chatIDs(want), total)
	}
}

// getMessages returns the messages of chat id; it fails the test unless
// the answer is 200.
func getMessages(t *testing.T, c *client, chatID string) []messageJSON {
	t.Helper()
	r := c.do("GET", "/api/chats/"+chatID+"/messages", nil)
	if r.Status != 200 {
		t.Fatalf("messages of %s: %d %s", chatID, r.Status, r.Body)
	}
	var out struct {
		Data struct {
			Messages []messageJSON `json:"messages"`
		}
	}
	r.decode(t, &out)
	if out.Data.Messages == nil {
		t.Fatalf("messages of %s: %s, want an array", chatID, r.Body)
	}
	return out.Data.Messages
}

// sendMessage posts body to chat id and returns the exchange; it fails the
// test unless the answer is 201.
func sendMessage(t *testing.T, c *client, chatID string, body any) exchangeJSON {
	t.Helper()
	r := c.do("POST", "/api/chats/"+chatID+"/messages", body)
	if r.Status != 201 {
		t.Fatalf("send %v: %d %s", body, r.Status, r.Body)
	}
	var out struct{ Data exchangeJSON }
	r.decode(t, &out)
	return out.Data
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Errorf("not JSON: %s", a)
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Errorf("not JSON: %s", b)
		return false
	}
	return reflect.DeepEqual(x, y)
}

// expectField checks that an error body names field in its details.
func expectField(t *testing.T, name string, e errorBody, field string) {
	t.Helper()
	for _, d := range e.Details {
		if d.Field == field {
			return
		}
	}
	t.Errorf("%s: details %+v do not name %q", name, e.Details, field)
}

const unknownUUID = "00000000-0000-4000-8000-000000000000"

// TestChatsJourney drives chat CRUD and listing with two users: every
// status and error code of the chat operations.
func TestChatsJourney(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada, eve, anon := newClient(t, srv.API), newClient(t, srv.API), newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "ada.chats@example.com")
	eveID := signUpChatUser(t, eve, "eve.chats@example.com")

	// Create.
	expectError(t, "anonymous create", anon.do("POST", "/api/chats", map[string]any{}), 401, "UNAUTHORIZED")
	start := time.Now().Add(-time.Second)
	c1 := newChat(t, ada, map[string]any{})
	if c1.Title != "New chat" || c1.UserID != adaID || c1.WorkflowID != "" || !c1.CreatedAt.Equal(c1.UpdatedAt) || c1.CreatedAt.Before(start) {
		t.Errorf("untitled chat: %+v, want title %q, owner %s, createdAt = updatedAt = now", c1, "New chat", adaID)
	}
	c2 := newChat(t, ada, map[string]any{"title": "  Trip planning  ", "unknown": true})
	if c2.Title != "Trip planning" || c2.UserID != adaID {
		t.Errorf("titled chat: %+v, want the title trimmed", c2)
	}
	if blank := newChat(t, eve, map[string]any{"title": "   "}); blank.Title != "New chat" || blank.UserID != eveID {
		t.Errorf("blank title: %+v, want New chat owned by eve", blank)
	}
	long := strings.Repeat("é", 200) // 200 characters, 400 bytes
	c3 := newChat(t, ada, map[string]any{"title": long})
	if c3.Title != long {
		t.Errorf("200-character title: got %d characters", len([]rune(c3.Title)))
	}
	e := expectError(t, "title over 200", ada.do("POST", "/api/chats", map[string]any{"title": long + "x"}), 400, "VALIDATION_FAILED")
	expectField(t, "title over 200", e, "title")
	for _, bad := range []string{"a\nb", "a\x00b", "a\tb"} {
		e = expectError(t, "title with a control character", ada.do("POST", "/api/chats", map[string]any{"title": bad}), 400, "VALIDATION_FAILED")
		expectField(t, "title with a control character", e, "title")
		e = expectError(t, "renamed with a control character", ada.do("PATCH", "/api/chats/"+c3.ID, map[string]any{"title": bad}), 400, "VALIDATION_FAILED")
		expectField(t, "renamed with a control character", e, "title")
	}
	c4 := newChat(t, ada, map[string]any{"title": " spaced \n"})
	if c4.Title != "spaced" {
		t.Errorf("a title with a line break at its end: %q, want it trimmed", c4.Title)
	}
	if r := ada.do("DELETE", "/api/chats/"+c4.ID, nil); r.Status != 204 { // out of the lists below
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	e = expectError(t, "title of the wrong type", ada.do("POST", "/api/chats", `{"title": 5}`), 400, "VALIDATION_FAILED")
	expectField(t, "title of the wrong type", e, "title")
	expectError(t, "malformed JSON", ada.do("POST", "/api/chats", `{"title":`), 400, "INVALID_JSON")
	expectError(t, "no body", ada.do("POST", "/api/chats", nil), 400, "INVALID_JSON")
	e = expectError(t, "workflowId not a UUID", ada.do("POST", "/api/chats", map[string]any{"workflowId": "nope"}), 400, "VALIDATION_FAILED")
	expectField(t, "workflowId not a UUID", e, "workflowId")
	expectError(t, "create too large", ada.do("POST", "/api/chats", `{"title":"`+strings.Repeat("x", 1<<20)+`"}`), 413, "PAYLOAD_TOO_LARGE")

	// List, newest first, with pagination.
	expectChats(t, "list all", listChats(t, ada, adaID, ""), 3, c3, c2, c1)
	expectChats(t, "limit=2", listChats(t, ada, adaID, "?limit=2"), 3, c3, c2)
	expectChats(t, "offset=2", listChats(t, ada, adaID, "?offset=2"), 3, c1)
	expectChats(t, "limit=1&offset=1", listChats(t, ada, adaID, "?limit=1&offset=1"), 3, c2)
	expectChats(t, "offset past the end", listChats(t, ada, adaID, "?offset=3"), 3)
	expectChats(t, "limit=100", listChats(t, ada, adaID, "?limit=100&offset=0"), 3, c3, c2, c1)
	if page := listChats(t, ada, adaID, ""); !reflect.DeepEqual(page.Chats[2], c1) {
		t.Errorf("listed chat %+v, want it as created: %+v", page.Chats[2], c1)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=-1", "?limit=two", "?limit=", "?offset=-1", "?offset=x"} {
		e := expectError(t, "list"+q, ada.do("GET", "/api/users/"+adaID+"/chats"+q, nil), 400, "INVALID_PAGINATION")
		expectField(t, "list"+q, e, strings.Split(strings.TrimPrefix(q, "?"), "=")[0])
	}
	expectError(t, "another user's list", eve.do("GET", "/api/users/"+adaID+"/chats", nil), 403, "FORBIDDEN")
	expectError(t, "anonymous list", anon.do("GET", "/api/users/"+adaID+"/chats", nil), 401, "UNAUTHORIZED")
	if page := listChats(t, eve, eveID, ""); page.Total != 1 || len(page.Chats) != 1 {
		t.Errorf("eve's list: %+v, want her one chat", page)
	}

	// Get.
	r := ada.do("GET", "/api/chats/"+c2.ID, nil)
	var got struct{ Data chatJSON }
	r.decode(t, &got)
	if r.Status != 200 || !reflect.DeepEqual(got.Data, c2) {
		t.Errorf("get: %d %s, want %+v", r.Status, r.Body, c2)
	}
	e = expectError(t, "get bad id", ada.do("GET", "/api/chats/not-a-uuid", nil), 400, "INVALID_ID")
	expectField(t, "get bad id", e, "chatId")
	expectError(t, "get unknown", ada.do("GET", "/api/chats/"+unknownUUID, nil), 404, "CHAT_NOT_FOUND")
	expectError(t, "get another user's", eve.do("GET", "/api/chats/"+c2.ID, nil), 403, "FORBIDDEN")
	expectError(t, "get anonymous", anon.do("GET", "/api/chats/"+c2.ID, nil), 401, "UNAUTHORIZED")

	// Rename: moves the chat to the top.
	r = ada.do("PATCH", "/api/chats/"+c1.ID, map[string]any{"title": " Renamed "})
	var renamed struct{ Data chatJSON }
	r.decode(t, &renamed)
	if r.Status != 200 || renamed.Data.Title != "Renamed" || renamed.Data.ID != c1.ID || !renamed.Data.CreatedAt.Equal(c1.CreatedAt) || !renamed.Data.UpdatedAt.After(c1.UpdatedAt) {
		t.Errorf("rename: %d %s, want title Renamed and a later updatedAt", r.Status, r.Body)
	}
	r = ada.do("GET", "/api/chats/"+c1.ID, nil)
	r.decode(t, &got)
	if !reflect.DeepEqual(got.Data, renamed.Data) {
		t.Errorf("get after rename: %+v, want %+v", got.Data, renamed.Data)
	}
	expectChats(t, "list after rename", listChats(t, ada, adaID, ""), 3, c1, c3, c2)
	e = expectError(t, "rename without title", ada.do("PATCH", "/api/chats/"+c1.ID, map[string]any{}), 400, "VALIDATION_FAILED")
	expectField(t, "rename without title", e, "title")
	e = expectError(t, "rename over 200", ada.do("PATCH", "/api/chats/"+c1.ID, map[string]any{"title": long + "x"}), 400, "VALIDATION_FAILED")
	expectField(t, "rename over 200", e, "title")
	expectError(t, "rename malformed JSON", ada.do("PATCH", "/api/chats/"+c1.ID, "nope"), 400, "INVALID_JSON")
	expectError(t, "rename bad id", ada.do("PATCH", "/api/chats/123", map[string]any{"title": "x"}), 400, "INVALID_ID")
	expectError(t, "rename unknown", ada.do("PATCH", "/api/chats/"+unknownUUID, map[string]any{"title": "x"}), 404, "CHAT_NOT_FOUND")
	expectError(t, "rename another user's", eve.do("PATCH", "/api/chats/"+c1.ID, map[string]any{"title": "mine now"}), 403, "FORBIDDEN")
	expectError(t, "rename anonymous", anon.do("PATCH", "/api/chats/"+c1.ID, map[string]any{"title": "x"}), 401, "UNAUTHORIZED")
	expectError(t, "rename too large", ada.do("PATCH", "/api/chats/"+c1.ID, `{"title":"`+strings.Repeat("x", 1<<20)+`"}`), 413, "PAYLOAD_TOO_LARGE")
	r = ada.do("GET", "/api/chats/"+c1.ID, nil)
	r.decode(t, &got)
	if got.Data.Title != "Renamed" {
		t.Errorf("after refused renames the title is %q, want Renamed", got.Data.Title)
	}

	// Posting a message moves the chat to the top and sets its updatedAt
	// to the reply's time.
	ex := sendMessage(t, ada, c2.ID, map[string]any{"content": "hello", "modelId": "builtin"})
	expectChats(t, "list after a message", listChats(t, ada, adaID, ""), 3, c2, c1, c3)
	r = ada.do("GET", "/api/chats/"+c2.ID, nil)
	r.decode(t, &got)
	if !got.Data.UpdatedAt.Equal(ex.Response.CreatedAt) || got.Data.Title != c2.Title {
		t.Errorf("chat after a message: %+v, want updatedAt = the reply's createdAt %s", got.Data, ex.Response.CreatedAt)
	}

	// Delete.
	expectError(t, "delete another user's", eve.do("DELETE", "/api/chats/"+c2.ID, nil), 403, "FORBIDDEN")
	expectError(t, "delete anonymous", anon.do("DELETE", "/api/chats/"+c2.ID, nil), 401, "UNAUTHORIZED")
	expectError(t, "delete bad id", ada.do("DELETE", "/api/chats/x", nil), 400, "INVALID_ID")
	expectError(t, "delete unknown", ada.do("DELETE", "/api/chats/"+unknownUUID, nil), 404, "CHAT_NOT_FOUND")
	expectChats(t, "list after refused deletes", listChats(t, ada, adaID, ""), 3, c2, c1, c3)
	for _, c := range []chatJSON{c3, c2} { // c2 has messages
		r = ada.do("DELETE", "/api/chats/"+c.ID, nil)
		if r.Status != 204 || len(r.Body) != 0 {
			t.Errorf("delete %s: %d %q, want 204 without a body", c.ID, r.Status, r.Body)
		}
		expectError(t, "get deleted", ada.do("GET", "/api/chats/"+c.ID, nil), 404, "CHAT_NOT_FOUND")
		expectError(t, "messages of deleted", ada.do("GET", "/api/chats/"+c.ID+"/messages", nil), 404, "CHAT_NOT_FOUND")
		expectError(t, "delete again", ada.do("DELETE", "/api/chats/"+c.ID, nil), 404, "CHAT_NOT_FOUND")
	}
	expectChats(t, "list after deletes", listChats(t, ada, adaID, ""), 1, c1)
	if page := listChats(t, eve, eveID, ""); page.Total != 1 {
		t.Errorf("eve's total after ada's deletes: %d, want 1", page.Total)
	}
}

// TestChatMessages posts messages and reads them back: replies of the
// built-in model, its tool call, the model preference, and every error.
func TestChatMessages(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada, eve, anon := newClient(t, srv.API), newClient(t, srv.API), newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "ada.messages@example.com")
	eveID := signUpChatUser(t, eve, "eve.messages@example.com")
	chat := newChat(t, ada, map[string]any{"title": "Messages"})
	evesChat := newChat(t, eve, map[string]any{})
	path := "/api/chats/" + chat.ID + "/messages"

	if msgs := getMessages(t, ada, chat.ID); len(msgs) != 0 {
		t.Errorf("new chat has %d messages", len(msgs))
	}

	// A plain message.
	before := time.Now().Add(-time.Second)
	ex1 := sendMessage(t, ada, chat.ID, map[string]any{"content": "Hello, assistant!", "modelId": "builtin"})
	if ex1.Role != "user" || ex1.Content != "Hello, assistant!" || ex1.ChatID != chat.ID || ex1.ID == "" || ex1.CreatedAt.Before(before) ||
		ex1.ModelID != "" || ex1.ToolCalls != nil {
		t.Errorf("user message: %+v", ex1.messageJSON)
	}
	reply := ex1.Response
	if reply.Role != "assistant" || reply.ModelID != "builtin" || reply.Content == "" || reply.ChatID != chat.ID || reply.ID == "" || reply.ID == ex1.ID ||
		reply.CreatedAt.Before(ex1.CreatedAt) || reply.InputTokens <= 0 || reply.OutputTokens <= 0 || reply.ToolCalls != nil {
		t.Errorf("reply: %+v", reply)
	}
	if !strings.Contains(reply.Content, "Hello, assistant!") {
		t.Errorf("the built-in reply %q does not quote the message", reply.Content)
	}

	// The built-in model calls json_query and reports its result.
	prompt := `run json_query with {"query": ".a", "input": {"a": 1}}`
	ex2 := sendMessage(t, ada, chat.ID, map[string]any{"content": prompt, "modelId": "builtin", "userId": adaID})
	if ex2.Content != prompt || ex2.Response.ModelID != "builtin" {
		t.Errorf("tool exchange: %+v", ex2)
	}
	if calls := ex2.Response.ToolCalls; len(calls) != 1 || calls[0].ToolName != "json_query" ||
		!jsonEqual(t, calls[0].ToolArgs, []byte(`{"query":".a","input":{"a":1}}`)) || !jsonEqual(t, calls[0].Result, []byte(`{"result":1}`)) {
		t.Errorf("tool calls: %+v, want json_query with its arguments and result {\"result\":1}", calls)
	}
	if c := ex2.Response.Content; !strings.Contains(c, "json_query") || !strings.Contains(c, `{"result":1}`) {
		t.Errorf("reply %q does not report the tool's result", c)
	}

	// Conversation order: user, assistant, user, assistant, as returned.
	msgs := getMessages(t, ada, chat.ID)
	want := []messageJSON{ex1.messageJSON, ex1.Response, ex2.messageJSON, ex2.Response}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		w := want[i]
		if m.ID != w.ID || m.Role != w.Role || m.Content != w.Content || m.ChatID != w.ChatID || m.ModelID != w.ModelID ||
			!m.CreatedAt.Equal(w.CreatedAt) || m.InputTokens != w.InputTokens || m.OutputTokens != w.OutputTokens || len(m.ToolCalls) != len(w.ToolCalls) {
			t.Errorf("message %d: %+v, want %+v", i, m, w)
			continue
		}
		for j := range m.ToolCalls {
			if m.ToolCalls[j].ToolName != w.ToolCalls[j].ToolName || !jsonEqual(t, m.ToolCalls[j].ToolArgs, w.ToolCalls[j].ToolArgs) ||
				!jsonEqual(t, m.ToolCalls[j].Result, w.ToolCalls[j].Result) {
				t.Errorf("message %d tool call %d: %+v, want %+v", i, j, m.ToolCalls[j], w.ToolCalls[j])
			}
		}
	}

	// Without modelId: the user's preference, else the default; with only
	// the built-in model served, both are builtin.
	if ex := sendMessage(t, eve, evesChat.ID, map[string]any{"content": "no preference yet"}); ex.Response.ModelID != "builtin" {
		t.Errorf("reply without a preference: modelId %q, want builtin", ex.Response.ModelID)
	}
	if r := ada.do("POST", "/api/users/"+adaID+"/model-preference", map[string]any{"modelId": "builtin"}); r.Status != 200 {
		t.Fatalf("set preference: %d %s", r.Status, r.Body)
	}
	if ex := sendMessage(t, ada, chat.ID, map[string]any{"content": "use my preference", "modelId": ""}); ex.Response.ModelID != "builtin" || ex.Response.Content == "" {
		t.Errorf("reply with the preference: %+v, want modelId builtin", ex.Response)
	}

	// Content bounds count characters, not bytes.
	if ex := sendMessage(t, ada, chat.ID, map[string]any{"content": strings.Repeat("é", 32000), "modelId": "builtin"}); len([]rune(ex.Content)) != 32000 {
		t.Errorf("32000-character message stored with %d characters", len([]rune(ex.Content)))
	}
	n := len(getMessages(t, ada, chat.ID))

	// Errors.
	for _, tt := range []struct {
		name  string
		c     *client
		path  string
		body  any
		code  string
		field string
	}{
		{"content missing", ada, path, map[string]any{"modelId": "builtin"}, "VALIDATION_FAILED", "content"},
		{"content empty", ada, path, map[string]any{"content": "", "modelId": "builtin"}, "VALIDATION_FAILED", "content"},
		{"content blank", ada, path, map[string]any{"content": " \n\t ", "modelId": "builtin"}, "VALIDATION_FAILED", "content"},
		{"content over 32000", ada, path, map[string]any{"content": strings.Repeat("é", 32001), "modelId": "builtin"}, "VALIDATION_FAILED", "content"},
		{"content of the wrong type", ada, path, `{"content": ["hi"]}`, "VALIDATION_FAILED", "content"},
		{"malformed JSON", ada, path, `{"content": "hi"`, "INVALID_JSON", ""},
		{"no body", ada, path, nil, "INVALID_JSON", ""},
		{"unknown model", ada, path, map[string]any{"content": "hi", "modelId": "no-such-model"}, "INVALID_MODEL", "modelId"},
		{"bad chat id", ada, "/api/chats/nope/messages", map[string]any{"content": "hi", "modelId": "builtin"}, "INVALID_ID", "chatId"},
	} {
		e := expectError(t, tt.name, tt.c.do("POST", tt.path, tt.body), 400, tt.code)
		if tt.field != "" {
			expectField(t, tt.name, e, tt.field)
		}
	}
	expectError(t, "userId of another user", ada.do("POST", path, map[string]any{"content": "hi", "modelId": "builtin", "userId": eveID}), 403, "FORBIDDEN")
	expectError(t, "another user's chat", eve.do("POST", path, map[string]any{"content": "hi", "modelId": "builtin"}), 403, "FORBIDDEN")
	expectError(t, "unknown chat", ada.do("POST", "/api/chats/"+unknownUUID+"/messages", map[string]any{"content": "hi", "modelId": "builtin"}), 404, "CHAT_NOT_FOUND")
	expectError(t, "anonymous", anon.do("POST", path, map[string]any{"content": "hi", "modelId": "builtin"}), 401, "UNAUTHORIZED")
	big := `{"content":"` + strings.Repeat("x", 1<<20+1<<20/10) + `","modelId":"builtin"}` // 1.1 MiB
	expectError(t, "1.1 MiB body", ada.do("POST", path, big), 413, "PAYLOAD_TOO_LARGE")

	expectError(t, "list bad id", ada.do("GET", "/api/chats/nope/messages", nil), 400, "INVALID_ID")
	expectError(t, "list unknown chat", ada.do("GET", "/api/chats/"+unknownUUID+"/messages", nil), 404, "CHAT_NOT_FOUND")
	expectError(t, "list another user's", eve.do("GET", path, nil), 403, "FORBIDDEN")
	expectError(t, "list anonymous", anon.do("GET", path, nil), 401, "UNAUTHORIZED")

	if got := len(getMessages(t, ada, chat.ID)); got != n {
		t.Errorf("refused messages were stored: %d messages, want %d", got, n)
	}
	if got := getMessages(t, eve, evesChat.ID); len(got) != 2 {
		t.Errorf("eve's chat has %d messages, want 2", len(got))
	}
}
