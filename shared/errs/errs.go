// Package errs defines the service's single error type. Every failure the
// service reports carries a Kind (what went wrong, which decides the HTTP
// status), a machine code (UPPER_SNAKE, part of the API contract), a message
// safe to show a client, and optionally the operation that failed and the
// underlying cause, which are for logs only.
//
// Domain packages create errors with E or the kind helpers and wrap errors
// they pass on with Wrap; exactly one function (httpapi.WriteError) turns an
// error into an HTTP response.
package errs

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Kind classifies an error. The zero value is Internal.
type Kind uint8

// The kinds of failure. Their HTTP statuses are fixed in httpapi.
const (
	Internal         Kind = iota // a bug or an unexpected dependency failure: 500
	Invalid                      // bad input: 400
	Unauthenticated              // no or invalid credentials: 401
	Forbidden                    // authenticated but not allowed: 403
	NotFound                     // the resource does not exist: 404
	Conflict                     // the request conflicts with current state: 409
	TooLarge                     // the request body is too large: 413
	RateLimited                  // too many requests: 429
	Unavailable                  // a dependency is unavailable; retrying may help: 503
	Timeout                      // an operation took too long: 504
	MethodNotAllowed             // the route exists but not for this method: 405
)

// UnsupportedMediaType: the request body is declared in a type the service
// does not take: 415.
const UnsupportedMediaType = MethodNotAllowed + 1

// PreconditionFailed: a conditional request's precondition (If-Match) does
// not hold: 412.
const PreconditionFailed = UnsupportedMediaType + 1

// LengthRequired: the request body must declare its length
// (Content-Length) and did not: 411.
const LengthRequired = PreconditionFailed + 1

var kindNames = [...]string{
	Internal:         "internal",
	Invalid:          "invalid",
	Unauthenticated:  "unauthenticated",
	Forbidden:        "forbidden",
	NotFound:         "not found",
	Conflict:         "conflict",
	TooLarge:         "too large",
	RateLimited:      "rate limited",
	Unavailable:      "unavailable",
	Timeout:          "timeout",
	MethodNotAllowed: "method not allowed",

	UnsupportedMediaType: "unsupported media type",
	PreconditionFailed:   "precondition failed",
	LengthRequired:       "length required",
}

// String returns a lower-case name for k.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// defaultCodes are the machine codes used when an error names none.
var defaultCodes = [...]string{
	Internal:         "INTERNAL_ERROR",
	Invalid:          "VALIDATION_FAILED",
	Unauthenticated:  "UNAUTHORIZED",
	Forbidden:        "FORBIDDEN",
	NotFound:         "NOT_FOUND",
	Conflict:         "CONFLICT",
	TooLarge:         "PAYLOAD_TOO_LARGE",
	RateLimited:      "RATE_LIMITED",
	Unavailable:      "SERVICE_UNAVAILABLE",
	Timeout:          "TIMEOUT",
	MethodNotAllowed: "METHOD_NOT_ALLOWED",

	UnsupportedMediaType: "UNSUPPORTED_MEDIA_TYPE",
	PreconditionFailed:   "PRECONDITION_FAILED",
	LengthRequired:       "LENGTH_REQUIRED",
}

// DefaultCode returns the machine code used for k when an error names none.
func (k Kind) DefaultCode() string {
	if int(k) < len(defaultCodes) {
		return defaultCodes[k]
	}
	return defaultCodes[Internal]
}

// FieldError describes one invalid input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is the service's error type.
type Error struct {
	// Op is the operation that failed, e.g. "auth.SignIn". For logs.
	Op string
	// Kind classifies the failure.
	Kind Kind
	// Code is the machine-readable code; empty means Kind.DefaultCode().
	Code string
	// Message is a human-readable detail safe to show a client.
	Message string
	// Details lists invalid fields, for Invalid errors.
	Details []FieldError
	// RetryAfter, when positive, is a hint in seconds for RateLimited and
	// Unavailable errors.
	RetryAfter int
	// Err is the underlying cause. For logs; never shown to a client.
	Err error
}

// E returns a new error of the given kind, code and client-safe message.
// An empty code means the kind's default code.
func E(op string, kind Kind, code, message string) *Error {
	return &Error{Op: op, Kind: kind, Code: code, Message: message}
}

