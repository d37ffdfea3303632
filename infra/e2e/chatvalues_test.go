package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Bounds of a reply's values (docs/decisions.md, "Large values in
// replies"), as the API documents them.
const (
	// toolResultBound: a tool result of at most this many bytes of JSON
	// is kept whole everywhere; a longer one is kept whole in the blob
	// store only, and cut to it elsewhere.
	toolResultBound = 32 << 10
	// maxEventBytes bounds the JSON of every event of a reply.
	maxEventBytes = 128 << 10
)

// bigQuery is the report's reproduction: json_query returning a string of
// the numbers 0..99999 joined by spaces, 588,890 characters.
const bigQuery = `run json_query with {"input": 1, "query": "[range(100000)] | map(tostring) | join(\" \")"}`

// bigResultText is the string bigQuery's result holds.
func bigResultText() string {
	var b strings.Builder
	for i := range 100000 {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, i)
	}
	return b.String()
}

// xQuery asks json_query for {"result": "xxx..."} of exactly n bytes of
// JSON (the envelope {"result":""} is 13 bytes).
func xQuery(n int) string {
	return fmt.Sprintf(`run json_query with {"input": 1, "query": "\"x\" * %d"}`, n-13)
}

// expectWholeResult fetches a tool call's resultUrl and checks that it
// serves the whole result, whose "result" field is want.
func expectWholeResult(t *testing.T, call toolCallJSON, want string) {
	t.Helper()
	if call.ResultURL == "" || !call.Truncated {
		t.Fatalf("tool call %s: truncated %v, resultUrl %q", call.ToolName, call.Truncated, call.ResultURL)
	}
	r := blobRequest(t, "GET", call.ResultURL, nil, nil)
	var whole struct{ Result string }
	if r.Status != 200 || json.Unmarshal(r.Body, &whole) != nil || whole.Result != want {
		t.Fatalf("resultUrl: %d, %d bytes, result of %d characters (want %d)", r.Status, len(r.Body), len(whole.Result), len(want))
	}
	if call.ResultSize != int64(len(r.Body)) {
		t.Errorf("resultSize %d, the whole result is %d bytes", call.ResultSize, len(r.Body))
	}
}

// TestLargeToolResultInStream is the report's reproduction: a streamed
// reply whose tool result is 589 KB ended with INTERNAL_ERROR "the reply
// could not be saved" (the tool_result event went into the reply's log
// whole and the log item passed DynamoDB's 400 KB), the message stayed
// streaming and the chat locked. Now every event is under its bound, the
// reply completes, its tool call shows the result cut with a resultUrl
// serving it whole, the tokens are counted, and the chat takes the next
// message at once. The same through POST .../messages.
func TestLargeToolResultInStream(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "big-stream@example.com")
	chat := newChat(t, c, map[string]any{"title": "big result"})
	want := bigResultText()

	res := c.stream(chat.ID, map[string]any{"content": bigQuery, "modelId": "builtin", "userId": userID})
	if res.Status != 200 {
		t.Fatalf("stream: %d %s", res.Status, res.Body)
	}
	types := streamTypes(res.Events)
	last := res.Events[len(res.Events)-1]
	if strings.Contains(types, "error") || last.Type != "end" || last.Reason != "completed" || !strings.Contains(types, "tool_call tool_result") {
		t.Fatalf("events %.300q, last %+v", types, last)
	}
	for _, e := range res.Events {
		if e.Size > maxEventBytes {
			t.Errorf("event %s (%s) is %d bytes, over %d", e.ID, e.Type, e.Size, maxEventBytes)
		}
		if e.Type == "tool_result" {
			expectCut(t, "tool_result event", e.Result, `{"result":"0 1 2 3`)
			if !e.Truncated || e.ResultSize != int64(len(want)+13) || len(e.Result) > toolResultBound {
				t.Errorf("tool_result event: truncated %v, resultSize %d, result of %d bytes", e.Truncated, e.ResultSize, len(e.Result))
			}
		}
	}
	msgs := getMessages(t, c, chat.ID)
	if len(msgs) != 2 || msgs[1].Status != "completed" || msgs[1].OutputTokens == 0 || len(msgs[1].ToolCalls) != 1 {
		t.Fatalf("stored reply: %+v", msgs[len(msgs)-1])
	}
	call := msgs[1].ToolCalls[0]
	expectCut(t, "stored tool result", call.Result, `{"result":"0 1 2 3`)
	expectWholeResult(t, call, want)
	// What the model read was cut to the bound: the built-in model
	// reports what it read.
	if n := len(msgs[1].Content); n > toolResultBound+1000 || !strings.Contains(msgs[1].Content, `"truncated":true`) {
		t.Errorf("the model's report is %d bytes: %.200s", n, msgs[1].Content)
	}

	// The chat is free at once.
	ex := sendMessage(t, c, chat.ID, map[string]any{"content": bigQuery, "modelId": "builtin"})
	if ex.Response.Status != "completed" || len(ex.Response.ToolCalls) != 1 {
		t.Fatalf("plain message: %+v", ex.Response)
	}
	expectWholeResult(t, ex.Response.ToolCalls[0], want)
	msgs = getMessages(t, c, chat.ID)
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4", len(msgs))
	}
	expectWholeResult(t, msgs[3].ToolCalls[0], want)

	// Deleting the chat deletes the kept results: their URLs stop working
	// when the DELETE answers.
	if r := c.do("DELETE", "/api/chats/"+chat.ID, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	for _, m := range []messageJSON{msgs[1], msgs[3]} {
		if r := blobRequest(t, "GET", m.ToolCalls[0].ResultURL, nil, nil); r.Status != 404 {
			t.Errorf("resultUrl after the chat's delete: %d", r.Status)
		}
	}
}

