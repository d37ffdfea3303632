package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

func newMCPServer(t testing.TB, userID, name string) mcpserver.Server {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	return mcpserver.Server{ID: id.String(), UserID: userID, Name: name, URL: "https://mcp.example.com/mcp",
		Auth: mcpserver.Auth{Type: mcpserver.AuthHeader, Name: "X-Api-Key"}, Enabled: true, Status: mcpserver.StatusConnected,
		Tools: []mcpserver.Tool{{Name: "echo", Description: "echoes", InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: &mcpserver.Annotations{ReadOnlyHint: true}}},
		Secret: "v1.sealed", Version: 1, CreatedAt: now, UpdatedAt: now, ToolsAt: now}
}

// TestMCPServers: create, read, list in creation order with a cursor,
// rename, delete; names unique per user; the 20-server limit at, over and
// after a delete; another user's server is 403, a missing one 404.
func TestMCPServers(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewMCPServers(db.DB, db.Data())
	ctx := context.Background()

	var ids []string
	for i := range mcpserver.MaxServers {
		srv := newMCPServer(t, "u1", fmt.Sprintf("s%02d", i))
		if err := s.CreateServer(ctx, srv, mcpserver.MaxServers); err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
		ids = append(ids, srv.ID)
	}
	if err := s.CreateServer(ctx, newMCPServer(t, "u1", "extra"), mcpserver.MaxServers); errs.CodeOf(err) != mcpserver.CodeServerLimit {
		t.Fatalf("21st server: %v; want SERVER_LIMIT", err)
	}
	if err := s.CreateServer(ctx, newMCPServer(t, "u1", "s00"), mcpserver.MaxServers); errs.CodeOf(err) != mcpserver.CodeNameTaken {
		t.Fatalf("taken name: %v; want NAME_TAKEN", err)
	}
	// Another user may take the same name.
	other := newMCPServer(t, "u2", "s00")
	if err := s.CreateServer(ctx, other, mcpserver.MaxServers); err != nil {
		t.Fatal(err)
	}

	got, err := s.Server(ctx, "u1", ids[3])
	if err != nil || got.Name != "s03" || got.Secret != "v1.sealed" || len(got.Tools) != 1 || !got.Tools[0].Annotations.ReadOnlyHint {
		t.Fatalf("Server = %+v, %v", got, err)
	}
	if _, err := s.Server(ctx, "u1", other.ID); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("another user's server: %v; want Forbidden", err)
	}
	if _, err := s.Server(ctx, "u1", uuid.NewString()); errs.CodeOf(err) != mcpserver.CodeNotFound {
		t.Fatalf("missing server: %v; want MCP_SERVER_NOT_FOUND", err)
	}

	// Pages of 7: 7, 7, 6, in creation order.
	var seen []string
	cursor := ""
	for range 4 {
		page, next, err := s.ListServers(ctx, "u1", paging.Cursor{Limit: 7, After: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			seen = append(seen, p.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if strings.Join(seen, ",") != strings.Join(ids, ",") {
		t.Fatalf("listed %d servers in another order", len(seen))
	}
	if _, _, err := s.ListServers(ctx, "u1", paging.Cursor{Limit: 7, After: "bm90LWEtdXVpZA"}); errs.CodeOf(err) != "INVALID_PAGINATION" {
		t.Fatalf("bad cursor: %v", err)
	}

	// Rename: the old name is free again, the new one taken.
	got.Name, got.Version = "renamed", got.Version+1
	if err := s.UpdateServer(ctx, got, "s03"); err != nil {
		t.Fatal(err)
	}
	stale := got
	stale.Version = got.Version // the stored version is got.Version now: a write from version-1 is stale
	stale.Enabled = false
	if err := s.UpdateServer(ctx, stale, stale.Name); !errs.Is(err, errs.Conflict) {
		t.Fatalf("stale update: %v; want Conflict", err)
	}
	clash := got
	clash.Name, clash.Version = "s04", got.Version+1
	if err := s.UpdateServer(ctx, clash, "renamed"); errs.CodeOf(err) != mcpserver.CodeNameTaken {
		t.Fatalf("rename onto a taken name: %v; want NAME_TAKEN", err)
	}

	// Delete frees a place and the name.
	if err := s.DeleteServer(ctx, "u1", other.ID); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("deleting another user's: %v", err)
	}
	if err := s.DeleteServer(ctx, "u1", ids[3]); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteServer(ctx, "u1", ids[3]); errs.CodeOf(err) != mcpserver.CodeNotFound {
		t.Fatalf("deleted twice: %v", err)
	}
	if err := s.CreateServer(ctx, newMCPServer(t, "u1", "renamed"), mcpserver.MaxServers); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	if err := s.CreateServer(ctx, newMCPServer(t, "u1", "s03"), mcpserver.MaxServers); errs.CodeOf(err) != mcpserver.CodeServerLimit {
		t.Fatalf("over the limit again: %v", err)
	}
	enabled, err := s.EnabledServers(ctx, "u1")
	if err != nil || len(enabled) != mcpserver.MaxServers {
		t.Fatalf("EnabledServers = %d, %v", len(enabled), err)
	}
}

// BenchmarkEnabledServers measures what a chat message or a run step pays
// for the tool list of a user with the most servers (20, 6 tools each with
// a schema): one consistent Query of the user's partition, no remote call.
// The floor is one server's GetItem.
func BenchmarkEnabledServers(b *testing.B) {
	db := storetest.New(b)
	s := store.NewMCPServers(db.DB, db.Data())
	ctx := context.Background()
	var first string
	for i := range mcpserver.MaxServers {
		srv := newMCPServer(b, "u1", fmt.Sprintf("s%02d", i))
		for j := range 5 {
			srv.Tools = append(srv.Tools, mcpserver.Tool{Name: fmt.Sprintf("tool_%d", j), Description: strings.Repeat("d", 200),
				InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"the query"}},"required":["q"]}`)})
		}
		if err := s.CreateServer(ctx, srv, mcpserver.MaxServers); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			first = srv.ID
		}
	}
	b.Run("floor_one_server_get", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Server(ctx, "u1", first); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("enabled_servers_20", func(b *testing.B) {
		for b.Loop() {
			list, err := s.EnabledServers(ctx, "u1")
			if err != nil || len(list) != mcpserver.MaxServers {
				b.Fatalf("%d servers, %v", len(list), err)
			}
		}
	})
}
