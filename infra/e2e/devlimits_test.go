package e2e_test

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// makeRunEnv returns the variables `make run` sets for the dev server, read
// from the Makefile's own recipe (`make -n run`), with DATA_FILE emptied
// (in memory: the test's server keeps nothing).
func makeRunEnv(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	out, err := exec.Command("make", "-s", "-n", "-C", "../..", "run", "DATA_FILE=").Output()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	line, _, _ := strings.Cut(string(out), " go run ")
	var env []string
	for _, m := range regexp.MustCompile(`(\w+)='([^']*)'`).FindAllStringSubmatch(line, -1) {
		env = append(env, m[1]+"="+m[2])
	}
	if len(env) == 0 {
		t.Fatalf("no variables in make run's command: %q", out)
	}
	return env
}

// TestMakeRunLiftsPerAddressLimits: the dev server as `make run` starts it
// says that the per-address sign-up and sign-in limits are off, and takes
// a frontend suite's many sign-ups and sign-ins from one address (every
// local client is 127.0.0.1), while the per-email sign-in limit holds; a
// plain dev server keeps the limits and refuses the 11th sign-up of the
// minute with 429.
func TestMakeRunLiftsPerAddressLimits(t *testing.T) {
	t.Parallel()
	env := makeRunEnv(t)
	for _, want := range []string{"RATE_LIMIT_SIGN_UP_ADDRESS=0", "RATE_LIMIT_SIGN_IN_ADDRESS=0"} {
		if !strings.Contains(strings.Join(env, " "), want) {
			t.Fatalf("make run sets %v, want %s", env, want)
		}
	}

	t.Run("make run", func(t *testing.T) {
		t.Parallel()
		clock := newClockFile(t)
		srv := startServer(t, append(env, "DEV_CLOCK_FILE="+string(clock))...)
		if out := srv.stdout.String(); !strings.Contains(out, "sign-ups per address OFF, sign-ins per address OFF, sign-ins per email 5/m,30/h (per-address limits off") {
			t.Errorf("start-up output does not say the per-address limits are off:\n%s", out)
		}
		c := newClient(t, srv.API)
		for i := range 15 {
			signUpChatUser(t, c, fmt.Sprintf("suite-%d@example.com", i))
		}
		for i := range 15 {
			r := c.do("POST", "/api/auth/sign-in/email", map[string]string{"email": fmt.Sprintf("suite-%d@example.com", i), "password": "chat-password-1"})
			if r.Status != 200 {
				t.Fatalf("sign-in %d of 15 from one address: %d %s", i+1, r.Status, r.Body)
			}
		}
		// The per-email limit (5 a minute) still stops guessing: 11 wrong
		// passwords cannot all be checked, even across a minute's turn
		// (they start a minute of the server's clock: two minutes hold 10).
		clock.toStartOf(t, time.Minute)
		refused := 0
		for range 11 {
			r := c.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "suite-0@example.com", "password": "not the password"})
			if r.Status == 429 {
				refused++
			} else if r.Status != 401 {
				t.Fatalf("wrong password: %d %s", r.Status, r.Body)
			}
		}
		if refused == 0 {
			t.Error("11 wrong passwords for one email in a row were all checked: the per-email limit is off")
		}
	})

	t.Run("plain devserver", func(t *testing.T) {
		t.Parallel()
		clock := newClockFile(t)
		srv := startServer(t, "DEV_CLOCK_FILE="+string(clock))
		if out := srv.stdout.String(); !strings.Contains(out, "sign-ups per address 10/m,100/h, sign-ins per address 30/m,300/h") || strings.Contains(out, "OFF") {
			t.Errorf("start-up output of a plain dev server:\n%s", out)
		}
		c := newClient(t, srv.API)
		clock.toStartOf(t, time.Minute) // the limits count per minute of the server's clock
		for i := range 10 {
			signUpChatUser(t, c, fmt.Sprintf("plain-%d@example.com", i))
		}
		r := c.do("POST", "/api/auth/sign-up/email", map[string]string{"email": "plain-10@example.com", "password": "chat-password-1", "name": "eleventh"})
		expectError(t, "the 11th sign-up of the minute from one address", r, 429, "RATE_LIMITED")
	})
}
