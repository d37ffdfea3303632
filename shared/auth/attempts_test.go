package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/store"
)

// newAttempts serves the auth routes with the credential limits of a,
// counted in the embedded engine's RateLimits table on the service's test
// clock. calls returns the DynamoDB calls made since its last call.
func newAttempts(t *testing.T, a ratelimit.Attempts) (http.Handler, *auth.Service, func() int64) {
	t.Helper()
	svc, db, clk := newService(t)
	a.Limiter = ratelimit.New(store.NewRateLimits(db.DB, db.RateLimits()), clk.Now)
	h := httpapi.Stack(auth.Routes(svc, a), httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	calls := func() int64 { n := db.Counter.Count(); db.Counter.Reset(); return n }
	return h, svc, calls
}

func credentialRequest(t *testing.T, h http.Handler, path, addr string, c auth.Credentials) *httptest.ResponseRecorder {
	t.Helper()
	b, _ := json.Marshal(c)
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(b)))
	r.Header.Set("Content-Type", "application/json")
	r.RemoteAddr = addr + ":40000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func expectCode(t *testing.T, what string, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	var body struct{ Code string }
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != status || body.Code != code {
		t.Fatalf("%s: %d %s, want %d %s", what, w.Code, w.Body, status, code)
	}
	if status == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
		t.Errorf("%s: 429 without Retry-After", what)
	}
}

// TestSignInGuessingIsLimited is the report's reproduction: 40 wrong
// passwords and then the right one. Past the per-email limit every
// attempt, the right password included, is refused 429 RATE_LIMITED
// before any password is checked (one counter update, no read of the
// user), from any address; other emails are not affected.
func TestSignInGuessingIsLimited(t *testing.T) {
	t.Parallel()
	h, _, calls := newAttempts(t, ratelimit.Attempts{SignInPerEmail: ratelimit.MustParse("sign-ins", "5/m")})
	victim := auth.Credentials{Email: "victim@example.com", Password: "correct horse", Name: "V"}
	expectCode(t, "sign-up", credentialRequest(t, h, "/api/auth/sign-up/email", "198.51.100.1", victim), http.StatusOK, "")
	wrong := victim
	wrong.Password = "wrong password"
	for i := range 40 {
		calls()
		w := credentialRequest(t, h, "/api/auth/sign-in/email", "203.0.113."+string(rune('1'+i%9)), wrong)
		if i < 5 {
			expectCode(t, "wrong password", w, http.StatusUnauthorized, "INVALID_CREDENTIALS")
			continue
		}
		expectCode(t, "guess past the limit", w, http.StatusTooManyRequests, ratelimit.Code)
		if n := calls(); n != 1 {
			t.Fatalf("a refused attempt cost %d DynamoDB calls, want 1 (the counter, no credential read)", n)
		}
	}
	expectCode(t, "the right password after 40 guesses", credentialRequest(t, h, "/api/auth/sign-in/email", "198.51.100.1", victim),
		http.StatusTooManyRequests, ratelimit.Code)

	other := auth.Credentials{Email: "other@example.com", Password: "another secret", Name: "O"}
	expectCode(t, "another user's sign-up", credentialRequest(t, h, "/api/auth/sign-up/email", "198.51.100.2", other), http.StatusOK, "")
	expectCode(t, "another user's sign-in", credentialRequest(t, h, "/api/auth/sign-in/email", "198.51.100.2", other), http.StatusOK, "")
}

// TestCredentialLimitsPerAddress: sign-ins and sign-ups are limited per
// client address (the IP of RemoteAddr, whatever X-Forwarded-For says),
// each address counted apart.
func TestCredentialLimitsPerAddress(t *testing.T) {
	t.Parallel()
	h, _, _ := newAttempts(t, ratelimit.Attempts{
		SignInPerAddress: ratelimit.MustParse("sign-ins", "3/m"),
		SignUpPerAddress: ratelimit.MustParse("sign-ups", "2/m"),
	})
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		c := auth.Credentials{Email: "user" + string(rune('a'+i)) + "@example.com", Password: "password one", Name: "U"}
		w := credentialRequest(t, h, "/api/auth/sign-up/email", "192.0.2.7", c)
		if w.Code != want {
			t.Fatalf("sign-up %d from one address: %d %s, want %d", i+1, w.Code, w.Body, want)
		}
	}
	expectCode(t, "sign-up from another address", credentialRequest(t, h, "/api/auth/sign-up/email", "192.0.2.8",
		auth.Credentials{Email: "userz@example.com", Password: "password one", Name: "U"}), http.StatusOK, "")

	// Sign-ins of many emails from one address.
	for i := range 3 {
		c := auth.Credentials{Email: "nobody" + string(rune('a'+i)) + "@example.com", Password: "password one"}
		expectCode(t, "sign-in under the address limit", credentialRequest(t, h, "/api/auth/sign-in/email", "192.0.2.9", c),
			http.StatusUnauthorized, "INVALID_CREDENTIALS")
	}
	b, _ := json.Marshal(auth.Credentials{Email: "usera@example.com", Password: "password one"})
	r := httptest.NewRequest(http.MethodPost, "/api/auth/sign-in/email", strings.NewReader(string(b)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Forwarded-For", "192.0.2.200")
	r.RemoteAddr = "192.0.2.9:40000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	expectCode(t, "fourth sign-in from the address, X-Forwarded-For set", w, http.StatusTooManyRequests, ratelimit.Code)
	expectCode(t, "sign-in from another address", credentialRequest(t, h, "/api/auth/sign-in/email", "192.0.2.10",
		auth.Credentials{Email: "usera@example.com", Password: "password one"}), http.StatusOK, "")
}

// TestHashingIsBounded: with every hashing slot of the instance taken,
// a sign-in or sign-up waits for one and, when none frees in time, is
// refused 503 SERVICE_UNAVAILABLE with a Retry-After instead of hashing;
// once slots free, both work.
func TestHashingIsBounded(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t)
	ctx := context.Background()
	c := auth.Credentials{Email: "busy@example.com", Password: "password one", Name: "B"}
	release := svc.HoldHashing(time.Millisecond)
	for name, call := range map[string]func() error{
		"sign-up": func() error { _, err := svc.SignUp(ctx, c); return err },
		"sign-in": func() error { _, err := svc.SignIn(ctx, c); return err },
	} {
		err := call()
		var e *errs.Error
		if !errs.Is(err, errs.Unavailable) || !errors.As(err, &e) || e.Code != "SERVICE_UNAVAILABLE" || e.RetryAfter < 1 {
			t.Errorf("%s with every hashing slot taken: %v, want Unavailable SERVICE_UNAVAILABLE with RetryAfter", name, err)
		}
	}
	release()
	if _, err := svc.SignUp(ctx, c); err != nil {
		t.Fatalf("sign-up once slots are free: %v", err)
	}
	if _, err := svc.SignIn(ctx, c); err != nil {
		t.Fatalf("sign-in once slots are free: %v", err)
	}
}
