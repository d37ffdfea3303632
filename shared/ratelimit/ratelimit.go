// Package ratelimit enforces per-user request quotas in fixed time windows
// counted in DynamoDB (store.RateLimits), so that a limit holds across every
// Lambda instance serving the user.
//
// A Rule names what is limited ("messages", "streams", "runs") and has one
// or more windows ("30/m", or "30/m,500/h"). Each limited request costs one
// atomic UpdateItem per window: the count of the user's current window is
// incremented and compared with the window's limit. Over the limit, the
// request is refused with 429 RATE_LIMITED and a Retry-After of the seconds
// left in the window. A failing count (storage throttled or unavailable)
// lets the request through with a logged warning: the limiter protects the
// service's budget, and must not turn a storage blip into an outage of the
// endpoints it guards.
//
// Limit is middleware that reads the user from auth.Require's session, so
// it sits inside Require:
//
//	authn.Require(limiter.Limit(rule)(handler))
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
)

// Code is the machine code of a refused request (429).
const Code = "RATE_LIMITED"

// MaxWindows bounds the windows of one rule; each costs a DynamoDB call per
// limited request.
const MaxWindows = 3

// Window is one fixed window of a rule: at most Limit requests per Per.
type Window struct {
	Limit int
	Per   time.Duration // time.Second, time.Minute or time.Hour
}

// Rule is a named quota. Name is part of the counters' keys: routes limited
// by rules of the same name share one count. A rule without windows is
// disabled.
type Rule struct {
	Name    string
	Windows []Window
}

// Enabled reports whether r limits anything.
func (r Rule) Enabled() bool { return len(r.Windows) > 0 }

// String returns r's windows in the form Parse reads ("30/m,500/h"), "0"
// when r is disabled.
func (r Rule) String() string {
	if !r.Enabled() {
		return "0"
	}
	parts := make([]string, len(r.Windows))
	for i, w := range r.Windows {
		parts[i] = strconv.Itoa(w.Limit) + "/" + unitOf(w.Per)
	}
	return strings.Join(parts, ",")
}

var units = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

var unitNames = map[time.Duration]string{time.Second: "second", time.Minute: "minute", time.Hour: "hour"}

func unitOf(d time.Duration) string {
	for u, v := range units {
		if v == d {
			return u
		}
	}
	return d.String()
}

// Parse reads the rule called name from spec: "0" (or "off") disables it;
// otherwise one to MaxWindows comma-separated windows "N/s", "N/m" or
// "N/h" (N from 1 to 1,000,000), each with a different unit, e.g. "30/m"
// or "30/m,500/h".
func Parse(name, spec string) (Rule, error) {
	r := Rule{Name: name}
	spec = strings.TrimSpace(spec)
	if spec == "0" || strings.EqualFold(spec, "off") {
		return r, nil
	}
	bad := fmt.Errorf("must be 0 (off) or up to %d comma-separated limits like 30/m (N per s, m or h; e.g. 30/m,500/h), got %q", MaxWindows, spec)
	seen := map[time.Duration]bool{}
	for _, part := range strings.Split(spec, ",") {
		n, unit, ok := strings.Cut(strings.TrimSpace(part), "/")
		per, known := units[strings.TrimSpace(unit)]
		limit, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || !known || err != nil || limit < 1 || limit > 1_000_000 || seen[per] {
			return Rule{}, bad
		}
		seen[per] = true
		r.Windows = append(r.Windows, Window{Limit: limit, Per: per})
	}
	if len(r.Windows) > MaxWindows {
		return Rule{}, bad
	}
	return r, nil
}

// MustParse is Parse for rules known to be valid; it panics otherwise.
func MustParse(name, spec string) Rule {
	r, err := Parse(name, spec)
	if err != nil {
		panic("ratelimit: " + name + ": " + err.Error())
	}
	return r
}

// Counter counts requests in fixed windows. store.RateLimits implements it
// on DynamoDB.
type Counter interface {
	// Hit counts one request of userID under rule in the window that
	// starts at start and lasts window, and returns the window's count
	// including this request.
	Hit(ctx context.Context, userID, rule string, start time.Time, window time.Duration) (int64, error)
}

