// Package auth is sign-up, sign-in, sessions and sign-out (the endpoints
// of docs/openapi.yaml's Auth tag), the middleware every protected handler sits behind, and the
// ownership checks.
//
// A session is a random 256-bit token sent to the browser in the HttpOnly
// session_token cookie; the store keeps only its SHA-256 hash, so a leaked
// table does not leak live sessions. Sessions last SessionTTL and slide: a
// session used more than RenewAfter after its last renewal is extended.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/audit"
	"github.com/workflowchat/service/shared/errs"
)

// Session lifetime rules: a session lasts SessionTTL after its last
// renewal, is renewed when used more than RenewAfter after it, and never
// outlives MaxSessionAge from its creation, however often it is used.
const (
	SessionTTL    = 7 * 24 * time.Hour
	RenewAfter    = 24 * time.Hour
	MaxSessionAge = 30 * 24 * time.Hour
)

// Input bounds.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 128
	MaxNameLen     = 255
	MaxEmailLen    = 254
)

// User is an account.
type User struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Session is a signed-in session. TokenHash is its storage key.
type Session struct {
	TokenHash string
	User      User
	CreatedAt time.Time
	RenewedAt time.Time
	ExpiresAt time.Time
}

// Store persists users and sessions.
type Store interface {
	// CreateUser stores u with its password hash and its first session, in
	// one transaction. It fails with Conflict EMAIL_TAKEN when the email is
	// already registered.
	CreateUser(ctx context.Context, u User, passwordHash string, s Session) error
	// Credential returns the user registered with email and the password
	// hash. NotFound when there is none.
	Credential(ctx context.Context, email string) (User, string, error)
	// CreateSession stores s.
	CreateSession(ctx context.Context, s Session) error
	// Session returns the session stored under tokenHash, expired or not.
	// NotFound when there is none.
	Session(ctx context.Context, tokenHash string) (Session, error)
	// RenewSession sets the session's renewal and expiry times. NotFound
	// when the session is gone.
	RenewSession(ctx context.Context, tokenHash string, renewedAt, expiresAt time.Time) error
	// DeleteSession removes the session; removing a missing one is not an error.
	DeleteSession(ctx context.Context, tokenHash string) error
	// DeleteUserSessions removes every session of userID and returns how
	// many it removed.
	DeleteUserSessions(ctx context.Context, userID string) (int, error)
}

// Service implements the auth operations.
type Service struct {
	store    Store
	hasher   *Hasher
	now      func() time.Time
	hashing  chan struct{} // a slot per hash computed at once (MaxHashing)
	hashWait time.Duration
	// signOutAll are the other credentials SignOutAll ends (OnSignOutAll).
	signOutAll []func(ctx context.Context, userID string) error
	// audit records the security events (WithAudit); nil records none.
	audit *audit.Log
	// deletions begins account deletions (WithDeletions).
	deletions Deletions
}

// WithAudit makes s record sign-ins (failed ones too), sign-out-all and
// deletion requests in l. Call it while building the service.
func (s *Service) WithAudit(l *audit.Log) *Service {
	s.audit = l
	return s
}

// Audit returns the log s records in (nil without one).
func (s *Service) Audit() *audit.Log { return s.audit }

// OnSignOutAll adds f to what SignOutAll ends besides the sessions: f
// revokes the user's other credentials (OAuth grants, personal access
// tokens). SignOutAll runs f twice, so f must be idempotent: before the
// sessions are deleted (a failure leaves them, and the call can be
// retried) and after (ending what a request authenticated by one of them
// completed meanwhile, such as an authorization code approved while the
// sessions were being deleted). Call it while building the service,
// before it serves.
func (s *Service) OnSignOutAll(f func(ctx context.Context, userID string) error) {
	s.signOutAll = append(s.signOutAll, f)
}

// NewService returns a Service over store. now is the clock (time.Now in
// production); hasher nil means DefaultHasher.
func NewService(store Store, hasher *Hasher, now func() time.Time) *Service {
	if hasher == nil {
		hasher = DefaultHasher()
	}
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, hasher: hasher, now: now, hashing: make(chan struct{}, MaxHashing), hashWait: MaxHashWait}
}

// Credentials are what sign-up and sign-in take.
type Credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
}

