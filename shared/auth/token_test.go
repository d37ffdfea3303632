package auth_test

import (
	"encoding/base64"
	"testing"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/oauth"
)

// TestNewToken: every token the service issues (sessions, OAuth codes and
// tokens, personal access tokens) is 256 random bits, base64url, and is
// stored under one hash, whichever package stores it.
func TestNewToken(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		tok := auth.NewToken()
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(b) != 32 {
			t.Fatalf("token %q: %d bytes, %v; want 32 bytes of base64url", tok, len(b), err)
		}
		if seen[tok] {
			t.Fatalf("token %q drawn twice", tok)
		}
		seen[tok] = true
		if oauth.HashSecret(tok) != auth.HashToken(tok) {
			t.Fatalf("oauth.HashSecret and auth.HashToken differ for %q", tok)
		}
	}
	if got, want := auth.HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("HashToken(abc) = %s, want hex SHA-256 %s", got, want)
	}
}
