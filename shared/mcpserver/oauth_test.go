package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/mcpserver/oauthclient"
	"github.com/workflowchat/service/shared/mcpserver/remote"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/vault"
)

// fixedTokens is a TokenSource whose answer the test sets.
type fixedTokens struct {
	mu    sync.Mutex
	token string
	err   error
}

func (f *fixedTokens) Token(context.Context, mcpserver.Server) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.token, f.err
}

func (f *fixedTokens) set(token string, err error) {
	f.mu.Lock()
	f.token, f.err = token, err
	f.mu.Unlock()
}

// bearerServer is a go-sdk MCP server that answers only "Bearer good".
func bearerServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "bearer", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "search", Description: "searches", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://`+r.Host+`/.well-known/oauth-protected-resource"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestOAuthServerConnectsWithItsToken: an oauth server is listed with the
// TokenSource's bearer token; without a grant it needs authorization; an
// authorization server out of reach leaves it as it was; a refused token
// makes it need authorization again, keeping its last tools; a new auth
// drops them.
func TestOAuthServerConnectsWithItsToken(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	tokens := &fixedTokens{err: fmt.Errorf("no grant: %w", mcpserver.ErrNeedsAuthorization)}
	svc := mcpserver.NewService(mcpserver.Options{Store: store.NewMCPServers(db.DB, db.Data()), Vault: vault.New(vault.NewMemoryKeys(), nil),
		Remote: remote.New(true), AllowPrivate: true, Tokens: tokens})
	ctx := auth.ActingFor(context.Background(), "u1")
	hs := bearerServer(t)

	s, err := svc.Create(ctx, mcpserver.CreateRequest{Name: "bearer", URL: hs.URL, Auth: &mcpserver.AuthInput{Type: "oauth"}})
	if err != nil || s.Status != mcpserver.StatusNeedsAuthorization || len(s.Tools) != 0 {
		t.Fatalf("created = %+v, %v", s, err)
	}
	tokens.set("good", nil)
	if s, err = svc.Refresh(ctx, s.ID); err != nil || s.Status != mcpserver.StatusConnected || len(s.Tools) != 1 || s.Tools[0].Name != "search" {
		t.Fatalf("with a token = %+v, %v", s, err)
	}
	tokens.set("", fmt.Errorf("down: %w", mcpserver.ErrTokenUnavailable))
	if s, err = svc.Refresh(ctx, s.ID); err != nil || s.Status != mcpserver.StatusConnected || len(s.Tools) != 1 {
		t.Fatalf("authorization server unreachable = %+v, %v; want it kept", s, err)
	}
	tokens.set("revoked", nil)
	// It keeps the tools it listed last (for the workflows naming them).
	if s, err = svc.Refresh(ctx, s.ID); err != nil || s.Status != mcpserver.StatusNeedsAuthorization || len(s.Tools) != 1 || s.Error != nil {
		t.Fatalf("a refused token = %+v, %v", s, err)
	}
	tokens.set("", fmt.Errorf("revoked: %w", mcpserver.ErrNeedsAuthorization))
	if s, err = svc.Refresh(ctx, s.ID); err != nil || s.Status != mcpserver.StatusNeedsAuthorization {
		t.Fatalf("without a grant = %+v, %v", s, err)
	}
	if s, err = svc.Update(ctx, s.ID, mcpserver.UpdateRequest{Auth: &mcpserver.AuthInput{Type: "oauth"}}); err != nil ||
		s.Status != mcpserver.StatusNeedsAuthorization || len(s.Tools) != 0 {
		t.Fatalf("a new auth = %+v, %v", s, err)
	}
}

