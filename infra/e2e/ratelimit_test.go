package e2e_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRateLimits starts the dev server with low per-user limits: the third
// message of a minute and the second stream are refused with 429
// RATE_LIMITED and Retry-After before anything is stored, while another
// user is unaffected. The contract transport checks the 429s against
// docs/openapi.yaml.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	clock := newClockFile(t)
	srv := startServer(t, "RATE_LIMIT_MESSAGES=2/m", "RATE_LIMIT_STREAMS=1/m", "RATE_LIMIT_ATTACHMENTS=2/m", "DEV_CLOCK_FILE="+string(clock))
	// The limits count per minute of the server's clock: keep the
	// requests of this test inside one minute of it.
	clock.toStartOf(t, time.Minute)
	alice, bob := newClient(t, srv.API), newClient(t, srv.API)
	aliceID := signUpChatUser(t, alice, "rl-alice@example.com")
	bobID := signUpChatUser(t, bob, "rl-bob@example.com")
	chat := newChat(t, alice, map[string]string{"title": "limited"})
	msg := map[string]string{"content": "hi", "modelId": "builtin"}

	sendMessage(t, alice, chat.ID, msg)
	sendMessage(t, alice, chat.ID, msg)
	r := alice.do("POST", "/api/chats/"+chat.ID+"/messages", msg)
	e := expectError(t, "third message", r, 429, "RATE_LIMITED")
	if !strings.Contains(e.Message, "at most 2 messages per minute") {
		t.Errorf("message %q does not name the limit", e.Message)
	}
	if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n < 1 || n > 60 {
		t.Errorf("Retry-After %q, want 1-60 seconds", r.Header.Get("Retry-After"))
	}
	if got := len(getMessages(t, alice, chat.ID)); got != 4 {
		t.Errorf("%d messages stored, want 4 (the refused one stores nothing)", got)
	}

	// The stream has its own limit.
	stream := map[string]string{"content": "hi", "modelId": "builtin", "userId": aliceID}
	if res := alice.stream(chat.ID, stream); res.Status != 200 || len(res.Events) == 0 || res.Events[len(res.Events)-1].Type != "end" {
		t.Fatalf("first stream: %d %s", res.Status, res.Body)
	}
	res := alice.stream(chat.ID, stream)
	expectError(t, "second stream", res.response(), 429, "RATE_LIMITED")
	if res.Header.Get("Retry-After") == "" {
		t.Error("second stream: no Retry-After")
	}

	// Attachments too: the third of the minute is refused, nothing held.
	newAttachment(t, alice, chat.ID, "a.txt", "text/plain", 1)
	newAttachment(t, alice, chat.ID, "b.txt", "text/plain", 1)
	e = expectError(t, "third attachment", attach(alice, chat.ID, "c.txt", "text/plain", 1), 429, "RATE_LIMITED")
	if !strings.Contains(e.Message, "attachments") {
		t.Errorf("message %q does not name the limit", e.Message)
	}

	// Another user is unaffected.
	bobChat := newChat(t, bob, map[string]string{"title": "bob"})
	sendMessage(t, bob, bobChat.ID, msg)
	newAttachment(t, bob, bobChat.ID, "b.txt", "text/plain", 1)
	if res := bob.stream(bobChat.ID, map[string]string{"content": "hi", "modelId": "builtin", "userId": bobID}); res.Status != 200 {
		t.Errorf("bob's stream: %d %s", res.Status, res.Body)
	}
}
