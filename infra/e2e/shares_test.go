package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
)

type shareJSON struct {
	ID        string `json:"id"`
	URL       string `json:"url"`
	CreatedAt string `json:"createdAt"`
}

type sharedJSON struct {
	Title    string `json:"title"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// TestChatShares shares a chat's current path, reads it without a
// session (nothing of the owner in it, later messages not in it), lists
// and revokes shares, and checks the limits, another user's access and
// the chat's delete taking its shares with it.
func TestChatShares(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada, eve, anon := newClient(t, srv.API), newClient(t, srv.API), newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "ada.shares@example.com")
	signUpChatUser(t, eve, "eve.shares@example.com")
	chat := newChat(t, ada, map[string]any{"title": "Shared trip"})
	e1 := sendMessage(t, ada, chat.ID, map[string]any{"content": "first question", "modelId": "builtin"})
	sendMessage(t, ada, chat.ID, map[string]any{"content": "a branch left behind", "modelId": "builtin"})
	// The share is of the current path: switch back to the first exchange.
	pathOf(t, ada, chat.ID, "?leaf="+e1.Response.ID)

	r := ada.do("POST", "/api/chats/"+chat.ID+"/shares", nil)
	if r.Status != 201 {
		t.Fatalf("share: %d %s", r.Status, r.Body)
	}
	var created struct{ Data shareJSON }
	r.decode(t, &created)
	sh := created.Data
	if sh.URL != "/api/shares/"+sh.ID || len(sh.ID) != 22 {
		t.Errorf("share %+v: want a 22-character id read at /api/shares/<id>", sh)
	}
	sendMessage(t, ada, chat.ID, map[string]any{"content": "after the share", "modelId": "builtin"})

	read := anon.do("GET", sh.URL, nil)
	if read.Status != 200 || !strings.Contains(read.Header.Get("Cache-Control"), "no-store") {
		t.Fatalf("public read: %d %s (Cache-Control %q)", read.Status, read.Body, read.Header.Get("Cache-Control"))
	}
	var shared struct{ Data sharedJSON }
	read.decode(t, &shared)
	if shared.Data.Title != "Shared trip" || len(shared.Data.Messages) != 2 || shared.Data.Messages[0].Content != "first question" ||
		shared.Data.Messages[1].Role != "assistant" || shared.Data.Messages[1].Content != e1.Response.Content {
		t.Errorf("shared %+v: want the title and the first exchange only", shared.Data)
	}
	for _, secret := range []string{adaID, "ada.shares@example.com", chat.ID} {
		if strings.Contains(string(read.Body), secret) {
			t.Errorf("the public share holds %q: %s", secret, read.Body)
		}
	}
	if got := eve.do("GET", sh.URL, nil); got.Status != 200 {
		t.Errorf("another user's read of a share: %d", got.Status)
	}

	// The owner's list; another user's access.
	list := ada.do("GET", "/api/chats/"+chat.ID+"/shares", nil)
	var page struct {
		Data struct {
			Shares []shareJSON `json:"shares"`
		}
	}
	list.decode(t, &page)
	if list.Status != 200 || len(page.Data.Shares) != 1 || page.Data.Shares[0].ID != sh.ID {
		t.Errorf("list: %d %s", list.Status, list.Body)
	}
	expectError(t, "share another user's chat", eve.do("POST", "/api/chats/"+chat.ID+"/shares", nil), 403, "FORBIDDEN")
	expectError(t, "list another user's shares", eve.do("GET", "/api/chats/"+chat.ID+"/shares", nil), 403, "FORBIDDEN")
	expectError(t, "delete another user's share", eve.do("DELETE", "/api/chats/"+chat.ID+"/shares/"+sh.ID, nil), 403, "FORBIDDEN")
	expectError(t, "share anonymously", anon.do("POST", "/api/chats/"+chat.ID+"/shares", nil), 401, "UNAUTHORIZED")
	expectError(t, "share unknown chat", ada.do("POST", "/api/chats/"+unknownUUID+"/shares", nil), 404, "CHAT_NOT_FOUND")
	expectError(t, "read a malformed id", anon.do("GET", "/api/shares/x", nil), 400, "INVALID_ID")
	expectError(t, "read an unknown id", anon.do("GET", "/api/shares/AAAAAAAAAAAAAAAAAAAAAA", nil), 404, "SHARE_NOT_FOUND")
	other := newChat(t, ada, map[string]any{})
	expectError(t, "delete through another chat", ada.do("DELETE", "/api/chats/"+other.ID+"/shares/"+sh.ID, nil), 404, "SHARE_NOT_FOUND")

	// Revoke: 204, then the URL answers 404 at once, and a second delete 404.
	if d := ada.do("DELETE", "/api/chats/"+chat.ID+"/shares/"+sh.ID, nil); d.Status != 204 {
		t.Fatalf("delete: %d %s", d.Status, d.Body)
	}
	expectError(t, "read a revoked share", anon.do("GET", sh.URL, nil), 404, "SHARE_NOT_FOUND")
	expectError(t, "delete twice", ada.do("DELETE", "/api/chats/"+chat.ID+"/shares/"+sh.ID, nil), 404, "SHARE_NOT_FOUND")

	// At most 20 shares per chat: the 21st is 409, nothing stored.
	var last shareJSON
	for range 20 {
		r := ada.do("POST", "/api/chats/"+other.ID+"/shares", nil)
		if r.Status != 201 {
			t.Fatalf("share %d: %d %s", len(page.Data.Shares), r.Status, r.Body)
		}
		var out struct{ Data shareJSON }
		r.decode(t, &out)
		last = out.Data
	}
	expectError(t, "21st share", ada.do("POST", "/api/chats/"+other.ID+"/shares", nil), 409, "SHARE_LIMIT")
	// Paginated, newest first, 20 in all.
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; pages < 5; pages++ {
		q := "?limit=8"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := ada.do("GET", "/api/chats/"+other.ID+"/shares"+q, nil)
		var p struct {
			Data struct {
				Shares     []shareJSON `json:"shares"`
				NextCursor string      `json:"nextCursor"`
			}
		}
		r.decode(t, &p)
		if pages == 0 && (len(p.Data.Shares) == 0 || p.Data.Shares[0].ID != last.ID) {
			t.Errorf("first page %s: want the newest share first", r.Body)
		}
		for _, s := range p.Data.Shares {
			seen[s.ID] = true
		}
		if cursor = p.Data.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 20 {
		t.Errorf("the pages listed %d shares, want 20", len(seen))
	}
	expectError(t, "bad cursor", ada.do("GET", "/api/chats/"+other.ID+"/shares?cursor=bm9wZQ", nil), 400, "INVALID_PAGINATION")

	// Deleting the chat deletes its shares.
	if d := ada.do("DELETE", "/api/chats/"+other.ID, nil); d.Status != 204 {
		t.Fatalf("delete chat: %d %s", d.Status, d.Body)
	}
	expectError(t, "read a share of a deleted chat", anon.do("GET", last.URL, nil), 404, "SHARE_NOT_FOUND")
}

// TestChatExport exports a chat's current path as Markdown and JSON.
func TestChatExport(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada, eve := newClient(t, srv.API), newClient(t, srv.API)
	signUpChatUser(t, ada, "ada.export@example.com")
	signUpChatUser(t, eve, "eve.export@example.com")
	chat := newChat(t, ada, map[string]any{"title": "Export me"})
	e1 := sendMessage(t, ada, chat.ID, map[string]any{"content": "kept question", "modelId": "builtin"})
	old := sendMessage(t, ada, chat.ID, map[string]any{"content": "old branch", "modelId": "builtin"})
	e2 := sendMessage(t, ada, chat.ID, map[string]any{"content": "new branch", "modelId": "builtin", "parentId": e1.Response.ID})

	md := ada.do("GET", "/api/chats/"+chat.ID+"/export?format=markdown", nil)
	if md.Status != 200 || md.Header.Get("Content-Disposition") != `attachment; filename="chat-`+chat.ID+`.md"` ||
		!strings.HasPrefix(md.Header.Get("Content-Type"), "text/markdown") {
		t.Fatalf("markdown export: %d %q %q", md.Status, md.Header.Get("Content-Disposition"), md.Header.Get("Content-Type"))
	}
	body := string(md.Body)
	if !strings.HasPrefix(body, "# Export me\n") || !strings.Contains(body, "kept question") || !strings.Contains(body, "new branch") ||
		strings.Contains(body, "old branch") || !strings.Contains(body, e2.Response.Content) {
		t.Errorf("markdown export of the current path:\n%s", body)
	}
	js := ada.do("GET", "/api/chats/"+chat.ID+"/export?format=json", nil)
	var exp struct {
		Title    string `json:"title"`
		Messages []struct {
			ID       string  `json:"id"`
			ParentID *string `json:"parentId"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(js.Body, &exp); err != nil || js.Status != 200 || exp.Title != "Export me" || len(exp.Messages) != 4 ||
		exp.Messages[2].ID != e2.ID || exp.Messages[2].ParentID == nil || *exp.Messages[2].ParentID != e1.Response.ID {
		t.Errorf("json export: %d %s", js.Status, js.Body)
	}
	if strings.Contains(string(js.Body), old.ID) {
		t.Errorf("json export holds the other branch")
	}
	if def := ada.do("GET", "/api/chats/"+chat.ID+"/export", nil); def.Status != 200 || !strings.HasSuffix(def.Header.Get("Content-Disposition"), `.md"`) {
		t.Errorf("default export: %d %q", def.Status, def.Header.Get("Content-Disposition"))
	}
	e := expectError(t, "bad format", ada.do("GET", "/api/chats/"+chat.ID+"/export?format=pdf", nil), 400, "VALIDATION_FAILED")
	expectField(t, "bad format", e, "format")
	expectError(t, "another user's export", eve.do("GET", "/api/chats/"+chat.ID+"/export", nil), 403, "FORBIDDEN")
	expectError(t, "unknown chat", ada.do("GET", "/api/chats/"+unknownUUID+"/export", nil), 404, "CHAT_NOT_FOUND")
}
