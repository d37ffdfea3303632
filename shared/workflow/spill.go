package workflow

import (
	"encoding/json"
	"maps"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/truncate"
)

// RunBlobPrefix is where the blob store keeps run runID's spilled values;
// they are deleted with the run.
func RunBlobPrefix(runID string) string { return blob.PrefixRuns + runID + "/" }

// A run's value too large for its record (a step's input or output, a
// forEach element's output, the run's input) is spilled: kept whole in
// the blob store, while the record holds its cut form (package truncate:
// {"truncated": true, "preview": "<the start of its JSON>"}) with two more
// fields, "blob" (the value's key in the blob store) and "size" (the
// length of its JSON in bytes). Readers that need the value whole (the
// engine resolving a later step's inputs, an MCP client's result) read it
// back; a client reading the run gets the cut form and a presigned URL.

// SpilledPreview bounds the preview a spilled value keeps in the record.
const SpilledPreview = 1 << 10

// Spilled returns the record's form of the value whose JSON is v, kept
// in the blob store under key.
func Spilled(v json.RawMessage, key string) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(truncate.Cut(v, SpilledPreview), &m)
	m["blob"], m["size"] = key, len(v)
	return m
}

// SpilledKey reports whether m is a spilled value, and its key.
func SpilledKey(m map[string]any) (string, bool) {
	if m == nil || m["truncated"] != true {
		return "", false
	}
	key, ok := m["blob"].(string)
	return key, ok && key != ""
}

// WithoutKey returns the spilled value m as a client sees it: its cut
// form and size, without the blob key; other values as they are.
func WithoutKey(m map[string]any) map[string]any {
	if _, ok := SpilledKey(m); !ok {
		return m
	}
	c := maps.Clone(m)
	delete(c, "blob")
	return c
}

// MinJSONSize returns a lower bound of the length of v's JSON (v a value
// as encoding/json decodes JSON into any, or a json.RawMessage), counted
// up to limit: once the count passes limit it stops and returns it. It
// visits at most about limit parts of v, however often v refers to one
// large value, so that a value too large to encode is refused before it
// is encoded.
func MinJSONSize(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch t := v.(type) {
		case string:
			n += len(t) + 2
		case json.RawMessage:
			n += len(t)
		case map[string]any:
			n += 2 + max(len(t)-1, 0) // braces, commas
			for k, e := range t {
				n += len(k) + 3 // quotes, colon
				walk(e)
				if n > limit {
					return
				}
			}
		case []any:
			n += 2 + max(len(t)-1, 0) // brackets, commas
			for _, e := range t {
				walk(e)
				if n > limit {
					return
				}
			}
		case nil:
			n += len("null")
		case bool:
			n += len("true")
		default: // numbers
			n++
		}
	}
	walk(v)
	return n
}
