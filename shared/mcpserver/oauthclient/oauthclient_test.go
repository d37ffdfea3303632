package oauthclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/mcpserver/oauthclient"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/vault"
)

// TestChallenge: the S256 challenge of a verifier (as Python's hashlib computes it),
// and fresh verifiers of the right form.
func TestChallenge(t *testing.T) {
	t.Parallel()
	if got := oauthclient.Challenge("dBjftJeZ4CVP-mJ92K9RgWhhcRLAAlY5i4bW1BJnRMs"); got != "g1WXg5mXPcjCgg3jAmVXH2mPk5DZK5RYljZhq2jws_Q" {
		t.Fatalf("challenge = %s", got)
	}
	a, b := oauthclient.NewVerifier(), oauthclient.NewVerifier()
	if len(a) != 43 || a == b || strings.ContainsAny(a, "+/=") {
		t.Fatalf("verifiers %q %q", a, b)
	}
}

func TestParseChallenge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		headers       []string
		metadata, scp string
	}{
		{"quoted", []string{`Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="a b"`},
			"https://mcp.example.com/.well-known/oauth-protected-resource/mcp", "a b"},
		{"bearer after basic", []string{`Basic realm="x"`, `Bearer error="invalid_token", resource_metadata="https://r.example/m"`}, "https://r.example/m", ""},
		{"no bearer", []string{`Basic realm="x"`}, "", ""},
		{"malformed", []string{`Bearer resource_metadata="unterminated`}, "", ""},
		{"none", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, s := oauthclient.ParseChallenge(tc.headers)
			if m != tc.metadata || s != tc.scp {
				t.Fatalf("= %q %q, want %q %q", m, s, tc.metadata, tc.scp)
			}
		})
	}
}

func TestMetadataURLs(t *testing.T) {
	t.Parallel()
	got, err := oauthclient.ResourceMetadataURLs("https://mcp.example.com/v1/mcp", "https://mcp.example.com/prm")
	want := []string{"https://mcp.example.com/prm", "https://mcp.example.com/.well-known/oauth-protected-resource/v1/mcp",
		"https://mcp.example.com/.well-known/oauth-protected-resource"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("resource metadata URLs = %v, %v", got, err)
	}
	got, _ = oauthclient.ResourceMetadataURLs("https://mcp.example.com", "")
	if fmt.Sprint(got) != "[https://mcp.example.com/.well-known/oauth-protected-resource]" {
		t.Fatalf("at the root: %v", got)
	}
	got, _ = oauthclient.ServerMetadataURLs("https://as.example.com/tenant1")
	want = []string{"https://as.example.com/.well-known/oauth-authorization-server/tenant1", "https://as.example.com/.well-known/openid-configuration/tenant1",
		"https://as.example.com/tenant1/.well-known/openid-configuration"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("server metadata URLs = %v", got)
	}
	got, _ = oauthclient.ServerMetadataURLs("https://as.example.com/")
	if fmt.Sprint(got) != "[https://as.example.com/.well-known/oauth-authorization-server https://as.example.com/.well-known/openid-configuration]" {
		t.Fatalf("issuer without path: %v", got)
	}
	if _, err := oauthclient.ServerMetadataURLs("https://as.example.com/?q=1"); err == nil {
		t.Fatal("an issuer with a query is accepted")
	}
}

func TestCheckResource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		resource, server string
		ok               bool
	}{
		{"https://mcp.example.com/mcp", "https://mcp.example.com/mcp", true},
		{"https://mcp.example.com", "https://mcp.example.com/mcp", true},
		{"https://MCP.example.com/mcp/", "https://mcp.example.com/mcp", true},
		{"https://mcp.example.com/other", "https://mcp.example.com/mcp", false},
		{"https://mcp.example.com/m", "https://mcp.example.com/mcp", false},
		{"https://evil.example.com/mcp", "https://mcp.example.com/mcp", false},
		{"http://mcp.example.com/mcp", "https://mcp.example.com/mcp", false},
		{"", "https://mcp.example.com/mcp", false},
	} {
		if err := oauthclient.CheckResource(tc.resource, tc.server); (err == nil) != tc.ok {
			t.Errorf("CheckResource(%q, %q) = %v, want ok %v", tc.resource, tc.server, err, tc.ok)
		}
	}
}

