package local_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
)

// TestOAuthMetadataDocuments checks the three metadata documents against
// the fields their RFCs require, as plain JSON (not wrapped in data).
func TestOAuthMetadataDocuments(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	base := e.srv.URL

	as := e.do(nil, "GET", "/.well-known/oauth-authorization-server", "", nil)
	if as.status != 200 || !strings.HasPrefix(as.header.Get("Content-Type"), "application/json") {
		t.Fatalf("AS metadata: %d %s", as.status, as.body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(as.body), &m); err != nil {
		t.Fatal(err)
	}
	if _, wrapped := m["data"]; wrapped {
		t.Errorf("AS metadata is wrapped in data: %s", as.body)
	}
	// RFC 8414 section 2: issuer, authorization_endpoint, token_endpoint
	// (the code grant), response_types_supported are required; the issuer
	// is the origin whose well-known URL served the document.
	for k, want := range map[string]string{"issuer": base, "authorization_endpoint": base + "/oauth/authorize",
		"token_endpoint": base + "/oauth/token", "registration_endpoint": base + "/oauth/register",
		"revocation_endpoint": base + "/oauth/revoke", "jwks_uri": base + "/oauth/jwks"} {
		if m[k] != want {
			t.Errorf("AS metadata %s = %v, want %s", k, m[k], want)
		}
	}
	list := func(doc map[string]any, k string) []string {
		var out []string
		for _, v := range doc[k].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	if got := list(m, "response_types_supported"); !slices.Equal(got, []string{"code"}) {
		t.Errorf("response_types_supported = %v", got)
	}
	if got := list(m, "code_challenge_methods_supported"); !slices.Equal(got, []string{"S256"}) {
		t.Errorf("code_challenge_methods_supported = %v, want S256 alone", got)
	}
	if got := list(m, "grant_types_supported"); !slices.Equal(got, []string{"authorization_code", "refresh_token"}) {
		t.Errorf("grant_types_supported = %v", got)
	}
	if m["client_id_metadata_document_supported"] != true {
		t.Errorf("client_id_metadata_document_supported = %v", m["client_id_metadata_document_supported"])
	}

	// RFC 9728 section 2: resource is required and is the URL the
	// well-known path was built from (section 3.3).
	for path, resource := range map[string]string{
		"/.well-known/oauth-protected-resource":         base,
		"/.well-known/oauth-protected-resource/api/mcp": base + "/api/mcp",
	} {
		pr := e.do(nil, "GET", path, "", nil)
		var d map[string]any
		if pr.status != 200 || json.Unmarshal([]byte(pr.body), &d) != nil {
			t.Fatalf("%s: %d %s", path, pr.status, pr.body)
		}
		if d["resource"] != resource || !slices.Equal(list(d, "authorization_servers"), []string{base}) || d["data"] != nil {
			t.Errorf("%s = %s, want resource %s and authorization_servers [%s]", path, pr.body, resource, base)
		}
	}

	jwks := e.do(nil, "GET", "/oauth/jwks", "", nil)
	if jwks.status != 200 || !strings.Contains(jwks.body, `"kty":"OKP"`) || !strings.Contains(jwks.body, `"alg":"EdDSA"`) || strings.Contains(jwks.body, `"d":`) {
		t.Errorf("jwks: %d %s", jwks.status, jwks.body)
	}

	// A browser-based client at any origin may read the documents.
	pre := e.do(nil, "OPTIONS", "/oauth/token", "", map[string]string{"Origin": "http://localhost:6274", "Access-Control-Request-Method": "POST"})
	if pre.status != 204 || pre.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("token preflight: %d %v", pre.status, pre.header)
	}
}

// TestMCPWithoutTokenPointsToTheMetadata: /api/mcp without a valid token
// is 401 with WWW-Authenticate naming the protected resource metadata by
// absolute URL, from which the authorization server is found.
func TestMCPWithoutTokenPointsToTheMetadata(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	for name, token := range map[string]string{"no token": "", "garbage": "not-a-token", "forged PAT": "wcp_" + strings.Repeat("A", 43)} {
		resp := e.mcp(token, listTools)
		want := `Bearer resource_metadata="` + e.srv.URL + `/.well-known/oauth-protected-resource/api/mcp"`
		if resp.status != 401 || !strings.HasPrefix(resp.header.Get("WWW-Authenticate"), want) || !strings.Contains(resp.body, `"code":"UNAUTHORIZED"`) {
			t.Errorf("%s: %d %q %s, want 401 with %s", name, resp.status, resp.header.Get("WWW-Authenticate"), resp.body, want)
		}
		if token != "" && !strings.Contains(resp.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: WWW-Authenticate %q lacks error=invalid_token", name, resp.header.Get("WWW-Authenticate"))
		}
	}
}

// TestOAuthFlowAndMCPTools runs the authorization code flow with PKCE
// through the pages, then uses the token with the go-sdk MCP client:
// tools/list, tools/call with structured content, isError, a run still
// going, and progress notifications (SSE) when a progressToken is sent.
func TestOAuthFlowAndMCPTools(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	wfID := e.expose(ada, "shout")
	redirect := "http://127.0.0.1:9/callback"
	client := e.register(redirect)
	tk := e.connect(ada, client, redirect)
	if tk.TokenType != "Bearer" || tk.ExpiresIn != 3600 || tk.RefreshToken == "" || tk.Scope != "mcp" {
		t.Errorf("tokens = %+v", tk)
	}

	ctx := context.Background()
	progress := make(chan string, 10)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		},
	})
	sess, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/api/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{tk.AccessToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	tools, err := sess.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "shout" || tools.Tools[0].OutputSchema == nil {
		t.Fatalf("tools = %+v, %v", tools, err)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %+v %v", res, err)
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"result":"HI"}` {
		t.Errorf("structuredContent = %s", b)
	}
	if len(progress) != 0 {
		t.Errorf("progress without a progressToken: %v", <-progress)
	}
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"text": "fail"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "step check failed") {
		t.Errorf("failed run: %+v %v", res, err)
	}
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"text": 7}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "input.text") {
		t.Errorf("arguments the input schema refuses: %+v %v", res, err)
	}
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"text": "slow"}})
	var still struct{ RunID, Status string }
	b, _ := json.Marshal(res.StructuredContent)
	if err != nil || res.IsError || json.Unmarshal(b, &still) != nil || still.Status != "running" || still.RunID == "" ||
		!strings.Contains(res.Content[0].(*mcp.TextContent).Text, "/api/workflows/"+wfID+"/runs/"+still.RunID) {
		t.Errorf("a run that outlives the call: %s %+v %v", b, res, err)
	}
	// It is a durable run like any other, started by MCP.
	run := e.do(ada.browser, "GET", "/api/workflows/"+wfID+"/runs/"+still.RunID, "", nil)
	if run.status != 200 || !strings.Contains(run.body, `"trigger":{"type":"mcp"}`) || strings.Contains(run.body, `"chatId"`) {
		t.Errorf("the MCP run: %d %s", run.status, run.body)
	}
	params := &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"text": "go"}}
	params.SetProgressToken("p1")
	if res, err = sess.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("call with progress: %+v %v", res, err)
	}
	// The client hands notifications to its handler on its own goroutine.
	var got []string
	for len(got) < 3 {
		select {
		case m := <-progress:
			got = append(got, m)
		case <-time.After(patience):
			t.Fatalf("progress = %v, want three steps", got)
		}
	}
	if !slices.Equal(got, []string{"step check (json_query) completed", "step upper (json_query) completed", "step done (json_query) completed"}) {
		t.Errorf("progress = %v", got)
	}

	// The answers' media types: JSON without a progress token, SSE with.
	plain := e.mcp(tk.AccessToken, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shout","arguments":{"text":"x"}}}`)
	sse := e.mcp(tk.AccessToken, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shout","arguments":{"text":"x"},"_meta":{"progressToken":7}}}`)
	if !strings.HasPrefix(plain.header.Get("Content-Type"), "application/json") || !strings.Contains(plain.body, `"structuredContent":{"result":"X"}`) {
		t.Errorf("plain call: %s %s", plain.header.Get("Content-Type"), plain.body)
	}
	if !strings.HasPrefix(sse.header.Get("Content-Type"), "text/event-stream") || strings.Count(sse.body, "notifications/progress") != 3 {
		t.Errorf("progress call: %s %s", sse.header.Get("Content-Type"), sse.body)
	}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestAuthorizationRequestRefusals: PKCE is S256 only and required; an
// unregistered redirect URI is never redirected to; the resource must be
// this service's; an unknown client is an error page.
func TestAuthorizationRequestRefusals(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1/cb"
	client := e.register(redirect, "https://app.example.com/cb")
	p := newPKCE()
	cases := []struct {
		name  string
		extra map[string]string
		// want is the error sent back to the redirect URI; page, the status
		// of an error page (no redirect).
		want string
		page int
	}{
		{"missing PKCE", map[string]string{"code_challenge": "", "code_challenge_method": ""}, "invalid_request", 0},
		{"plain PKCE", map[string]string{"code_challenge_method": "plain"}, "invalid_request", 0},
		{"PKCE method missing", map[string]string{"code_challenge_method": ""}, "invalid_request", 0},
		{"implicit flow", map[string]string{"response_type": "token"}, "unsupported_response_type", 0},
		{"another resource", map[string]string{"resource": "https://other.example/mcp"}, "invalid_target", 0},
		{"unregistered redirect", map[string]string{"redirect_uri": "https://evil.example/cb"}, "", 400},
		{"redirect with another path", map[string]string{"redirect_uri": "http://127.0.0.1/other"}, "", 400},
		{"https redirect on another port", map[string]string{"redirect_uri": "https://app.example.com:8443/cb"}, "", 400},
		{"unknown client", map[string]string{"client_id": "no-such-client"}, "", 400},
	}
	for _, tc := range cases {
		resp := e.do(ada.browser, "GET", "/oauth/authorize?"+authorizeParams(client, redirect, p, tc.extra).Encode(), "", nil)
		if tc.page != 0 {
			if resp.status != tc.page || resp.header.Get("Location") != "" || !strings.HasPrefix(resp.header.Get("Content-Type"), "text/html") {
				t.Errorf("%s: %d Location %q, want an error page %d", tc.name, resp.status, resp.header.Get("Location"), tc.page)
			}
			continue
		}
		loc, _ := url.Parse(resp.header.Get("Location"))
		if resp.status != http.StatusSeeOther || loc == nil || loc.Query().Get("error") != tc.want || loc.Query().Get("state") != "st-1" ||
			loc.Query().Get("iss") != e.srv.URL || !strings.HasPrefix(loc.String(), redirect) {
			t.Errorf("%s: %d %q, want a redirect with error=%s", tc.name, resp.status, resp.header.Get("Location"), tc.want)
		}
	}

	// A native client's loopback redirect may use any port (RFC 8252).
	loc := e.authorize(ada, authorizeParams(client, "http://127.0.0.1:53122/cb", p, nil))
	if loc.Host != "127.0.0.1:53122" || loc.Query().Get("code") == "" {
		t.Errorf("loopback with a port: %s", loc)
	}
	// The pages: strict CSP, no script.
	page := e.do(ada.browser, "GET", "/oauth/authorize?"+authorizeParams(client, redirect, p, nil).Encode(), "", nil)
	csp := page.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self' http://127.0.0.1"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(page.body, "<script") {
		t.Error("the consent page has a script")
	}
}

