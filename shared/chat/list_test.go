package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/model"
)

// chain stores contents as a chain of messages of chat id (user and
// assistant in turn, each following the one before) and returns them.
func (f *fixture) chain(t *testing.T, id string, contents ...string) []chat.Message {
	t.Helper()
	ctx := context.Background()
	c, err := f.raw.Chat(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []chat.Message
	var parent *string
	at := time.Now().Add(-time.Hour)
	if c.Leaf != "" {
		leaf := c.Leaf
		parent = &leaf
	}
	for i, content := range contents {
		at = at.Add(time.Millisecond)
		role := model.RoleUser
		if i%2 == 1 {
			role = model.RoleAssistant
		}
		m := chat.Message{ID: uuid.NewString(), ChatID: id, Role: role, Content: content, Status: chat.StatusCompleted, CreatedAt: at, ParentID: parent}
		if err := f.raw.AddMessages(ctx, c, m); err != nil {
			t.Fatal(err)
		}
		mid := m.ID
		parent = &mid
		out = append(out, m)
	}
	return out
}

// list answers GET .../messages with its body's size.
func (f *fixture) list(t *testing.T, id, query string) (chat.MessageList, int, string) {
	t.Helper()
	resp := f.do(t, "GET", "/api/chats/"+id+"/messages"+query, "")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET messages%s: %d %v", query, resp.StatusCode, err)
	}
	var body struct{ Data chat.MessageList }
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	return body.Data, len(b), string(b)
}

// jsonSize is the bytes the bound counts for msgs: each message's JSON
// with its comma.
// jsonSize is the bytes msgs take in a buffered Lambda's answer, each
// with its comma: their JSON as a JSON string (the response event's
// body), its quotes left out.
func jsonSize(t *testing.T, msgs []chat.Message) int {
	t.Helper()
	n := 0
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		s, err := json.Marshal(string(b))
		if err != nil {
			t.Fatal(err)
		}
		n += len(s) - 2 + 1
	}
	return n
}

// lambdaPayload is the size of the response event a buffered Lambda
// function answers with body, encoded as aws-lambda-go encodes it.
func lambdaPayload(t *testing.T, body string) int {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: body}); err != nil {
		t.Fatal(err)
	}
	return buf.Len()
}

// TestMessagesListFitsALambdaAnswer: content whose quotes and backslashes
// are escaped again in the Lambda's response event (code, pasted JSON)
// is counted as it travels, so the answer stays under the 6 MB a Lambda
// may return.
func TestMessagesListFitsALambdaAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, 0)
	unit := "if (a[\"k\"] == \"v\") {\n\treturn \"x\\\\y\";\n}\n"
	code := strings.Repeat(unit, chat.MaxContentLen/len([]rune(unit)))
	id := f.newChat(t)
	contents := make([]string, 130)
	for i := range contents {
		contents[i] = code
	}
	stored := f.chain(t, id, contents...)
	l, _, raw := f.list(t, id, "")
	if n := lambdaPayload(t, raw); n >= 6_000_000 {
		t.Fatalf("a Lambda answer of %d bytes (%d messages, %d omitted)", n, len(l.Messages), l.Omitted)
	}
	if l.Omitted == 0 || l.Omitted+len(l.Messages) != len(stored) {
		t.Fatalf("%d messages, %d omitted, want some of %d left out", len(l.Messages), l.Omitted, len(stored))
	}
}

