package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/oauth"
)

// OAuth stores the authorization server's clients, codes, grants and
// refresh tokens, and the personal access tokens, in the OAuth table. It
// implements oauth.Store. Codes and tokens are stored by the SHA-256 of
// their value only; every item carries its TTL (expiresAt), and every read
// checks the expiry itself, TTL deletion being lazy.
type OAuth struct {
	db    *dynamo.DB
	table dynamo.Table
}

// NewOAuth returns an OAuth store over the named table.
func NewOAuth(db *dynamo.DB, table string) *OAuth {
	return &OAuth{db: db, table: db.Table(table)}
}

type clientItem struct {
	PK           string
	Name         string    `dynamo:"name"`
	URI          string    `dynamo:"uri,omitempty"`
	RedirectURIs []string  `dynamo:"redirectUris"`
	AuthMethod   string    `dynamo:"authMethod"`
	SecretHash   string    `dynamo:"secretHash,omitempty"`
	GrantTypes   []string  `dynamo:"grantTypes"`
	CreatedAt    time.Time `dynamo:"createdAt"`
	ExpiresAt    int64     `dynamo:"expiresAt"`
}

type codeItem struct {
	PK string
	// GSI1PK and GSI1SK list the code under its user (UserItems), for
	// the erasure of a deleted account only.
	GSI1PK      string    `dynamo:",omitempty"`
	GSI1SK      string    `dynamo:",omitempty"`
	ClientID    string    `dynamo:"clientId"`
	UserID      string    `dynamo:"userId"`
	RedirectURI string    `dynamo:"redirectUri,omitempty"`
	Challenge   string    `dynamo:"challenge"`
	Resource    string    `dynamo:"resource"`
	Scope       string    `dynamo:"scope"`
	ClientName  string    `dynamo:"clientName"`
	EpochUser   int64     `dynamo:"epochUser,omitempty"`
	EpochClient int64     `dynamo:"epochClient,omitempty"`
	CreatedAt   time.Time `dynamo:"createdAt"`
	ExpiresAt   int64     `dynamo:"expiresAt"`
}

// epochItem is one count of a user's code epoch (oauth.Epoch): under
// codeEpochPK for every client, under clientEpochPK for one.
type epochItem struct {
	PK string
	N  int64 `dynamo:"n"`
}

type grantItem struct {
	PK         string
	GSI1PK     string
	GSI1SK     string
	ID         string    `dynamo:"id"`
	UserID     string    `dynamo:"userId"`
	ClientID   string    `dynamo:"clientId"`
	ClientName string    `dynamo:"clientName"`
	Resource   string    `dynamo:"resource"`
	Scope      string    `dynamo:"scope"`
	CreatedAt  time.Time `dynamo:"createdAt"`
	LastUsedAt time.Time `dynamo:"lastUsedAt"`
	RevokedAt  time.Time `dynamo:"revokedAt,omitempty"`
	ExpiresAt  int64     `dynamo:"expiresAt"`
}

type refreshItem struct {
	PK string
	// GSI1PK and GSI1SK list the token under its user (UserItems), for
	// the erasure of a deleted account only.
	GSI1PK    string    `dynamo:",omitempty"`
	GSI1SK    string    `dynamo:",omitempty"`
	GrantID   string    `dynamo:"grantId"`
	ClientID  string    `dynamo:"clientId"`
	UserID    string    `dynamo:"userId"`
	Used      bool      `dynamo:"used"`
	UsedAtMs  int64     `dynamo:"usedAtMs,omitempty"` // first exchange, Unix milliseconds
	CreatedAt time.Time `dynamo:"createdAt"`
	ExpiresAt int64     `dynamo:"expiresAt"`
}

type patItem struct {
	PK        string
	GSI1PK    string
	GSI1SK    string
	ID        string    `dynamo:"id"`
	UserID    string    `dynamo:"userId"`
	Name      string    `dynamo:"name"`
	CreatedAt time.Time `dynamo:"createdAt"`
	ExpiresAt int64     `dynamo:"expiresAt"`
}

func clientPK(id string) string      { return "CLIENT#" + id }
func codePK(hash string) string      { return "CODE#" + hash }
func grantPK(id string) string       { return "GRANT#" + id }
func refreshPK(hash string) string   { return "REFRESH#" + hash }
func patPK(hash string) string       { return "PAT#" + hash }
func oauthUserKey(uid string) string { return "USER#" + uid }
func codeEpochPK(uid string) string  { return "CODES#" + uid }

