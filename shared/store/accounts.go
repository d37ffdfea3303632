package store

import (
	"context"
	"errors"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/account"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/usage"
)

// Accounts keeps the account deletions: the request that ends an
// account at once (its credential gone, its profile marked) and the
// queue of erasures, and erases the items of a user that belong to no
// chat or workflow. A deletion request is the item DELETION#<userId> in
// the Data table, sparse in GSI1 under DELETIONS until its erasure ends.
// It implements auth.Deletions and account.Queue.
type Accounts struct {
	db       *dynamo.DB
	users    dynamo.Table
	data     dynamo.Table
	oauth    dynamo.Table
	sessions *Users
}

// NewAccounts returns an Accounts over the named tables.
func NewAccounts(db *dynamo.DB, usersTable, sessionsTable, dataTable, oauthTable string) *Accounts {
	return &Accounts{db: db, users: db.Table(usersTable), data: db.Table(dataTable), oauth: db.Table(oauthTable),
		sessions: NewUsers(db, usersTable, sessionsTable)}
}

func deletionPK(userID string) string { return "DELETION#" + userID }

const (
	deletionSK   = "DELETION"
	deletionsGSI = "DELETIONS"
)

type deletionItem struct {
	PK          string
	SK          string
	GSI1PK      string
	GSI1SK      string
	UserID      string    `dynamo:"userId"`
	Email       string    `dynamo:"email"`
	UserCreated time.Time `dynamo:"userCreatedAt"`
	RequestedAt time.Time `dynamo:"requestedAt"`
	LastPassAt  time.Time `dynamo:"lastPassAt,omitempty"`
	BusyChats   []string  `dynamo:"busyChats,set,omitempty"`
}

// deletionDue is a queued erasure's GSI1 sort key: the time it is due
// (its request, then its last pass), and the user.
func deletionDue(at time.Time, userID string) string {
	return at.UTC().Format(time.RFC3339Nano) + "#" + userID
}

// DeletedAccounts reads the deletion records BeginDeletion writes in the
// Data table. It implements auth.Erasures.
type DeletedAccounts struct{ data dynamo.Table }

// NewDeletedAccounts returns a DeletedAccounts over the Data table.
func NewDeletedAccounts(db *dynamo.DB, dataTable string) *DeletedAccounts {
	return &DeletedAccounts{data: db.Table(dataTable)}
}

// Deleted reports whether userID's deletion has begun: its deletion
// record exists (one strongly consistent GetItem of its key). Errors:
// storage's.
func (d *DeletedAccounts) Deleted(ctx context.Context, userID string) (bool, error) {
	var it struct{ PK string }
	err := d.data.Get("PK", deletionPK(userID)).Range("SK", dynamo.Equal, deletionSK).Project("PK").Consistent(true).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return false, nil
	case err != nil:
		return false, storeError("store.DeletedAccounts", err)
	}
	return true, nil
}

// BeginDeletion ends u's account in one transaction: the credential is
// deleted (conditioned on it being u's: no sign-in after it, and the
// email is free to sign up with again), the profile is marked deleted
// and the erasure is queued. NotFound USER_NOT_FOUND when the credential
// is already gone (a deletion already begun).
func (a *Accounts) BeginDeletion(ctx context.Context, u auth.User, at time.Time) error {
	const op = "store.BeginDeletion"
	tx := a.db.WriteTx().
		Delete(a.users.Delete("PK", emailKey(u.Email)).If("userId = ?", u.ID)).
		Update(a.users.Update("PK", userKey(u.ID)).Set("deletedAt", at.UTC()).If("attribute_exists(PK)")).
		Put(a.data.Put(deletionItem{PK: deletionPK(u.ID), SK: deletionSK, GSI1PK: deletionsGSI,
			GSI1SK: deletionDue(at, u.ID), UserID: u.ID, Email: u.Email, UserCreated: u.CreatedAt, RequestedAt: at.UTC()}))
	if err := tx.Run(ctx); err != nil {
		if isConditionFailure(err) {
			return errs.E(op, errs.NotFound, "USER_NOT_FOUND", "no such user")
		}
		return storeError(op, err)
	}
	return nil
}

// PendingDeletions returns up to limit queued erasures due at now,
// oldest first: one Query of GSI1, whose sort key is when each is due.
func (a *Accounts) PendingDeletions(ctx context.Context, now time.Time, limit int) ([]account.Deletion, error) {
	var items []deletionItem
	err := a.data.Get("GSI1PK", deletionsGSI).Index("GSI1").Range("GSI1SK", dynamo.LessOrEqual, deletionDue(now, "~")).
		SearchLimit(limit).Limit(limit).All(ctx, &items)
	if err != nil {
		return nil, storeError("store.PendingDeletions", err)
	}
	out := make([]account.Deletion, len(items))
	for i, it := range items {
		out[i] = account.Deletion{UserID: it.UserID, Email: it.Email, UserCreatedAt: it.UserCreated, RequestedAt: it.RequestedAt, LastPassAt: it.LastPassAt, BusyChats: it.BusyChats}
	}
	return out, nil
}

// AddBusyChats adds chatIDs to userID's queued erasure's busyChats (a
// string set), in one write; none is no write.
func (a *Accounts) AddBusyChats(ctx context.Context, userID string, chatIDs []string) error {
	if len(chatIDs) == 0 {
		return nil
	}
	err := a.data.Update("PK", deletionPK(userID)).Range("SK", deletionSK).AddStringsToSet("busyChats", chatIDs...).If("attribute_exists(PK)").Run(ctx)
	if isConditionFailure(err) {
		return nil
	}
	return storeError("store.AddBusyChats", err)
}