// TestToolResultSizes: a tool result at the bound is kept whole (no
// resultUrl), one byte over is cut with a resultUrl, in the stream and in
// POST .../messages alike, and 4 MiB too (over the 512 KiB that travel inline from the tool server,
// so the result comes back by reference).
func TestToolResultSizes(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "sizes@example.com")
	for _, tt := range []struct {
		name string
		size int
		cut  bool
	}{
		{"at the bound", toolResultBound, false},
		{"one byte over", toolResultBound + 1, true},
		{"4 MiB", 4<<20 - 1024, true},
	} {
		want := strings.Repeat("x", tt.size-13)
		check := func(how string, call toolCallJSON) {
			t.Helper()
			if !tt.cut {
				if call.Truncated || call.ResultURL != "" || len(call.Result) != tt.size {
					t.Errorf("%s, %s: truncated %v, resultUrl %q, %d bytes", tt.name, how, call.Truncated, call.ResultURL, len(call.Result))
				}
				return
			}
			expectCut(t, tt.name+", "+how, call.Result, `{"result":"xxxx`)
			expectWholeResult(t, call, want)
		}
		chat := newChat(t, c, map[string]any{"title": tt.name})
		res := c.stream(chat.ID, map[string]any{"content": xQuery(tt.size), "modelId": "builtin", "userId": userID})
		if last := res.Events[len(res.Events)-1]; res.Status != 200 || last.Reason != "completed" {
			t.Fatalf("%s: stream %d, events %q", tt.name, res.Status, streamTypes(res.Events))
		}
		for _, e := range res.Events {
			if e.Size > maxEventBytes {
				t.Errorf("%s: event %s is %d bytes", tt.name, e.Type, e.Size)
			}
		}
		ex := sendMessage(t, c, chat.ID, map[string]any{"content": xQuery(tt.size), "modelId": "builtin"})
		check("message", ex.Response.ToolCalls[0])
		msgs := getMessages(t, c, chat.ID)
		if len(msgs) != 4 || msgs[1].Status != "completed" || msgs[3].Status != "completed" {
			t.Fatalf("%s: messages %+v", tt.name, msgs)
		}
		check("stream", msgs[1].ToolCalls[0])
		check("stored message", msgs[3].ToolCalls[0])
	}
}