// clientEpochPK names a user's code epoch for one client by the hash of
// the client id, which may be a URL of up to 2,048 bytes (a key's limit).
func clientEpochPK(uid, clientID string) string {
	return "CODES#" + uid + "#" + oauth.HashSecret(clientID)
}
func unix(t int64) time.Time             { return time.Unix(t, 0).UTC() }
func sortTime(t time.Time) string        { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }
func grantSK(g oauth.Grant) string       { return "GRANT#" + sortTime(g.CreatedAt) + "#" + g.ID }
func patSK(t oauth.PersonalToken) string { return "PAT#" + sortTime(t.CreatedAt) + "#" + t.ID }

// CreateClient stores a registered client.
func (o *OAuth) CreateClient(ctx context.Context, c oauth.Client) error {
	const op = "store.CreateClient"
	err := o.table.Put(clientItem{
		PK: clientPK(c.ID), Name: c.Name, URI: c.URI, RedirectURIs: c.RedirectURIs, AuthMethod: c.AuthMethod,
		SecretHash: c.SecretHash, GrantTypes: c.GrantTypes, CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt.Unix(),
	}).If("attribute_not_exists(PK)").Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, "CLIENT_EXISTS", "client id already registered")
	}
	return storeError(op, err)
}

// Client returns the registered client id. NotFound CLIENT_NOT_FOUND.
func (o *OAuth) Client(ctx context.Context, id string) (oauth.Client, error) {
	const op = "store.Client"
	var it clientItem
	if err := o.table.Get("PK", clientPK(id)).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return oauth.Client{}, errs.E(op, errs.NotFound, "CLIENT_NOT_FOUND", "unknown client")
		}
		return oauth.Client{}, storeError(op, err)
	}
	return oauth.Client{ID: id, Name: it.Name, URI: it.URI, RedirectURIs: it.RedirectURIs, AuthMethod: it.AuthMethod,
		SecretHash: it.SecretHash, GrantTypes: it.GrantTypes, CreatedAt: it.CreatedAt, ExpiresAt: unix(it.ExpiresAt)}, nil
}

// CreateCode stores c.
func (o *OAuth) CreateCode(ctx context.Context, c oauth.Code) error {
	return storeError("store.CreateCode", o.table.Put(codeItem{
		PK: codePK(c.Hash), GSI1PK: oauthUserKey(c.UserID), GSI1SK: codePK(c.Hash), ClientID: c.ClientID, UserID: c.UserID, RedirectURI: c.RedirectURI, Challenge: c.Challenge,
		Resource: c.Resource, Scope: c.Scope, ClientName: c.ClientName, EpochUser: c.Epoch.User, EpochClient: c.Epoch.Client,
		CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt.Unix(),
	}).If("attribute_not_exists(PK)").Run(ctx))
}

// CodeEpoch reads userID's two epoch counts for clientID with one
// consistent BatchGetItem; a count never advanced is 0.
func (o *OAuth) CodeEpoch(ctx context.Context, userID, clientID string) (oauth.Epoch, error) {
	const op = "store.CodeEpoch"
	var items []epochItem
	user, client := codeEpochPK(userID), clientEpochPK(userID, clientID)
	err := o.table.Batch("PK").Get(dynamo.Keys{user}, dynamo.Keys{client}).Consistent(true).All(ctx, &items)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return oauth.Epoch{}, storeError(op, err)
	}
	var e oauth.Epoch
	for _, it := range items {
		switch it.PK {
		case user:
			e.User = it.N
		case client:
			e.Client = it.N
		}
	}
	return e, nil
}

// EndCodes adds 1 to userID's epoch count for clientID (every client's
// when clientID is ""): one UpdateItem, which creates the item the first
// time.
func (o *OAuth) EndCodes(ctx context.Context, userID, clientID string) error {
	pk := codeEpochPK(userID)
	if clientID != "" {
		pk = clientEpochPK(userID, clientID)
	}
	return storeError("store.EndCodes", o.table.Update("PK", pk).Add("n", 1).Run(ctx))
}

// epochCheck is the transaction check that a count is still n.
func (o *OAuth) epochCheck(pk string, n int64) *dynamo.ConditionCheck {
	c := o.table.Check("PK", pk)
	if n == 0 {
		return c.If("attribute_not_exists(n)")
	}
	return c.If("n = ?", n)
}