// TestTokenEndpointRefusals: PKCE mismatch, wrong redirect URI, another
// client's code, and malformed requests, each with its RFC error code.
func TestTokenEndpointRefusals(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	client, other := e.register(redirect), e.register(redirect)
	codeFor := func(p pkce) string {
		return e.authorize(ada, authorizeParams(client, redirect, p, nil)).Query().Get("code")
	}
	exchange := func(code, clientID, redirectURI, verifier string) (int, string) {
		st, tk, body := e.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {clientID},
			"redirect_uri": {redirectURI}, "code_verifier": {verifier}})
		return st, tk.Error + " " + body
	}
	p := newPKCE()
	if st, body := exchange(codeFor(p), client, redirect, newPKCE().verifier); st != 400 || !strings.HasPrefix(body, "invalid_grant") {
		t.Errorf("PKCE mismatch: %d %s", st, body)
	}
	if st, body := exchange(codeFor(p), client, "http://127.0.0.1:8/cb", p.verifier); st != 400 || !strings.HasPrefix(body, "invalid_grant") {
		t.Errorf("wrong redirect URI: %d %s", st, body)
	}
	if st, body := exchange(codeFor(p), other, redirect, p.verifier); st != 400 || !strings.HasPrefix(body, "invalid_grant") {
		t.Errorf("another client's code: %d %s", st, body)
	}
	if st, body := exchange("wcc_unknown", client, redirect, p.verifier); st != 400 || !strings.HasPrefix(body, "invalid_grant") {
		t.Errorf("unknown code: %d %s", st, body)
	}
	for name, v := range map[string]url.Values{
		"unsupported_grant_type": {"grant_type": {"password"}, "client_id": {client}},
		"invalid_request":        {"client_id": {client}},
		"invalid_client":         {"grant_type": {"authorization_code"}, "code": {"x"}, "client_id": {"nobody"}},
	} {
		st, tk, body := e.token(v)
		if tk.Error != name || (st != 400 && st != 401) {
			t.Errorf("%s: %d %s", name, st, body)
		}
	}
	resp := e.do(nil, "POST", "/oauth/token", `{"grant_type":"authorization_code"}`, nil)
	if resp.status != 400 || !strings.Contains(resp.body, `"invalid_request"`) {
		t.Errorf("JSON body: %d %s", resp.status, resp.body)
	}
	// A code expires after two minutes.
	code := codeFor(p)
	e.clk.Set(e.clk.Now().Add(3 * time.Minute))
	if st, body := exchange(code, client, redirect, p.verifier); st != 400 || !strings.HasPrefix(body, "invalid_grant") {
		t.Errorf("expired code: %d %s", st, body)
	}
}