// TestLongChatPausedReply is the second reproduction: in a chat of 16
// messages of 32,000 characters, a tool call that needs approval paused
// the reply, whose state (the conversation sent to the model) did not fit
// an item: INTERNAL_ERROR, the message stuck streaming, the chat locked
// until the sweeper. The state now goes to the blob store and comes back
// whole when the reply goes on.
func TestLongChatPausedReply(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "TOOLS_ALLOW_PRIVATE_NETWORKS=true")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "long-paused@example.com")
	chat := newChat(t, c, map[string]any{"title": "long"})
	for i := range 16 { // 16 user messages of 32,000 characters, each answered
		long := fmt.Sprintf("message %d: %s", i, strings.Repeat("y", 32000-12))
		sendMessage(t, c, chat.ID, map[string]any{"content": long, "modelId": "builtin"})
	}
	ask := `run http_request with {"url": "http://127.0.0.1:1/unreachable"}`
	res := c.stream(chat.ID, map[string]any{"content": ask, "modelId": "builtin", "userId": userID})
	callID := approvalOf(t, res)
	msgs := getMessages(t, c, chat.ID)
	if len(msgs) != 34 || msgs[33].Status != "awaiting_approval" {
		t.Fatalf("paused reply: %d messages, last %+v", len(msgs), msgs[len(msgs)-1])
	}
	if r := c.do("POST", "/api/chats/"+chat.ID+"/tool-calls/"+callID+"/deny", nil); r.Status != 202 {
		t.Fatalf("deny: %d %s", r.Status, r.Body)
	}
	cont := c.resume(chat.ID, "", false)
	if got := streamTypes(cont.Events); cont.Status != 200 || !strings.HasPrefix(got, "tool_call tool_result") || !strings.HasSuffix(got, "end") {
		t.Fatalf("continuation: %d %q", cont.Status, got)
	}
	if r := string(cont.Events[1].Result); !strings.Contains(r, "did not allow") {
		t.Errorf("denied call's result %s", r)
	}
	msgs = getMessages(t, c, chat.ID)
	if last := msgs[len(msgs)-1]; len(msgs) != 34 || last.Status != "completed" || !strings.Contains(last.Content, "did not allow") {
		t.Fatalf("continued reply: %d messages, last %+v", len(msgs), last)
	}
	// The chat takes the next message.
	sendMessage(t, c, chat.ID, map[string]any{"content": "thanks", "modelId": "builtin"})
}

// readyAttachment creates an attachment of chatID holding data and
// uploads it; the attachment is ready at its next read.
func readyAttachment(t *testing.T, c *client, chatID, name, contentType string, data []byte) attachmentJSON {
	t.Helper()
	a := newAttachment(t, c, chatID, name, contentType, int64(len(data)))
	if r := upload(t, a, data); r.Status != 200 {
		t.Fatalf("upload %s: %d %s", name, r.Status, r.Body)
	}
	return a
}

