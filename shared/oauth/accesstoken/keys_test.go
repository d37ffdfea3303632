package accesstoken_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/workflowchat/service/shared/oauth/accesstoken"
)

const (
	issuer   = "https://api.example.com"
	resource = "https://api.example.com/api/mcp"
)

func claims(now time.Time) accesstoken.AccessClaims {
	return accesstoken.AccessClaims{
		Claims: jwt.Claims{Issuer: issuer, Subject: "user-1", Audience: jwt.Audience{resource}, ID: "j1",
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))},
		ClientID: "client-1", Scope: "mcp", GrantID: "g1",
	}
}

func mustParse(t *testing.T, doc string) *accesstoken.KeySet {
	t.Helper()
	ks, err := accesstoken.ParseKeySet([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

var (
	secretA = strings.Repeat("a", 40)
	secretB = strings.Repeat("b", 40)
)

func TestParseKeySetRefusals(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		`not json`:                                 "key set",
		`{"kid":"k1","secret":"short"}`:            "at least 32",
		`{"kid":"","secret":"` + secretA + `"}`:    "kid must be",
		`{"kid":"k 1","secret":"` + secretA + `"}`: "kid must be",
		`{"kid":"k1","secret":"` + secretA + `","verify":[{"kid":"k1","secret":"` + secretB + `"}]}`: "used twice",
	} {
		if _, err := accesstoken.ParseKeySet([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}

// TestVerify: a token verifies with its key set and claims; every other
// token, claim or key fails the same way.
func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ks := mustParse(t, `{"kid":"k1","secret":"`+secretA+`"}`)
	tok, err := ks.Sign(claims(now))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ks.Verify(tok, issuer, []string{resource}, now.Add(59*time.Minute))
	if err != nil || got.Subject != "user-1" || got.GrantID != "g1" || got.ClientID != "client-1" {
		t.Fatalf("verify: %+v %v", got, err)
	}
	other := mustParse(t, `{"kid":"k1","secret":"`+secretB+`"}`)
	otherTok, _ := other.Sign(claims(now))
	noGrant := claims(now)
	noGrant.GrantID = ""
	noGrantTok, _ := ks.Sign(noGrant)
	cases := map[string]struct {
		token, iss string
		aud        []string
		at         time.Time
	}{
		"expired":            {tok, issuer, []string{resource}, now.Add(time.Hour)},
		"before issue":       {tok, issuer, []string{resource}, now.Add(-time.Minute)},
		"another audience":   {tok, issuer, []string{"https://other.example/mcp"}, now},
		"no audience given":  {tok, issuer, nil, now},
		"another issuer":     {tok, "https://other.example", []string{resource}, now},
		"no issuer given":    {tok, "", []string{resource}, now},
		"another key":        {otherTok, issuer, []string{resource}, now},
		"no grant":           {noGrantTok, issuer, []string{resource}, now},
		"garbage":            {"a.b.c", issuer, []string{resource}, now},
		"signature stripped": {tok[:strings.LastIndex(tok, ".")+1], issuer, []string{resource}, now},
	}
	for name, c := range cases {
		if _, err := ks.Verify(c.token, c.iss, c.aud, c.at); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestRotation: during a rotation both keys verify; the signing key is the
// top-level one and its kid is in the header; the JWKS lists both.
func TestRotation(t *testing.T) {
	t.Parallel()
	now := time.Now()
	before := mustParse(t, `{"kid":"k1","secret":"`+secretA+`"}`)
	oldTok, _ := before.Sign(claims(now))
	// Step 1: k2 is published for verification only.
	step1 := mustParse(t, `{"kid":"k1","secret":"`+secretA+`","verify":[{"kid":"k2","secret":"`+secretB+`"}]}`)
	// Step 2: k2 signs, k1 still verifies.
	step2 := mustParse(t, `{"kid":"k2","secret":"`+secretB+`","verify":[{"kid":"k1","secret":"`+secretA+`"}]}`)
	newTok, _ := step2.Sign(claims(now))
	for name, c := range map[string]struct {
		ks  *accesstoken.KeySet
		tok string
	}{"old token, step 1": {step1, oldTok}, "new token, step 1": {step1, newTok}, "old token, step 2": {step2, oldTok}, "new token, step 2": {step2, newTok}} {
		if _, err := c.ks.Verify(c.tok, issuer, []string{resource}, now); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Step 3: k1 dropped; its tokens stop verifying.
	step3 := mustParse(t, `{"kid":"k2","secret":"`+secretB+`"}`)
	if _, err := step3.Verify(oldTok, issuer, []string{resource}, now); err == nil {
		t.Error("a token of a dropped key verified")
	}
	if step2.SigningKeyID() != "k2" || len(step2.JWKS().Keys) != 2 || step2.JWKS().Keys[0].KeyID != "k2" {
		t.Errorf("step 2: signing %s, jwks %+v", step2.SigningKeyID(), step2.JWKS().Keys)
	}
	for _, k := range step2.JWKS().Keys {
		if !k.IsPublic() {
			t.Error("the JWKS holds a private key")
		}
	}
}

func TestKeyFileIsCreatedOnceAndPrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "keys.json")
	first, err := accesstoken.KeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := accesstoken.KeyFile(path)
	if err != nil || string(first) != string(again) {
		t.Fatalf("second read: %v (same: %v)", err, string(first) == string(again))
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v %v", st.Mode(), err)
	}
	if err := os.WriteFile(path, []byte(`{"kid":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := accesstoken.KeyFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a broken file: %v", err)
	}
}

// TestRefreshingKeys reloads after Every and keeps the last good set when
// a reload fails.
func TestRefreshingKeys(t *testing.T) {
	t.Parallel()
	now := time.Now()
	doc, fail := `{"kid":"k1","secret":"`+secretA+`"}`, false
	loads := 0
	src := &accesstoken.RefreshingKeys{Every: time.Minute, Now: func() time.Time { return now }, Load: func(context.Context) ([]byte, error) {
		loads++
		if fail {
			return nil, errors.New("secret store down")
		}
		return []byte(doc), nil
	}}
	ctx := context.Background()
	ks, err := src.Keys(ctx)
	if err != nil || ks.SigningKeyID() != "k1" {
		t.Fatal(ks, err)
	}
	doc = `{"kid":"k2","secret":"` + secretB + `"}`
	if ks, _ := src.Keys(ctx); ks.SigningKeyID() != "k1" || loads != 1 {
		t.Errorf("reloaded before Every: %s after %d loads", ks.SigningKeyID(), loads)
	}
	now = now.Add(2 * time.Minute)
	if ks, _ := src.Keys(ctx); ks.SigningKeyID() != "k2" {
		t.Errorf("not reloaded after Every: %s", ks.SigningKeyID())
	}
	fail, now = true, now.Add(2*time.Minute)
	if ks, err := src.Keys(ctx); err != nil || ks.SigningKeyID() != "k2" {
		t.Errorf("a failed reload: %v %v", ks, err)
	}
	never := &accesstoken.RefreshingKeys{Every: time.Minute, Load: func(context.Context) ([]byte, error) { return nil, errors.New("down") }}
	if _, err := never.Keys(ctx); err == nil {
		t.Error("no keys ever loaded, but no error")
	}
}