// TestCodeReuseRevokesItsTokens: an authorization code works once; using
// it again revokes every token issued from it.
func TestCodeReuseRevokesItsTokens(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	p := newPKCE()
	code := e.authorize(ada, authorizeParams(client, redirect, p, nil)).Query().Get("code")
	v := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {client}, "redirect_uri": {redirect}, "code_verifier": {p.verifier}}
	st, tk, body := e.token(v)
	if st != 200 {
		t.Fatalf("first use: %d %s", st, body)
	}
	if r := e.mcp(tk.AccessToken, listTools); r.status != 200 {
		t.Fatalf("token before the reuse: %d %s", r.status, r.body)
	}
	st, again, body := e.token(v)
	if st != 400 || again.Error != "invalid_grant" {
		t.Errorf("second use: %d %s", st, body)
	}
	if r := e.mcp(tk.AccessToken, listTools); r.status != 401 {
		t.Errorf("access token after the code's reuse: %d, want 401", r.status)
	}
	if st, _, body := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}, "client_id": {client}}); st != 400 {
		t.Errorf("refresh token after the code's reuse: %d %s", st, body)
	}
}

// TestRefreshRotationAndReuse: a refresh token rotates; presenting a spent
// one after the reuse grace (30 s) revokes the whole family, the newest
// tokens included.
func TestRefreshRotationAndReuse(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	first := e.connect(ada, client, redirect)
	refresh := func(rt string) (int, tokens) {
		st, tk, _ := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {client}})
		return st, tk
	}
	st, second := refresh(first.RefreshToken)
	if st != 200 || second.RefreshToken == "" || second.RefreshToken == first.RefreshToken || second.AccessToken == "" {
		t.Fatalf("rotation: %d %+v", st, second)
	}
	if r := e.mcp(second.AccessToken, listTools); r.status != 200 {
		t.Fatalf("rotated access token: %d %s", r.status, r.body)
	}
	e.clk.Set(e.clk.Now().Add(oauth.RefreshReuseGrace))
	st, reused := refresh(first.RefreshToken)
	if st != 400 || reused.Error != "invalid_grant" {
		t.Errorf("reuse: %d %+v", st, reused)
	}
	if st, _ := refresh(second.RefreshToken); st != 400 {
		t.Errorf("the family's newest refresh token after a reuse: %d, want 400", st)
	}
	for name, at := range map[string]string{"first": first.AccessToken, "second": second.AccessToken} {
		if r := e.mcp(at, listTools); r.status != 401 {
			t.Errorf("%s access token after a reuse: %d, want 401", name, r.status)
		}
	}
	// Another client may not redeem the refresh token of this one.
	other := e.register(redirect)
	third := e.connect(ada, client, redirect)
	if st, _, body := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {third.RefreshToken}, "client_id": {other}}); st != 400 || !strings.Contains(body, "invalid_grant") {
		t.Errorf("another client's refresh: %d %s", st, body)
	}
	// Revocation (RFC 7009) ends the family.
	if r := e.form(nil, "/oauth/revoke", url.Values{"token": {third.RefreshToken}, "client_id": {client}}, nil); r.status != 200 {
		t.Errorf("revoke: %d %s", r.status, r.body)
	}
	if r := e.mcp(third.AccessToken, listTools); r.status != 401 {
		t.Errorf("access token after revocation: %d", r.status)
	}
}

