package auth_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func cheapHasher() *auth.Hasher { return &auth.Hasher{Memory: 64, Time: 1, Threads: 1} }

func newService(t *testing.T) (*auth.Service, *storetest.DB, *clock) {
	t.Helper()
	db := storetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	return auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), cheapHasher(), clk.Now), db, clk
}

func TestSignUpValidation(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t)
	long := strings.Repeat("a", 256)
	tests := []struct {
		name  string
		in    auth.Credentials
		field string
	}{
		{"missing email", auth.Credentials{Password: "password-1x", Name: "A"}, "email"},
		{"malformed email", auth.Credentials{Email: "not-an-email", Password: "password-1x", Name: "A"}, "email"},
		{"email without domain dot", auth.Credentials{Email: "a@localhost", Password: "password-1x", Name: "A"}, "email"},
		{"display-name email", auth.Credentials{Email: "Bob <bob@example.com>", Password: "password-1x", Name: "A"}, "email"},
		{"short password", auth.Credentials{Email: "a@example.com", Password: "1234567", Name: "A"}, "password"},
		{"long password", auth.Credentials{Email: "a@example.com", Password: strings.Repeat("p", 129), Name: "A"}, "password"},
		{"common password", auth.Credentials{Email: "a@example.com", Password: "12345678", Name: "A"}, "password"},
		{"common password, other case", auth.Credentials{Email: "a@example.com", Password: "PassWord", Name: "A"}, "password"},
		{"common password from the list's end", auth.Credentials{Email: "a@example.com", Password: "mustang1", Name: "A"}, "password"},
		{"eight spaces", auth.Credentials{Email: "a@example.com", Password: "        ", Name: "A"}, "password"},
		{"one character repeated", auth.Credentials{Email: "a@example.com", Password: "ééééééééé", Name: "A"}, "password"},
		{"empty name", auth.Credentials{Email: "a@example.com", Password: "password-1x", Name: "  "}, "name"},
		{"long name", auth.Credentials{Email: "a@example.com", Password: "password-1x", Name: long}, "name"},
		{"name with a NUL", auth.Credentials{Email: "a@example.com", Password: "password-1x", Name: "\x00ctl"}, "name"},
		{"name with a line break", auth.Credentials{Email: "a@example.com", Password: "password-1x", Name: "Ada\nLovelace"}, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := svc.SignUp(context.Background(), tt.in)
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Invalid || len(e.Details) == 0 || e.Details[0].Field != tt.field {
				t.Fatalf("err = %v, want Invalid on %s", err, tt.field)
			}
		})
	}
}

