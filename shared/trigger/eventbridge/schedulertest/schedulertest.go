// Package schedulertest serves EventBridge Scheduler endpoints for the
// tests of functions that are configured with a schedule group.
package schedulertest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Unused starts an EventBridge Scheduler endpoint for a function that
// must not call it in the test (one that deletes schedules only for
// triggers the test never creates) and returns its URL, for
// SCHEDULER_ENDPOINT: any request fails the test and is answered 500.
// The server stops with the test.
func Unused(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("schedulertest: unexpected scheduler call %s %s", r.Method, r.URL.Path)
		http.Error(w, "unexpected call", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