// TestAccessTokenExpiryAndAudience: a token is refused an hour after its
// issue, and a token of another audience (signed by the same keys) is
// refused by /api/mcp.
func TestAccessTokenExpiryAndAudience(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	tk := e.connect(ada, client, redirect)
	if r := e.mcp(tk.AccessToken, listTools); r.status != 200 {
		t.Fatalf("fresh token: %d %s", r.status, r.body)
	}

	doc, err := os.ReadFile(e.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := accesstoken.ParseKeySet(doc)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := ks.Decode(tk.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	for name, aud := range map[string]string{"another resource": "https://other.example/mcp", "another origin's MCP": "http://127.0.0.2:1/api/mcp"} {
		c := claims
		c.Audience = jwt.Audience{aud}
		forged, err := ks.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		if r := e.mcp(forged, listTools); r.status != 401 {
			t.Errorf("%s: %d, want 401", name, r.status)
		}
	}
	c := claims
	c.Issuer = "https://other.example"
	if forged, _ := ks.Sign(c); e.mcp(forged, listTools).status != 401 {
		t.Error("a token of another issuer was accepted")
	}
	// Unsigned and foreign-key tokens.
	other, _ := accesstoken.ParseKeySet(accesstoken.GenerateKeySet(ks.SigningKeyID()))
	if forged, _ := other.Sign(claims); e.mcp(forged, listTools).status != 401 {
		t.Error("a token signed by another key with the same kid was accepted")
	}
	parts := strings.Split(tk.AccessToken, ".")
	if e.mcp(parts[0]+"."+parts[1]+".", listTools).status != 401 {
		t.Error("an unsigned token was accepted")
	}

	e.clk.Set(e.clk.Now().Add(61 * time.Minute))
	if r := e.mcp(tk.AccessToken, listTools); r.status != 401 {
		t.Errorf("token after an hour: %d, want 401", r.status)
	}
}

// TestUsersNeverReachEachOthersTools: A's token lists and calls only A's
// tools, whatever it names.
func TestUsersNeverReachEachOthersTools(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	a, b := e.signUp("a@example.com"), e.signUp("b@example.com")
	e.expose(a, "a_tool")
	bWorkflow := e.expose(b, "b_tool")
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	ta := e.connect(a, client, redirect)
	pat := e.do(b.browser, "POST", "/api/users/"+b.id+"/tokens", `{"name":"script","expiresInDays":7}`, nil)
	tb := jsonPath(t, pat.body, "data", "token")

	for who, token := range map[string]string{"A": ta.AccessToken, "B": tb} {
		r := e.mcp(token, listTools)
		mine, theirs := strings.ToLower(who)+"_tool", "b_tool"
		if who == "B" {
			theirs = "a_tool"
		}
		if r.status != 200 || !strings.Contains(r.body, `"name":"`+mine+`"`) || strings.Contains(r.body, theirs) {
			t.Errorf("%s lists %d %s", who, r.status, r.body)
		}
		call := e.mcp(token, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+theirs+`","arguments":{"text":"x"}}}`)
		if !strings.Contains(call.body, `"error"`) && !strings.Contains(call.body, `"isError":true`) {
			t.Errorf("%s called %s: %s", who, theirs, call.body)
		}
	}
	// B's own calls ran B's workflow; A's call of b_tool ran nothing.
	if runs := e.do(b.browser, "GET", "/api/workflows/"+bWorkflow+"/runs", "", nil); strings.Count(runs.body, `"trigger":{"type":"mcp"}`) != 0 ||
		!strings.Contains(runs.body, `"workflowRuns":[]`) {
		t.Errorf("B's workflow's runs: %s", runs.body)
	}
}

// TestBearerTokensNeverWorkOnTheCookieAPI: neither an access token nor a
// personal access token opens a cookie-authenticated route.
func TestBearerTokensNeverWorkOnTheCookieAPI(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	tk := e.connect(ada, e.register(redirect), redirect)
	pat := jsonPath(t, e.do(ada.browser, "POST", "/api/users/"+ada.id+"/tokens", `{"name":"s","expiresInDays":1}`, nil).body, "data", "token")
	for name, token := range map[string]string{"access token": tk.AccessToken, "personal token": pat} {
		for _, route := range []struct{ method, path, body string }{
			{"POST", "/api/chats", `{"title":"by bearer"}`},
			{"GET", "/api/users/" + ada.id + "/chats", ""},
			{"GET", "/api/auth/session", ""},
			{"GET", "/api/users/" + ada.id + "/tokens", ""},
			{"POST", "/api/users/" + ada.id + "/tokens", `{"name":"x","expiresInDays":1}`},
			{"GET", "/api/models", ""},
		} {
			r := e.do(nil, route.method, route.path, route.body, map[string]string{"Authorization": "Bearer " + token})
			if r.status != 401 || !strings.Contains(r.body, `"code":"UNAUTHORIZED"`) {
				t.Errorf("%s on %s %s: %d %s, want 401", name, route.method, route.path, r.status, r.body)
			}
		}
	}
}

// TestConsentFormCSRF: the consent and sign-in forms need the CSRF token of
// the page the browser was served, and a same-origin post.
func TestConsentFormCSRF(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	params := authorizeParams(client, redirect, newPKCE(), nil)
	page := e.do(ada.browser, "GET", "/oauth/authorize?"+params.Encode(), "", nil)
	csrf := csrfField.FindStringSubmatch(page.body)[1]
	post := func(token string, header map[string]string) answer {
		v := url.Values{"action": {"approve"}}
		if token != "" {
			v.Set("csrf", token)
		}
		for k, val := range params {
			v[k] = val
		}
		return e.form(ada.browser, "/oauth/authorize", v, header)
	}
	for name, r := range map[string]answer{
		"no token":        post("", nil),
		"wrong token":     post(strings.Repeat("x", 43), nil),
		"cross-site post": post(csrf, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}),
	} {
		if r.status != 403 || r.header.Get("Location") != "" {
			t.Errorf("%s: %d Location %q, want 403 and no code", name, r.status, r.header.Get("Location"))
		}
	}
	// A browser without the page's cookie (the attacker's page posting
	// the victim's form) fails too.
	stranger := e.signUp("eve@example.com")
	v := url.Values{"action": {"approve"}, "csrf": {csrf}}
	for k, val := range params {
		v[k] = val
	}
	if r := e.form(stranger.browser, "/oauth/authorize", v, nil); r.status != 403 {
		t.Errorf("another browser's token: %d", r.status)
	}
	if r := post(csrf, nil); r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "code=") {
		t.Errorf("the genuine form: %d %s", r.status, r.header.Get("Location"))
	}
}

