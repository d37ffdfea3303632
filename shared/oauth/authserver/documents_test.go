package authserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/safehttp"
)

// TestClientDocuments: what a Client ID Metadata Document must be, the
// bounds of its fetch, and its cache.
func TestClientDocuments(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	var base string
	mux := http.NewServeMux()
	serve := func(path, contentType, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Cache-Control", "max-age=600")
			_, _ = w.Write([]byte(strings.ReplaceAll(body, "SELF", base+path)))
		})
	}
	serve("/ok.json", "application/json", `{"client_id":"SELF","client_name":"Doc","redirect_uris":["http://127.0.0.1/cb"]}`)
	serve("/other-id.json", "application/json", `{"client_id":"https://x.example/c.json","redirect_uris":["http://127.0.0.1/cb"]}`)
	serve("/secret.json", "application/json", `{"client_id":"SELF","client_secret":"s","redirect_uris":["http://127.0.0.1/cb"]}`)
	serve("/confidential.json", "application/json", `{"client_id":"SELF","token_endpoint_auth_method":"client_secret_basic","redirect_uris":["http://127.0.0.1/cb"]}`)
	serve("/no-redirects.json", "application/json", `{"client_id":"SELF"}`)
	serve("/bad-redirect.json", "application/json", `{"client_id":"SELF","redirect_uris":["http://evil.example/cb"]}`)
	serve("/html.json", "text/html", `<html></html>`)
	serve("/huge.json", "application/json", `{"client_id":"SELF","redirect_uris":["http://127.0.0.1/cb"],"pad":"`+strings.Repeat("x", MaxClientDocument)+`"}`)
	serve("/garbage.json", "application/json", `[1,2`)
	mux.HandleFunc("/moved.json", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok.json", http.StatusFound) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base = srv.URL
	now := time.Now()
	docs := newDocumentCache(safehttp.NewClient(safehttp.Options{AllowPrivate: true, Timeout: DocumentTimeout, MaxRedirects: -1}), true, func() time.Time { return now }, nil, ratelimit.Rule{})
	ctx := context.Background()

	c, err := docs.get(ctx, base+"/ok.json", "192.0.2.1")
	if err != nil || c.ID != base+"/ok.json" || c.Name != "Doc" || !c.Document || c.AuthMethod != "none" {
		t.Fatalf("ok: %+v %v", c, err)
	}
	for path, want := range map[string]string{
		"/other-id.json":     "client_id is not the URL",
		"/secret.json":       "client_secret",
		"/confidential.json": "token_endpoint_auth_method",
		"/no-redirects.json": "redirect_uris",
		"/bad-redirect.json": "loopback",
		"/html.json":         "application/json",
		"/huge.json":         "larger than",
		"/garbage.json":      "not a JSON object",
		"/moved.json":        "redirects are not followed",
		"/missing.json":      "HTTP 404",
		"/":                  "with a path",
		"/ok.json?x=1":       "query",
	} {
		_, err := docs.get(ctx, base+path, "192.0.2.1")
		if !errs.Is(err, errs.Invalid) || !strings.Contains(errs.MessageOf(err, ""), want) {
			t.Errorf("%s: %v, want Invalid naming %q", path, err, want)
		}
	}

	// Cached for its max-age (600 s); fetched again after it.
	before := hits.Load()
	if _, err := docs.get(ctx, base+"/ok.json", "192.0.2.1"); err != nil || hits.Load() != before {
		t.Errorf("a fresh document was fetched again (%v)", err)
	}
	now = now.Add(11 * time.Minute)
	if _, err := docs.get(ctx, base+"/ok.json", "192.0.2.1"); err != nil || hits.Load() != before+1 {
		t.Errorf("a stale document was not fetched again (%v)", err)
	}

	// The production client refuses private addresses.
	strict := newDocumentCache(nil, false, time.Now, nil, ratelimit.Rule{})
	if _, err := strict.get(ctx, strings.Replace(base, "http://", "https://", 1)+"/ok.json", "192.0.2.1"); !errs.Is(err, errs.Invalid) || !strings.Contains(errs.MessageOf(err, ""), "public address") {
		t.Errorf("a loopback document with the production client: %v", err)
	}
}
