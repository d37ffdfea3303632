package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The service as an OAuth client: a user of one dev server (the client
// side) registers the MCP endpoint of a second dev server (a real MCP
// server behind the service's own OAuth authorization server) as an
// oauth server, authorizes it through the second server's sign-in and
// consent pages over HTTP, and the first lists the remote tools with the
// token it redeemed.

const appOrigin = "http://app.example.test"

// oauthPair is the two dev servers and their users: client is the
// signed-in user of the client side (cA), remote the user of the
// authorization server's side (cB, signed in there) with an exposed
// workflow.
type oauthPair struct {
	a, b         *server
	cA, cB       *client
	remoteUserID string
	clientUserID string
}

func newOAuthPair(t *testing.T) oauthPair {
	t.Helper()
	p := oauthPair{}
	p.a = startServer(t, "TOOLS_ALLOW_PRIVATE_NETWORKS=true", "RATE_LIMIT_MCP_SERVERS=100/m", "ALLOWED_ORIGINS="+appOrigin)
	p.b = startServer(t, "OAUTH_ALLOW_HTTP_CLIENTS=true", "RATE_LIMIT_OAUTH_DOCUMENT=100/m")
	p.cA, p.cB = newClient(t, p.a.API), newClient(t, p.b.API)
	p.clientUserID = signUpChatUser(t, p.cA, "oauth-client@example.com")
	p.remoteUserID = signUpChatUser(t, p.cB, "oauth-remote@example.com")
	defineWorkflow(t, p.cB, p.remoteUserID, "digest", `{"steps":[{"id":"h","toolId":"hash","inputs":{"algorithm":"sha256","text":"{{input.text}}"}}],
	  "inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"toolName":"digest_text","exposeAsTool":true}`)
	return p
}

// noRedirects returns c's client that does not follow redirects.
func noRedirects(c *client) *http.Client {
	h := *c.http
	h.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &h
}

func get(t *testing.T, h *http.Client, u string) response {
	t.Helper()
	res, err := h.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

var csrfValue = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consent drives the authorization server's pages as the remote user's
// browser (signed in there: the consent page comes at once) and returns
// the redirect to the client side's callback.
func consent(t *testing.T, cB *client, authorizationURL string, action string) *url.URL {
	t.Helper()
	page := get(t, noRedirects(cB), authorizationURL)
	if page.Status != 200 || !strings.Contains(string(page.Body), `value="approve"`) {
		t.Fatalf("consent page: %d %s", page.Status, page.Body)
	}
	csrf := csrfValue.FindStringSubmatch(string(page.Body))
	if csrf == nil {
		t.Fatalf("no CSRF field in %s", page.Body)
	}
	au, _ := url.Parse(authorizationURL)
	form := au.Query()
	form.Set("csrf", csrf[1])
	form.Set("action", action)
	req, _ := http.NewRequest("POST", au.Scheme+"://"+au.Host+au.Path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", au.Scheme+"://"+au.Host)
	res, err := noRedirects(cB).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("%s: %d %s", action, res.StatusCode, body)
	}
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func authorizeURL(t *testing.T, cA *client, serverID string, body any) string {
	t.Helper()
	r := cA.do("POST", "/api/mcp-servers/"+serverID+"/authorize", body)
	var out struct {
		Data struct{ AuthorizationURL string }
	}
	r.decode(t, &out)
	if r.Status != 200 || out.Data.AuthorizationURL == "" {
		t.Fatalf("authorize: %d %s", r.Status, r.Body)
	}
	return out.Data.AuthorizationURL
}

func getMCPServer(t *testing.T, c *client, id string) mcpServerJSON {
	t.Helper()
	var got struct{ Data mcpServerJSON }
	r := c.do("GET", "/api/mcp-servers/"+id, nil)
	r.decode(t, &got)
	if r.Status != 200 {
		t.Fatalf("GET server: %d %s", r.Status, r.Body)
	}
	return got.Data
}

// TestMCPServerOAuthWithMetadataDocument: the authorization server takes
// Client ID Metadata Documents, so the client id is the first server's
// /oauth/client.json; authorize, consent, callback, connected with the
// remote tool; the state cannot be replayed; a refused consent and a
// foreign returnTo.
func TestMCPServerOAuthWithMetadataDocument(t *testing.T) {
	t.Parallel()
	p := newOAuthPair(t)
	endpoint := p.b.API + "/api/mcp"
	s := createMCPServer(t, p.cA, map[string]any{"name": "remote", "url": endpoint, "auth": map[string]string{"type": "oauth"}})
	if s.Status != "needs_authorization" || !strings.HasPrefix(s.AuthorizationURL, p.b.API+"/oauth/authorize?") {
		t.Fatalf("created = %+v", s)
	}

	// The metadata document names the callback under the first server.
	var doc map[string]any
	r := p.cA.do("GET", "/oauth/client.json", nil)
	r.decode(t, &doc)
	if r.Status != 200 || doc["client_id"] != p.a.API+"/oauth/client.json" || doc["token_endpoint_auth_method"] != "none" {
		t.Fatalf("client.json: %d %s", r.Status, r.Body)
	}

	expectError(t, "returnTo on another origin", p.cA.do("POST", "/api/mcp-servers/"+s.ID+"/authorize",
		map[string]string{"returnTo": "https://evil.example.com/x"}), 400, "INVALID_RETURN_TO")
	none := createMCPServer(t, p.cA, map[string]any{"name": "plain", "url": "http://127.0.0.1:1/mcp"})
	expectError(t, "authorize a server without oauth", p.cA.do("POST", "/api/mcp-servers/"+none.ID+"/authorize", nil), 400, "NOT_OAUTH_SERVER")

	authURL := authorizeURL(t, p.cA, s.ID, map[string]string{"returnTo": appOrigin + "/settings?tab=servers"})
	au, _ := url.Parse(authURL)
	q := au.Query()
	if !strings.HasPrefix(authURL, p.b.API+"/oauth/authorize?") || q.Get("client_id") != p.a.API+"/oauth/client.json" ||
		q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 || len(q.Get("state")) < 43 ||
		q.Get("resource") != endpoint || q.Get("redirect_uri") != p.a.API+"/oauth/callback" {
		t.Fatalf("authorization URL = %s", authURL)
	}
	if got := getMCPServer(t, p.cA, s.ID); got.Status != "needs_authorization" || got.AuthorizationURL != authURL {
		t.Fatalf("while authorizing: %+v", got)
	}
	// returnTo at its bound, one over, and a body far over the limit.
	atBound := appOrigin + "/" + strings.Repeat("r", 2048-len(appOrigin)-1)
	if r := p.cA.do("POST", "/api/mcp-servers/"+s.ID+"/authorize", map[string]string{"returnTo": atBound}); r.Status != 200 {
		t.Fatalf("returnTo of 2048 characters: %d %s", r.Status, r.Body)
	}
	expectError(t, "returnTo of 2049 characters", p.cA.do("POST", "/api/mcp-servers/"+s.ID+"/authorize",
		map[string]string{"returnTo": atBound + "r"}), 400, "INVALID_RETURN_TO")
	expectError(t, "a body far over the limit", p.cA.do("POST", "/api/mcp-servers/"+s.ID+"/authorize",
		map[string]string{"returnTo": strings.Repeat("r", 2<<20)}), 413, "PAYLOAD_TOO_LARGE")
	expectFieldError(t, "returnTo not a string", p.cA.do("POST", "/api/mcp-servers/"+s.ID+"/authorize", `{"returnTo":5}`), "returnTo")

	cb := consent(t, p.cB, authURL, "approve")
	if !strings.HasPrefix(cb.String(), p.a.API+"/oauth/callback?") || cb.Query().Get("code") == "" {
		t.Fatalf("consent redirect = %s", cb)
	}
	back := get(t, noRedirects(p.cA), cb.String())
	loc, _ := url.Parse(back.Header.Get("Location"))
	if back.Status != http.StatusSeeOther || !strings.HasPrefix(loc.String(), appOrigin+"/settings?") || loc.Query().Get("tab") != "servers" ||
		loc.Query().Get("mcpServer") != s.ID || loc.Query().Get("status") != "connected" {
		t.Fatalf("callback: %d %s", back.Status, back.Header.Get("Location"))
	}
	got := getMCPServer(t, p.cA, s.ID)
	if got.Status != "connected" || len(got.Tools) != 1 || got.Tools[0].Name != "digest_text" {
		t.Fatalf("after the callback: %+v", got)
	}
	// Nothing shows the tokens or the code.
	for _, path := range []string{"/api/mcp-servers/" + s.ID, "/api/mcp-servers"} {
		if b := p.cA.do("GET", path, nil).Body; bytes.Contains(b, []byte(cb.Query().Get("code"))) || bytes.Contains(b, []byte("eyJ")) {
			t.Fatalf("GET %s shows a secret: %s", path, b)
		}
	}
	// The audit log has the authorization.
	if b := p.cA.do("GET", "/api/users/"+p.clientUserID+"/audit", nil).Body; !bytes.Contains(b, []byte("mcp_server_authorized")) {
		t.Fatalf("audit: %s", b)
	}

	if strings.Contains(p.a.logs.String(), cb.Query().Get("code")) {
		t.Fatal("the client side logged the authorization code")
	}
	// The same callback again: the state was used.
	again := get(t, noRedirects(p.cA), cb.String())
	if again.Status != 400 || !strings.Contains(string(again.Body), "already used") {
		t.Fatalf("replayed callback: %d %s", again.Status, again.Body)
	}
	if got := getMCPServer(t, p.cA, s.ID); got.Status != "connected" {
		t.Fatalf("after the replay: %+v", got)
	}

	// A refresh lists the tools with the stored token.
	var ref struct{ Data mcpServerJSON }
	r = p.cA.do("POST", "/api/mcp-servers/"+s.ID+"/refresh", nil)
	r.decode(t, &ref)
	if r.Status != 200 || ref.Data.Status != "connected" || len(ref.Data.Tools) != 1 {
		t.Fatalf("refresh: %d %s", r.Status, r.Body)
	}

	// The user refuses: back with status=error, never a 5xx; the server
	// stays as it was.
	authURL = authorizeURL(t, p.cA, s.ID, map[string]string{"returnTo": appOrigin + "/back"})
	denied := consent(t, p.cB, authURL, "deny")
	if denied.Query().Get("error") != "access_denied" {
		t.Fatalf("deny redirect = %s", denied)
	}
	back = get(t, noRedirects(p.cA), denied.String())
	loc, _ = url.Parse(back.Header.Get("Location"))
	if back.Status != http.StatusSeeOther || loc.Query().Get("status") != "error" || loc.Query().Get("mcpServer") != s.ID {
		t.Fatalf("denied callback: %d %s", back.Status, back.Header.Get("Location"))
	}

	// Without returnTo the callback answers a page; a callback of another
	// user's browser is refused before the code is redeemed.
	authURL = authorizeURL(t, p.cA, s.ID, nil)
	cb = consent(t, p.cB, authURL, "approve")
	stranger := newClient(t, p.a.API)
	signUpChatUser(t, stranger, "oauth-stranger@example.com")
	if r := get(t, noRedirects(stranger), cb.String()); r.Status != 403 || !strings.Contains(string(r.Body), "Not connected") {
		t.Fatalf("another user's callback: %d %s", r.Status, r.Body)
	}
	authURL = authorizeURL(t, p.cA, s.ID, nil)
	cb = consent(t, p.cB, authURL, "approve")
	if r := get(t, noRedirects(p.cA), cb.String()); r.Status != 200 || !strings.Contains(string(r.Body), "connection is made") {
		t.Fatalf("callback page: %d %s", r.Status, r.Body)
	}
	// Garbage callbacks are 400 pages.
	for _, qs := range []string{"", "?state=nope&code=x", "?error=access_denied", "?state=" + strings.Repeat("a", 300)} {
		if r := get(t, noRedirects(p.cA), p.a.API+"/oauth/callback"+qs); r.Status != 400 {
			t.Fatalf("callback%s: %d %s", qs, r.Status, r.Body)
		}
	}
}

// rewritingProxy stands in front of the authorization server's dev
// server, as its public origin: it hides client_id_metadata_document_supported
// from the metadata (so that the client registers dynamically), cuts the
// tokens' expires_in to 1 s (so that every use refreshes), and counts
// registrations and refreshes. Everything else is the real server's.
type rewritingProxy struct {
	*httptest.Server
	registrations, refreshes atomic.Int32
}

func newRewritingProxy(t *testing.T, target string) *rewritingProxy {
	u, _ := url.Parse(target)
	p := &rewritingProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		host := r.Host
		director(r)
		r.Host = host // the server computes its issuer from the proxy's host
		switch {
		case r.Method == "POST" && r.URL.Path == "/oauth/register":
			p.registrations.Add(1)
		case r.Method == "POST" && r.URL.Path == "/oauth/token":
			b, _ := io.ReadAll(r.Body)
			if v, _ := url.ParseQuery(string(b)); v.Get("grant_type") == "refresh_token" {
				p.refreshes.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
	}
	rp.ModifyResponse = func(res *http.Response) error {
		path := res.Request.URL.Path
		if path != "/.well-known/oauth-authorization-server" && path != "/oauth/token" || res.StatusCode != 200 {
			return nil
		}
		var m map[string]any
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if json.Unmarshal(b, &m) == nil {
			delete(m, "client_id_metadata_document_supported")
			if _, ok := m["expires_in"]; ok {
				m["expires_in"] = 1
			}
			b, _ = json.Marshal(m)
		}
		res.Body = io.NopCloser(bytes.NewReader(b))
		res.ContentLength = int64(len(b))
		res.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	p.Server = httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

// TestMCPServerOAuthRegistersOnceRefreshesAndLosesARevokedGrant: the
// authorization server takes no metadata documents, so the client
// registers (RFC 7591) once for the server and keeps the client through
// later authorizations; its short-lived tokens are refreshed on use; a
// grant the remote user revokes makes the server needs_authorization.
func TestMCPServerOAuthRegistersOnceRefreshesAndLosesARevokedGrant(t *testing.T) {
	t.Parallel()
	p := newOAuthPair(t)
	proxy := newRewritingProxy(t, p.b.API)
	proxied := newClient(t, proxy.URL) // the remote user's browser, on the proxy's origin
	signIn := proxied.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "oauth-remote@example.com", "password": "chat-password-1"})
	if signIn.Status != 200 {
		t.Fatalf("sign in through the proxy: %d %s", signIn.Status, signIn.Body)
	}
	s := createMCPServer(t, p.cA, map[string]any{"name": "registered", "url": proxy.URL + "/api/mcp", "auth": map[string]string{"type": "oauth"}})

	connect := func() {
		t.Helper()
		authURL := authorizeURL(t, p.cA, s.ID, map[string]string{"returnTo": appOrigin + "/"})
		clientID, _ := url.Parse(authURL)
		if id := clientID.Query().Get("client_id"); id == "" || strings.HasPrefix(id, "http") {
			t.Fatalf("client id %q is not a registered one", id)
		}
		back := get(t, noRedirects(p.cA), consent(t, proxied, authURL, "approve").String())
		loc, _ := url.Parse(back.Header.Get("Location"))
		if back.Status != http.StatusSeeOther || loc.Query().Get("status") != "connected" {
			t.Fatalf("callback: %d %s", back.Status, back.Header.Get("Location"))
		}
	}
	connect()
	if got := getMCPServer(t, p.cA, s.ID); got.Status != "connected" || len(got.Tools) != 1 {
		t.Fatalf("after the callback: %+v", got)
	}
	// The token lives 1 s: a refresh of the server refreshes it first.
	before := proxy.refreshes.Load()
	for i := 0; i < 2; i++ {
		var ref struct{ Data mcpServerJSON }
		r := p.cA.do("POST", "/api/mcp-servers/"+s.ID+"/refresh", nil)
		r.decode(t, &ref)
		if r.Status != 200 || ref.Data.Status != "connected" || len(ref.Data.Tools) != 1 {
			t.Fatalf("refresh %d: %d %s", i, r.Status, r.Body)
		}
	}
	if n := proxy.refreshes.Load() - before; n != 2 {
		t.Fatalf("token refreshes = %d, want 2", n)
	}
	// Authorizing again keeps the registered client.
	connect()
	if n := proxy.registrations.Load(); n != 1 {
		t.Fatalf("registrations = %d, want 1", n)
	}

	// A refresh race: 16 workflow runs at once, each a step calling the
	// remote tool with a token that lives 1 s (so each wants it
	// refreshed): every run gets the tool's result, the server stays
	// connected and its grant is not lost (no sign-out).
	wfID := defineWorkflow(t, p.cA, p.clientUserID, "remote race", `{"steps":[{"id":"r","toolId":"mcp/registered/digest_text","inputs":{"text":"race"}}]}`)
	before = proxy.refreshes.Load()
	var wg sync.WaitGroup
	fails := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			r := p.cA.do("POST", "/api/workflows/"+wfID+"/runs", `{}`)
			var d struct{ Data unattendedRun }
			if json.Unmarshal(r.Body, &d) != nil || r.Status != 201 || d.Data.Status != "completed" || len(d.Data.Steps) != 1 ||
				!strings.Contains(fmt.Sprint(d.Data.Steps[0].Output["text"]), sha256Hex("race")) {
				fails <- fmt.Sprintf("%d %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	close(fails)
	for f := range fails {
		t.Errorf("a run of the race: %s", f)
	}
	if got := getMCPServer(t, p.cA, s.ID); got.Status != "connected" || proxy.refreshes.Load() == before {
		t.Fatalf("after the race: %+v, %d refreshes", got, proxy.refreshes.Load()-before)
	}

	// The remote user disconnects the client: the refresh is refused
	// (invalid_grant) and the server needs authorization again.
	var conns struct {
		Data []struct {
			ClientID string `json:"clientId"`
		} `json:"data"`
	}
	r := p.cB.do("GET", "/api/users/"+p.remoteUserID+"/connections", nil)
	r.decode(t, &conns)
	if r.Status != 200 || len(conns.Data) != 1 {
		t.Fatalf("connections: %d %s", r.Status, r.Body)
	}
	if r := p.cB.do("DELETE", "/api/users/"+p.remoteUserID+"/connections/"+url.PathEscape(conns.Data[0].ClientID), nil); r.Status != 204 {
		t.Fatalf("disconnect: %d %s", r.Status, r.Body)
	}
	var ref struct{ Data mcpServerJSON }
	r = p.cA.do("POST", "/api/mcp-servers/"+s.ID+"/refresh", nil)
	r.decode(t, &ref)
	if r.Status != 200 || ref.Data.Status != "needs_authorization" || len(ref.Data.Tools) != 1 {
		t.Fatalf("refresh after the revocation: %d %s (want the last tools kept)", r.Status, r.Body)
	}
	// And authorizing once more connects it, with the same client.
	connect()
	if got := getMCPServer(t, p.cA, s.ID); got.Status != "connected" || proxy.registrations.Load() != 1 {
		t.Fatalf("after authorizing again: %+v, %d registrations", got, proxy.registrations.Load())
	}
}

// TestMCPServerAuthorizeIsRateLimited: authorize counts against
// RATE_LIMIT_MCP_SERVERS per user, and callbacks against it per client
// address, each refused with 429 past it.
func TestMCPServerAuthorizeIsRateLimited(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "TOOLS_ALLOW_PRIVATE_NETWORKS=true", "RATE_LIMIT_MCP_SERVERS=3/m")
	c := newClient(t, srv.API)
	signUpChatUser(t, c, "oauth-limits@example.com")
	s := createMCPServer(t, c, map[string]any{"name": "plain", "url": "http://127.0.0.1:1/mcp"}) // the first of 3
	for i := 0; i < 2; i++ {
		expectError(t, "authorize within the limit", c.do("POST", "/api/mcp-servers/"+s.ID+"/authorize", nil), 400, "NOT_OAUTH_SERVER")
	}
	expectError(t, "authorize over the limit", c.do("POST", "/api/mcp-servers/"+s.ID+"/authorize", nil), 429, "RATE_LIMITED")
	for i := 0; i < 3; i++ {
		if r := get(t, noRedirects(c), srv.API+"/oauth/callback?state=nope"); r.Status != 400 {
			t.Fatalf("callback %d: %d %s", i, r.Status, r.Body)
		}
	}
	expectError(t, "callback over the limit", get(t, noRedirects(c), srv.API+"/oauth/callback?state=nope"), 429, "RATE_LIMITED")
}