// TestSignInThroughTheAuthorizationPage: a browser without a session signs
// in on the page (wrong password refused, the sign-in limits apply), and
// then holds a session cookie.
func TestSignInThroughTheAuthorizationPage(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, map[string]string{"RATE_LIMIT_SIGN_IN_EMAIL": "2/m"})
	ada := e.signUp("ada@example.com")
	fresh := testUser{id: ada.id, email: ada.email, password: ada.password, browser: e.browser()}
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	params := authorizeParams(client, redirect, newPKCE(), nil)
	page := e.do(fresh.browser, "GET", "/oauth/authorize?"+params.Encode(), "", nil)
	if !strings.Contains(page.body, `value="sign-in"`) {
		t.Fatalf("a browser without a session is not asked to sign in: %s", page.body)
	}
	v := url.Values{"action": {"sign-in"}, "email": {ada.email}, "password": {"wrong password"}, "csrf": {csrfField.FindStringSubmatch(page.body)[1]}}
	for k, val := range params {
		v[k] = val
	}
	if r := e.form(fresh.browser, "/oauth/authorize", v, nil); r.status != 401 || !strings.Contains(r.body, "invalid email or password") {
		t.Errorf("wrong password: %d %s", r.status, r.body)
	}
	loc := e.authorize(fresh, params)
	if loc.Query().Get("code") == "" {
		t.Fatalf("no code after signing in: %s", loc)
	}
	if r := e.do(fresh.browser, "GET", "/api/auth/session", "", nil); r.status != 200 {
		t.Errorf("the page's sign-in left no session: %d", r.status)
	}
	// The sign-in limit (2 per minute per email) covers the page too.
	v.Set("password", "wrong again")
	if r := e.form(fresh.browser, "/oauth/authorize", v, nil); r.status != 429 {
		t.Errorf("third sign-in in a minute: %d, want 429", r.status)
	}
}

