package local_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/workflowchat/service/shared/oauth"
)

// pendingCode is an approved authorization code not yet redeemed, and the
// token request that would redeem it.
type pendingCode struct {
	code   string
	redeem url.Values
}

// approve runs the pages as u's browser and returns the code the consent
// sends back, unredeemed.
func (e *oauthEnv) approve(u testUser, clientID, redirect string) pendingCode {
	e.t.Helper()
	p := newPKCE()
	code := e.authorize(u, authorizeParams(clientID, redirect, p, nil)).Query().Get("code")
	if code == "" {
		e.t.Fatal("no code")
	}
	return pendingCode{code: code, redeem: url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {clientID},
		"redirect_uri": {redirect}, "code_verifier": {p.verifier}}}
}

// atOnce runs f(0..n-1) on n goroutines released together and returns
// their results in index order.
func atOnce[T any](n int, f func(i int) T) []T {
	out := make([]T, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// signIn gives u's browser a new session (after a sign-out-all).
func (e *oauthEnv) signIn(u testUser) {
	e.t.Helper()
	if r := e.do(u.browser, "POST", "/api/auth/sign-in/email", `{"email":"`+u.email+`","password":"`+u.password+`"}`, nil); r.status != 200 {
		e.t.Fatalf("sign-in: %d %s", r.status, r.body)
	}
}

// TestRevocationEndsUnredeemedCodes: a code approved before a
// sign-out-all, a disconnect of its client, or a deny of its client in
// another tab never redeems, and no connection reappears; codes of other
// clients and codes approved after the revocation are untouched.
func TestRevocationEndsUnredeemedCodes(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	c1, c2 := e.register(redirect), e.register(redirect)
	connections := func() string {
		r := e.do(ada.browser, "GET", "/api/users/"+ada.id+"/connections", "", nil)
		if r.status != 200 {
			t.Fatalf("connections: %d %s", r.status, r.body)
		}
		return r.body
	}
	refused := func(name string, p pendingCode) {
		t.Helper()
		if st, tk, body := e.token(p.redeem); st != 400 || tk.Error != "invalid_grant" || tk.AccessToken != "" {
			t.Errorf("%s: redeeming the code answered %d %s, want 400 invalid_grant", name, st, body)
		}
	}

	// Sign out everywhere: the pending code of every client dies.
	before1, before2 := e.approve(ada, c1, redirect), e.approve(ada, c2, redirect)
	if r := e.do(ada.browser, "POST", "/api/auth/sign-out-all", "", nil); r.status != 200 {
		t.Fatalf("sign-out-all: %d %s", r.status, r.body)
	}
	refused("sign-out-all, client 1", before1)
	refused("sign-out-all, client 2", before2)
	e.signIn(ada)
	if body := connections(); strings.Contains(body, c1) || strings.Contains(body, c2) {
		t.Errorf("a connection reappeared after sign-out-all: %s", body)
	}
	// A code approved after it works.
	after := e.approve(ada, c1, redirect)
	st, tk, body := e.token(after.redeem)
	if st != 200 {
		t.Fatalf("a code approved after sign-out-all: %d %s", st, body)
	}
	if r := e.mcp(tk.AccessToken, listTools); r.status != 200 {
		t.Fatalf("its token: %d %s", r.status, r.body)
	}

	// Disconnect: the disconnected client's pending code dies, another
	// client's lives.
	pending1, pending2 := e.approve(ada, c1, redirect), e.approve(ada, c2, redirect)
	if r := e.do(ada.browser, "DELETE", "/api/users/"+ada.id+"/connections/"+url.PathEscape(c1), "", nil); r.status != 204 {
		t.Fatalf("disconnect: %d %s", r.status, r.body)
	}
	refused("disconnect", pending1)
	if body := connections(); strings.Contains(body, c1) {
		t.Errorf("the disconnected client reappeared: %s", body)
	}
	if st, _, body := e.token(pending2.redeem); st != 200 {
		t.Errorf("another client's code after a disconnect: %d %s", st, body)
	}

	// Deny in another tab: the code approved in the first dies.
	approved := e.approve(ada, c1, redirect)
	p := newPKCE()
	params := authorizeParams(c1, redirect, p, nil)
	page := e.do(ada.browser, "GET", "/oauth/authorize?"+params.Encode(), "", nil)
	deny := url.Values{"action": {"deny"}, "csrf": {csrfField.FindStringSubmatch(page.body)[1]}}
	for k, v := range params {
		deny[k] = v
	}
	r := e.form(ada.browser, "/oauth/authorize", deny, nil)
	if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || !strings.Contains(loc, "error=access_denied") {
		t.Fatalf("deny: %d %s", r.status, loc)
	}
	refused("deny", approved)
	if body := connections(); strings.Contains(body, c1) {
		t.Errorf("the denied client reappeared: %s", body)
	}
}

// TestConcurrentRefreshesSignNobodyOut: 16 refreshes of one refresh token
// at once (clients refresh from several requests without a lock) each get
// a valid pair and revoke nothing; the token presented again after the
// grace (30 s, on the injected clock) revokes the grant.
func TestConcurrentRefreshesSignNobodyOut(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	first := e.connect(ada, client, redirect)
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.RefreshToken}, "client_id": {client}}
	const n = 16
	type result struct {
		status int
		tk     tokens
		body   string
	}
	results := atOnce(n, func(int) result {
		st, tk, body := e.token(refresh)
		return result{st, tk, body}
	})
	var pairs []tokens
	seen := map[string]bool{}
	for _, r := range results {
		if r.status != 200 || r.tk.AccessToken == "" || r.tk.RefreshToken == "" {
			t.Errorf("a concurrent refresh: %d %s", r.status, r.body)
			continue
		}
		if seen[r.tk.RefreshToken] {
			t.Errorf("two refreshes got the same refresh token")
		}
		seen[r.tk.RefreshToken] = true
		pairs = append(pairs, r.tk)
	}
	if len(pairs) != n {
		t.Fatalf("%d of %d concurrent refreshes succeeded", len(pairs), n)
	}
	// Every pair works: the access token on /api/mcp, the refresh token
	// once more.
	for i, p := range pairs {
		if r := e.mcp(p.AccessToken, listTools); r.status != 200 {
			t.Errorf("access token %d: %d %s", i, r.status, r.body)
		}
	}
	if r := e.mcp(first.AccessToken, listTools); r.status != 200 {
		t.Errorf("the first access token after the refreshes: %d", r.status)
	}
	st, next, body := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {pairs[0].RefreshToken}, "client_id": {client}})
	if st != 200 {
		t.Fatalf("a refresh token of the concurrent refreshes: %d %s", st, body)
	}
	// Another client may not use the grace.
	other := e.register(redirect)
	if st, _, body := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.RefreshToken}, "client_id": {other}}); st != 400 || !strings.Contains(body, "another client") {
		t.Errorf("another client within the grace: %d %s", st, body)
	}
	if r := e.mcp(next.AccessToken, listTools); r.status != 200 {
		t.Fatalf("after another client's try: %d %s", r.status, r.body)
	}

	// After the grace a reuse revokes the grant: every token of it stops.
	e.clk.Set(e.clk.Now().Add(oauth.RefreshReuseGrace))
	if st, tk, body := e.token(refresh); st != 400 || tk.Error != "invalid_grant" || !strings.Contains(body, "revoked") {
		t.Errorf("a reuse after the grace: %d %s", st, body)
	}
	for i, p := range append(pairs, next) {
		if r := e.mcp(p.AccessToken, listTools); r.status != 401 {
			t.Errorf("access token %d after a reuse past the grace: %d, want 401", i, r.status)
		}
	}
	if st, _, _ := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {next.RefreshToken}, "client_id": {client}}); st != 400 {
		t.Errorf("the newest refresh token after the revocation: %d, want 400", st)
	}
}