// Limiter checks requests against rules. A nil *Limiter limits nothing.
type Limiter struct {
	counter Counter
	now     func() time.Time
}

// New returns a Limiter counting with c on the clock now (nil: time.Now).
func New(c Counter, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{counter: c, now: now}
}

// Allow counts one request of userID (or any other key, see Attempts) under rule and returns nil when it is
// within every window of the rule, or a RateLimited error (code
// RATE_LIMITED, RetryAfter the whole seconds left in the exceeded window,
// at least 1, and a message naming the limit). Windows are checked in
// order and the first exceeded one refuses the request, without counting
// it in the later ones. A counting failure allows the request and is
// logged as a warning (fail open). A nil Limiter or a disabled rule allows
// everything without a call.
func (l *Limiter) Allow(ctx context.Context, userID string, rule Rule) error {
	const op = "ratelimit.Allow"
	if l == nil || !rule.Enabled() {
		return nil
	}
	if userID == "" {
		// Limit applied outside auth.Require: a wiring bug, made loud.
		return errs.E(op, errs.Internal, "", "internal error").WithCause(fmt.Errorf("rule %s: no signed-in user in the context; apply Limit inside auth.Require", rule.Name))
	}
	now := l.now()
	for _, w := range rule.Windows {
		per := int64(w.Per / time.Second)
		startUnix := now.Unix() - mod(now.Unix(), per)
		start := time.Unix(startUnix, 0).UTC()
		n, err := l.counter.Hit(ctx, userID, rule.Name, start, w.Per)
		if err != nil {
			logging.FromContext(ctx).WarnContext(ctx, "rate limit not checked: counting failed; request allowed (fail open)",
				"rule", rule.Name, "window", rule.String(), "err", err.Error())
			return nil
		}
		if n > int64(w.Limit) {
			left := start.Add(w.Per).Sub(now)
			retry := max(int((left+time.Second-1)/time.Second), 1)
			e := errs.E(op, errs.RateLimited, Code, fmt.Sprintf("rate limit exceeded: at most %d %s per %s; retry in %d s", w.Limit, rule.Name, unitNames[w.Per], retry))
			e.RetryAfter = retry
			return e
		}
	}
	return nil
}

// mod is a modulo that is never negative (times before 1970 included).
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// Limit returns middleware that refuses the signed-in user's requests over
// rule with 429 (see Allow). It needs the session auth.Require puts in the
// context, so it goes inside Require:
//
//	authn.Require(limiter.Limit(rule)(handler))
//
// With a nil Limiter or a disabled rule it returns handlers unchanged.
func (l *Limiter) Limit(rule Rule) httpapi.Middleware {
	if l == nil || !rule.Enabled() {
		return func(next http.Handler) http.Handler { return next }
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := l.Allow(r.Context(), auth.UserID(r.Context()), rule); err != nil {
				httpapi.WriteError(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Attempts limits the credential endpoints (auth.Attempts) on a Limiter:
// sign-ins per email and per client address, sign-ups per client address.
// The counters are keyed by kind and value ("email:<sha-256 of the
// address>", "addr:<ip>"), in the same table as the users' quotas; an
// email is hashed so that the table holds no address in clear.
type Attempts struct {
	Limiter *Limiter
	// SignInPerEmail, SignInPerAddress and SignUpPerAddress are the rules;
	// a disabled rule limits nothing.
	SignInPerEmail, SignInPerAddress, SignUpPerAddress Rule
}

// SignIn counts a sign-in attempt for email from addr under both rules
// (the address first: an address over its limit is refused without
// spending the email's budget, so one flooding address cannot lock out
// the emails it guesses at for long). It returns the first refusal, a
// RateLimited error (see Allow).
func (a Attempts) SignIn(ctx context.Context, email, addr string) error {
	if err := a.Limiter.Allow(ctx, "addr:"+addr, a.SignInPerAddress); err != nil {
		return err
	}
	if email == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(email))
	return a.Limiter.Allow(ctx, "email:"+hex.EncodeToString(sum[:16]), a.SignInPerEmail)
}

// SignUp counts a sign-up attempt from addr (see Allow).
func (a Attempts) SignUp(ctx context.Context, addr string) error {
	return a.Limiter.Allow(ctx, "addr:"+addr, a.SignUpPerAddress)
}