// TestPersonalAccessTokens: create (token shown once), list (never the
// token), validation naming the field, another user's 403, the cap,
// delete, and the token working only on /api/mcp.
func TestPersonalAccessTokens(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada, eve := e.signUp("ada@example.com"), e.signUp("eve@example.com")
	e.expose(ada, "shout")
	path := "/api/users/" + ada.id + "/tokens"
	created := e.do(ada.browser, "POST", path, `{"name":"ci script","expiresInDays":30}`, nil)
	if created.status != 201 {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	token, id := jsonPath(t, created.body, "data", "token"), jsonPath(t, created.body, "data", "id")
	if !strings.HasPrefix(token, "wcp_") || jsonPath(t, created.body, "data", "expiresAt") == "" || jsonPath(t, created.body, "data", "name") != "ci script" {
		t.Errorf("created = %s", created.body)
	}
	list := e.do(ada.browser, "GET", path, "", nil)
	if list.status != 200 || !strings.Contains(list.body, id) || strings.Contains(list.body, token) || strings.Contains(list.body, `"token"`) {
		t.Errorf("list: %d %s", list.status, list.body)
	}
	if r := e.mcp(token, listTools); r.status != 200 || !strings.Contains(r.body, "shout") {
		t.Errorf("PAT on /api/mcp: %d %s", r.status, r.body)
	}
	for body, field := range map[string]string{
		`{"expiresInDays":30}`:             "name",
		`{"name":"x"}`:                     "expiresInDays",
		`{"name":"x","expiresInDays":0}`:   "expiresInDays",
		`{"name":"x","expiresInDays":366}`: "expiresInDays",
		`{"name":"` + strings.Repeat("n", 101) + `","expiresInDays":1}`: "name",
	} {
		r := e.do(ada.browser, "POST", path, body, nil)
		if r.status != 400 || !strings.Contains(r.body, `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, r.status, r.body, field)
		}
	}
	if r := e.do(eve.browser, "POST", path, `{"name":"x","expiresInDays":1}`, nil); r.status != 403 {
		t.Errorf("eve creates on ada's: %d", r.status)
	}
	// The path is checked before the body: another user's path is 403 and
	// a malformed one 400 INVALID_ID, whatever the body.
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{path, `{"name":"x"}`, 403, "FORBIDDEN"},
		{path, ``, 403, "FORBIDDEN"},
		{"/api/users/not-a-uuid/tokens", `{"name":"x"}`, 400, "INVALID_ID"},
		{"/api/users/not-a-uuid/tokens", `{"name":"x","expiresInDays":1}`, 400, "INVALID_ID"},
	} {
		if r := e.do(eve.browser, "POST", tc.path, tc.body, nil); r.status != tc.status || !strings.Contains(r.body, `"code":"`+tc.code+`"`) {
			t.Errorf("eve POST %s %s: %d %s, want %d %s", tc.path, tc.body, r.status, r.body, tc.status, tc.code)
		}
	}
	if r := e.do(eve.browser, "GET", path, "", nil); r.status != 403 {
		t.Errorf("eve lists ada's: %d", r.status)
	}
	if r := e.do(eve.browser, "DELETE", path+"/"+id, "", nil); r.status != 403 {
		t.Errorf("eve deletes ada's: %d", r.status)
	}
	for i := 1; i < 20; i++ {
		if r := e.do(ada.browser, "POST", path, `{"name":"t","expiresInDays":1}`, nil); r.status != 201 {
			t.Fatalf("token %d: %d %s", i+1, r.status, r.body)
		}
	}
	if r := e.do(ada.browser, "POST", path, `{"name":"t","expiresInDays":1}`, nil); r.status != 409 || !strings.Contains(r.body, "TOO_MANY_TOKENS") {
		t.Errorf("21st token: %d %s", r.status, r.body)
	}
	if r := e.do(ada.browser, "DELETE", path+"/"+id, "", nil); r.status != 204 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := e.do(ada.browser, "DELETE", path+"/"+id, "", nil); r.status != 404 {
		t.Errorf("delete again: %d", r.status)
	}
	if r := e.mcp(token, listTools); r.status != 401 {
		t.Errorf("deleted PAT on /api/mcp: %d", r.status)
	}
	// An expired token stops working.
	short := jsonPath(t, e.do(ada.browser, "POST", path, `{"name":"short","expiresInDays":1}`, nil).body, "data", "token")
	e.clk.Set(e.clk.Now().Add(25 * time.Hour))
	if r := e.mcp(short, listTools); r.status != 401 {
		t.Errorf("expired PAT: %d", r.status)
	}
}

// TestConnectionsAndSignOutEverywhere: connections list the clients
// holding grants; deleting one stops its tokens; signing out everywhere
// revokes every grant and personal token.
func TestConnectionsAndSignOutEverywhere(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	c1, c2 := e.register(redirect), e.register(redirect)
	t1, t2 := e.connect(ada, c1, redirect), e.connect(ada, c2, redirect)
	list := e.do(ada.browser, "GET", "/api/users/"+ada.id+"/connections", "", nil)
	if list.status != 200 || !strings.Contains(list.body, c1) || !strings.Contains(list.body, c2) || !strings.Contains(list.body, `"clientName":"Test client"`) {
		t.Fatalf("connections: %d %s", list.status, list.body)
	}
	if r := e.do(ada.browser, "DELETE", "/api/users/"+ada.id+"/connections/"+c1, "", nil); r.status != 204 {
		t.Fatalf("disconnect: %d %s", r.status, r.body)
	}
	if r := e.mcp(t1.AccessToken, listTools); r.status != 401 {
		t.Errorf("disconnected client's access token: %d", r.status)
	}
	if st, _, _ := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {t1.RefreshToken}, "client_id": {c1}}); st != 400 {
		t.Errorf("disconnected client's refresh token: %d", st)
	}
	if r := e.mcp(t2.AccessToken, listTools); r.status != 200 {
		t.Errorf("the other client's token: %d", r.status)
	}
	if r := e.do(ada.browser, "DELETE", "/api/users/"+ada.id+"/connections/"+c1, "", nil); r.status != 404 {
		t.Errorf("disconnect again: %d", r.status)
	}

	pat := jsonPath(t, e.do(ada.browser, "POST", "/api/users/"+ada.id+"/tokens", `{"name":"s","expiresInDays":1}`, nil).body, "data", "token")
	if r := e.do(ada.browser, "POST", "/api/auth/sign-out-all", "", nil); r.status != 200 {
		t.Fatalf("sign-out-all: %d %s", r.status, r.body)
	}
	for name, token := range map[string]string{"access token": t2.AccessToken, "personal token": pat} {
		if r := e.mcp(token, listTools); r.status != 401 {
			t.Errorf("%s after sign-out-all: %d", name, r.status)
		}
	}
	if st, _, _ := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {t2.RefreshToken}, "client_id": {c2}}); st != 400 {
		t.Errorf("refresh after sign-out-all: %d", st)
	}
}

// TestClientRegistrationAndMetadataDocuments: registration validates the
// metadata and is rate limited; a client id may be the URL of a Client ID
// Metadata Document, whose client_id must be that URL.
func TestClientRegistrationAndMetadataDocuments(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, map[string]string{"RATE_LIMIT_OAUTH_REGISTER": "6/m"})
	for body, code := range map[string]string{
		`{"redirect_uris":[]}`:                                                  "invalid_redirect_uri",
		`{"redirect_uris":["http://evil.example/cb"]}`:                          "invalid_redirect_uri",
		`{"redirect_uris":["javascript:alert(1)"]}`:                             "invalid_redirect_uri",
		`{"redirect_uris":["https://a.example/cb#frag"]}`:                       "invalid_redirect_uri",
		`{"redirect_uris":["https://a.example/cb"],"grant_types":["password"]}`: "invalid_client_metadata",
	} {
		r := e.do(nil, "POST", "/oauth/register", body, nil)
		if r.status != 400 || jsonPath(t, r.body, "error") != code {
			t.Errorf("%s: %d %s, want %s", body, r.status, r.body, code)
		}
	}
	conf := e.do(nil, "POST", "/oauth/register", `{"redirect_uris":["https://a.example/cb"],"client_name":"Confidential"}`, nil)
	if conf.status != 201 || jsonPath(t, conf.body, "client_secret") == "" || jsonPath(t, conf.body, "token_endpoint_auth_method") != "client_secret_basic" {
		t.Errorf("confidential registration: %d %s", conf.status, conf.body)
	}
	if r := e.do(nil, "POST", "/oauth/register", `{"redirect_uris":["https://a.example/cb"]}`, nil); r.status != 429 {
		t.Errorf("7th registration in a minute: %d, want 429", r.status)
	}

	// A Client ID Metadata Document.
	docs := http.NewServeMux()
	var docURL string
	docs.HandleFunc("/client.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": docURL, "client_name": "Doc Client",
			"redirect_uris": []string{"http://127.0.0.1/cb"}, "grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"})
	})
	docs.HandleFunc("/liar.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"client_id":"https://someone.else/client.json","redirect_uris":["http://127.0.0.1/cb"]}`))
	})
	ds := httptest.NewServer(docs)
	defer ds.Close()
	docURL = ds.URL + "/client.json"
	ada := e.signUp("ada@example.com")
	tk := e.connect(ada, docURL, "http://127.0.0.1:4242/cb")
	if r := e.mcp(tk.AccessToken, listTools); r.status != 200 {
		t.Errorf("document client's token: %d", r.status)
	}
	conns := e.do(ada.browser, "GET", "/api/users/"+ada.id+"/connections", "", nil)
	if !strings.Contains(conns.body, `"clientName":"Doc Client"`) {
		t.Errorf("connections: %s", conns.body)
	}
	if r := e.do(ada.browser, "DELETE", "/api/users/"+ada.id+"/connections/"+url.PathEscape(docURL), "", nil); r.status != 204 {
		t.Errorf("disconnect a document client by its URL: %d %s", r.status, r.body)
	}
	liar := e.do(ada.browser, "GET", "/oauth/authorize?"+authorizeParams(ds.URL+"/liar.json", "http://127.0.0.1/cb", newPKCE(), nil).Encode(), "", nil)
	if liar.status != 400 || !strings.Contains(liar.body, "client_id is not the URL") {
		t.Errorf("a document naming another client id: %d %s", liar.status, liar.body)
	}
}