// ConsumeCode deletes the code stored under hash and returns it: one
// DeleteItem conditioned on the item existing, returning the old item, so
// that of two concurrent redemptions exactly one gets the code. NotFound
// CODE_NOT_FOUND when there is none.
func (o *OAuth) ConsumeCode(ctx context.Context, hash string) (oauth.Code, error) {
	const op = "store.ConsumeCode"
	var it codeItem
	err := o.table.Delete("PK", codePK(hash)).If("attribute_exists(PK)").OldValue(ctx, &it)
	if isConditionFailure(err) || errors.Is(err, dynamo.ErrNotFound) {
		return oauth.Code{}, errs.E(op, errs.NotFound, "CODE_NOT_FOUND", "unknown or used code")
	}
	if err != nil {
		return oauth.Code{}, storeError(op, err)
	}
	return oauth.Code{Hash: hash, ClientID: it.ClientID, UserID: it.UserID, RedirectURI: it.RedirectURI, Challenge: it.Challenge,
		Resource: it.Resource, Scope: it.Scope, ClientName: it.ClientName, Epoch: oauth.Epoch{User: it.EpochUser, Client: it.EpochClient},
		CreatedAt: it.CreatedAt, ExpiresAt: unix(it.ExpiresAt)}, nil
}

func newGrantItem(g oauth.Grant) grantItem {
	return grantItem{PK: grantPK(g.ID), GSI1PK: oauthUserKey(g.UserID), GSI1SK: grantSK(g), ID: g.ID, UserID: g.UserID,
		ClientID: g.ClientID, ClientName: g.ClientName, Resource: g.Resource, Scope: g.Scope, CreatedAt: g.CreatedAt,
		LastUsedAt: g.LastUsedAt, RevokedAt: g.RevokedAt, ExpiresAt: g.ExpiresAt.Unix()}
}

func (it grantItem) grant() oauth.Grant {
	return oauth.Grant{ID: it.ID, UserID: it.UserID, ClientID: it.ClientID, ClientName: it.ClientName, Resource: it.Resource,
		Scope: it.Scope, CreatedAt: it.CreatedAt, LastUsedAt: it.LastUsedAt, RevokedAt: it.RevokedAt, ExpiresAt: unix(it.ExpiresAt)}
}

func newRefreshItem(t oauth.RefreshToken) refreshItem {
	return refreshItem{PK: refreshPK(t.Hash), GSI1PK: oauthUserKey(t.UserID), GSI1SK: refreshPK(t.Hash), GrantID: t.GrantID, ClientID: t.ClientID, UserID: t.UserID, Used: t.Used,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt.Unix()}
}

// CreateGrant stores g and, when first has a hash, its first refresh
// token, in one transaction conditioned on the grant being new and on
// both of the user's epoch counts for g.ClientID still being epoch's.
// Conflict GRANT_EXISTS or CODE_REVOKED otherwise.
func (o *OAuth) CreateGrant(ctx context.Context, g oauth.Grant, first oauth.RefreshToken, epoch oauth.Epoch) error {
	const op = "store.CreateGrant"
	tx := o.db.WriteTx().Put(o.table.Put(newGrantItem(g)).If("attribute_not_exists(PK)")).
		Check(o.epochCheck(codeEpochPK(g.UserID), epoch.User)).
		Check(o.epochCheck(clientEpochPK(g.UserID, g.ClientID), epoch.Client))
	if first.Hash != "" {
		tx.Put(o.table.Put(newRefreshItem(first)).If("attribute_not_exists(PK)"))
	}
	if err := tx.Run(ctx); err != nil {
		switch {
		case failedCondition(err, 0):
			return errs.E(op, errs.Conflict, "GRANT_EXISTS", "the grant exists")
		case failedCondition(err, 1), failedCondition(err, 2):
			return errs.E(op, errs.Conflict, "CODE_REVOKED", "the authorization code was revoked before its redemption")
		}
		return storeError(op, err)
	}
	return nil
}

// Grant returns the grant id. NotFound GRANT_NOT_FOUND.
func (o *OAuth) Grant(ctx context.Context, id string) (oauth.Grant, error) {
	const op = "store.Grant"
	var it grantItem
	if err := o.table.Get("PK", grantPK(id)).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return oauth.Grant{}, errs.E(op, errs.NotFound, "GRANT_NOT_FOUND", "unknown grant")
		}
		return oauth.Grant{}, storeError(op, err)
	}
	return it.grant(), nil
}

// RefreshToken returns the refresh token stored under hash. NotFound
// REFRESH_TOKEN_NOT_FOUND.
func (o *OAuth) RefreshToken(ctx context.Context, hash string) (oauth.RefreshToken, error) {
	const op = "store.RefreshToken"
	var it refreshItem
	if err := o.table.Get("PK", refreshPK(hash)).Consistent(true).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return oauth.RefreshToken{}, errs.E(op, errs.NotFound, "REFRESH_TOKEN_NOT_FOUND", "unknown refresh token")
		}
		return oauth.RefreshToken{}, storeError(op, err)
	}
	t := oauth.RefreshToken{Hash: hash, GrantID: it.GrantID, ClientID: it.ClientID, UserID: it.UserID, Used: it.Used,
		CreatedAt: it.CreatedAt, ExpiresAt: unix(it.ExpiresAt)}
	if it.UsedAtMs != 0 {
		t.UsedAt = time.UnixMilli(it.UsedAtMs).UTC()
	}
	return t, nil
}