// TestAuthorizeReturnTo: returnTo must be on an allowed origin; a server
// whose auth is not oauth is refused.
func TestAuthorizeReturnTo(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	svc := mcpserver.NewService(mcpserver.Options{Store: store.NewMCPServers(db.DB, db.Data()), Vault: vault.New(vault.NewMemoryKeys(), nil),
		Remote: remote.New(true), AllowPrivate: true, AllowedOrigins: []string{"https://app.example.com"}})
	ctx := auth.ActingFor(context.Background(), "u1")
	s, err := svc.Create(ctx, mcpserver.CreateRequest{Name: "plain", URL: "http://127.0.0.1:1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		returnTo, code string
	}{
		{"", mcpserver.CodeNotOAuth},
		{"https://app.example.com/settings?x=1", mcpserver.CodeNotOAuth},
		{"https://APP.example.com/", mcpserver.CodeNotOAuth},
		{"https://app.example.com.evil.com/", "INVALID_RETURN_TO"},
		{"http://app.example.com/", "INVALID_RETURN_TO"},
		{"https://user@app.example.com/", "INVALID_RETURN_TO"},
		{"https://app.example.com/#frag", "INVALID_RETURN_TO"},
		{"javascript:alert(1)", "INVALID_RETURN_TO"},
		{"//app.example.com/", "INVALID_RETURN_TO"},
		{"https://app.example.com/" + strings.Repeat("a", mcpserver.MaxReturnToLen), "INVALID_RETURN_TO"},
	} {
		_, err := svc.Authorize(ctx, s.ID, "https://svc.example.com", tc.returnTo)
		if errs.CodeOf(err) != tc.code || errs.KindOf(err) != errs.Invalid {
			t.Errorf("returnTo %q: %v, want %s", tc.returnTo, err, tc.code)
		}
	}
}

// TestStartAuthorizationFailure: a new oauth server whose authorization
// server names an authorization endpoint that is not an https URL
// (javascript:) cannot be authorized: it is stored in status error with
// OAUTH_DISCOVERY_FAILED, as POST .../authorize answers, never
// needs_authorization without an authorizationUrl. Once the metadata is
// fixed, authorize moves it to needs_authorization with its URL.
func TestStartAuthorizationFailure(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	endpoint := "javascript:alert(document.cookie)"
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/prm"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /prm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, base+"/mcp", base)
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ae := endpoint
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"code_challenge_methods_supported":["S256"],
		  "client_id_metadata_document_supported":true}`, base, ae, base+"/token")
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	base = hs.URL

	db := storetest.New(t)
	st := store.NewMCPServers(db.DB, db.Data())
	v := vault.New(vault.NewMemoryKeys(), nil)
	client := oauthclient.New(oauthclient.Options{Store: st, Vault: v, AllowPrivate: true})
	svc := mcpserver.NewService(mcpserver.Options{Store: st, Vault: v, Remote: remote.New(true), AllowPrivate: true, Tokens: client, OAuth: client})
	ctx := auth.ActingFor(context.Background(), "u1")

	s, err := svc.Create(ctx, mcpserver.CreateRequest{Name: "bad_as", URL: base + "/mcp", Auth: &mcpserver.AuthInput{Type: "oauth"}})
	if err != nil || s.Status != mcpserver.StatusNeedsAuthorization {
		t.Fatalf("created = %+v, %v", s, err)
	}
	_, aerr := svc.Authorize(ctx, s.ID, "http://svc.example", "")
	if errs.CodeOf(aerr) != mcpserver.CodeOAuthDiscovery {
		t.Fatalf("authorize = %v, want %s", aerr, mcpserver.CodeOAuthDiscovery)
	}
	s = svc.StartAuthorization(ctx, s, "http://svc.example")
	if s.Status != mcpserver.StatusError || s.Error == nil || s.Error.Code != mcpserver.CodeOAuthDiscovery || s.Error.Message == "" || s.AuthorizationURL != "" {
		t.Fatalf("after the start = %+v (error %+v), want status error with %s", s, s.Error, mcpserver.CodeOAuthDiscovery)
	}
	if got, err := svc.Get(ctx, s.ID); err != nil || got.Status != mcpserver.StatusError || got.Error == nil || got.Error.Code != mcpserver.CodeOAuthDiscovery {
		t.Fatalf("stored = %+v, %v", got, err)
	}

	mu.Lock()
	endpoint = base + "/authorize"
	mu.Unlock()
	u, err := svc.Authorize(ctx, s.ID, "http://svc.example", "")
	if err != nil || !strings.HasPrefix(u, base+"/authorize?") {
		t.Fatalf("authorize after the fix = %q, %v", u, err)
	}
	if got, err := svc.Get(ctx, s.ID); err != nil || got.Status != mcpserver.StatusNeedsAuthorization || got.Error != nil || got.AuthorizationURL != u {
		t.Fatalf("after the fix = %+v, %v; want needs_authorization with its URL", got, err)
	}
}