// TestNoSecretInLogs: codes, tokens and client secrets never reach a log
// line.
func TestNoSecretInLogs(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	redirect := "http://127.0.0.1:7/cb"
	client := e.register(redirect)
	p := newPKCE()
	code := e.authorize(ada, authorizeParams(client, redirect, p, nil)).Query().Get("code")
	_, tk, _ := e.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {client}, "redirect_uri": {redirect}, "code_verifier": {p.verifier}})
	_, _, _ = e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}, "client_id": {client}})
	e.clk.Set(e.clk.Now().Add(oauth.RefreshReuseGrace))
	_, _, _ = e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}, "client_id": {client}}) // reuse past the grace: logged
	pat := jsonPath(t, e.do(ada.browser, "POST", "/api/users/"+ada.id+"/tokens", `{"name":"s","expiresInDays":1}`, nil).body, "data", "token")
	e.mcp(pat, listTools)
	logs := e.logs.String()
	if !strings.Contains(logs, "refresh token reused") {
		t.Fatal("the captured logs miss the reuse warning; the check would prove nothing")
	}
	for name, secret := range map[string]string{"code": code, "access token": tk.AccessToken, "refresh token": tk.RefreshToken, "PAT": pat, "password": ada.password} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s is in the logs", name)
		}
	}
}

