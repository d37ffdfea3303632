package e2e_test

import (
	"testing"
	"time"
)

// TestSignInGuessing is the report's reproduction through the dev server
// binary with its default per-email limit: 40 wrong passwords for one
// email, then the right one. The attempts past the limit (5 a minute, 30
// an hour) are refused 429 RATE_LIMITED with Retry-After, the right
// password included, while another user signs in normally. Every client
// here has the same address, so the per-address limit is off (the auth
// package's tests cover it).
func TestSignInGuessing(t *testing.T) {
	t.Parallel()
	clock := newClockFile(t)
	srv := startServer(t, "RATE_LIMIT_SIGN_IN_ADDRESS=0", "DEV_CLOCK_FILE="+string(clock))
	victim, other := newClient(t, srv.API), newClient(t, srv.API)
	signUpChatUser(t, victim, "guess-victim@example.com")
	signUpChatUser(t, other, "guess-other@example.com")

	// The limits count per minute of the server's clock, and an attempt
	// the minute window refuses is not counted in the hour's: keep the
	// attempts and the final one inside one minute of it.
	clock.toStartOf(t, time.Minute)
	attacker := newClient(t, srv.API)
	allowed := 0
	for range 40 {
		r := attacker.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "guess-victim@example.com", "password": "not the password"})
		switch r.Status {
		case 401:
			allowed++
		case 429:
			if r.Header.Get("Retry-After") == "" {
				t.Fatalf("429 without Retry-After: %s", r.Body)
			}
		default:
			t.Fatalf("wrong password: %d %s", r.Status, r.Body)
		}
	}
	if allowed != 5 {
		t.Errorf("%d of 40 wrong passwords were checked, want 5 (5 a minute)", allowed)
	}
	r := attacker.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "guess-victim@example.com", "password": "chat-password-1"})
	expectError(t, "the right password after 40 guesses", r, 429, "RATE_LIMITED")

	if r := other.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "guess-other@example.com", "password": "chat-password-1"}); r.Status != 200 {
		t.Errorf("another user's sign-in: %d %s", r.Status, r.Body)
	}
}

// TestSignOutEverywhere: a user signed in on two devices signs out
// everywhere from one; both sessions end (401), another user's does not.
func TestSignOutEverywhere(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	laptop, phone, other := newClient(t, srv.API), newClient(t, srv.API), newClient(t, srv.API)
	signUpChatUser(t, laptop, "everywhere@example.com")
	signUpChatUser(t, other, "not-me@example.com")
	if r := phone.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "everywhere@example.com", "password": "chat-password-1"}); r.Status != 200 {
		t.Fatalf("sign-in on the phone: %d %s", r.Status, r.Body)
	}
	r := laptop.do("POST", "/api/auth/sign-out-all", nil)
	var out struct {
		Data struct {
			Success  bool `json:"success"`
			Sessions int  `json:"sessions"`
		}
	}
	r.decode(t, &out)
	if r.Status != 200 || !out.Data.Success || out.Data.Sessions != 2 {
		t.Fatalf("sign-out-all: %d %s", r.Status, r.Body)
	}
	for name, c := range map[string]*client{"laptop": laptop, "phone": phone} {
		expectError(t, name+" after sign-out-all", c.do("GET", "/api/auth/session", nil), 401, "UNAUTHORIZED")
	}
	if r := other.do("GET", "/api/auth/session", nil); r.Status != 200 {
		t.Errorf("another user's session: %d %s", r.Status, r.Body)
	}
}