// AwaitLastPass records that userID's erasure ran its first pass and is
// due again at at (its GSI1 sort key moves there), in one write.
func (a *Accounts) AwaitLastPass(ctx context.Context, userID string, at time.Time) error {
	err := a.data.Update("PK", deletionPK(userID)).Range("SK", deletionSK).
		Set("lastPassAt", at.UTC()).Set("GSI1SK", deletionDue(at, userID)).If("attribute_exists(PK)").Run(ctx)
	if isConditionFailure(err) {
		return nil // finished meanwhile
	}
	return storeError("store.AwaitLastPass", err)
}

// FinishDeletion removes the queued erasure of userID, the last item of
// the user.
func (a *Accounts) FinishDeletion(ctx context.Context, userID string) error {
	return storeError("store.FinishDeletion", a.data.Delete("PK", deletionPK(userID)).Range("SK", deletionSK).Run(ctx))
}

// EraseUserItems deletes what d's user has outside chats and workflows:
// the profile, the tool policies, every month of usage since the account
// was created, the user's collection (counters, remote MCP servers with
// their secrets and owner items), the audit log,
// the sessions, and in the OAuth table the grants (with each client's
// code epoch), the token count and the code epoch. Each part is
// idempotent, so an erasure interrupted anywhere is finished by running
// it again.
func (a *Accounts) EraseUserItems(ctx context.Context, d account.Deletion) error {
	const op = "store.EraseUserItems"
	uid := d.UserID
	if _, err := a.sessions.DeleteUserSessions(ctx, uid); err != nil {
		return errs.Wrap(op, err)
	}
	// OAuth: what the user's index lists (the grants, revoked by now,
	// the personal access tokens, the refresh tokens and codes), the
	// per-client code epochs the grants' clients name, then the user's
	// own items.
	var grants []grantItem
	if err := a.oauth.Get("GSI1PK", oauthUserKey(uid)).Index(OAuthByUserIndex).All(ctx, &grants); err != nil {
		return storeError(op, err)
	}
	var okeys []dynamo.Keyed
	seen := map[string]bool{}
	for _, g := range grants {
		okeys = append(okeys, dynamo.Keys{g.PK})
		if g.ClientID != "" && !seen[g.ClientID] {
			seen[g.ClientID] = true
			okeys = append(okeys, dynamo.Keys{clientEpochPK(uid, g.ClientID)})
		}
	}
	okeys = append(okeys, dynamo.Keys{codeEpochPK(uid)}, dynamo.Keys{patCountPK(uid)})
	if err := hashBatchDelete(ctx, op, a.oauth, okeys); err != nil {
		return err
	}
	// The Users table: profile, policies, usage months.
	ukeys := []dynamo.Keyed{dynamo.Keys{userKey(uid)}, dynamo.Keys{toolPolicyKey(uid)}}
	start := d.UserCreatedAt
	if start.IsZero() || start.After(d.RequestedAt) {
		start = d.RequestedAt
	}
	end := time.Now().UTC().AddDate(0, 1, 0)
	for m := time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, time.UTC); !m.After(end); m = m.AddDate(0, 1, 0) {
		ukeys = append(ukeys, dynamo.Keys{usageKey(uid, usage.Month(m))})
	}
	if err := hashBatchDelete(ctx, op, a.users, ukeys); err != nil {
		return err
	}
	// The Data table: the owner items of the user's remote MCP servers
	// (the servers themselves, with their sealed secrets, are in the
	// user's collection), then the user's collection (counters, tool
	// names, servers and their names) and the audit log.
	var servers []struct {
		ID string `dynamo:"id"`
	}
	if err := a.data.Get("PK", userKey(uid)).Range("SK", dynamo.BeginsWith, mcpServerPrefix).Project("id").Consistent(true).All(ctx, &servers); err != nil {
		return storeError(op, err)
	}
	var owners []dynamo.Keyed
	for _, srv := range servers {
		owners = append(owners, dynamo.Keys{mcpServerPrefix + srv.ID, mcpOwnerSK})
	}
	if err := batchDelete(ctx, op, a.data, owners); err != nil {
		return err
	}
	if err := deleteCollection(ctx, a.data, userKey(uid), ""); err != nil {
		return errs.Wrap(op, err)
	}
	// The search index's own items (its totals and progress; each chat's
	// postings went with the chat), the words' counts first.
	if err := eraseSearchCounts(ctx, op, a.data, uid); err != nil {
		return err
	}
	if err := deleteCollection(ctx, a.data, searchPK(uid), ""); err != nil {
		return errs.Wrap(op, err)
	}
	return errs.Wrap(op, deleteCollection(ctx, a.data, auditPK(uid), ""))
}

// hashBatchDelete deletes keys of a table keyed by PK alone, 25 at a time.
func hashBatchDelete(ctx context.Context, op string, table dynamo.Table, keys []dynamo.Keyed) error {
	for len(keys) > 0 {
		n := min(len(keys), 25)
		if _, err := table.Batch("PK").Write().Delete(keys[:n]...).Run(ctx); err != nil {
			return storeError(op, err)
		}
		keys = keys[n:]
	}
	return nil
}
