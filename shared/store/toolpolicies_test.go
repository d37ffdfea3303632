package store_test

import (
	"context"
	"maps"
	"testing"

	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestToolPolicies: overrides are per user, a later one replaces the
// earlier, reading them is one call; a malformed tool id is refused.
func TestToolPolicies(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewToolPolicies(db.DB, db.Users())
	ctx := context.Background()
	if got, err := s.ToolPolicies(ctx, "u1"); err != nil || len(got) != 0 {
		t.Fatalf("before any: %v, %v", got, err)
	}
	for _, set := range [][2]string{{"http_request", "allow"}, {"hash", "deny"}, {"http_request", "ask"}} {
		if err := s.SetToolPolicy(ctx, "u1", set[0], set[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetToolPolicy(ctx, "u2", "hash", "allow"); err != nil {
		t.Fatal(err)
	}
	db.Counter.Reset()
	got, err := s.ToolPolicies(ctx, "u1")
	if want := map[string]string{"http_request": "ask", "hash": "deny"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("u1 = %v, %v; want %v", got, err, want)
	}
	if c := db.Counter.Count(); c != 1 {
		t.Errorf("reading made %d calls, want 1", c)
	}
	if err := s.SetToolPolicy(ctx, "u1", "a.b", "allow"); err == nil {
		t.Error("a malformed tool id was stored")
	}
	// A remote tool's id, dots and all, comes back as it was set.
	for _, id := range []string{"mcp/files/read.v2-x", "mcp/files/Read_Me"} {
		if err := s.SetToolPolicy(ctx, "u3", id, "allow"); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.ToolPolicies(ctx, "u3"); err != nil || !maps.Equal(got, map[string]string{"mcp/files/read.v2-x": "allow", "mcp/files/Read_Me": "allow"}) {
		t.Errorf("u3 = %v, %v", got, err)
	}
	for _, id := range []string{"mcp/Files/x", "mcp/files/a%b", "mcp/files/a b"} {
		if err := s.SetToolPolicy(ctx, "u3", id, "allow"); err == nil {
			t.Errorf("%s was stored", id)
		}
	}
}