func TestSignUpSignInSignOut(t *testing.T) {
	t.Parallel()
	svc, db, _ := newService(t)
	ctx := context.Background()

	up, err := svc.SignUp(ctx, auth.Credentials{Email: "  Ada@Example.COM ", Password: "correct horse", Name: " Ada "})
	if err != nil {
		t.Fatal(err)
	}
	if up.User.Email != "ada@example.com" || up.User.Name != "Ada" || up.User.ID == "" || up.Token == "" {
		t.Fatalf("user = %+v", up.User)
	}
	if got := up.Session.ExpiresAt.Sub(up.Session.CreatedAt); got != auth.SessionTTL {
		t.Errorf("session lifetime = %v", got)
	}

	// The same email in another case is taken.
	_, err = svc.SignUp(ctx, auth.Credentials{Email: "ADA@example.com", Password: "another pw", Name: "Imposter"})
	if errs.KindOf(err) != errs.Conflict || errs.CodeOf(err) != "EMAIL_TAKEN" {
		t.Fatalf("duplicate sign-up err = %v, want EMAIL_TAKEN", err)
	}

	// The stored session key is the token's hash, never the token.
	var items []map[string]any
	if err := db.Table(db.Sessions()).Scan().All(ctx, &items); err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0]["PK"] != auth.HashToken(up.Token) {
		t.Fatalf("sessions = %v", items)
	}
	for k, v := range items[0] {
		if s, ok := v.(string); ok && strings.Contains(s, up.Token) {
			t.Errorf("session attribute %s holds the raw token", k)
		}
	}
	// No password in clear anywhere in the users table.
	var users []map[string]any
	if err := db.Table(db.Users()).Scan().All(ctx, &users); err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 {
		t.Fatalf("users table has %d items, want profile + credential", len(users))
	}
	for _, u := range users {
		for k, v := range u {
			if s, ok := v.(string); ok && strings.Contains(s, "correct horse") {
				t.Errorf("users attribute %s holds the password", k)
			}
		}
	}

	in, err := svc.SignIn(ctx, auth.Credentials{Email: "ada@EXAMPLE.com", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	if in.User != up.User {
		t.Errorf("signed-in user = %+v, want %+v", in.User, up.User)
	}
	if in.Token == up.Token {
		t.Error("sign-in reused the sign-up token")
	}

	for _, c := range []auth.Credentials{
		{Email: "ada@example.com", Password: "wrong password"},
		{Email: "nobody@example.com", Password: "correct horse"},
	} {
		_, err := svc.SignIn(ctx, c)
		if errs.KindOf(err) != errs.Unauthenticated || errs.CodeOf(err) != "INVALID_CREDENTIALS" {
			t.Errorf("sign-in %s err = %v, want INVALID_CREDENTIALS", c.Email, err)
		}
	}
	if _, err := svc.SignIn(ctx, auth.Credentials{Email: "ada@example.com"}); errs.KindOf(err) != errs.Invalid {
		t.Errorf("sign-in without password err = %v, want Invalid", err)
	}

	sess, _, err := svc.Authenticate(ctx, in.Token)
	if err != nil || sess.User.ID != up.User.ID {
		t.Fatalf("Authenticate = %+v, %v", sess, err)
	}
	if err := svc.SignOut(ctx, in.Token); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Authenticate(ctx, in.Token); errs.KindOf(err) != errs.Unauthenticated {
		t.Errorf("after sign-out err = %v, want Unauthenticated", err)
	}
	if err := svc.SignOut(ctx, in.Token); errs.KindOf(err) != errs.Unauthenticated {
		t.Errorf("second sign-out err = %v, want Unauthenticated", err)
	}
	// The sign-up session is independent and still live.
	if _, _, err := svc.Authenticate(ctx, up.Token); err != nil {
		t.Errorf("other session: %v", err)
	}
}

func TestSessionExpiryAndRenewal(t *testing.T) {
	t.Parallel()
	svc, db, clk := newService(t)
	ctx := context.Background()
	up, err := svc.SignUp(ctx, auth.Credentials{Email: "b@example.com", Password: "password-1x", Name: "B"})
	if err != nil {
		t.Fatal(err)
	}

	// Within a day: no renewal, one read.
	clk.Advance(23 * time.Hour)
	db.Counter.Reset()
	s, renewed, err := svc.Authenticate(ctx, up.Token)
	if err != nil || renewed || !s.ExpiresAt.Equal(up.Session.ExpiresAt) {
		t.Fatalf("at 23h: renewed=%v expires=%v err=%v", renewed, s.ExpiresAt, err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("authenticate cost %d DynamoDB calls, want 1", n)
	}

	// More than a day after the last renewal: extended from now.
	clk.Advance(2 * time.Hour)
	s, renewed, err = svc.Authenticate(ctx, up.Token)
	if err != nil || !renewed {
		t.Fatalf("at 25h: renewed=%v err=%v", renewed, err)
	}
	if want := clk.Now().Add(auth.SessionTTL); !s.ExpiresAt.Equal(want.Truncate(time.Second)) && !s.ExpiresAt.Equal(want) {
		t.Errorf("renewed expiry = %v, want %v", s.ExpiresAt, want)
	}
	// The renewal is stored: just before the new expiry it still works...
	clk.Advance(auth.SessionTTL - time.Minute)
	if _, _, err := svc.Authenticate(ctx, up.Token); err != nil {
		t.Fatalf("before renewed expiry: %v", err)
	}
	// ...and a week of silence after that renewal expires it, even though
	// the item is still in the table (TTL deletion is lazy).
	clk.Advance(auth.SessionTTL + time.Minute)
	if _, _, err := svc.Authenticate(ctx, up.Token); errs.KindOf(err) != errs.Unauthenticated {
		t.Fatalf("after expiry err = %v, want Unauthenticated", err)
	}
	var items []map[string]any
	if err := db.Table(db.Sessions()).Scan().All(ctx, &items); err != nil || len(items) != 1 {
		t.Fatalf("expired session item should still be stored (TTL is lazy): %v %v", items, err)
	}
}

func TestAuthenticateRejectsBadTokens(t *testing.T) {
	t.Parallel()
	svc, db, _ := newService(t)
	for _, tok := range []string{"", "short", strings.Repeat("a", 43), strings.Repeat("!", 43), auth.HashToken("x")} {
		db.Counter.Reset()
		_, _, err := svc.Authenticate(context.Background(), tok)
		if errs.KindOf(err) != errs.Unauthenticated || errs.CodeOf(err) != "UNAUTHORIZED" {
			t.Errorf("token %q: err = %v, want UNAUTHORIZED", tok, err)
		}
		if tok != strings.Repeat("a", 43) && db.Counter.Count() != 0 {
			t.Errorf("malformed token %q reached DynamoDB", tok)
		}
	}
}

func TestHasher(t *testing.T) {
	t.Parallel()
	h := cheapHasher()
	enc, err := h.Hash("s3cret-pass")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Errorf("encoding = %q", enc)
	}
	enc2, _ := h.Hash("s3cret-pass")
	if enc == enc2 {
		t.Error("two hashes of one password are equal: salt missing")
	}
	tests := []struct {
		name, hash, pw string
		want           bool
	}{
		{"match", enc, "s3cret-pass", true},
		{"wrong", enc, "s3cret-pasS", false},
		{"empty", enc, "", false},
		{"garbage hash", "nope", "s3cret-pass", false},
		{"other algorithm", strings.Replace(enc, "argon2id", "argon2i", 1), "s3cret-pass", false},
		{"absurd memory", strings.Replace(enc, "m=64", "m=99999999", 1), "s3cret-pass", false},
		// Parameters live in the hash: a hash made with other parameters still verifies.
		{"default params verify", mustHash(t, auth.DefaultHasher(), "pw-default"), "pw-default", true},
	}
	for _, tt := range tests {
		if got := h.Verify(tt.hash, tt.pw); got != tt.want {
			t.Errorf("%s: Verify = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func mustHash(t *testing.T, h *auth.Hasher, pw string) string {
	t.Helper()
	s, err := h.Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCommon: the bundled list is loaded (its header skipped) and a
// password that is neither listed nor one repeated character passes.
func TestCommon(t *testing.T) {
	t.Parallel()
	for pw, want := range map[string]bool{
		"password": true, "iloveyou": true, "TRUSTNO1": true, "zzzzzzzz": true,
		"# Common passwords of 8 characters or more, lower-cased, most common first.": false,
		"correct horse battery": false, "password-1x": false, "ab" + "ababab": false,
	} {
		if got := auth.Common(pw); got != want {
			t.Errorf("Common(%q) = %v, want %v", pw, got, want)
		}
	}
}

// TestSessionAbsoluteLifetime: a session used every day is renewed, but
// never past MaxSessionAge from its creation, and ends then.
func TestSessionAbsoluteLifetime(t *testing.T) {
	t.Parallel()
	svc, _, clk := newService(t)
	ctx := context.Background()
	up, err := svc.SignUp(ctx, auth.Credentials{Email: "daily@example.com", Password: "password-1x", Name: "D"})
	if err != nil {
		t.Fatal(err)
	}
	end := up.Session.CreatedAt.Add(auth.MaxSessionAge)
	var last auth.Session
	for day := 1; clk.Now().Add(25 * time.Hour).Before(end); day++ {
		clk.Advance(25 * time.Hour)
		s, _, err := svc.Authenticate(ctx, up.Token)
		if err != nil {
			t.Fatalf("day %d: %v", day, err)
		}
		if s.ExpiresAt.After(end) {
			t.Fatalf("day %d: renewed to %v, past the absolute end %v", day, s.ExpiresAt, end)
		}
		last = s
	}
	if !last.ExpiresAt.Equal(end) {
		t.Errorf("last renewal expires %v, want the absolute end %v", last.ExpiresAt, end)
	}
	clk.Advance(end.Sub(clk.Now()))
	if _, _, err := svc.Authenticate(ctx, up.Token); errs.KindOf(err) != errs.Unauthenticated {
		t.Fatalf("at the absolute end: %v, want Unauthenticated", err)
	}
}

// TestSignOutAll ends every session of the user, on every device, and
// leaves other users' sessions alone.
func TestSignOutAll(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t)
	ctx := context.Background()
	c := auth.Credentials{Email: "everywhere@example.com", Password: "password-1x", Name: "E"}
	up, err := svc.SignUp(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	tokens := []string{up.Token}
	for range 30 {
		in, err := svc.SignIn(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, in.Token)
	}
	other, err := svc.SignUp(ctx, auth.Credentials{Email: "bystander@example.com", Password: "password-1x", Name: "B"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := svc.SignOutAll(ctx, tokens[3])
	if err != nil || n != len(tokens) {
		t.Fatalf("SignOutAll = %d, %v; want %d", n, err, len(tokens))
	}
	for i, tok := range tokens {
		if _, _, err := svc.Authenticate(ctx, tok); errs.KindOf(err) != errs.Unauthenticated {
			t.Errorf("session %d after sign-out-all: %v", i, err)
		}
	}
	if _, _, err := svc.Authenticate(ctx, other.Token); err != nil {
		t.Errorf("another user's session: %v", err)
	}
	if _, err := svc.SignOutAll(ctx, tokens[0]); errs.KindOf(err) != errs.Unauthenticated {
		t.Errorf("sign-out-all without a live session: %v", err)
	}
}

// TestSignOutAllEndsOtherCredentialsFirst: the hooks added with
// OnSignOutAll run with the user's id before the sessions go, and again
// after they are gone; a failing first run leaves the sessions, so that
// the request can be retried.
func TestSignOutAllEndsOtherCredentialsFirst(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t)
	ctx := context.Background()
	up, err := svc.SignUp(ctx, auth.Credentials{Email: "hooks@example.com", Password: "password-1x", Name: "H"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	fail := true
	svc.OnSignOutAll(func(ctx context.Context, userID string) error {
		_, _, err := svc.Authenticate(ctx, up.Token)
		seen = append(seen, fmt.Sprintf("%s session=%v", userID, err == nil))
		if fail {
			return errs.E("test.revoke", errs.Unavailable, "STORAGE_UNAVAILABLE", "down")
		}
		return nil
	})
	if _, err := svc.SignOutAll(ctx, up.Token); errs.KindOf(err) != errs.Unavailable {
		t.Fatalf("with a failing hook: %v", err)
	}
	if _, _, err := svc.Authenticate(ctx, up.Token); err != nil {
		t.Errorf("the session after a failed sign-out-all: %v", err)
	}
	fail = false
	if n, err := svc.SignOutAll(ctx, up.Token); err != nil || n != 1 {
		t.Fatalf("retry: %d %v", n, err)
	}
	id := up.User.ID
	if want := []string{id + " session=true", id + " session=true", id + " session=false"}; !slices.Equal(seen, want) {
		t.Errorf("hook calls = %v, want %v", seen, want)
	}
}