// TestPersonalTokenCapHoldsUnderConcurrency: 30 creations at once make
// exactly 20 tokens; the rest are 409 TOO_MANY_TOKENS.
func TestPersonalTokenCapHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	path := "/api/users/" + ada.id + "/tokens"
	statuses := atOnce(30, func(int) answer {
		return e.do(ada.browser, "POST", path, `{"name":"parallel","expiresInDays":1}`, nil)
	})
	created, refused := 0, 0
	for _, r := range statuses {
		switch {
		case r.status == 201:
			created++
		case r.status == 409 && strings.Contains(r.body, `"code":"TOO_MANY_TOKENS"`):
			refused++
		default:
			t.Errorf("a creation: %d %s", r.status, r.body)
		}
	}
	list := e.do(ada.browser, "GET", path, "", nil)
	if n := strings.Count(list.body, `"name":"parallel"`); created != 20 || refused != 10 || n != 20 {
		t.Errorf("%d created, %d refused, %d listed; want 20, 10, 20", created, refused, n)
	}
}

// TestMetadataDocumentFetchesAreLimitedPerAddress: 100 authorization
// requests naming 100 client id URLs from one address make 10 fetches
// (RATE_LIMIT_OAUTH_DOCUMENT's default 10 a minute); the rest answer 429
// with Retry-After and fetch nothing. A cached document is still served,
// and the token endpoint answers 429 slow_down.
func TestMetadataDocumentFetchesAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	var fetches atomic.Int64
	var base string
	ds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": base + r.URL.Path, "client_name": "Doc",
			"redirect_uris": []string{"http://127.0.0.1/cb"}, "token_endpoint_auth_method": "none"})
	}))
	defer ds.Close()
	base = ds.URL
	page := func(i int) answer {
		return e.do(nil, "GET", "/oauth/authorize?"+authorizeParams(fmt.Sprintf("%s/c/%d.json", base, i), "http://127.0.0.1/cb", newPKCE(), nil).Encode(), "", nil)
	}
	if r := page(0); r.status != 200 {
		t.Fatalf("the first document: %d %s", r.status, r.body)
	}
	answers := atOnce(99, func(i int) answer { return page(i + 1) })
	served, limited := 1, 0
	for _, r := range answers {
		switch {
		case r.status == 200:
			served++
		case r.status == 429 && r.header.Get("Retry-After") != "" && strings.Contains(r.body, "wait and retry"):
			limited++
		default:
			t.Errorf("an authorization request: %d %s %s", r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	if n := fetches.Load(); served != 10 || limited != 90 || n != 10 {
		t.Errorf("%d pages served, %d limited, %d fetches; want 10, 90, 10", served, limited, n)
	}
	if r := page(0); r.status != 200 {
		t.Errorf("a cached document over the limit: %d %s", r.status, r.body)
	}
	st, tk, body := e.token(url.Values{"grant_type": {"authorization_code"}, "code": {"x"}, "code_verifier": {newPKCE().verifier},
		"client_id": {base + "/c/uncached.json"}})
	if st != 429 || tk.Error != "slow_down" {
		t.Errorf("the token endpoint with an uncached document client: %d %s", st, body)
	}
	if n := fetches.Load(); n != 10 {
		t.Errorf("%d fetches after the limit, want 10", n)
	}
}

// TestConsentCSRFIsBoundToTheSession: a CSRF token planted with the
// cookie (oauth_csrf=x, field csrf=x) does not pass with the victim's
// session, nor does another session's token; the page's own token does.
func TestConsentCSRFIsBoundToTheSession(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada, eve := e.signUp("ada@example.com"), e.signUp("eve@example.com")
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	params := authorizeParams(client, redirect, newPKCE(), nil)
	approve := func(u testUser, csrf string) answer {
		v := url.Values{"action": {"approve"}, "csrf": {csrf}}
		for k, val := range params {
			v[k] = val
		}
		return e.form(u.browser, "/oauth/authorize", v, nil)
	}
	srvURL, _ := url.Parse(e.srv.URL + "/oauth/authorize")
	planted := strings.Repeat("x", 43)
	ada.browser.Jar.SetCookies(srvURL, []*http.Cookie{{Name: "oauth_csrf", Value: planted, Path: "/oauth/authorize"}})
	if r := approve(ada, planted); r.status != 403 || r.header.Get("Location") != "" {
		t.Errorf("a planted cookie and field with the victim's session: %d Location %q, want 403", r.status, r.header.Get("Location"))
	}
	evePage := e.do(eve.browser, "GET", "/oauth/authorize?"+params.Encode(), "", nil)
	if r := approve(ada, csrfField.FindStringSubmatch(evePage.body)[1]); r.status != 403 {
		t.Errorf("another session's token: %d, want 403", r.status)
	}
	page := e.do(ada.browser, "GET", "/oauth/authorize?"+params.Encode(), "", nil)
	if r := approve(ada, csrfField.FindStringSubmatch(page.body)[1]); r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "code=") {
		t.Errorf("the page's own token: %d %s", r.status, r.header.Get("Location"))
	}
}
