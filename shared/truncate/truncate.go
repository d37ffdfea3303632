// Package truncate cuts the values a user's work produces (tool results,
// workflow step inputs and outputs, reply text) to sizes storage can hold.
// A DynamoDB item holds at most 400 KB and a buffered Lambda response at
// most 6 MB, while one tool may return megabytes: what is stored and
// returned is bounded, and marked when cut.
//
// A cut JSON value becomes the object
//
//	{"truncated": true, "preview": "<the start of the value's JSON text>"}
//
// so a reader sees both that it was cut and how it began.
package truncate

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

const (
	// MaxValue is the largest value stored whole: 256 KiB of JSON.
	MaxValue = 256 << 10
	// MaxItem is the budget of the values of one stored item (a message
	// with its tool calls, a run with its steps), under DynamoDB's 400 KB
	// with room for the item's other attributes and keys.
	MaxItem = 320 << 10
	// MinPreview is the least preview a cut value keeps.
	MinPreview = 1 << 10
)

// String returns s cut to at most max bytes, at a rune boundary, and
// whether it was cut.
func String(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// Ellipsis returns s cut to at most max bytes at a rune boundary (String)
// with "…" appended when it was cut: the form of a long text quoted in a
// message or a reply.
func Ellipsis(s string, max int) string {
	if cut, ok := String(s, max); ok {
		return cut + "…"
	}
	return s
}

// Cut returns the truncated form of the JSON value v, at most limit bytes
// long (limit at least 64): as much of v's text as fits in the preview once
// escaped. Cutting a value already cut shortens its preview.
func Cut(v json.RawMessage, limit int) json.RawMessage {
	src := string(v)
	if p, ok := preview(v); ok {
		src = p
	}
	n := limit - 40
	for {
		p, _ := String(src, max(n, 0))
		b, _ := json.Marshal(cutValue{true, p})
		if len(b) <= limit || n <= 0 {
			return b
		}
		// Escaping grew the preview: shrink it in proportion, and by at
		// least a byte.
		n = min(n-1, n*(limit-40)/(len(b)-40))
	}
}

// cutValue is the form of a cut value.
type cutValue struct {
	Truncated bool   `json:"truncated"`
	Preview   string `json:"preview"`
}

// preview returns the preview of v when v is a cut value, in either key
// order (a cut value decoded into a map and encoded again has "preview"
// first).
func preview(v json.RawMessage) (string, bool) {
	if !bytes.HasPrefix(v, []byte(`{"truncated":true,"preview":`)) && !bytes.HasPrefix(v, []byte(`{"preview":`)) {
		return "", false
	}
	var m map[string]any
	if json.Unmarshal(v, &m) != nil || len(m) != 2 || m["truncated"] != true {
		return "", false
	}
	p, ok := m["preview"].(string)
	return p, ok
}

// Fit cuts values in place so that none is larger than MaxValue and all
// together take at most budget bytes, cutting the largest first and never
// to less than MinPreview. It returns, for each value, whether it was
// cut. A budget smaller than MinPreview per value may be exceeded.
func Fit(values []json.RawMessage, budget int) []bool {
	orig := slices.Clone(values)
	cut := make([]bool, len(values))
	total := 0
	for i, v := range values {
		if len(v) > MaxValue {
			values[i], cut[i] = Cut(v, MaxValue), true
		}
		total += len(values[i])
	}
	for total > budget {
		i := -1 // the largest value that can still shrink
		for j, v := range values {
			if len(v) > MinPreview && (i < 0 || len(v) > len(values[i])) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		before := len(values[i])
		values[i], cut[i] = Cut(orig[i], max(MinPreview, before-(total-budget))), true
		total += len(values[i]) - before
	}
	return cut
}

// Any reports whether any of cut is true.
func Any(cut []bool) bool { return slices.Contains(cut, true) }
