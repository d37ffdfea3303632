package e2e_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

type searchPageJSON struct {
	Results []struct {
		ChatID    string `json:"chatId"`
		Title     string `json:"title"`
		MessageID string `json:"messageId"`
		Snippet   string `json:"snippet"`
	} `json:"results"`
	NextCursor string `json:"nextCursor"`
}

// searchChats answers GET .../chats/search?q=q of userID as c.
func searchChats(c *client, userID, q, extra string) response {
	return c.do("GET", "/api/users/"+userID+"/chats/search?q="+url.QueryEscape(q)+extra, nil)
}

// awaitSearch polls the search of q until found holds of its page (a new
// message must be found within 2 s; the bound here is the machine's
// patience, never a speed assertion) and returns the page.
func awaitSearch(t *testing.T, c *client, userID, q string, found func(searchPageJSON) bool) searchPageJSON {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := searchChats(c, userID, q, "")
		if r.Status != 200 {
			t.Fatalf("search %q: %d %s", q, r.Status, r.Body)
		}
		var out struct{ Data searchPageJSON }
		r.decode(t, &out)
		if found(out.Data) {
			return out.Data
		}
		if time.Now().After(deadline) {
			t.Fatalf("search %q: %s, never what was expected", q, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSearch: through the dev server binary, a sent message and a streamed
// reply are found with their words folded and marked, the query's bounds
// are 400 INVALID_QUERY, another user's search is 403, a deleted chat is
// no longer found, and the route is rate limited.
func TestSearch(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "RATE_LIMIT_SEARCH=100/m")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "search.alice@example.com")
	other := newClient(t, srv.API)
	otherID := signUpChatUser(t, other, "search.bob@example.com")

	dessert := newChat(t, c, map[string]any{"title": "Dessert"})
	sent := sendMessage(t, c, dessert.ID, map[string]any{"content": "How do I make a CRÈME brûlée?", "modelId": "builtin"})
	page := awaitSearch(t, c, userID, "creme", func(p searchPageJSON) bool { return len(p.Results) > 0 })
	if r := page.Results[0]; len(page.Results) != 1 || r.ChatID != dessert.ID || r.Title != "Dessert" ||
		(r.MessageID != sent.ID && r.MessageID != sent.Response.ID) || !strings.Contains(r.Snippet, "<mark>CRÈME</mark>") {
		t.Errorf("search creme: %+v", page)
	}

	streamed := newChat(t, c, map[string]any{"title": "Fruit"})
	if res := c.stream(streamed.ID, map[string]any{"content": "Tell me about the papaya.", "modelId": "builtin", "userId": userID}); res.Status != 200 {
		t.Fatalf("stream: %d %s", res.Status, res.Body)
	}
	awaitSearch(t, c, userID, "Papaya", func(p searchPageJSON) bool { return len(p.Results) == 1 && p.Results[0].ChatID == streamed.ID })

	// A message at the content limit, of thousands of distinct words: the
	// index keeps its 500 most frequent, nothing fails.
	var huge strings.Builder
	for i := 0; huge.Len() < 31990; i++ {
		fmt.Fprintf(&huge, "z%d ", i)
	}
	wide := newChat(t, c, map[string]any{"title": "Wide"})
	sendMessage(t, c, wide.ID, map[string]any{"content": strings.TrimSpace(huge.String()), "modelId": "builtin"})
	awaitSearch(t, c, userID, "z7", func(p searchPageJSON) bool { return len(p.Results) == 1 && p.Results[0].ChatID == wide.ID })

	// Bob finds nothing of Alice's, and may not search her chats.
	r := searchChats(other, otherID, "papaya", "")
	var none struct{ Data searchPageJSON }
	r.decode(t, &none)
	if r.Status != 200 || len(none.Data.Results) != 0 {
		t.Errorf("another user's search: %d %s", r.Status, r.Body)
	}
	expectError(t, "Alice's path as Bob", searchChats(other, userID, "papaya", ""), 403, "FORBIDDEN")
	expectError(t, "a malformed user id", searchChats(c, "nope", "papaya", ""), 400, "INVALID_ID")

	for _, tt := range []struct {
		name, q string
		status  int
		code    string
	}{
		{"1 character", "a", 400, "INVALID_QUERY"},
		{"2 characters", "ab", 200, ""},
		{"200 characters", strings.Repeat("é", 200), 200, ""},
		{"201 characters", strings.Repeat("é", 201), 400, "INVALID_QUERY"},
		{"no q", "", 400, "INVALID_QUERY"},
	} {
		r := searchChats(c, userID, tt.q, "")
		if tt.code != "" {
			expectError(t, tt.name, r, tt.status, tt.code)
		} else if r.Status != tt.status {
			t.Errorf("%s: %d %s", tt.name, r.Status, r.Body)
		}
	}
	expectField(t, "a bad cursor", expectError(t, "a bad cursor", searchChats(c, userID, "papaya", "&cursor=nope"), 400, "INVALID_PAGINATION"), "cursor")
	expectField(t, "a forged cursor", expectError(t, "a forged cursor", searchChats(c, userID, "papaya", "&cursor=czE6MA"), 400, "INVALID_PAGINATION"), "cursor")
	expectError(t, "limit 101", searchChats(c, userID, "papaya", "&limit=101"), 400, "INVALID_PAGINATION")

	// A deleted chat is no longer found.
	if r := c.do("DELETE", "/api/chats/"+dessert.ID, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	awaitSearch(t, c, userID, "creme", func(p searchPageJSON) bool { return len(p.Results) == 0 })
}

// TestSearchRateLimit: the search route answers 429 RATE_LIMITED past
// RATE_LIMIT_SEARCH.
func TestSearchRateLimit(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "RATE_LIMIT_SEARCH=3/h")
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "search.limited@example.com")
	for i := range 3 {
		if r := searchChats(c, userID, "anything", ""); r.Status != 200 {
			t.Fatalf("search %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	r := searchChats(c, userID, "anything", "")
	expectError(t, "fourth search", r, 429, "RATE_LIMITED")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After: %v", r.Header)
	}
}
