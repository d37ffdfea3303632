package bearer_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/oauth/accesstoken"
	"github.com/workflowchat/service/shared/oauth/bearer"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

const benchBase = "https://api.example.com"

// BenchmarkVerify is the validation of one bearer token of POST /api/mcp,
// as every request pays it, over the real store on the embedded engine:
//   - store_read, the floor: one GetItem of a personal token by its hash
//     (store.OAuth.PersonalToken), the read a personal token's validation
//     cannot do without;
//   - personal_token: Verify of a personal access token (SHA-256 of the
//     token, that read, the expiry);
//   - oauth_access_token: Verify of an OAuth access token (the EdDSA
//     signature, issuer, audience and expiry, then one GetItem of its
//     grant, which must be live);
//   - signature_only: the access token's checks without the grant's read,
//     the part that costs CPU rather than a round trip.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	db := storetest.New(b)
	st := store.NewOAuth(db.DB, db.OAuth())
	ks, err := accesstoken.ParseKeySet(accesstoken.GenerateKeySet("bench"))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	userID, clientID := uuid.NewString(), uuid.NewString()
	pat := oauth.PersonalTokenPrefix + uuid.NewString()
	if err := st.CreatePersonalToken(ctx, oauth.PersonalToken{ID: uuid.NewString(), UserID: userID, Name: "bench",
		Hash: oauth.HashSecret(pat), CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}, 20); err != nil {
		b.Fatal(err)
	}
	g := oauth.Grant{ID: uuid.NewString(), UserID: userID, ClientID: clientID, ClientName: "bench", Resource: oauth.ResourceURL(benchBase),
		Scope: "mcp", CreatedAt: now, LastUsedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	if err := st.CreateGrant(ctx, g, oauth.RefreshToken{Hash: oauth.HashSecret(uuid.NewString()), GrantID: g.ID, ClientID: clientID,
		UserID: userID, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}, oauth.Epoch{}); err != nil {
		b.Fatal(err)
	}
	at, err := ks.Sign(accesstoken.AccessClaims{
		Claims: jwt.Claims{Issuer: benchBase, Subject: userID, Audience: jwt.Audience{g.Resource}, ID: uuid.NewString(),
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(oauth.AccessTokenTTL))},
		ClientID: clientID, Scope: g.Scope, GrantID: g.ID,
	})
	if err != nil {
		b.Fatal(err)
	}
	v := bearer.NewVerifier(st, accesstoken.StaticKeys{Set: ks}, benchBase, nil)
	r := httptest.NewRequest("POST", benchBase+oauth.ResourcePath, nil)
	hash := oauth.HashSecret(pat)

	verify := func(token string) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := v.Verify(ctx, token, r)
				if err != nil || p.UserID != userID {
					b.Fatalf("verify: %+v %v", p, err)
				}
			}
		}
	}
	b.Run("store_read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.PersonalToken(ctx, hash); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("personal_token", verify(pat))
	b.Run("oauth_access_token", verify(at))
	b.Run("signature_only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ks.Verify(at, benchBase, oauth.Audiences(benchBase), time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
