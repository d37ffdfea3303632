package chat_test

import (
	"io"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/chat"
)

// TestChatHoldsAtMostMaxChatBytes: a message, a streamed message or a
// regenerate in a chat without room for it (chat.MaxChatBytes, every
// branch counted) is 409 CHAT_FULL before the model is called, with
// nothing stored; the chat stays readable. Below the bound by the
// message's own weight, the message is taken.
func TestChatHoldsAtMostMaxChatBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, 0)
	id := f.newChat(t)
	// Contents filling the chat to 2,000 bytes under its bound: each
	// message counts its content and chat.MessageOverhead.
	var contents []string
	for left := chat.MaxChatBytes - 2_000; left > 0; {
		n := min(300_000, left) - chat.MessageOverhead
		contents = append(contents, strings.Repeat("x", n))
		left -= n + chat.MessageOverhead
	}
	if len(contents)%2 == 1 { // end on a reply, so that a regenerate has one
		last := contents[len(contents)-1]
		contents[len(contents)-1] = last[:len(last)/2]
		contents = append(contents, last[len(last)/2:len(last)-chat.MessageOverhead])
	}
	stored := f.chain(t, id, contents...)
	reply := stored[len(stored)-1]
	count := func() int {
		l, _, _ := f.list(t, id, "?leaf="+reply.ID)
		return len(l.Messages) + l.Omitted
	}
	before := count()

	over := strings.Repeat("y", 2_000-chat.MessageOverhead+1)
	for _, tc := range []struct{ name, path, body string }{
		{"message", "/api/chats/" + id + "/messages", `{"content":"` + over + `","modelId":"loop"}`},
		{"stream", "/api/chats/" + id + "/messages/stream", `{"content":"` + over + `","modelId":"loop","userId":"` + f.userID + `"}`},
	} {
		resp := f.do(t, "POST", tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 409 || !strings.Contains(string(b), `"code":"CHAT_FULL"`) {
			t.Errorf("%s one byte over: %d %s", tc.name, resp.StatusCode, b)
		}
	}
	if n := f.loop.calls.Load(); n != 0 {
		t.Errorf("the model was called %d times for messages the chat had no room for", n)
	}
	if n := count(); n != before {
		t.Errorf("refused messages left %d messages", n-before)
	}

	// At the bound exactly: taken, and its reply stored past it.
	at := strings.Repeat("z", 2_000-chat.MessageOverhead)
	resp := f.do(t, "POST", "/api/chats/"+id+"/messages", `{"content":"`+at+`","modelId":"builtin"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("a message at the bound: %d %s", resp.StatusCode, b)
	}
	// Full now: a regenerate of the last reply is refused too.
	l, _, _ := f.list(t, id, "")
	last := l.Messages[len(l.Messages)-1]
	resp = f.do(t, "POST", "/api/chats/"+id+"/messages/"+last.ID+"/regenerate", `{"modelId":"loop"}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 409 || !strings.Contains(string(b), `"code":"CHAT_FULL"`) {
		t.Errorf("regenerate in a full chat: %d %s", resp.StatusCode, b)
	}
	if n := f.loop.calls.Load(); n != 0 {
		t.Errorf("the model was called %d times", n)
	}
}
