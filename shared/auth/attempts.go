package auth

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Attempts limits attempts at the credential endpoints. They are checked
// before any password is hashed, so a refused attempt costs one counter
// update, not an argon2id hash. ratelimit.Attempts implements it over the
// RateLimits table.
type Attempts interface {
	// SignIn counts a sign-in attempt for email (normalized; empty when the
	// request has none) from the client address addr. An error, normally
	// RateLimited RATE_LIMITED with RetryAfter, refuses the attempt.
	SignIn(ctx context.Context, email, addr string) error
	// SignUp counts a sign-up attempt from addr, as SignIn does.
	SignUp(ctx context.Context, addr string) error
}

// ClientAddress returns the address the credential limits count a request
// under: the IP of r.RemoteAddr. In Lambda that is API Gateway's
// requestContext sourceIp, the address of the connection API Gateway
// received (the lambdahttp adapters set it); locally the TCP peer. Headers
// a client can write (X-Forwarded-For, CloudFront-Viewer-Address) are
// never trusted: a caller reaching the API directly could set them to
// anything and escape every per-address limit.
func ClientAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// Hashing bounds of one instance. An argon2id hash takes 19 MiB and tens of
// milliseconds of CPU; without a bound, a flood of sign-ins exhausts the
// instance's memory and starves every other request of CPU.
const (
	// MaxHashing is the number of password hashes (sign-up) or verifications
	// (sign-in) one instance computes at once.
	MaxHashing = 4
	// MaxHashWait is how long a request waits for a hashing slot before it
	// is refused with 503 SERVICE_UNAVAILABLE and a Retry-After.
	MaxHashWait = 5 * time.Second
)

var errHashingBusy = &errs.Error{Op: "auth.hash", Kind: errs.Unavailable, Code: "SERVICE_UNAVAILABLE",
	Message: "too many sign-ins at once; retry shortly", RetryAfter: 1}

// acquireHashing takes one of the instance's hashing slots, waiting at most
// MaxHashWait and no longer than ctx. It returns the release function, or
// Unavailable when no slot freed in time.
func (s *Service) acquireHashing(ctx context.Context) (func(), error) {
	select {
	case s.hashing <- struct{}{}:
		return func() { <-s.hashing }, nil
	default:
	}
	t := time.NewTimer(s.hashWait)
	defer t.Stop()
	select {
	case s.hashing <- struct{}{}:
		return func() { <-s.hashing }, nil
	case <-ctx.Done():
		return nil, errHashingBusy
	case <-t.C:
		return nil, errHashingBusy
	}
}
