package e2e_test

import (
	"strings"
	"testing"
)

// TestUserPathsIgnoreCase: a user's own id in a path names them in any
// case (ids are stored lower-cased), on every route under
// /api/users/{userId}; another user's id is 403 in any case too.
func TestUserPathsIgnoreCase(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "user-path-case@example.com")
	other := newClient(t, srv.API)
	otherID := signUpChatUser(t, other, "user-path-case-other@example.com")
	for _, path := range []string{"/chats", "/workflows", "/usage", "/tool-permissions", "/chats/search?q=hello", "/audit", "/tokens", "/connections"} {
		for _, id := range []string{userID, strings.ToUpper(userID)} {
			if r := c.do("GET", "/api/users/"+id+path, nil); r.Status != 200 {
				t.Errorf("GET /api/users/%s%s: %d %s", id, path, r.Status, r.Body)
			}
		}
		expectError(t, "another user's "+path, c.do("GET", "/api/users/"+strings.ToUpper(otherID)+path, nil), 403, "FORBIDDEN")
	}
}