// TestMCPCallOfAWorkflowThatAsksAPerson: a call of a workflow that
// reaches a human step answers at once with the waiting run's id and
// status and where to answer it; the answer then finishes the run.
func TestMCPCallOfAWorkflowThatAsksAPerson(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, nil)
	ada := e.signUp("ada@example.com")
	r := e.do(ada.browser, "POST", "/api/workflows", `{"userId":"`+ada.id+`","name":"ask"}`, nil)
	wfID := jsonPath(t, r.body, "data", "id")
	def := `{"steps": [{"id": "ok", "toolId": "ask_human", "inputs": {"message": "Ship it?"}},
	  {"id": "then", "toolId": "json_query", "inputs": {"input": "{{ok.approved}}", "query": "."}}],
	  "exposeAsTool": true, "toolName": "ship"}`
	if r := e.do(ada.browser, "PATCH", "/api/workflows/"+wfID, def, nil); r.status != 200 {
		t.Fatalf("define: %d %s", r.status, r.body)
	}
	token := jsonPath(t, e.do(ada.browser, "POST", "/api/users/"+ada.id+"/tokens", `{"name":"s","expiresInDays":1}`, nil).body, "data", "token")
	start := time.Now()
	call := e.mcp(token, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ship","arguments":{}}}`)
	var res struct {
		Result struct {
			IsError           bool
			StructuredContent struct{ RunID, Status string }
			Content           []struct{ Text string }
		}
	}
	if err := json.Unmarshal([]byte(call.body), &res); err != nil || res.Result.IsError || res.Result.StructuredContent.Status != "waiting" ||
		len(res.Result.Content) != 1 || !strings.Contains(res.Result.Content[0].Text, "/steps/ok/respond") || !strings.Contains(res.Result.Content[0].Text, "Ship it?") {
		t.Fatalf("call: %s (%v)", call.body, err)
	}
	if took := time.Since(start); took >= callWait {
		t.Errorf("the call waited %s (the whole call wait) for a run that waits for a person", took)
	}
	runID := res.Result.StructuredContent.RunID
	if r := e.do(ada.browser, "POST", "/api/workflows/"+wfID+"/runs/"+runID+"/steps/ok/respond", `{"approved":true}`, nil); r.status != 202 {
		t.Fatalf("respond: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(patience)
	for {
		got := e.do(ada.browser, "GET", "/api/workflows/"+wfID+"/runs/"+runID, "", nil)
		if strings.Contains(got.body, `"status":"completed"`) && strings.Contains(got.body, `"output":{"result":true}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answered run: %s", got.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
