package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
)

// PathUUID returns the path parameter name of r, which must be a UUID in
// its canonical 36-character form (any case). Otherwise it fails with
// INVALID_ID. The id is answered lower-cased, as every id is stored, and
// r's path value is replaced by it, so that a handler reading
// r.PathValue after the check (PathIDs) finds the same resource: an
// upper-case id names the resource its lower-case form names.
func PathUUID(r *http.Request, name string) (string, error) {
	v := r.PathValue(name)
	if !IsUUID(v) {
		e := errs.E("httpapi.PathUUID", errs.Invalid, "INVALID_ID", name+" must be a UUID")
		e.Details = []errs.FieldError{{Field: name, Message: "must be a UUID"}}
		return "", e
	}
	if lower := strings.ToLower(v); lower != v {
		v = lower
		r.SetPathValue(name, v)
	}
	return v, nil
}

// PathIDs answers 400 INVALID_ID for the first of the path parameters
// names that is not a UUID (PathUUID, which also lower-cases them for
// next), before next runs, so that a route's
// path is told as malformed whatever its body: the body is read only for
// a well-formed path.
func PathIDs(next http.Handler, names ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, name := range names {
			if _, err := PathUUID(r, name); err != nil {
				WriteError(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
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

// The pagination bounds, as the query parameters take them.
const (
	DefaultLimit = paging.DefaultLimit
	MaxLimit     = paging.MaxLimit
	MaxOffset    = paging.MaxOffset
)

// ParsePage parses the limit (integer 1-100, default 20) and offset
// (integer 0-10000, default 0) query parameters. Anything else fails with
// INVALID_PAGINATION and a detail per bad parameter.
func ParsePage(r *http.Request) (paging.Page, error) {
	q := r.URL.Query()
	var bad errs.FieldErrors
	p := paging.Page{Limit: parseLimit(q, &bad)}
	if v, ok := q["offset"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 0 || n > MaxOffset {
			bad.Add("offset", "must be an integer from 0 to %d", MaxOffset)
		}
		p.Offset = n
	}
	return p, paginationError("httpapi.ParsePage", bad)
}

// ParseCursorPage parses the limit (integer 1-100, default 20) and cursor
// (an opaque token of at most paging.MaxCursorLen characters) query
// parameters. Anything else fails with INVALID_PAGINATION and a detail per
// bad parameter; whether a well-formed cursor names a place in the list is
// for the list to say.
func ParseCursorPage(r *http.Request) (paging.Cursor, error) {
	q := r.URL.Query()
	var bad errs.FieldErrors
	p := paging.Cursor{Limit: parseLimit(q, &bad)}
	if v, ok := q["cursor"]; ok {
		if len(v[0]) == 0 || len(v[0]) > paging.MaxCursorLen {
			bad.Add("cursor", "must be the nextCursor of an earlier page")
		}
		p.After = v[0]
	}
	return p, paginationError("httpapi.ParseCursorPage", bad)
}

// parseLimit reads the limit parameter of q, DefaultLimit when absent,
// adding to bad when it is not an integer from 1 to MaxLimit.
func parseLimit(q url.Values, bad *errs.FieldErrors) int {
	v, ok := q["limit"]
	if !ok {
		return DefaultLimit
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 1 || n > MaxLimit {
		bad.Add("limit", "must be an integer from 1 to %d", MaxLimit)
	}
	return n
}

// paginationError is INVALID_PAGINATION with bad as its details, nil when
// bad is empty.
func paginationError(op string, bad errs.FieldErrors) error {
	if len(bad) == 0 {
		return nil
	}
	e := errs.Fields(op, bad...)
	e.Code = "INVALID_PAGINATION"
	return e
}