// RotateRefreshToken spends old and stores next in one transaction: an
// Update of old (used, and usedAtMs unless set) conditioned on it being
// unused or first used after now - oauth.RefreshReuseGrace, an Update of
// the grant (lastUsedAt) conditioned on it being unrevoked and unexpired
// at now, and the Put of next. Conflict REFRESH_TOKEN_USED when old was
// spent before the grace; Conflict GRANT_REVOKED when the grant is not
// live.
func (o *OAuth) RotateRefreshToken(ctx context.Context, old, next oauth.RefreshToken, now time.Time) error {
	const op = "store.RotateRefreshToken"
	graceStart := now.Add(-oauth.RefreshReuseGrace).UnixMilli()
	err := o.db.WriteTx().
		Update(o.table.Update("PK", refreshPK(old.Hash)).Set("used", true).SetIfNotExists("usedAtMs", now.UnixMilli()).
			If("attribute_exists(PK) AND (used = ? OR usedAtMs > ?)", false, graceStart)).
		Update(o.table.Update("PK", grantPK(old.GrantID)).Set("lastUsedAt", now).
			If("attribute_exists(PK) AND attribute_not_exists(revokedAt) AND expiresAt > ?", now.Unix())).
		Put(o.table.Put(newRefreshItem(next)).If("attribute_not_exists(PK)")).
		Run(ctx)
	switch {
	case err == nil:
		return nil
	case failedCondition(err, 0):
		return errs.E(op, errs.Conflict, "REFRESH_TOKEN_USED", "the refresh token was already used")
	case failedCondition(err, 1):
		return errs.E(op, errs.Conflict, "GRANT_REVOKED", "the grant is revoked or expired")
	}
	return storeError(op, err)
}

// RevokeGrant sets the grant's revokedAt unless it is missing or already
// revoked (neither is an error).
func (o *OAuth) RevokeGrant(ctx context.Context, id string, at time.Time) error {
	err := o.table.Update("PK", grantPK(id)).Set("revokedAt", at).
		If("attribute_exists(PK) AND attribute_not_exists(revokedAt)").Run(ctx)
	if isConditionFailure(err) {
		return nil
	}
	return storeError("store.RevokeGrant", err)
}

// UserGrants returns the user's stored grants, oldest first (paged
// Queries of the UserItems index).
func (o *OAuth) UserGrants(ctx context.Context, userID string) ([]oauth.Grant, error) {
	var items []grantItem
	err := o.table.Get("GSI1PK", oauthUserKey(userID)).Index(OAuthByUserIndex).
		Range("GSI1SK", dynamo.BeginsWith, "GRANT#").All(ctx, &items)
	if err != nil {
		return nil, storeError("store.UserGrants", err)
	}
	out := make([]oauth.Grant, len(items))
	for i, it := range items {
		out[i] = it.grant()
	}
	return out, nil
}

// patCountItem counts a user's personal access tokens: the map of their
// ids to their expiry (epoch seconds), changed in the same transactions as
// the tokens. It is the conditional counter of the cap, as the trigger
// counter is (triggers.go), but one whose entries expire with their tokens,
// which TTL deletes without a transaction.
type patCountItem struct {
	PK     string
	Tokens map[string]int64 `dynamo:"tokens"`
}

func patCountPK(uid string) string { return "PATS#" + uid }

// tokenCount makes sure userID's token count exists and holds no expired
// entry at now: one consistent GetItem; the first time, a Put of the
// user's unexpired tokens (listed from the index: tokens stored before the
// count existed); when entries expired, one UpdateItem removing them
// (removing an expired entry is right whoever does it first). A zero now
// removes nothing.
func (o *OAuth) tokenCount(ctx context.Context, userID string, now time.Time) error {
	const op = "store.tokenCount"
	var it patCountItem
	err := o.table.Get("PK", patCountPK(userID)).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		ts, err := o.UserPersonalTokens(ctx, userID)
		if err != nil {
			return errs.Wrap(op, err)
		}
		it = patCountItem{PK: patCountPK(userID), Tokens: map[string]int64{}}
		for _, t := range ts {
			if now.Before(t.ExpiresAt) {
				it.Tokens[t.ID] = t.ExpiresAt.Unix()
			}
		}
		err = o.table.Put(it).If("attribute_not_exists(PK)").Run(ctx)
		if isConditionFailure(err) {
			return nil // created meanwhile
		}
		return storeError(op, err)
	}
	if err != nil {
		return storeError(op, err)
	}
	u := o.table.Update("PK", patCountPK(userID))
	expired := 0
	for id, exp := range it.Tokens {
		if !now.IsZero() && exp <= now.Unix() {
			u.RemoveExpr("tokens.$", id)
			expired++
		}
	}
	if expired == 0 {
		return nil
	}
	return storeError(op, u.Run(ctx))
}

