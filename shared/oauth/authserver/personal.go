package authserver

import (
	"context"
	"github.com/workflowchat/service/shared/audit"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/oauth"
)

// Bounds of personal access tokens.
const (
	MaxPersonalTokens    = 20
	MaxTokenNameLen      = 100
	MaxTokenLifetimeDays = 365
)

// TokenRequest is the body of POST /api/users/{userId}/tokens.
type TokenRequest struct {
	Name          string `json:"name"`
	ExpiresInDays *int   `json:"expiresInDays"`
}

// Validate requires a name of 1-100 characters on one line (no control
// characters) and a lifetime of 1-365 days.
func (t TokenRequest) Validate() error {
	var f errs.FieldErrors
	switch n := utf8.RuneCountInString(strings.TrimSpace(t.Name)); {
	case n == 0:
		f.Add("name", "is required")
	case n > MaxTokenNameLen:
		f.Add("name", "must be at most %d characters", MaxTokenNameLen)
	default:
		f.OneLine("name", t.Name)
	}
	switch {
	case t.ExpiresInDays == nil:
		f.Add("expiresInDays", "is required")
	case *t.ExpiresInDays < 1 || *t.ExpiresInDays > MaxTokenLifetimeDays:
		f.Add("expiresInDays", "must be an integer from 1 to %d", MaxTokenLifetimeDays)
	}
	return f.Err("oauth.TokenRequest")
}

// CreatedToken is the answer to a token creation: the only time the token
// itself is shown.
type CreatedToken struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// CreatePersonalToken creates a token for userID. Conflict
// TOO_MANY_TOKENS when the user has MaxPersonalTokens unexpired tokens:
// the store counts them in the transaction that creates the token, so
// concurrent creations never pass the cap.
func (s *Server) CreatePersonalToken(ctx context.Context, userID string, in TokenRequest) (CreatedToken, error) {
	const op = "oauth.CreatePersonalToken"
	if err := in.Validate(); err != nil {
		return CreatedToken{}, err
	}
	now := s.now().UTC()
	token := newSecret(oauth.PersonalTokenPrefix)
	t := oauth.PersonalToken{ID: uuid.NewString(), UserID: userID, Name: strings.TrimSpace(in.Name), Hash: oauth.HashSecret(token),
		CreatedAt: now, ExpiresAt: now.Add(time.Duration(*in.ExpiresInDays) * 24 * time.Hour)}
	if err := s.store.CreatePersonalToken(ctx, t, MaxPersonalTokens); err != nil {
		return CreatedToken{}, errs.Wrap(op, err)
	}
	return CreatedToken{ID: t.ID, Name: t.Name, Token: token, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}, nil
}

// PersonalTokens lists userID's unexpired tokens, newest first, without
// the tokens themselves.
func (s *Server) PersonalTokens(ctx context.Context, userID string) ([]oauth.PersonalToken, error) {
	ts, err := s.store.UserPersonalTokens(ctx, userID)
	if err != nil {
		return nil, errs.Wrap("oauth.PersonalTokens", err)
	}
	now := s.now()
	out := []oauth.PersonalToken{}
	for i := len(ts) - 1; i >= 0; i-- {
		if now.Before(ts[i].ExpiresAt) {
			out = append(out, ts[i])
		}
	}
	return out, nil
}

// Connection is an OAuth client holding live grants of a user.
type Connection struct {
	ClientID   string    `json:"clientId"`
	ClientName string    `json:"clientName"`
	Scope      string    `json:"scope"`
	Grants     int       `json:"grants"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt"`
}

// Connections lists the clients holding live grants of userID, most
// recently used first.
func (s *Server) Connections(ctx context.Context, userID string) ([]Connection, error) {
	gs, err := s.store.UserGrants(ctx, userID)
	if err != nil {
		return nil, errs.Wrap("oauth.Connections", err)
	}
	now := s.now()
	by := map[string]*Connection{}
	out := []Connection{}
	for _, g := range gs {
		if !g.Live(now) {
			continue
		}
		c := by[g.ClientID]
		if c == nil {
			c = &Connection{ClientID: g.ClientID, ClientName: g.ClientName, Scope: g.Scope, CreatedAt: g.CreatedAt, LastUsedAt: g.LastUsedAt}
			by[g.ClientID] = c
		}
		c.Grants++
		if g.CreatedAt.Before(c.CreatedAt) {
			c.CreatedAt = g.CreatedAt
		}
		if g.LastUsedAt.After(c.LastUsedAt) {
			c.LastUsedAt = g.LastUsedAt
		}
	}
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Connection) int { return b.LastUsedAt.Compare(a.LastUsedAt) })
	return out, nil
}

