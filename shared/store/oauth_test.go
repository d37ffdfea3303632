package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestOAuthCodesAreRedeemedOnce: of concurrent redemptions of one code,
// exactly one gets it; afterwards it is gone.
func TestOAuthCodesAreRedeemedOnce(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewOAuth(db.DB, db.OAuth())
	ctx, now := context.Background(), time.Now().UTC()
	c := oauth.Code{Hash: "h1", ClientID: "c", UserID: "u", Challenge: "x", Resource: "r", Scope: "mcp", ClientName: "n", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := s.CreateCode(ctx, c); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got, missing := 0, 0
	for range 8 {
		wg.Go(func() {
			code, err := s.ConsumeCode(ctx, "h1")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && code.UserID == "u" && code.Challenge == "x" && code.ExpiresAt.Unix() == c.ExpiresAt.Unix():
				got++
			case errs.Is(err, errs.NotFound):
				missing++
			default:
				t.Errorf("consume: %+v %v", code, err)
			}
		})
	}
	wg.Wait()
	if got != 1 || missing != 7 {
		t.Errorf("%d redemptions got the code, %d did not; want 1 and 7", got, missing)
	}
}

// TestOAuthRefreshRotation: rotation spends the old token once, records
// the use on the grant, and refuses a spent token and a revoked grant.
func TestOAuthRefreshRotation(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewOAuth(db.DB, db.OAuth())
	ctx, now := context.Background(), time.Now().UTC().Truncate(time.Second)
	g := oauth.Grant{ID: "g1", UserID: "u1", ClientID: "c1", ClientName: "C", Resource: "r", Scope: "mcp", CreatedAt: now, LastUsedAt: now, ExpiresAt: now.Add(time.Hour)}
	rt := func(hash string) oauth.RefreshToken {
		return oauth.RefreshToken{Hash: hash, GrantID: "g1", ClientID: "c1", UserID: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	if err := s.CreateGrant(ctx, g, rt("r1"), oauth.Epoch{}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateGrant(ctx, g, oauth.RefreshToken{}, oauth.Epoch{}); errs.CodeOf(err) != "GRANT_EXISTS" {
		t.Errorf("second grant with the id: %v", err)
	}
	later := now.Add(time.Minute)
	if err := s.RotateRefreshToken(ctx, rt("r1"), rt("r2"), later); err != nil {
		t.Fatal(err)
	}
	old, err := s.RefreshToken(ctx, "r1")
	if err != nil || !old.Used || !old.UsedAt.Equal(later) {
		t.Errorf("the spent token: %+v %v", old, err)
	}
	if next, err := s.RefreshToken(ctx, "r2"); err != nil || next.Used || next.GrantID != "g1" {
		t.Errorf("the new token: %+v %v", next, err)
	}
	if got, err := s.Grant(ctx, "g1"); err != nil || !got.LastUsedAt.Equal(later) {
		t.Errorf("grant after a rotation: %+v %v", got, err)
	}
	// Within the grace of its first use it rotates again, keeping the
	// time of that first use; after the grace it is refused.
	if err := s.RotateRefreshToken(ctx, rt("r1"), rt("r2b"), later.Add(oauth.RefreshReuseGrace-time.Second)); err != nil {
		t.Errorf("rotating a spent token within the grace: %v", err)
	}
	if old, err := s.RefreshToken(ctx, "r1"); err != nil || !old.UsedAt.Equal(later) || !old.Reusable(later.Add(oauth.RefreshReuseGrace-time.Millisecond)) || old.Reusable(later.Add(oauth.RefreshReuseGrace)) {
		t.Errorf("the token spent twice: %+v %v", old, err)
	}
	if err := s.RotateRefreshToken(ctx, rt("r1"), rt("r3"), later.Add(oauth.RefreshReuseGrace)); errs.CodeOf(err) != "REFRESH_TOKEN_USED" {
		t.Errorf("rotating a spent token after the grace: %v", err)
	}
	if _, err := s.RefreshToken(ctx, "r3"); !errs.Is(err, errs.NotFound) {
		t.Errorf("a refused rotation stored its new token: %v", err)
	}
	if err := s.RevokeGrant(ctx, "g1", later); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeGrant(ctx, "g1", later.Add(time.Second)); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	if err := s.RevokeGrant(ctx, "missing", later); err != nil {
		t.Errorf("revoking a missing grant: %v", err)
	}
	if got, _ := s.Grant(ctx, "g1"); !got.RevokedAt.Equal(later) || got.Live(later) {
		t.Errorf("revoked grant: %+v", got)
	}
	if err := s.RotateRefreshToken(ctx, rt("r2"), rt("r4"), later); errs.CodeOf(err) != "GRANT_REVOKED" {
		t.Errorf("rotating under a revoked grant: %v", err)
	}
	// An expired grant refuses a rotation too.
	g2 := g
	g2.ID = "g2"
	if err := s.CreateGrant(ctx, g2, oauth.RefreshToken{Hash: "s1", GrantID: "g2", ClientID: "c1", UserID: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, oauth.Epoch{}); err != nil {
		t.Fatal(err)
	}
	if err := s.RotateRefreshToken(ctx, oauth.RefreshToken{Hash: "s1", GrantID: "g2"}, rt("s2"), now.Add(2*time.Hour)); errs.CodeOf(err) != "GRANT_REVOKED" {
		t.Errorf("rotating under an expired grant: %v", err)
	}
}

// TestOAuthUserItems: a user's grants and personal tokens are listed from
// the index, per user, oldest first; a token is deleted only by its user.
func TestOAuthUserItems(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewOAuth(db.DB, db.OAuth())
	ctx, now := context.Background(), time.Now().UTC()
	for i, id := range []string{"a", "b"} {
		at := now.Add(time.Duration(i) * time.Second)
		if err := s.CreateGrant(ctx, oauth.Grant{ID: id, UserID: "u1", ClientID: "c", CreatedAt: at, LastUsedAt: at, ExpiresAt: at.Add(time.Hour)}, oauth.RefreshToken{}, oauth.Epoch{}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreatePersonalToken(ctx, oauth.PersonalToken{ID: "t" + id, UserID: "u1", Name: id, Hash: "ph" + id, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}, 20); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreatePersonalToken(ctx, oauth.PersonalToken{ID: "tz", UserID: "u2", Name: "z", Hash: "phz", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, 20); err != nil {
		t.Fatal(err)
	}
	gs, err := s.UserGrants(ctx, "u1")
	if err != nil || len(gs) != 2 || gs[0].ID != "a" || gs[1].ID != "b" {
		t.Errorf("grants: %+v %v", gs, err)
	}
	ts, err := s.UserPersonalTokens(ctx, "u1")
	if err != nil || len(ts) != 2 || ts[0].ID != "ta" || ts[1].Hash != "phb" {
		t.Errorf("tokens: %+v %v", ts, err)
	}
	if tok, err := s.PersonalToken(ctx, "pha"); err != nil || tok.UserID != "u1" || tok.Name != "a" {
		t.Errorf("by hash: %+v %v", tok, err)
	}
	if err := s.DeletePersonalToken(ctx, "u1", "tz"); !errs.Is(err, errs.NotFound) {
		t.Errorf("u1 deleting u2's token: %v", err)
	}
	if err := s.DeletePersonalToken(ctx, "u1", "ta"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PersonalToken(ctx, "pha"); !errs.Is(err, errs.NotFound) {
		t.Errorf("deleted token: %v", err)
	}
	if n, err := oauth.RevokeUser(ctx, s, "u1", now); err != nil || n != 3 {
		t.Errorf("revoke user: %d %v, want 2 grants and 1 token", n, err)
	}
	if ts, _ := s.UserPersonalTokens(ctx, "u1"); len(ts) != 0 {
		t.Errorf("tokens after RevokeUser: %+v", ts)
	}
	if ts, _ := s.UserPersonalTokens(ctx, "u2"); len(ts) != 1 {
		t.Errorf("another user's tokens after RevokeUser: %+v", ts)
	}
	if _, err := s.Client(ctx, "nope"); errs.CodeOf(err) != "CLIENT_NOT_FOUND" {
		t.Errorf("unknown client: %v", err)
	}
}

// TestOAuthCodeEpochs: a grant is created only under the epoch its code
// was issued in; ending one client's codes leaves another's, ending every
// client's ends them all.
func TestOAuthCodeEpochs(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewOAuth(db.DB, db.OAuth())
	ctx, now := context.Background(), time.Now().UTC()
	clientA := "https://client.example/" + strings.Repeat("a", 2000) // a URL id near the key limit
	grant := func(id, client string, e oauth.Epoch) error {
		return s.CreateGrant(ctx, oauth.Grant{ID: id, UserID: "u1", ClientID: client, CreatedAt: now, LastUsedAt: now, ExpiresAt: now.Add(time.Hour)}, oauth.RefreshToken{}, e)
	}
	a0, err := s.CodeEpoch(ctx, "u1", clientA)
	if err != nil || a0 != (oauth.Epoch{}) {
		t.Fatalf("a fresh epoch: %+v %v", a0, err)
	}
	b0, _ := s.CodeEpoch(ctx, "u1", "b")
	if err := s.EndCodes(ctx, "u1", clientA); err != nil {
		t.Fatal(err)
	}
	if err := grant("g1", clientA, a0); errs.CodeOf(err) != "CODE_REVOKED" {
		t.Errorf("a code of the ended client: %v, want CODE_REVOKED", err)
	}
	if err := grant("g2", "b", b0); err != nil {
		t.Errorf("another client's code: %v", err)
	}
	a1, _ := s.CodeEpoch(ctx, "u1", clientA)
	if a1 != (oauth.Epoch{Client: 1}) {
		t.Errorf("epoch after one ending: %+v", a1)
	}
	if err := grant("g3", clientA, a1); err != nil {
		t.Errorf("a code issued after the ending: %v", err)
	}
	other, _ := s.CodeEpoch(ctx, "u2", clientA)
	if err := s.EndCodes(ctx, "u1", ""); err != nil {
		t.Fatal(err)
	}
	b1, _ := s.CodeEpoch(ctx, "u1", "b")
	for name, err := range map[string]error{
		"client a": grant("g4", clientA, a1),
		"client b": grant("g5", "b", b0),
	} {
		if errs.CodeOf(err) != "CODE_REVOKED" {
			t.Errorf("%s after ending every client's codes: %v", name, err)
		}
	}
	if b1 != (oauth.Epoch{User: 1}) {
		t.Errorf("epoch after ending every client's: %+v", b1)
	}
	if err := s.CreateGrant(ctx, oauth.Grant{ID: "g6", UserID: "u2", ClientID: clientA, CreatedAt: now, LastUsedAt: now, ExpiresAt: now.Add(time.Hour)}, oauth.RefreshToken{}, other); err != nil {
		t.Errorf("another user's code: %v", err)
	}
	if _, err := s.Grant(ctx, "g1"); !errs.Is(err, errs.NotFound) {
		t.Errorf("a refused grant was stored: %v", err)
	}
}

// TestOAuthPersonalTokenCap: of 30 creations at once under a cap of 20,
// exactly 20 are stored and 10 refused TOO_MANY_TOKENS; a deleted token
// and an expired one free their place; RevokeUser frees them all.
func TestOAuthPersonalTokenCap(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewOAuth(db.DB, db.OAuth())
	ctx, now := context.Background(), time.Now().UTC().Truncate(time.Second)
	const max = 20
	tok := func(i int, at time.Time, ttl time.Duration) oauth.PersonalToken {
		id := fmt.Sprintf("t%02d-%d", i, at.Unix())
		return oauth.PersonalToken{ID: id, UserID: "u1", Name: id, Hash: "h" + id, CreatedAt: at, ExpiresAt: at.Add(ttl)}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := range 30 {
		wg.Go(func() {
			err := s.CreatePersonalToken(ctx, tok(i, now, time.Hour), max)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errs.Is(err, errs.Conflict) && errs.CodeOf(err) == oauth.CodeTooManyTokens:
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	stored, err := s.UserPersonalTokens(ctx, "u1")
	if err != nil || created != max || refused != 10 || len(stored) != max {
		t.Fatalf("%d created, %d refused, %d stored (%v); want %d, 10, %d", created, refused, len(stored), err, max, max)
	}
	if err := s.CreatePersonalToken(ctx, tok(99, now, time.Hour), max); errs.CodeOf(err) != oauth.CodeTooManyTokens {
		t.Errorf("one more at the cap: %v", err)
	}
	if err := s.DeletePersonalToken(ctx, "u1", stored[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePersonalToken(ctx, tok(98, now, time.Minute), max); err != nil {
		t.Errorf("after a delete: %v", err)
	}
	if err := s.CreatePersonalToken(ctx, tok(97, now, time.Hour), max); errs.CodeOf(err) != oauth.CodeTooManyTokens {
		t.Errorf("at the cap again: %v", err)
	}
	// The minute token expires: its place is free, counted at the
	// creation's time.
	later := now.Add(2 * time.Minute)
	if err := s.CreatePersonalToken(ctx, tok(96, later, time.Hour), max); err != nil {
		t.Errorf("after an expiry: %v", err)
	}
	if err := s.CreatePersonalToken(ctx, tok(95, later, time.Hour), max); errs.CodeOf(err) != oauth.CodeTooManyTokens {
		t.Errorf("at the cap after the expiry: %v", err)
	}
	// RevokeUser deletes every token, and the count with them.
	if _, err := oauth.RevokeUser(ctx, s, "u1", later); err != nil {
		t.Fatal(err)
	}
	for i := range max {
		if err := s.CreatePersonalToken(ctx, tok(i, later.Add(time.Second), time.Hour), max); err != nil {
			t.Fatalf("token %d after RevokeUser: %v", i, err)
		}
	}
}
