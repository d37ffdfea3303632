package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/httpapi"
)

// TestAccessLogHidesSecretPathValues: the access log's path of a route
// whose wildcard is a credential (a share's id) names the wildcard in its
// place; other routes, and requests no route matched, log their path.
func TestAccessLogHidesSecretPathValues(t *testing.T) {
	t.Parallel()
	const secret = "OMXcz3ObM_yszltTMpGKzA"
	r := httpapi.NewRouter()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	r.Handle("GET /api/shares/{shareId}", ok)
	r.Handle("DELETE /api/chats/{chatId}/shares/{shareId}", ok)
	r.Handle("GET /api/chats/{chatId}", ok)
	for _, tc := range []struct{ method, path, logged string }{
		{"GET", "/api/shares/" + secret, "path=/api/shares/{shareId}"},
		{"DELETE", "/api/chats/c1/shares/" + secret, "path=/api/chats/c1/shares/{shareId}"},
		{"GET", "/api/chats/c1", "path=/api/chats/c1"},
		{"GET", "/api/nowhere/" + secret, "path=/api/nowhere/" + secret},
	} {
		var buf bytes.Buffer
		h := httpapi.Stack(r, httpapi.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
		line := buf.String()
		if !strings.Contains(line, tc.logged+" ") {
			t.Errorf("%s %s logged %q, want %s", tc.method, tc.path, line, tc.logged)
		}
		if strings.Contains(tc.logged, "{shareId}") && strings.Contains(line, secret) {
			t.Errorf("%s %s: the share id is in the log: %q", tc.method, tc.path, line)
		}
	}
}