// Disconnect ends the unredeemed codes and revokes every live grant of
// clientID for userID: each of the client's tokens for the user stops
// working, and no code approved before redeems. NotFound
// CONNECTION_NOT_FOUND when the client holds no grant.
func (s *Server) Disconnect(ctx context.Context, userID, clientID string) error {
	const op = "oauth.Disconnect"
	// The client's unredeemed codes first, so that none becomes a grant
	// the listing below misses.
	if err := s.store.EndCodes(ctx, userID, clientID); err != nil {
		return errs.Wrap(op, err)
	}
	gs, err := s.store.UserGrants(ctx, userID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	now := s.now().UTC()
	n := 0
	for _, g := range gs {
		if g.ClientID == clientID && g.Live(now) {
			if err := s.store.RevokeGrant(ctx, g.ID, now); err != nil {
				return errs.Wrap(op, err)
			}
			n++
		}
	}
	if n == 0 {
		return errs.E(op, errs.NotFound, "CONNECTION_NOT_FOUND", "no such connection")
	}
	return nil
}

// userPath checks the {userId} path parameter (a UUID, else 400) and that
// it is the signed-in user (else 403).
func userPath(r *http.Request, op string) (string, error) {
	id, err := httpapi.PathUUID(r, "userId")
	if err != nil {
		return "", err
	}
	if err := auth.Authorize(r.Context(), op, id); err != nil {
		return "", err
	}
	return id, nil
}

// handleCreateToken checks the path (400 INVALID_ID, 403 another user's)
// before it reads the body, as every route with a body does, so that a
// malformed or foreign path is told as such whatever the body.
func (s *Server) handleCreateToken() http.Handler {
	create := httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in TokenRequest) (CreatedToken, error) {
		t, err := s.CreatePersonalToken(r.Context(), r.PathValue("userId"), in)
		if err == nil {
			s.auth.Audit().Record(r.Context(), r.PathValue("userId"), audit.TokenCreated, map[string]any{"tokenId": t.ID, "name": t.Name})
		}
		return t, err
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := userPath(r, "oauth.CreateToken"); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		create.ServeHTTP(w, r)
	})
}

func (s *Server) handleListTokens() http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) ([]oauth.PersonalToken, error) {
		id, err := userPath(r, "oauth.ListTokens")
		if err != nil {
			return nil, err
		}
		return s.PersonalTokens(r.Context(), id)
	})
}

func (s *Server) handleDeleteToken() http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		const op = "oauth.DeleteToken"
		tokenID, err := httpapi.PathUUID(r, "tokenId")
		if err != nil {
			return httpapi.Empty{}, err
		}
		id, err := userPath(r, op)
		if err != nil {
			return httpapi.Empty{}, err
		}
		if err := s.store.DeletePersonalToken(r.Context(), id, tokenID); err != nil {
			return httpapi.Empty{}, errs.Wrap(op, err)
		}
		s.auth.Audit().Record(r.Context(), id, audit.TokenRevoked, map[string]any{"tokenId": tokenID})
		return httpapi.Empty{}, nil
	})
}

func (s *Server) handleListConnections() http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) ([]Connection, error) {
		id, err := userPath(r, "oauth.ListConnections")
		if err != nil {
			return nil, err
		}
		return s.Connections(r.Context(), id)
	})
}

func (s *Server) handleDeleteConnection() http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		const op = "oauth.DeleteConnection"
		clientID := r.PathValue("clientId") // unescaped: a URL client id arrives percent-encoded
		if clientID == "" || len(clientID) > MaxURILen {
			return httpapi.Empty{}, errs.Fields(op, errs.FieldError{Field: "clientId", Message: "must be a client id"})
		}
		id, err := userPath(r, op)
		if err != nil {
			return httpapi.Empty{}, err
		}
		if err := s.Disconnect(r.Context(), id, clientID); err != nil {
			return httpapi.Empty{}, err
		}
		s.auth.Audit().Record(r.Context(), id, audit.OAuthRevoked, map[string]any{"clientId": clientID})
		return httpapi.Empty{}, nil
	})
}
