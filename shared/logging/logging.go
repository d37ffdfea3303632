// Package logging builds the service's structured loggers (log/slog) and
// carries a request-scoped logger in a context.
//
// Loggers redact attributes whose keys name secrets (passwords, tokens,
// cookies, keys, authorization headers) whatever their nesting, so a careless
// log call cannot leak them.
package logging

import (
	"context"
	"io"
	"log/slog"
	"strings"
)

// Format selects the log encoding.
type Format string

// The supported formats: JSON in Lambda (CloudWatch parses it), text locally.
const (
	JSON Format = "json"
	Text Format = "text"
)

// New returns a logger writing in format f at level to w, with secret
// attributes redacted.
func New(w io.Writer, f Format, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: redact}
	if f == Text {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Redacted is the value logged in place of a secret.
const Redacted = "[REDACTED]"

var secretKeys = []string{"password", "token", "cookie", "secret", "authorization", "service_key", "servicekey", "x-service-key", "api_key", "apikey"}

// IsSecretKey reports whether an attribute or header named key holds a
// secret that must never be logged.
func IsSecretKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func redact(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindGroup && IsSecretKey(a.Key) {
		return slog.String(a.Key, Redacted)
	}
	return a
}

type ctxKey struct{}

// WithLogger returns a copy of ctx carrying l.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// FromContext returns the logger carried by ctx, or slog.Default().
func FromContext(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(ctxKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
