package auth

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
)

// CookieName is the session cookie's name.
const CookieName = "session_token"

type ctxKey struct{}

// WithSession returns a copy of ctx carrying s.
func WithSession(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// FromContext returns the session that Require put in ctx.
func FromContext(ctx context.Context) (Session, bool) {
	s, ok := ctx.Value(ctxKey{}).(Session)
	return s, ok
}

type actingKey struct{}

// ActingFor returns a copy of ctx in which UserID reports userID: work
// done for a user outside any request of theirs (a durable workflow run
// in the runner function) is checked against that user's tool policies
// and budget as the request that started it would be. It grants nothing
// by itself: there is no session in it.
func ActingFor(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, actingKey{}, userID)
}

// UserID returns the signed-in user's id from ctx (Require), else the user
// ActingFor named, else "".
func UserID(ctx context.Context) string {
	if s, ok := FromContext(ctx); ok {
		return s.User.ID
	}
	id, _ := ctx.Value(actingKey{}).(string)
	return id
}

// Require lets a request through only with a live session cookie: it puts
// the session into the request's context (FromContext) and re-issues the
// cookie when the session was renewed. Otherwise it answers 401
// UNAUTHORIZED. Every protected handler sits behind it.
func (s *Service) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var token string
		if c, err := r.Cookie(CookieName); err == nil {
			token = c.Value
		}
		sess, renewed, err := s.Authenticate(r.Context(), token)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if renewed {
			SetCookie(w, r, token, sess.ExpiresAt, sess.RenewedAt)
		}
		ctx := WithSession(r.Context(), sess)
		ctx = logging.WithLogger(ctx, logging.FromContext(ctx).With("userId", sess.User.ID))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// SetCookie sets the session cookie: HttpOnly, Path=/, SameSite=Lax, and
// Secure unless the request came over plain HTTP to localhost. Max-Age runs
// from issued, the time the session was created or last renewed.
func SetCookie(w http.ResponseWriter, r *http.Request, token string, expires, issued time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: token, Path: "/",
		MaxAge:   int(expires.Sub(issued).Seconds()),
		Expires:  expires.UTC(),
		HttpOnly: true, Secure: !plainLocalhost(r), SameSite: http.SameSiteLaxMode,
	})
}

// ClearCookie expires the session cookie in the browser.
func ClearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: "/", MaxAge: -1, Expires: time.Unix(0, 0),
		HttpOnly: true, Secure: !plainLocalhost(r), SameSite: http.SameSiteLaxMode,
	})
}

// plainLocalhost reports whether r reached us over plain HTTP on a loopback
// host name, the only case where a Secure cookie would not come back.
func plainLocalhost(r *http.Request) bool {
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Authorize checks that the signed-in user is ownerID: Forbidden
// otherwise. Call it only once the resource is known to exist, so that a
// missing resource is 404 before another user's resource is 403.
func Authorize(ctx context.Context, op, ownerID string) error {
	if uid := UserID(ctx); uid == "" || uid != ownerID {
		return errs.E(op, errs.Forbidden, "FORBIDDEN", "you do not have access to this resource")
	}
	return nil
}

// SelfPath answers, before next reads the body, 400 INVALID_ID when the
// {userId} path parameter is not a UUID and 403 FORBIDDEN when it is not
// the signed-in user: a path naming a user is decided by the path alone,
// so another user's path is 403 whatever the body. It belongs inside
// Require (it needs the session).
func SelfPath(next http.Handler) http.Handler {
	return httpapi.PathIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := Authorize(r.Context(), "auth.SelfPath", r.PathValue("userId")); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	}), "userId")
}

// Owned loads a resource and checks that the signed-in user owns it, in
// the order docs/decisions.md gives: load's error first (a NotFound becomes 404),
// then ownership (403).
func Owned[T any](ctx context.Context, op string, load func(context.Context) (T, error), owner func(T) string) (T, error) {
	v, err := load(ctx)
	if err != nil {
		var zero T
		return zero, errs.Wrap(op, err)
	}
	if err := Authorize(ctx, op, owner(v)); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}
