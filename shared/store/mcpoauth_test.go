package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestMCPOAuthGrant: a grant is created once, every later write is
// conditioned on its version (of two writers at one version, one wins:
// how one refresh at a time runs), and it goes with its server.
func TestMCPOAuthGrant(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewMCPServers(db.DB, db.Data())
	ctx := context.Background()
	srv := newMCPServer(t, "u1", "remote")
	if err := s.CreateServer(ctx, srv, mcpserver.MaxServers); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, "u1", srv.ID); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("no grant yet: %v", err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	g := mcpserver.OAuthGrant{UserID: "u1", ServerID: srv.ID, Issuer: "https://as.example.com", AuthorizationEndpoint: "https://as.example.com/a",
		TokenEndpoint: "https://as.example.com/t", Resource: "https://mcp.example.com/mcp", ClientID: "c1", Registered: true, AuthMethod: "none",
		Tokens: "v1.sealed", ExpiresAt: now.Add(time.Hour), Version: 1, UpdatedAt: now}
	if err := s.PutGrant(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGrant(ctx, g); errs.KindOf(err) != errs.Conflict {
		t.Fatalf("a second first write: %v, want Conflict", err)
	}
	got, err := s.Grant(ctx, "u1", srv.ID)
	if err != nil || got.ClientID != "c1" || !got.Registered || got.Tokens != "v1.sealed" || !got.ExpiresAt.Equal(g.ExpiresAt) || got.Version != 1 {
		t.Fatalf("read = %+v, %v", got, err)
	}
	if _, err := s.Grant(ctx, "u2", srv.ID); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("another user's grant: %v", err)
	}

	// Eight writers at version 1: exactly one takes version 2.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := got
			w.Version = 2
			w.RefreshingUntil = now.Add(time.Duration(i) * time.Second)
			err := s.PutGrant(ctx, w)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errs.KindOf(err) != errs.Conflict:
				t.Errorf("writer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d writers won version 2, want 1", won)
	}

	if err := s.DeleteServer(ctx, "u1", srv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, "u1", srv.ID); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("grant after the server's deletion: %v", err)
	}
}

// TestMCPOAuthState: a state is read without being taken, taken once (of
// many takers one gets it), and neither read nor taken once expired.
func TestMCPOAuthState(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewMCPServers(db.DB, db.Data())
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	st := mcpserver.OAuthState{Hash: "h1", UserID: "u1", ServerID: "s1", Verifier: "v1.sealed", RedirectURI: "https://svc.example.com/oauth/callback",
		ReturnTo: "https://app.example.com/x", Issuer: "https://as.example.com", IssRequired: true, ExpiresAt: now.Add(10 * time.Minute)}
	if err := s.PutState(ctx, st); err != nil {
		t.Fatal(err)
	}
	for range 2 { // reading does not take it
		if got, err := s.State(ctx, "h1", now); err != nil || got.UserID != "u1" || got.Verifier != st.Verifier {
			t.Fatalf("state = %+v, %v", got, err)
		}
	}
	if _, err := s.State(ctx, "h0", now); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("unknown state: %v, want NotFound", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var taken []mcpserver.OAuthState
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.TakeState(ctx, "h1", now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				taken = append(taken, got)
			case errs.KindOf(err) != errs.NotFound:
				t.Errorf("take: %v", err)
			}
		}()
	}
	wg.Wait()
	if _, err := s.State(ctx, "h1", now); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("a taken state read: %v, want NotFound", err)
	}
	if len(taken) != 1 || taken[0].UserID != "u1" || taken[0].ServerID != "s1" || taken[0].ReturnTo != st.ReturnTo || !taken[0].IssRequired ||
		!taken[0].ExpiresAt.Equal(st.ExpiresAt) {
		t.Fatalf("taken = %+v, want the state once", taken)
	}
	old := st
	old.Hash = "h2"
	if err := s.PutState(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.State(ctx, "h2", st.ExpiresAt); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("expired state read: %v, want NotFound", err)
	}
	if _, err := s.TakeState(ctx, "h2", st.ExpiresAt); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("expired state: %v, want NotFound", err)
	}
	if _, err := s.TakeState(ctx, "h2", now); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("an expired state taken is gone: %v", err)
	}
}
