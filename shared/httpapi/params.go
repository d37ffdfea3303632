package httpapi

import (
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
)

// PathUUID returns the path parameter name of r, which must be a UUID in
// its canonical 36-character form. Otherwise it fails with INVALID_ID.
func PathUUID(r *http.Request, name string) (string, error) {
	v := r.PathValue(name)
	if !IsUUID(v) {
		e := errs.E("httpapi.PathUUID", errs.Invalid, "INVALID_ID", name+" must be a UUID")
		e.Details = []errs.FieldError{{Field: name, Message: "must be a UUID"}}
		return "", e
	}
	return v, nil
}

// IsUUID reports whether s is a UUID in canonical form
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, any case).
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// Page is a parsed limit/offset pagination request.
type Page struct {
	Limit  int
	Offset int
}

// Pagination bounds. MaxOffset bounds the work one list request can cause:
// serving a page reads the items before it, so a page never reads more
// than MaxOffset+MaxLimit items.
const (
	DefaultLimit = 20
	MaxLimit     = 100
	MaxOffset    = 10000
)

// ParsePage parses the limit (integer 1-100, default 20) and offset
// (integer 0-10000, default 0) query parameters. Anything else fails with
// INVALID_PAGINATION and a detail per bad parameter.
func ParsePage(r *http.Request) (Page, error) {
	p := Page{Limit: DefaultLimit}
	q := r.URL.Query()
	var bad errs.FieldErrors
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > MaxLimit {
			bad.Add("limit", "must be an integer from 1 to %d", MaxLimit)
		}
		p.Limit = n
	}
	if v, ok := q["offset"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 0 || n > MaxOffset {
			bad.Add("offset", "must be an integer from 0 to %d", MaxOffset)
		}
		p.Offset = n
	}
	if len(bad) > 0 {
		e := errs.Fields("httpapi.ParsePage", bad...)
		e.Code = "INVALID_PAGINATION"
		return Page{}, e
	}
	return p, nil
}

// End returns Offset+Limit, the number of items up to the end of the page,
// with Offset clamped to 0-MaxOffset and Limit to 1-MaxLimit: whatever a
// caller put in p, the sum cannot overflow and stays a bounded, positive
// read size.
func (p Page) End() int {
	return min(max(p.Offset, 0), MaxOffset) + min(max(p.Limit, 1), MaxLimit)
}

// CursorPage is a parsed limit/cursor pagination request.
type CursorPage struct {
	Limit int
	// Cursor is the nextCursor of the previous page; empty for the first.
	Cursor string
}

// MaxCursorLen bounds the cursor parameter.
const MaxCursorLen = 256

// ParseCursorPage parses the limit (integer 1-100, default 20) and cursor
// (an opaque token of at most MaxCursorLen characters) query parameters.
// Anything else fails with INVALID_PAGINATION and a detail per bad
// parameter; whether a well-formed cursor names a place in the list is for
// the list to say.
func ParseCursorPage(r *http.Request) (CursorPage, error) {
	p := CursorPage{Limit: DefaultLimit}
	q := r.URL.Query()
	var bad errs.FieldErrors
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > MaxLimit {
			bad.Add("limit", "must be an integer from 1 to %d", MaxLimit)
		}
		p.Limit = n
	}
	if v, ok := q["cursor"]; ok {
		if len(v[0]) == 0 || len(v[0]) > MaxCursorLen {
			bad.Add("cursor", "must be the nextCursor of an earlier page")
		}
		p.Cursor = v[0]
	}
	if len(bad) > 0 {
		e := errs.Fields("httpapi.ParseCursorPage", bad...)
		e.Code = "INVALID_PAGINATION"
		return CursorPage{}, e
	}
	return p, nil
}
