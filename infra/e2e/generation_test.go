package e2e_test

import (
	"context"
	"io"
	"iter"
	"testing"
)

// TestOneGenerationPerChat is the report's reproduction: two streams on
// one chat interleaved their messages. While a stream generates, a second
// stream and a plain message on the same chat are refused 409
// GENERATION_ACTIVE and store nothing, another chat is unaffected, and once
// the reply ends the chat takes messages again. Each assistant message
// names the user message it answers (replyTo).
func TestOneGenerationPerChat(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "one-generation@example.com")
	busy, other := newChat(t, c, map[string]any{"title": "busy"}), newChat(t, c, map[string]any{"title": "other"})
	// A reply of 20 s, stopped once the checks are done.
	long := map[string]any{"content": "count to 200 slowly", "modelId": "builtin", "userId": userID}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := c.openStream(ctx, busy.ID, long)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("first stream: %d %s", resp.StatusCode, b)
	}
	next, stop := iter.Pull2(iter.Seq2[streamEvent, error](readEvents(t, resp.Body)))
	defer stop()
	first, err, ok := next()
	if !ok || err != nil || first.Type != "start" {
		t.Fatalf("first event %+v, want start", first)
	}

	// The reply is being generated (the built-in model paces its chunks).
	short := map[string]any{"content": "hi", "modelId": "builtin"}
	second := c.stream(busy.ID, map[string]any{"content": "hi", "modelId": "builtin", "userId": userID})
	expectError(t, "second stream on the chat", second.response(), 409, "GENERATION_ACTIVE")
	expectError(t, "message on the chat", c.do("POST", "/api/chats/"+busy.ID+"/messages", short), 409, "GENERATION_ACTIVE")
	sendMessage(t, c, other.ID, short)
	if r := c.do("POST", "/api/chats/"+busy.ID+"/messages/"+first.MessageID+"/stop", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}

	// The stopped reply ends its stream properly (how many chunks came
	// before the stop depends on the machine's speed).
	var last string
	for e, err, ok := next(); ok; e, err, ok = next() {
		if err != nil {
			t.Fatalf("reading the first stream: %v", err)
		}
		last = e.Type
		if e.Type == "end" {
			break
		}
	}
	resp.Body.Close()
	if last != "end" {
		t.Fatalf("the first stream's last event is %q, want end", last)
	}
	ex := sendMessage(t, c, busy.ID, short)
	if ex.Response.ReplyTo != ex.ID {
		t.Errorf("replyTo %q, want the user message %q", ex.Response.ReplyTo, ex.ID)
	}
	msgs := getMessages(t, c, busy.ID)
	if len(msgs) != 4 || msgs[0].Role != "user" || msgs[1].Role != "assistant" || msgs[1].ReplyTo != msgs[0].ID ||
		msgs[2].Role != "user" || msgs[3].ReplyTo != msgs[2].ID {
		t.Errorf("messages: %+v", msgs)
	}
}