// SignedIn is the outcome of sign-up and sign-in: the user, the session and
// the raw token for the cookie (never stored).
type SignedIn struct {
	User    User
	Session Session
	Token   string
}

// NormalizeEmail trims and lower-cases an email address.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

func validateEmail(f *errs.FieldErrors, email string) {
	switch {
	case email == "":
		f.Add("email", "is required")
	case len(email) > MaxEmailLen:
		f.Add("email", "must be at most %d characters", MaxEmailLen)
	default:
		a, err := mail.ParseAddress(email)
		if err != nil || a.Address != email || !strings.Contains(email[strings.LastIndexByte(email, '@')+1:], ".") {
			f.Add("email", "must be a valid email address")
		}
	}
}

// SignUp creates an account and signs it in. Errors: Invalid
// (VALIDATION_FAILED with details) for a malformed email, a password
// shorter than 8 or longer than 128 characters or too common (see
// Common), or an empty or over-long name; Conflict EMAIL_TAKEN; Unavailable when the instance is busy
// hashing other passwords (see MaxHashing).
func (s *Service) SignUp(ctx context.Context, c Credentials) (SignedIn, error) {
	const op = "auth.SignUp"
	email, name := NormalizeEmail(c.Email), strings.TrimSpace(c.Name)
	var f errs.FieldErrors
	validateEmail(&f, email)
	if n := utf8.RuneCountInString(c.Password); n < MinPasswordLen || n > MaxPasswordLen {
		f.Add("password", "must be %d to %d characters", MinPasswordLen, MaxPasswordLen)
	} else if Common(c.Password) {
		f.Add("password", "is too common or too simple; choose a less guessable password")
	}
	if name == "" {
		f.Add("name", "is required")
	} else if utf8.RuneCountInString(name) > MaxNameLen {
		f.Add("name", "must be at most %d characters", MaxNameLen)
	} else {
		f.OneLine("name", name)
	}
	if err := f.Err(op); err != nil {
		return SignedIn{}, err
	}
	release, err := s.acquireHashing(ctx)
	if err != nil {
		return SignedIn{}, errs.Wrap(op, err)
	}
	hash, err := s.hasher.Hash(c.Password)
	release()
	if err != nil {
		return SignedIn{}, errs.Wrap(op, err)
	}
	now := s.now().UTC()
	u := User{ID: uuid.NewString(), Email: email, Name: name, CreatedAt: now, UpdatedAt: now}
	token, sess := s.newSession(u, now)
	if err := s.store.CreateUser(ctx, u, hash, sess); err != nil {
		return SignedIn{}, errs.Wrap(op, err)
	}
	return SignedIn{User: u, Session: sess, Token: token}, nil
}

var errBadCredentials = errs.E("auth.SignIn", errs.Unauthenticated, "INVALID_CREDENTIALS", "invalid email or password")

// SignIn checks an email and password and opens a session. An unknown
// email and a wrong password both fail with Unauthenticated
// INVALID_CREDENTIALS after the same work (one read, one password hash
// verification), so timing does not tell registered emails apart. Invalid
// when either field is missing; Unavailable when the instance is busy
// hashing other passwords (see MaxHashing).
func (s *Service) SignIn(ctx context.Context, c Credentials) (SignedIn, error) {
	const op = "auth.SignIn"
	email := NormalizeEmail(c.Email)
	var f errs.FieldErrors
	if email == "" {
		f.Add("email", "is required")
	}
	if c.Password == "" {
		f.Add("password", "is required")
	}
	if err := f.Err(op); err != nil {
		return SignedIn{}, err
	}
	u, hash, err := s.store.Credential(ctx, email)
	if err != nil && !errs.Is(err, errs.NotFound) {
		return SignedIn{}, errs.Wrap(op, err)
	}
	if err != nil {
		hash = s.hasher.dummy() // same cost as a real verification
	}
	release, herr := s.acquireHashing(ctx)
	if herr != nil {
		return SignedIn{}, errs.Wrap(op, herr)
	}
	ok := s.hasher.Verify(hash, c.Password)
	release()
	if err != nil {
		return SignedIn{}, errBadCredentials
	}
	if !ok {
		s.audit.Record(ctx, u.ID, audit.SignInFailed, map[string]any{"method": "password"})
		return SignedIn{}, errBadCredentials
	}
	now := s.now().UTC()
	token, sess := s.newSession(u, now)
	if err := s.store.CreateSession(ctx, sess); err != nil {
		return SignedIn{}, errs.Wrap(op, err)
	}
	s.audit.Record(ctx, u.ID, audit.SignIn, map[string]any{"method": "password"})
	return SignedIn{User: u, Session: sess, Token: token}, nil
}