func TestCheckServerMetadata(t *testing.T) {
	t.Parallel()
	good := func() *oauthex.AuthServerMeta {
		return &oauthex.AuthServerMeta{Issuer: "https://as.example.com", AuthorizationEndpoint: "https://as.example.com/authorize",
			TokenEndpoint: "https://as.example.com/token", CodeChallengeMethodsSupported: []string{"S256"}, ResponseTypesSupported: []string{"code"}}
	}
	c := oauthclient.New(oauthclient.Options{})
	for _, tc := range []struct {
		name   string
		change func(m *oauthex.AuthServerMeta)
		ok     bool
	}{
		{"good", func(*oauthex.AuthServerMeta) {}, true},
		{"another issuer", func(m *oauthex.AuthServerMeta) { m.Issuer = "https://evil.example.com" }, false},
		{"no PKCE", func(m *oauthex.AuthServerMeta) { m.CodeChallengeMethodsSupported = nil }, false},
		{"plain PKCE only", func(m *oauthex.AuthServerMeta) { m.CodeChallengeMethodsSupported = []string{"plain"} }, false},
		{"no code flow", func(m *oauthex.AuthServerMeta) { m.ResponseTypesSupported = []string{"token"} }, false},
		{"no token endpoint", func(m *oauthex.AuthServerMeta) { m.TokenEndpoint = "" }, false},
		{"http token endpoint", func(m *oauthex.AuthServerMeta) { m.TokenEndpoint = "http://as.example.com/token" }, false},
		{"javascript authorization", func(m *oauthex.AuthServerMeta) { m.AuthorizationEndpoint = "javascript:alert(1)" }, false},
		{"registration with credentials", func(m *oauthex.AuthServerMeta) { m.RegistrationEndpoint = "https://u:p@as.example.com/r" }, false},
	} {
		m := good()
		tc.change(m)
		if err := c.CheckServerMetadata(m, "https://as.example.com"); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestParseTokenResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"bearer", 200, `{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":"r"}`, true},
		{"lower-case type", 200, `{"access_token":"a","token_type":"bearer"}`, true},
		{"no access token", 200, `{"token_type":"Bearer"}`, false},
		{"not bearer", 200, `{"access_token":"a","token_type":"mac"}`, false},
		{"not an object", 200, `["a"]`, false},
		{"token at 8 KiB", 200, `{"access_token":"` + strings.Repeat("a", 8192) + `","token_type":"Bearer"}`, true},
		{"token over 8 KiB", 200, `{"access_token":"` + strings.Repeat("a", 8193) + `","token_type":"Bearer"}`, false},
		{"invalid_grant", 400, `{"error":"invalid_grant"}`, false},
		{"5xx HTML", 502, `<html>`, false},
	} {
		_, err := oauthclient.ParseTokenResponse(tc.status, []byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// env is a Client over the embedded engine's Data table, a vault in
// memory and a clock the test moves.
type env struct {
	c     *oauthclient.Client
	store *store.MCPServers
	vault *vault.Vault
	mu    sync.Mutex
	now   time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := storetest.New(t)
	e := &env{store: store.NewMCPServers(db.DB, db.Data()), vault: vault.New(vault.NewMemoryKeys(), nil), now: time.Now().UTC()}
	e.c = oauthclient.New(oauthclient.Options{Store: e.store, Vault: e.vault, AllowPrivate: true, Now: e.clock,
		Sleep: func(ctx context.Context, d time.Duration) error { time.Sleep(time.Millisecond); return ctx.Err() }})
	return e
}

func (e *env) clock() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }
func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

// grant stores a grant of srv with tokens that expire in ttl, at the
// token endpoint tokenURL.
func (e *env) grant(t *testing.T, srv mcpserver.Server, tokenURL string, ttl time.Duration) {
	t.Helper()
	sealed, err := e.vault.Seal(context.Background(), "mcpserver:"+srv.ID+":oauth-tokens", []byte(`{"a":"old-access","r":"old-refresh"}`))
	if err != nil {
		t.Fatal(err)
	}
	g := mcpserver.OAuthGrant{UserID: srv.UserID, ServerID: srv.ID, Issuer: "http://as", AuthorizationEndpoint: tokenURL, TokenEndpoint: tokenURL,
		Resource: "http://mcp/mcp", ClientID: "client-1", AuthMethod: "none", Registered: true, Tokens: sealed, ExpiresAt: e.clock().Add(ttl), Version: 1}
	if err := e.store.PutGrant(context.Background(), g); err != nil {
		t.Fatal(err)
	}
}

// TestTokenRefreshesOnceAtATime: a live token is used as it is; one about
// to expire is refreshed with the resource and the refresh token, once
// for eight callers at the same moment; the new refresh token is kept.
func TestTokenRefreshesOnceAtATime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var refreshes atomic.Int32
	release := make(chan struct{})
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("resource") != "http://mcp/mcp" || r.Form.Get("client_id") != "client-1" {
			http.Error(w, `{"error":"invalid_request"}`, 400)
			return
		}
		n := refreshes.Add(1)
		if n == 1 {
			<-release // hold the first refresh until every caller waits
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"new-access-%d","token_type":"Bearer","expires_in":3600,"refresh_token":"new-refresh-%d","old":%q}`,
			n, n, r.Form.Get("refresh_token"))
	}))
	defer as.Close()
	srv := mcpserver.Server{ID: "s1", UserID: "u1", URL: "http://mcp/mcp"}
	e.grant(t, srv, as.URL, time.Hour)
	ctx := context.Background()
	if tok, err := e.c.Token(ctx, srv); err != nil || tok != "old-access" {
		t.Fatalf("live token = %q, %v", tok, err)
	}
	e.advance(time.Hour - 30*time.Second) // within RefreshMargin
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := e.c.Token(ctx, srv)
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
			got[i] = tok
		}()
	}
	// The callers that lost the lease use the old token, still live.
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := refreshes.Load(); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	for i, tok := range got {
		if tok != "old-access" && tok != "new-access-1" {
			t.Fatalf("caller %d got %q", i, tok)
		}
	}
	if tok, err := e.c.Token(ctx, srv); err != nil || tok != "new-access-1" {
		t.Fatalf("after the refresh = %q, %v", tok, err)
	}
}

// TestTokenRefreshFailures: a network failure or a 5xx is retried and
// keeps the grant (the token while it lives, else ErrTokenUnavailable);
// invalid_grant forgets the tokens: ErrNeedsAuthorization; an answer over
// MaxTokenBytes is refused.
func TestTokenRefreshFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("5xx retried then served", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		var calls atomic.Int32
		as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) < 3 {
				http.Error(w, "busy", 503)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"fresh","token_type":"Bearer","expires_in":60}`)
		}))
		defer as.Close()
		srv := mcpserver.Server{ID: "s1", UserID: "u1"}
		e.grant(t, srv, as.URL, -time.Second)
		if tok, err := e.c.Token(ctx, srv); err != nil || tok != "fresh" || calls.Load() != 3 {
			t.Fatalf("= %q, %v after %d calls", tok, err, calls.Load())
		}
	})

	t.Run("unreachable keeps the grant", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		as := httptest.NewServer(http.NotFoundHandler())
		dead := as.URL
		as.Close()
		srv := mcpserver.Server{ID: "s1", UserID: "u1"}
		e.grant(t, srv, dead, 30*time.Second) // live, within the margin
		if tok, err := e.c.Token(ctx, srv); err != nil || tok != "old-access" {
			t.Fatalf("live token while unreachable = %q, %v", tok, err)
		}
		e.advance(time.Minute)
		if _, err := e.c.Token(ctx, srv); !errors.Is(err, mcpserver.ErrTokenUnavailable) {
			t.Fatalf("expired while unreachable: %v, want ErrTokenUnavailable", err)
		}
		if g, err := e.store.Grant(ctx, "u1", "s1"); err != nil || g.Tokens == "" || !g.RefreshingUntil.IsZero() {
			t.Fatalf("grant = %+v, %v: want its tokens kept and no lease", g, err)
		}
	})

	t.Run("invalid_grant", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
		}))
		defer as.Close()
		srv := mcpserver.Server{ID: "s1", UserID: "u1"}
		e.grant(t, srv, as.URL, -time.Second)
		if _, err := e.c.Token(ctx, srv); !errors.Is(err, mcpserver.ErrNeedsAuthorization) {
			t.Fatalf("= %v, want ErrNeedsAuthorization", err)
		}
		if g, _ := e.store.Grant(ctx, "u1", "s1"); g.Tokens != "" || g.ClientID != "client-1" {
			t.Fatalf("grant = %+v: want the tokens gone, the client kept", g)
		}
		if _, err := e.c.Token(ctx, srv); !errors.Is(err, mcpserver.ErrNeedsAuthorization) {
			t.Fatalf("again = %v", err)
		}
	})

	for _, size := range []struct {
		name string
		n    int
		ok   bool
	}{{"answer at the bound", oauthclient.MaxTokenBytes, true}, {"one over", oauthclient.MaxTokenBytes + 1, false}, {"far over", 10 << 20, false}} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				head := `{"access_token":"big","token_type":"Bearer","pad":"`
				fmt.Fprint(w, head+strings.Repeat("x", size.n-len(head)-2)+`"}`)
			}))
			defer as.Close()
			srv := mcpserver.Server{ID: "s1", UserID: "u1"}
			e.grant(t, srv, as.URL, -time.Second)
			tok, err := e.c.Token(ctx, srv)
			if size.ok && (err != nil || tok != "big") || !size.ok && !errors.Is(err, mcpserver.ErrNeedsAuthorization) {
				t.Fatalf("= %q, %v (ok %v)", tok, err, size.ok)
			}
		})
	}
}

