package store

import "github.com/workflowchat/service/shared/errs"

// badCursor returns the error of a list's cursor that is not one the
// list returned: Invalid INVALID_PAGINATION naming the cursor.
func badCursor(op string) *errs.Error {
	e := errs.E(op, errs.Invalid, "INVALID_PAGINATION", "cursor is not a cursor of this list")
	e.Details = []errs.FieldError{{Field: "cursor", Message: "must be the nextCursor of an earlier page"}}
	return e
}

// pageOf cuts items, read with a limit of limit+1, to one page and
// returns the key of its last item for the next page's cursor: empty
// when the read ended the list (fewer than limit+1 items and no
// LastEvaluatedKey: more is true when DynamoDB's 1 MB page ended first).
func pageOf[T any](items []T, limit int, more bool, key func(T) string) ([]T, string) {
	switch {
	case len(items) > limit:
		items = items[:limit]
		return items, key(items[limit-1])
	case more && len(items) > 0:
		return items, key(items[len(items)-1])
	}
	return items, ""
}
