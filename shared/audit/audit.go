// Package audit is a user's log of security events: sign-ins (failed ones
// too), sign-out-all, personal access tokens, OAuth consents and
// revocations, remote tool servers, trigger secret rotations, tool policy
// changes, data exports and account deletion. The log is append-only (no
// route changes an event) and each event is kept for Retention.
//
// An event is recorded right after its action succeeded (or, for a failed
// sign-in, failed), by the service that did it. The request's origin
// (address and user agent) reaches the recorder through the context
// (httpapi.OriginFrom; the standard middleware stack puts it there).
package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// Type is the kind of an event.
type Type string

// The event types.
const (
	SignIn               Type = "sign_in"
	SignInFailed         Type = "sign_in_failed"
	SignOutAll           Type = "sign_out_all"
	TokenCreated         Type = "token_created"
	TokenRevoked         Type = "token_revoked"
	OAuthConsent         Type = "oauth_consent"
	OAuthRevoked         Type = "oauth_revoked"
	MCPServerAdded       Type = "mcp_server_added"
	MCPServerRemoved     Type = "mcp_server_removed"
	MCPServerAuthorized  Type = "mcp_server_authorized"
	TriggerSecretRotated Type = "trigger_secret_rotated"
	PolicyChanged        Type = "policy_changed"
	ExportRequested      Type = "export_requested"
	DeletionRequested    Type = "deletion_requested"
)

// Retention is how long an event is kept (the TTL of its item).
const Retention = 400 * 24 * time.Hour

// Bounds of what an event records from a request.
const (
	MaxUserAgent = 512
	// MaxDetail bounds each string value of an event's details.
	MaxDetail = 256
	maxIP     = 64
)

// Event is one entry of a user's log.
type Event struct {
	ID        string         `json:"id"`
	Type      Type           `json:"type"`
	At        time.Time      `json:"at"`
	IP        string         `json:"ip"`
	UserAgent string         `json:"userAgent"`
	Details   map[string]any `json:"details"`
}

// Store keeps the events.
type Store interface {
	// AppendAudit adds e to userID's log, to be deleted after expires.
	AppendAudit(ctx context.Context, userID string, e Event, expires time.Time) error
	// AuditPage returns up to limit of userID's events, newest first,
	// after the one cursor names (empty: the newest), and the cursor of
	// the next page (empty on the last). Invalid INVALID_PAGINATION for a
	// cursor it did not return.
	AuditPage(ctx context.Context, userID string, limit int, cursor string) ([]Event, string, error)
}

// Log records and lists events. A nil *Log records nothing, for services
// built without one (tests of other concerns).
type Log struct {
	store  Store
	now    func() time.Time
	logger *slog.Logger
}

// NewLog returns a Log over store. now nil means time.Now; logger nil
// means slog.Default().
func NewLog(store Store, now func() time.Time, logger *slog.Logger) *Log {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Log{store: store, now: now, logger: logger}
}

// Record appends an event of typ to userID's log, with the origin of the
// request ctx carries (Middleware) and details (string values cut to
// MaxDetail). It reports no error: the action it records has happened,
// so a failed write is logged (with the user and type, never the details)
// rather than turned into a failure of the action.
func (l *Log) Record(ctx context.Context, userID string, typ Type, details map[string]any) {
	if l == nil || userID == "" {
		return
	}
	o := httpapi.OriginFrom(ctx)
	now := l.now().UTC()
	e := Event{ID: newID(now), Type: typ, At: now, IP: cut(o.IP, maxIP), UserAgent: cut(o.UserAgent, MaxUserAgent), Details: clean(details)}
	// The action's own request may be ending; the event must still land.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := l.store.AppendAudit(ctx, userID, e, now.Add(Retention)); err != nil {
		l.logger.ErrorContext(ctx, "audit: event not recorded", "user", userID, "type", string(typ), "err", err)
	}
}

// Page is one page of a user's log.
type Page struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// List returns a page of userID's events, newest first. The caller checks
// that userID is the signed-in user. Invalid INVALID_PAGINATION.
func (l *Log) List(ctx context.Context, userID string, limit int, cursor string) (Page, error) {
	evs, next, err := l.store.AuditPage(ctx, userID, limit, cursor)
	if err != nil {
		return Page{}, errs.Wrap("audit.List", err)
	}
	if evs == nil {
		evs = []Event{}
	}
	return Page{Events: evs, NextCursor: next}, nil
}

// newID returns an event id that orders by time: the millisecond in hex,
// then 64 random bits.
func newID(t time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%012x", t.UnixMilli()) + hex.EncodeToString(b[:])
}

// IDLen is the length of an event id.
const IDLen = 28

func clean(d map[string]any) map[string]any {
	out := make(map[string]any, len(d))
	for k, v := range d {
		if s, ok := v.(string); ok {
			v = cut(s, MaxDetail)
		}
		out[k] = v
	}
	return out
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
