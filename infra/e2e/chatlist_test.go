package e2e_test

import (
	"testing"
)

// TestChatPinArchiveAndTitle pins and archives chats and reads the list
// the way a sidebar does (pinned first, archived hidden unless asked for,
// pages that add up), and titles an untitled chat from its first
// exchange.
func TestChatPinArchiveAndTitle(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada, eve := newClient(t, srv.API), newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "ada.sidebar@example.com")
	signUpChatUser(t, eve, "eve.sidebar@example.com")
	var c []chatJSON
	for _, title := range []string{"zero", "one", "two", "three", "four"} {
		c = append(c, newChat(t, ada, map[string]any{"title": title}))
	}
	patch := func(id string, body map[string]any) chatJSON {
		t.Helper()
		r := ada.do("PATCH", "/api/chats/"+id, body)
		if r.Status != 200 {
			t.Fatalf("patch %v: %d %s", body, r.Status, r.Body)
		}
		var out struct {
			Data struct {
				chatJSON
				Pinned   bool `json:"pinned"`
				Archived bool `json:"archived"`
			}
		}
		r.decode(t, &out)
		if p, ok := body["pinned"].(bool); ok && out.Data.Pinned != p {
			t.Errorf("patch %v answered pinned %v", body, out.Data.Pinned)
		}
		if a, ok := body["archived"].(bool); ok && out.Data.Archived != a {
			t.Errorf("patch %v answered archived %v", body, out.Data.Archived)
		}
		return out.Data.chatJSON
	}
	pinned := patch(c[1].ID, map[string]any{"pinned": true})
	if !pinned.UpdatedAt.Equal(c[1].UpdatedAt) || pinned.Title != "one" {
		t.Errorf("pinning changed %+v, was %+v", pinned, c[1])
	}
	patch(c[3].ID, map[string]any{"archived": true})
	patch(c[0].ID, map[string]any{"archived": true, "pinned": true})

	expectChats(t, "sidebar", listChats(t, ada, adaID, ""), 3, c[1], c[4], c[2])
	expectChats(t, "sidebar page 1", listChats(t, ada, adaID, "?limit=2"), 3, c[1], c[4])
	expectChats(t, "sidebar page 2", listChats(t, ada, adaID, "?limit=2&offset=2"), 3, c[2])
	expectChats(t, "with the archived", listChats(t, ada, adaID, "?archived=true"), 5, c[1], c[4], c[2], c[3], c[0])
	expectChats(t, "with the archived, page 2", listChats(t, ada, adaID, "?archived=true&limit=2&offset=2"), 5, c[2], c[3])
	expectChats(t, "archived=false", listChats(t, ada, adaID, "?archived=false"), 3, c[1], c[4], c[2])

	// Unarchive: the pinned flag it kept puts it among the pinned.
	patch(c[0].ID, map[string]any{"archived": false})
	expectChats(t, "unarchived", listChats(t, ada, adaID, ""), 4, c[1], c[0], c[4], c[2])

	e := expectError(t, "archived not a boolean", ada.do("GET", "/api/users/"+adaID+"/chats?archived=maybe", nil), 400, "VALIDATION_FAILED")
	expectField(t, "archived not a boolean", e, "archived")
	expectError(t, "pinned not a boolean", ada.do("PATCH", "/api/chats/"+c[2].ID, map[string]any{"pinned": "yes"}), 400, "VALIDATION_FAILED")
	expectError(t, "pin another user's", eve.do("PATCH", "/api/chats/"+c[2].ID, map[string]any{"pinned": true}), 403, "FORBIDDEN")
	expectError(t, "pin unknown", ada.do("PATCH", "/api/chats/"+unknownUUID, map[string]any{"pinned": true}), 404, "CHAT_NOT_FOUND")

	// A chat deleted while pinned leaves the counts right.
	if r := ada.do("DELETE", "/api/chats/"+c[1].ID, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	expectChats(t, "after the delete", listChats(t, ada, adaID, "?archived=true"), 4, c[0], c[4], c[2], c[3])

	// Titles from the first exchange: the built-in model's first words;
	// a chat renamed keeps its name.
	untitled := newChat(t, ada, map[string]any{})
	sendMessage(t, ada, untitled.ID, map[string]any{"content": "Plan a trip to Lisbon next spring, please", "modelId": "builtin"})
	if got := getChat(t, ada, untitled.ID); got.Title != "Plan a trip to Lisbon next" {
		t.Errorf("title after the first exchange: %q", got.Title)
	}
	sendMessage(t, ada, untitled.ID, map[string]any{"content": "Something else entirely", "modelId": "builtin"})
	if got := getChat(t, ada, untitled.ID); got.Title != "Plan a trip to Lisbon next" {
		t.Errorf("title after the second exchange: %q", got.Title)
	}
	streamed := newChat(t, ada, map[string]any{})
	if res := ada.stream(streamed.ID, map[string]any{"content": "  Why is   the sky blue?  ", "modelId": "builtin", "userId": adaID}); res.Status != 200 {
		t.Fatalf("stream: %d %s", res.Status, res.Body)
	}
	if got := getChat(t, ada, streamed.ID); got.Title != "Why is the sky blue?" {
		t.Errorf("title after a streamed first exchange: %q", got.Title)
	}
	if got := getChat(t, ada, c[2].ID); got.Title != "two" {
		t.Errorf("a titled chat was renamed: %q", got.Title)
	}
}

// getChat returns chat id; it fails the test unless the answer is 200.
func getChat(t *testing.T, c *client, id string) chatJSON {
	t.Helper()
	r := c.do("GET", "/api/chats/"+id, nil)
	if r.Status != 200 {
		t.Fatalf("get chat %s: %d %s", id, r.Status, r.Body)
	}
	var out struct{ Data chatJSON }
	r.decode(t, &out)
	return out.Data
}