// Error implements error. It includes the operation chain and the cause,
// so it is meant for logs.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(e.Kind.String())
	if code := e.CodeOrDefault(); code != "" {
		b.WriteString(" (" + code + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodeOrDefault returns e.Code, or the kind's default code when it is empty.
func (e *Error) CodeOrDefault() string {
	if e.Code != "" {
		return e.Code
	}
	return e.Kind.DefaultCode()
}

// WithCause returns a copy of e whose cause is err.
func (e *Error) WithCause(err error) *Error {
	c := *e
	c.Err = err
	return &c
}

// Wrap records that op failed with err. A *Error keeps its kind, code and
// message and gains op in front of its own; any other error becomes an
// Internal error with err as its cause. Wrap(op, nil) is nil.
func Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		c := *e
		if c.Op == "" {
			c.Op = op
		} else if op != "" {
			c.Op = op + ": " + c.Op
		}
		return &c
	}
	return &Error{Op: op, Kind: Internal, Err: err}
}

// KindOf returns the kind of the first *Error in err's chain, Internal when
// there is none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// CodeOf returns the code of the first *Error in err's chain, or
// Internal's default code when there is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.CodeOrDefault()
	}
	return Internal.DefaultCode()
}

// Is reports whether err has kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// Invalidf returns an Invalid error with the given code and message.
func Invalidf(op, code, format string, args ...any) *Error {
	return E(op, Invalid, code, fmt.Sprintf(format, args...))
}

// Fields returns an Invalid error with code VALIDATION_FAILED that lists the
// given field errors.
func Fields(op string, details ...FieldError) *Error {
	msg := "request validation failed"
	if len(details) == 1 {
		msg = details[0].Field + ": " + details[0].Message
	}
	return &Error{Op: op, Kind: Invalid, Code: "VALIDATION_FAILED", Message: msg, Details: details}
}

// Summarize joins the first three of details into one sentence ("field:
// message; field: message; ... and N more"), for a message that names
// them.
func Summarize(details []FieldError) string {
	var b strings.Builder
	for i, p := range details {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(details)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Field + ": " + p.Message)
	}
	return b.String()
}

// NotFoundf returns a NotFound error with the given code and message.
func NotFoundf(op, code, format string, args ...any) *Error {
	return E(op, NotFound, code, fmt.Sprintf(format, args...))
}

// Forbiddenf returns a Forbidden error with the given message.
func Forbiddenf(op, format string, args ...any) *Error {
	return E(op, Forbidden, "", fmt.Sprintf(format, args...))
}

// FieldErrors collects field validation failures.
type FieldErrors []FieldError

// Add records that field is invalid.
func (f *FieldErrors) Add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// OneLineMessage is the problem OneLine records.
const OneLineMessage = "must not contain control characters (line breaks, tabs, NUL, direction overrides)"

// HasControl reports whether s, its leading and trailing white space
// aside (which callers trim), holds a control character (IsControl).
func HasControl(s string) bool {
	return strings.ContainsFunc(strings.TrimSpace(s), IsControl)
}

// IsControl reports whether r has no place in one line of text a user
// names something with: a C0 or C1 control (a line break, a tab, a NUL,
// an escape), the Unicode line and paragraph separators (U+2028,
// U+2029), which break lines in many viewers, and the bidirectional
// embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069),
// which make a name read otherwise than it is spelled. Other format
// characters (the zero-width joiner of emoji sequences) are text.
func IsControl(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}

// OneLine records that field is invalid when s holds a control character
// (HasControl), and reports whether it did. Names and titles that users
// give are one line of text, shown in lists, logs, shares and exports.
func (f *FieldErrors) OneLine(field, s string) bool {
	if !HasControl(s) {
		return false
	}
	f.Add(field, "%s", OneLineMessage)
	return true
}

// Err returns an Invalid error (VALIDATION_FAILED) listing f, or nil when f
// is empty.
func (f FieldErrors) Err(op string) error {
	if len(f) == 0 {
		return nil
	}
	return Fields(op, f...)
}

// MessageOf returns the client-safe message of the first *Error in err's
// chain, or fallback when there is none or it has no message.
func MessageOf(err error, fallback string) string {
	var e *Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return fallback
}
