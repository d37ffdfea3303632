package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/mcpserver/remote"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/vault"
)

const key = "secret-api-key-0123456789"

// keyedServer is a go-sdk MCP server in process that answers only
// requests with X-Api-Key: key.
func keyedServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "keyed", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", Description: "looks up", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestServiceSealsTheKey: the key is stored sealed (not in any attribute
// of the item), opened again for a refresh and a new URL, and replaced by
// a new auth.
func TestServiceSealsTheKey(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	st := store.NewMCPServers(db.DB, db.Data())
	svc := mcpserver.NewService(mcpserver.Options{Store: st, Vault: vault.New(vault.NewMemoryKeys(), nil), Remote: remote.New(true), AllowPrivate: true})
	ctx := auth.ActingFor(context.Background(), "u1")
	hs := keyedServer(t)

	s, err := svc.Create(ctx, mcpserver.CreateRequest{Name: "keyed", URL: hs.URL, Auth: &mcpserver.AuthInput{Type: "header", Name: "x-api-key", Value: key}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != mcpserver.StatusConnected || len(s.Tools) != 1 || s.Auth.Name != "X-Api-Key" {
		t.Fatalf("created = %+v", s)
	}
	var raw map[string]any
	if err := db.DB.Table(db.Data()).Get("PK", "USER#u1").Range("SK", "EQ", "MCPSERVER#"+s.ID).One(context.Background(), &raw); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(raw)
	if strings.Contains(string(b), key) || !strings.HasPrefix(raw["secret"].(string), "v1.") {
		t.Fatalf("stored item shows the key or no sealed secret: %s", b)
	}
	if v, _ := json.Marshal(mcpserver.NewView(s)); strings.Contains(string(v), key) || strings.Contains(string(v), "v1.") {
		t.Fatalf("view shows the secret: %s", v)
	}

	// Refresh opens the sealed key: still connected.
	if s, err = svc.Refresh(ctx, s.ID); err != nil || s.Status != mcpserver.StatusConnected {
		t.Fatalf("refresh = %+v, %v", s, err)
	}
	// A new URL (the same server by another name) keeps the key.
	other := strings.Replace(hs.URL, "127.0.0.1", "localhost", 1)
	if s, err = svc.Update(ctx, s.ID, mcpserver.UpdateRequest{URL: &other}); err != nil || s.Status != mcpserver.StatusConnected {
		t.Fatalf("new URL = %+v, %v", s, err)
	}
	// A new auth without the key: the server refuses, the secret is gone.
	if s, err = svc.Update(ctx, s.ID, mcpserver.UpdateRequest{Auth: &mcpserver.AuthInput{Type: "none"}}); err != nil ||
		s.Status != mcpserver.StatusError || s.Error.Code != mcpserver.CodeUnauthorizedByRmt || s.Secret != "" {
		t.Fatalf("auth none = %+v, %v", s, err)
	}
	// Another user reaches none of it.
	if _, err := svc.Get(auth.ActingFor(context.Background(), "u2"), s.ID); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("another user's Get: %v", err)
	}
	// Without private networks, the same loopback server is refused and
	// nothing is stored.
	strict := mcpserver.NewService(mcpserver.Options{Store: st, Vault: vault.New(vault.NewMemoryKeys(), nil), Remote: remote.New(false)})
	if _, err := strict.Create(ctx, mcpserver.CreateRequest{Name: "strict", URL: strings.Replace(hs.URL, "http:", "https:", 1)}); errs.CodeOf(err) != mcpserver.CodeInvalidURL {
		t.Fatalf("loopback without private networks: %v", err)
	}
	if list, _, err := svc.List(ctx, paging.Cursor{Limit: 20}); err != nil || len(list) != 1 {
		t.Fatalf("List = %d servers, %v; want 1", len(list), err)
	}
}