// TestMessageAttachments: a message carries ready attachments of its chat
// to the model (POST .../messages and the stream alike): the built-in
// model says what it received, reads a text file's words (its input
// tokens count them), and the stored user message lists the ids. Another
// user's attachment, another chat's, an unknown one are 404; one not
// uploaded or failed is 409; more than 10, malformed, repeated ids, or
// ids with a workflowId are 400; nothing is stored for any of them.
func TestMessageAttachments(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "ALLOWED_ORIGINS="+frontendOrigin)
	ada, bob := newClient(t, srv.API), newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "ada-msg-files@example.com")
	signUpChatUser(t, bob, "bob-msg-files@example.com")
	chat := newChat(t, ada, map[string]any{"title": "with files"})
	words := strings.Repeat("pineapple ", 1000)
	notes := readyAttachment(t, ada, chat.ID, "notes.md", "text/markdown", []byte("# Notes\n\n"+words))
	photo := readyAttachment(t, ada, chat.ID, "photo.png", "image/png", pngFile)

	plain := sendMessage(t, ada, chat.ID, map[string]any{"content": "what is in my files?", "modelId": "builtin"})
	ex := sendMessage(t, ada, chat.ID, map[string]any{"content": "what is in my files?", "modelId": "builtin",
		"attachmentIds": []string{notes.ID, strings.ToUpper(photo.ID)}})
	const wantSaid = "I received 1 image (photo.png, image/png, 1016 B) and 1 document (notes.md, text/markdown, 9.8 KB)."
	if !strings.HasPrefix(ex.Response.Content, wantSaid) {
		t.Errorf("reply %q, want it to start %q", ex.Response.Content, wantSaid)
	}
	if got := ex.Response.InputTokens - plain.Response.InputTokens; got < 1000 {
		t.Errorf("the text file added %d input tokens, want its 1000 words and more", got)
	}
	if strings.Join(ex.AttachmentIDs, ",") != notes.ID+","+photo.ID {
		t.Errorf("the user message's attachmentIds %v", ex.AttachmentIDs)
	}
	res := ada.stream(chat.ID, map[string]any{"content": "and now?", "modelId": "builtin", "userId": adaID, "attachmentIds": []string{photo.ID}})
	if res.Status != 200 || !strings.Contains(checkSequence(t, res.Events[0].MessageID, 1, res.Events), "I received 1 image (photo.png") {
		t.Fatalf("stream with an image: %d %q", res.Status, streamTypes(res.Events))
	}
	msgs := getMessages(t, ada, chat.ID)
	if len(msgs) != 6 || strings.Join(msgs[2].AttachmentIDs, ",") != notes.ID+","+photo.ID ||
		strings.Join(msgs[4].AttachmentIDs, ",") != photo.ID || msgs[0].AttachmentIDs != nil || msgs[3].AttachmentIDs != nil {
		t.Fatalf("stored messages: %+v", msgs)
	}

	// Refusals, each before anything is stored.
	bobChat := newChat(t, bob, map[string]any{"title": "bob's"})
	bobFile := readyAttachment(t, bob, bobChat.ID, "bob.txt", "text/plain", []byte("bob's"))
	otherChat := newChat(t, ada, map[string]any{"title": "other"})
	otherFile := readyAttachment(t, ada, otherChat.ID, "other.txt", "text/plain", []byte("other"))
	pending := newAttachment(t, ada, chat.ID, "later.txt", "text/plain", 5)
	failed := newAttachment(t, ada, chat.ID, "fake.png", "image/png", 5)
	if r := upload(t, failed, []byte("hello")); r.Status != 200 {
		t.Fatalf("upload: %d", r.Status)
	}
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	}
	for _, tt := range []struct {
		name   string
		ids    []string
		extra  map[string]any
		status int
		code   string
		field  string
	}{
		{"another user's attachment", []string{notes.ID, bobFile.ID}, nil, 404, "ATTACHMENT_NOT_FOUND", ""},
		{"another chat's attachment", []string{otherFile.ID}, nil, 404, "ATTACHMENT_NOT_FOUND", ""},
		{"unknown attachment", []string{unknownUUID}, nil, 404, "ATTACHMENT_NOT_FOUND", ""},
		{"not uploaded", []string{pending.ID}, nil, 409, "ATTACHMENT_NOT_READY", ""},
		{"failed", []string{failed.ID}, nil, 409, "ATTACHMENT_FAILED", ""},
		{"eleven", eleven, nil, 400, "VALIDATION_FAILED", "attachmentIds"},
		{"malformed", []string{"nope"}, nil, 400, "VALIDATION_FAILED", "attachmentIds[0]"},
		{"repeated", []string{notes.ID, notes.ID}, nil, 400, "VALIDATION_FAILED", "attachmentIds[1]"},
		{"with a workflow", []string{notes.ID}, map[string]any{"workflowId": unknownUUID}, 400, "VALIDATION_FAILED", "attachmentIds"},
	} {
		body := map[string]any{"content": "look", "modelId": "builtin", "userId": adaID, "attachmentIds": tt.ids}
		for k, v := range tt.extra {
			body[k] = v
		}
		paths := []string{"/messages", "/messages/stream"}
		if tt.extra != nil {
			paths = paths[1:] // only the stream takes a workflowId
		}
		for _, p := range paths {
			e := expectError(t, tt.name+" "+p, ada.do("POST", "/api/chats/"+chat.ID+p, body), tt.status, tt.code)
			if tt.field != "" {
				expectField(t, tt.name, e, tt.field)
			}
			if tt.status == 404 && strings.Contains(e.Message, "bob") {
				t.Errorf("%s: the error tells of the other user's file: %q", tt.name, e.Message)
			}
		}
	}
	// Bob cannot use Ada's file in his chat either.
	expectError(t, "ada's attachment in bob's chat", bob.do("POST", "/api/chats/"+bobChat.ID+"/messages",
		map[string]any{"content": "look", "attachmentIds": []string{notes.ID}}), 404, "ATTACHMENT_NOT_FOUND")
	if got := getMessages(t, ada, chat.ID); len(got) != 6 {
		t.Errorf("%d messages after the refusals, want 6", len(got))
	}
	if got := getMessages(t, bob, bobChat.ID); len(got) != 0 {
		t.Errorf("bob's chat holds %d messages", len(got))
	}
}