// TestStartBoundsMetadata: a protected resource metadata document over
// MaxMetadataBytes fails discovery with OAUTH_DISCOVERY_FAILED, at the
// bound it is read; an issuer whose metadata names another issuer is
// refused.
func TestStartBoundsMetadata(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		pad       int
		issuerFor func(base string) string
		ok        bool
	}{
		{"at the bound", oauthclient.MaxMetadataBytes, func(b string) string { return b }, true},
		{"one over", oauthclient.MaxMetadataBytes + 1, func(b string) string { return b }, false},
		{"another issuer", 0, func(string) string { return "https://evil.example.com" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var base string
			mux := http.NewServeMux()
			mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/prm"`)
				w.WriteHeader(401)
			})
			mux.HandleFunc("GET /prm", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				body := fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q],"pad":"`, base+"/mcp", base)
				pad := 0
				if tc.pad > 0 {
					pad = tc.pad - len(body) - 2
				}
				fmt.Fprint(w, body+strings.Repeat("x", pad)+`"}`)
			})
			mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"code_challenge_methods_supported":["S256"],
				  "client_id_metadata_document_supported":true}`, tc.issuerFor(base), base+"/authorize", base+"/token")
			})
			ts := httptest.NewServer(mux)
			defer ts.Close()
			base = ts.URL
			srv := mcpserver.Server{ID: "s1", UserID: "u1", URL: base + "/mcp"}
			u, err := e.c.Start(context.Background(), srv, "http://svc.example", "")
			if !tc.ok {
				if errs.CodeOf(err) != oauthclient.CodeDiscovery {
					t.Fatalf("= %q, %v; want %s", u, err, oauthclient.CodeDiscovery)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			q, _ := url.Parse(u)
			if q.Query().Get("client_id") != "http://svc.example/oauth/client.json" || q.Query().Get("resource") != base+"/mcp" {
				t.Fatalf("authorization URL = %s", u)
			}
		})
	}
}

// TestStartFallsBack: a 401 without resource_metadata sends discovery to
// the well-known URL with the server's path, and an issuer with a path
// whose RFC 8414 document is missing to OpenID Connect's; a server that
// takes no metadata documents is registered with, once.
func TestStartFallsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var base string
	var registrations atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/mcp", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) })
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/v1/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q],"scopes_supported":["read","write"]}`, base+"/v1/mcp", base+"/tenant")
	})
	mux.HandleFunc("GET /.well-known/openid-configuration/tenant", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"registration_endpoint":%q,
		  "code_challenge_methods_supported":["S256"],"response_types_supported":["code"]}`, base+"/tenant", base+"/tenant/authorize?x=1",
			base+"/tenant/token", base+"/tenant/register")
	})
	mux.HandleFunc("POST /tenant/register", func(w http.ResponseWriter, r *http.Request) {
		registrations.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		fmt.Fprint(w, `{"client_id":"registered-1"}`)
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	base = ts.URL
	srv := mcpserver.Server{ID: "s1", UserID: "u1", URL: base + "/v1/mcp"}
	for range 2 {
		u, err := e.c.Start(context.Background(), srv, "http://svc.example", "")
		if err != nil {
			t.Fatal(err)
		}
		pu, _ := url.Parse(u)
		q := pu.Query()
		if pu.Path != "/tenant/authorize" || q.Get("x") != "1" || q.Get("client_id") != "registered-1" || q.Get("scope") != "read write" ||
			q.Get("resource") != base+"/v1/mcp" || q.Get("redirect_uri") != "http://svc.example/oauth/callback" {
			t.Fatalf("authorization URL = %s", u)
		}
	}
	if n := registrations.Load(); n != 1 {
		t.Fatalf("%d registrations, want 1", n)
	}
}

// TestFinishChecksTheUserFirst: a callback without a session or by
// another user is refused (OAUTH_WRONG_USER) and leaves the state to the
// user who started the authorization; of that user's callbacks at the
// same moment one redeems the code, the others find the state used.
func TestFinishChecksTheUserFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var base string
	var redeemed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/prm"`)
		w.WriteHeader(401)
	})
	mux.HandleFunc("GET /prm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, base+"/mcp", base)
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"code_challenge_methods_supported":["S256"],
		  "client_id_metadata_document_supported":true}`, base, base+"/authorize", base+"/token")
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.Form.Get("grant_type") != "authorization_code" || r.Form.Get("code") != "the-code" || r.Form.Get("code_verifier") == "" {
			http.Error(w, `{"error":"invalid_request"}`, 400)
			return
		}
		redeemed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"granted","token_type":"Bearer","expires_in":3600}`)
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	base = ts.URL
	ctx := context.Background()
	srv := mcpserver.Server{ID: "s1", UserID: "u1", URL: base + "/mcp"}
	u, err := e.c.Start(ctx, srv, "http://svc.example", "")
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(u)
	q := url.Values{"state": {pu.Query().Get("state")}, "code": {"the-code"}}
	for _, who := range []string{"", "u2"} {
		cb, err := e.c.Finish(ctx, q, who)
		if errs.KindOf(err) != errs.Forbidden || errs.CodeOf(err) != oauthclient.CodeWrongUser || cb.UserID != "u1" {
			t.Fatalf("callback by %q = %+v, %v; want Forbidden %s", who, cb, err, oauthclient.CodeWrongUser)
		}
	}
	var wg sync.WaitGroup
	var ok, used atomic.Int32
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cb, err := e.c.Finish(ctx, q, "u1")
			switch {
			case err == nil && cb.UserID == "u1" && cb.ServerID == "s1":
				ok.Add(1)
			case errs.CodeOf(err) == oauthclient.CodeState:
				used.Add(1)
			default:
				t.Errorf("callback = %+v, %v", cb, err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || used.Load() != 3 || redeemed.Load() != 1 {
		t.Fatalf("%d finished, %d found the state used, %d codes redeemed; want 1, 3, 1", ok.Load(), used.Load(), redeemed.Load())
	}
	if tok, err := e.c.Token(ctx, srv); err != nil || tok != "granted" {
		t.Fatalf("token after the callback = %q, %v", tok, err)
	}
}