var errNoSession = errs.E("auth.Authenticate", errs.Unauthenticated, "UNAUTHORIZED", "a valid session is required")

// Authenticate returns the live session of token, extending it when it was
// last renewed more than RenewAfter ago (renewed is then true and the
// cookie should be re-issued). Unauthenticated for a missing, unknown or
// expired token.
func (s *Service) Authenticate(ctx context.Context, token string) (sess Session, renewed bool, err error) {
	const op = "auth.Authenticate"
	if !validToken(token) {
		return Session{}, false, errNoSession
	}
	sess, err = s.store.Session(ctx, HashToken(token))
	if errs.Is(err, errs.NotFound) {
		return Session{}, false, errNoSession
	}
	if err != nil {
		return Session{}, false, errs.Wrap(op, err)
	}
	now := s.now().UTC()
	if !now.Before(sess.ExpiresAt) {
		return Session{}, false, errNoSession
	}
	if end := sess.CreatedAt.Add(MaxSessionAge); !now.Before(end) {
		return Session{}, false, errNoSession
	}
	if now.Sub(sess.RenewedAt) > RenewAfter && sess.ExpiresAt.Before(sess.CreatedAt.Add(MaxSessionAge)) {
		exp := now.Add(SessionTTL)
		if end := sess.CreatedAt.Add(MaxSessionAge); end.Before(exp) {
			exp = end
		}
		switch err := s.store.RenewSession(ctx, sess.TokenHash, now, exp); {
		case errs.Is(err, errs.NotFound):
			return Session{}, false, errNoSession // signed out concurrently
		case err != nil:
			return Session{}, false, errs.Wrap(op, err)
		}
		sess.RenewedAt, sess.ExpiresAt = now, exp
		return sess, true, nil
	}
	return sess, false, nil
}

// SignOut deletes the session of token. Unauthenticated when there is no
// live session.
func (s *Service) SignOut(ctx context.Context, token string) error {
	sess, _, err := s.Authenticate(ctx, token)
	if err != nil {
		return errs.Wrap("auth.SignOut", err)
	}
	return errs.Wrap("auth.SignOut", s.store.DeleteSession(ctx, sess.TokenHash))
}

// SignOutAll deletes every session of the user of token, on every device,
// between two runs of what OnSignOutAll added, and returns how many
// sessions there were. Unauthenticated when there is no live session; a
// failure of the first run fails it before any session is deleted, so
// that it can be retried; a failure of the second fails it after.
func (s *Service) SignOutAll(ctx context.Context, token string) (int, error) {
	const op = "auth.SignOutAll"
	sess, _, err := s.Authenticate(ctx, token)
	if err != nil {
		return 0, errs.Wrap(op, err)
	}
	for _, f := range s.signOutAll {
		if err := f(ctx, sess.User.ID); err != nil {
			return 0, errs.Wrap(op, err)
		}
	}
	n, err := s.store.DeleteUserSessions(ctx, sess.User.ID)
	if err != nil {
		return 0, errs.Wrap(op, err)
	}
	for _, f := range s.signOutAll {
		if err := f(ctx, sess.User.ID); err != nil {
			return 0, errs.Wrap(op, err)
		}
	}
	s.audit.Record(ctx, sess.User.ID, audit.SignOutAll, map[string]any{"sessions": n})
	return n, nil
}

func (s *Service) newSession(u User, now time.Time) (string, Session) {
	token := NewToken()
	return token, Session{TokenHash: HashToken(token), User: u, CreatedAt: now, RenewedAt: now, ExpiresAt: now.Add(SessionTTL)}
}

const tokenBytes = 32

// NewToken returns a new secret of 256 random bits, base64url-encoded (43
// characters): a session token, or the random part of any token the
// service issues. It cannot fail (crypto/rand.Read never does).
func NewToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

func validToken(t string) bool {
	if len(t) != base64.RawURLEncoding.EncodedLen(tokenBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(t)
	return err == nil
}

// HashToken returns the storage key of a session token: hex SHA-256. A
// token has 256 bits of entropy, so a fast hash is enough.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
