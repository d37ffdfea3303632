package chat_test

import (
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/chat"
)

// TestUpperCaseChatID: a chat's id in upper case names the chat (ids are
// stored lower-cased), for reads and deletes alike, as ?leaf= does for
// messages.
func TestUpperCaseChatID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, 0)
	id := f.newChat(t)
	up := strings.ToUpper(id)
	var c struct{ Data chat.Chat }
	resp := f.do(t, "GET", "/api/chats/"+up, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET upper-case id: %d", resp.StatusCode)
	}
	decode(t, resp, &c)
	if c.Data.ID != id {
		t.Errorf("GET upper-case id answered chat %q, want %q", c.Data.ID, id)
	}
	if resp := f.do(t, "GET", "/api/chats/"+up+"/messages", ""); resp.StatusCode != 200 {
		t.Errorf("GET messages of upper-case id: %d", resp.StatusCode)
	}
	if resp := f.do(t, "DELETE", "/api/chats/"+up, ""); resp.StatusCode != 204 {
		t.Fatalf("DELETE upper-case id: %d", resp.StatusCode)
	}
	if resp := f.do(t, "GET", "/api/chats/"+id, ""); resp.StatusCode != 404 {
		t.Errorf("GET after the delete: %d, want 404", resp.StatusCode)
	}
}
