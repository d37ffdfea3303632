// Package paging is how the lists a user reads are cut into pages: by
// offset (chats and workflows, which show a total) or by cursor (runs,
// which can be large). It holds the bounds every list shares; httpapi
// parses them from query parameters and the stores read them.
package paging

// Bounds. MaxOffset bounds the work one list request can cause: serving an
// offset page reads the items before it, so a page never reads more than
// MaxOffset+MaxLimit items.
const (
	DefaultLimit = 20
	MaxLimit     = 100
	MaxOffset    = 10000
	// MaxCursorLen bounds a cursor as a client sends it back.
	MaxCursorLen = 256
)

// Page is a page by offset: Limit items after the first Offset.
type Page struct {
	Limit  int
	Offset int
}

// End returns Offset+Limit, the number of items up to the end of the page,
// with Offset clamped to 0-MaxOffset and Limit to 1-MaxLimit: whatever a
// caller put in p, the sum cannot overflow and stays a bounded, positive
// read size.
func (p Page) End() int {
	return min(max(p.Offset, 0), MaxOffset) + min(max(p.Limit, 1), MaxLimit)
}

// Cursor is a page by cursor: Limit items after the place After names (a
// list's own opaque token, its previous page's next cursor; empty for the
// first page).
type Cursor struct {
	Limit int
	After string
}