// TestMessagesListIsBounded: GET .../messages answers at most
// chat.MaxListBytes of messages, under what a Lambda behind API Gateway
// may answer (6 MB): a path of 50 messages of 32,000 emoji (6.4 MB) is
// answered from its leaf back, as many as fit and no fewer, with
// `omitted` counting the older ones, whose newest is the first message's
// parent; ?leaf= of it answers them. A path of exactly the bound is
// answered whole, without `omitted`; one more message leaves the first
// one out.
func TestMessagesListIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, 0)
	ctx := auth.ActingFor(context.Background(), f.userID)
	big := strings.Repeat("😀", chat.MaxContentLen)

	id := f.newChat(t)
	contents := make([]string, 50)
	for i := range contents {
		contents[i] = big
	}
	stored := f.chain(t, id, contents...)
	l, size, raw := f.list(t, id, "")
	if size >= 6_000_000 || size > chat.MaxListBytes+100 {
		t.Fatalf("answer of %d bytes", size)
	}
	if l.Omitted == 0 || l.Omitted+len(l.Messages) != len(stored) || !strings.Contains(raw, `"omitted":`) {
		t.Fatalf("%d messages, %d omitted, want %d in all", len(l.Messages), l.Omitted, len(stored))
	}
	if last := l.Messages[len(l.Messages)-1]; last.ID != stored[len(stored)-1].ID {
		t.Errorf("last message %s, want the leaf %s", last.ID, stored[len(stored)-1].ID)
	}
	newestLeftOut := stored[l.Omitted-1]
	if p := l.Messages[0].ParentID; p == nil || *p != newestLeftOut.ID {
		t.Errorf("the first message's parent %v, want the newest left out %s", p, newestLeftOut.ID)
	}
	// As many as fit: one more would not.
	path, err := f.svc.Messages(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	kept := path[l.Omitted:]
	if n := jsonSize(t, kept); n > chat.MaxListBytes || jsonSize(t, path[l.Omitted-1:]) <= chat.MaxListBytes {
		t.Errorf("%d messages of %d bytes kept: not the most that fit in %d", len(kept), n, chat.MaxListBytes)
	}
	// The older ones, through ?leaf=.
	older, _, _ := f.list(t, id, "?leaf="+newestLeftOut.ID)
	if older.Omitted != 0 || len(older.Messages) != l.Omitted || older.Messages[0].ID != stored[0].ID {
		t.Errorf("?leaf= of the newest left out: %d messages, %d omitted; want %d from the first", len(older.Messages), older.Omitted, l.Omitted)
	}

	// Exactly at the bound: 40 messages of 32,000 emoji and one filling
	// what is left.
	at := f.newChat(t)
	stored = f.chain(t, at, contents[:40]...)
	filler := f.chain(t, at, "x")[0]
	path, err = f.svc.Messages(ctx, at, "")
	if err != nil {
		t.Fatal(err)
	}
	left := chat.MaxListBytes - jsonSize(t, path)
	// The filler's content ("x") grows to left+1 bytes, in at most
	// MaxContentLen characters.
	n := left + 1
	filler.Content = strings.Repeat("😀", n/4) + strings.Repeat("a", n%4)
	if left <= 0 || len([]rune(filler.Content)) > chat.MaxContentLen {
		t.Fatalf("%d bytes left under the bound", left)
	}
	c, err := f.raw.Chat(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.raw.AddMessages(context.Background(), c, filler); err != nil {
		t.Fatal(err)
	}
	path, err = f.svc.Messages(ctx, at, "")
	if err != nil || jsonSize(t, path) != chat.MaxListBytes {
		t.Fatalf("path of %d bytes (%v), want %d", jsonSize(t, path), err, chat.MaxListBytes)
	}
	l, _, raw = f.list(t, at, "")
	if l.Omitted != 0 || len(l.Messages) != 41 || strings.Contains(raw, `"omitted"`) {
		t.Errorf("at the bound: %d messages, %d omitted; want all 41, no omitted", len(l.Messages), l.Omitted)
	}
	f.chain(t, at, "b")
	l, _, _ = f.list(t, at, "")
	if l.Omitted != 1 || len(l.Messages) != 41 || l.Messages[0].ID != stored[1].ID {
		t.Errorf("one byte over: %d messages, %d omitted; want the first left out", len(l.Messages), l.Omitted)
	}
}
