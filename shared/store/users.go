package store

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
)

// Users stores accounts, their credentials, sessions and model
// preferences. It implements auth.Store and model.Preferences.
type Users struct {
	db       *dynamo.DB
	users    dynamo.Table
	sessions dynamo.Table
}

// NewUsers returns a Users over the named Users and Sessions tables.
func NewUsers(db *dynamo.DB, usersTable, sessionsTable string) *Users {
	return &Users{db: db, users: db.Table(usersTable), sessions: db.Table(sessionsTable)}
}

type profileItem struct {
	PK        string
	ID        string    `dynamo:"id"`
	Email     string    `dynamo:"email"`
	Name      string    `dynamo:"name"`
	CreatedAt time.Time `dynamo:"createdAt"`
	UpdatedAt time.Time `dynamo:"updatedAt"`
	ModelID   string    `dynamo:"modelId,omitempty"`
}

type credentialItem struct {
	PK           string
	UserID       string    `dynamo:"userId"`
	Email        string    `dynamo:"email"`
	Name         string    `dynamo:"name"`
	PasswordHash string    `dynamo:"passwordHash"`
	CreatedAt    time.Time `dynamo:"createdAt"`
	UpdatedAt    time.Time `dynamo:"updatedAt"`
}

type sessionItem struct {
	PK            string
	UserID        string    `dynamo:"userId"`
	Email         string    `dynamo:"email"`
	Name          string    `dynamo:"name"`
	UserCreatedAt time.Time `dynamo:"userCreatedAt"`
	UserUpdatedAt time.Time `dynamo:"userUpdatedAt"`
	CreatedAt     time.Time `dynamo:"createdAt"`
	RenewedAt     time.Time `dynamo:"renewedAt"`
	ExpiresAt     int64     `dynamo:"expiresAt"` // epoch seconds: the TTL attribute
}

func userKey(id string) string     { return "USER#" + id }
func emailKey(email string) string { return "EMAIL#" + email }

func newSessionItem(s auth.Session) sessionItem {
	return sessionItem{
		PK: s.TokenHash, UserID: s.User.ID, Email: s.User.Email, Name: s.User.Name,
		UserCreatedAt: s.User.CreatedAt, UserUpdatedAt: s.User.UpdatedAt,
		CreatedAt: s.CreatedAt, RenewedAt: s.RenewedAt, ExpiresAt: s.ExpiresAt.Unix(),
	}
}

// CreateUser writes the profile, the credential and the first session in
// one transaction, conditioned on the email being unregistered. Conflict
// EMAIL_TAKEN otherwise.
func (u *Users) CreateUser(ctx context.Context, user auth.User, passwordHash string, s auth.Session) error {
	const op = "store.CreateUser"
	tx := u.db.WriteTx().
		Put(u.users.Put(credentialItem{
			PK: emailKey(user.Email), UserID: user.ID, Email: user.Email, Name: user.Name,
			PasswordHash: passwordHash, CreatedAt: user.CreatedAt, UpdatedAt: user.UpdatedAt,
		}).If("attribute_not_exists(PK)")).
		Put(u.users.Put(profileItem{
			PK: userKey(user.ID), ID: user.ID, Email: user.Email, Name: user.Name,
			CreatedAt: user.CreatedAt, UpdatedAt: user.UpdatedAt,
		}).If("attribute_not_exists(PK)")).
		Put(u.sessions.Put(newSessionItem(s)))
	if err := tx.Run(ctx); err != nil {
		if isConditionFailure(err) {
			return errs.E(op, errs.Conflict, "EMAIL_TAKEN", "an account with this email already exists")
		}
		return storeError(op, err)
	}
	return nil
}

// Credential returns the user registered under email and the password
// hash. NotFound USER_NOT_FOUND when there is none.
func (u *Users) Credential(ctx context.Context, email string) (auth.User, string, error) {
	const op = "store.Credential"
	var it credentialItem
	if err := u.users.Get("PK", emailKey(email)).Consistent(true).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return auth.User{}, "", errs.E(op, errs.NotFound, "USER_NOT_FOUND", "no such user")
		}
		return auth.User{}, "", storeError(op, err)
	}
	return auth.User{ID: it.UserID, Email: it.Email, Name: it.Name, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}, it.PasswordHash, nil
}

// CreateSession stores s.
func (u *Users) CreateSession(ctx context.Context, s auth.Session) error {
	return storeError("store.CreateSession", u.sessions.Put(newSessionItem(s)).Run(ctx))
}

// Session returns the session stored under tokenHash. NotFound
// SESSION_NOT_FOUND when there is none.
func (u *Users) Session(ctx context.Context, tokenHash string) (auth.Session, error) {
	const op = "store.Session"
	var it sessionItem
	if err := u.sessions.Get("PK", tokenHash).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return auth.Session{}, errs.E(op, errs.NotFound, "SESSION_NOT_FOUND", "no such session")
		}
		return auth.Session{}, storeError(op, err)
	}
	return auth.Session{
		TokenHash: it.PK,
		User:      auth.User{ID: it.UserID, Email: it.Email, Name: it.Name, CreatedAt: it.UserCreatedAt, UpdatedAt: it.UserUpdatedAt},
		CreatedAt: it.CreatedAt, RenewedAt: it.RenewedAt, ExpiresAt: time.Unix(it.ExpiresAt, 0).UTC(),
	}, nil
}