// CreatePersonalToken stores t and its entry in the user's token count in
// one transaction conditioned on the count holding fewer than max
// unexpired tokens at t.CreatedAt (expired entries are removed first).
// Conflict TOO_MANY_TOKENS when it holds max.
func (o *OAuth) CreatePersonalToken(ctx context.Context, t oauth.PersonalToken, max int) error {
	const op = "store.CreatePersonalToken"
	if err := o.tokenCount(ctx, t.UserID, t.CreatedAt); err != nil {
		return errs.Wrap(op, err)
	}
	err := o.db.WriteTx().
		Put(o.table.Put(patItem{
			PK: patPK(t.Hash), GSI1PK: oauthUserKey(t.UserID), GSI1SK: patSK(t), ID: t.ID, UserID: t.UserID, Name: t.Name,
			CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt.Unix(),
		}).If("attribute_not_exists(PK)")).
		Update(o.table.Update("PK", patCountPK(t.UserID)).SetExpr("tokens.$ = ?", t.ID, t.ExpiresAt.Unix()).
			If("size(tokens) < ?", max)).
		Run(ctx)
	if failedCondition(err, 1) {
		return errs.E(op, errs.Conflict, oauth.CodeTooManyTokens, fmt.Sprintf("at most %d personal access tokens; delete one first", max))
	}
	return storeError(op, err)
}

func (it patItem) token() oauth.PersonalToken {
	hash := it.PK[len("PAT#"):]
	return oauth.PersonalToken{ID: it.ID, UserID: it.UserID, Name: it.Name, Hash: hash, CreatedAt: it.CreatedAt, ExpiresAt: unix(it.ExpiresAt)}
}

// PersonalToken returns the token stored under hash. NotFound
// TOKEN_NOT_FOUND.
func (o *OAuth) PersonalToken(ctx context.Context, hash string) (oauth.PersonalToken, error) {
	const op = "store.PersonalToken"
	var it patItem
	if err := o.table.Get("PK", patPK(hash)).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return oauth.PersonalToken{}, errs.E(op, errs.NotFound, "TOKEN_NOT_FOUND", "no such token")
		}
		return oauth.PersonalToken{}, storeError(op, err)
	}
	return it.token(), nil
}

// UserPersonalTokens returns the user's stored tokens, oldest first.
func (o *OAuth) UserPersonalTokens(ctx context.Context, userID string) ([]oauth.PersonalToken, error) {
	var items []patItem
	err := o.table.Get("GSI1PK", oauthUserKey(userID)).Index(OAuthByUserIndex).
		Range("GSI1SK", dynamo.BeginsWith, "PAT#").All(ctx, &items)
	if err != nil {
		return nil, storeError("store.UserPersonalTokens", err)
	}
	out := make([]oauth.PersonalToken, len(items))
	for i, it := range items {
		out[i] = it.token()
	}
	return out, nil
}

// DeletePersonalToken deletes the user's token id: its key from the
// UserItems index, then, in one transaction, a DeleteItem conditioned on
// the item still being the user's and the removal of its entry from the
// user's token count. NotFound TOKEN_NOT_FOUND when the user has no such
// token.
func (o *OAuth) DeletePersonalToken(ctx context.Context, userID, id string) error {
	const op = "store.DeletePersonalToken"
	ts, err := o.UserPersonalTokens(ctx, userID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	for _, t := range ts {
		if t.ID != id {
			continue
		}
		if err := o.tokenCount(ctx, userID, time.Time{}); err != nil {
			return errs.Wrap(op, err)
		}
		err := o.db.WriteTx().
			Delete(o.table.Delete("PK", patPK(t.Hash)).If("userId = ?", userID)).
			Update(o.table.Update("PK", patCountPK(userID)).RemoveExpr("tokens.$", id)).
			Run(ctx)
		if isConditionFailure(err) {
			break
		}
		return storeError(op, err)
	}
	return errs.E(op, errs.NotFound, "TOKEN_NOT_FOUND", "no such token")
}