// RenewSession sets the session's renewal and expiry times. NotFound
// SESSION_NOT_FOUND when the session no longer exists.
func (u *Users) RenewSession(ctx context.Context, tokenHash string, renewedAt, expiresAt time.Time) error {
	const op = "store.RenewSession"
	err := u.sessions.Update("PK", tokenHash).
		Set("renewedAt", renewedAt).Set("expiresAt", expiresAt.Unix()).
		If("attribute_exists(PK)").Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.NotFound, "SESSION_NOT_FOUND", "no such session")
	}
	return storeError(op, err)
}

// DeleteUserSessions removes every session of userID: the keys from the
// UserSessions index (paged Queries), deleted in batches of 25. It returns
// how many it deleted. A session created meanwhile may survive.
func (u *Users) DeleteUserSessions(ctx context.Context, userID string) (int, error) {
	const op = "store.DeleteUserSessions"
	var keys []struct{ PK string }
	if err := u.sessions.Get("userId", userID).Index(SessionsByUserIndex).Project("PK").All(ctx, &keys); err != nil {
		return 0, storeError(op, err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	ks := make([]dynamo.Keyed, len(keys))
	for i, k := range keys {
		ks[i] = dynamo.Keys{k.PK}
	}
	n, err := u.sessions.Batch("PK").Write().Delete(ks...).Run(ctx)
	if err != nil {
		return n, storeError(op, err)
	}
	return n, nil
}

// DeleteSession removes the session stored under tokenHash.
func (u *Users) DeleteSession(ctx context.Context, tokenHash string) error {
	return storeError("store.DeleteSession", u.sessions.Delete("PK", tokenHash).Run(ctx))
}

// SetModelPreference records the user's preferred model. NotFound
// USER_NOT_FOUND when the user does not exist.
func (u *Users) SetModelPreference(ctx context.Context, userID, modelID string) error {
	const op = "store.SetModelPreference"
	err := u.users.Update("PK", userKey(userID)).Set("modelId", modelID).If("attribute_exists(PK)").Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.NotFound, "USER_NOT_FOUND", "no such user")
	}
	return storeError(op, err)
}

// ModelPreference returns the user's preferred model id, "" when none is
// set. NotFound USER_NOT_FOUND when the user does not exist.
func (u *Users) ModelPreference(ctx context.Context, userID string) (string, error) {
	const op = "store.ModelPreference"
	var it profileItem
	if err := u.users.Get("PK", userKey(userID)).One(ctx, &it); err != nil {
		if errors.Is(err, dynamo.ErrNotFound) {
			return "", errs.E(op, errs.NotFound, "USER_NOT_FOUND", "no such user")
		}
		return "", storeError(op, err)
	}
	return it.ModelID, nil
}

// isConditionFailure reports whether err is a failed condition, of a
// single write or of a transaction.
func isConditionFailure(err error) bool {
	if err == nil {
		return false
	}
	if dynamo.IsCondCheckFailed(err) {
		return true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if r.Code != nil && *r.Code == "ConditionalCheckFailed" {
				return true
			}
		}
	}
	return false
}

// failedCondition reports whether the transaction item at index i (in the
// order the items were added) failed its condition.
func failedCondition(err error, i int) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || i >= len(tce.CancellationReasons) {
		return false
	}
	c := tce.CancellationReasons[i].Code
	return c != nil && *c == "ConditionalCheckFailed"
}

// storeError classifies a DynamoDB error, as it comes out of the retryer
// (MaxAttempts spent, or not retryable): what a later retry may fix —
// throttling (of a request or of a transaction), internal and 5xx errors,
// a transaction conflict, a connection that failed — becomes Unavailable
// (503 STORAGE_UNAVAILABLE, retry after a second); anything else, a
// request DynamoDB refuses (validation, a cancelled transaction that is not
// transient), Internal. Failed conditions are the callers' to map to their
// domain errors before calling it. The cause is kept for logs. nil stays
// nil.
func storeError(op string, err error) error {
	if err == nil {
		return nil
	}
	if transient(err) {
		e := errs.E(op, errs.Unavailable, "STORAGE_UNAVAILABLE", "storage is temporarily unavailable; retry shortly").WithCause(err)
		e.RetryAfter = 1
		return e
	}
	return &errs.Error{Op: op, Kind: errs.Internal, Err: err}
}

// transient reports whether err is a failure a later retry may fix.
func transient(err error) bool {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		// Transient only when every reason is: throttling or a conflict
		// (the others, None aside, fail again).
		found := false
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "", "None":
			case "ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict":
				found = true
			default:
				return false
			}
		}
		return found
	}
	var (
		throughput *types.ProvisionedThroughputExceededException
		limit      *types.RequestLimitExceeded
		internal   *types.InternalServerError
		conflict   *types.TransactionConflictException
	)
	if errors.As(err, &throughput) || errors.As(err, &limit) || errors.As(err, &internal) || errors.As(err, &conflict) || isThrottle(err) {
		return true
	}
	// What the SDK itself deems retryable: 5xx answers (with or without
	// a DynamoDB error body), throttling codes, failed connections. A
	// cancelled context (the client left) is not.
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}
