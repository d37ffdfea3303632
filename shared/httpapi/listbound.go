package httpapi

import (
	"bytes"
	"encoding/json"
)

// MaxListBytes bounds the items a list answered whole (no pagination)
// carries, counted as they travel in a buffered Lambda's answer
// (WireSize): under the 6 MB a Lambda behind the HTTP API may answer,
// with room for the rest of the answer.
const MaxListBytes = 5 << 20

// NewestWithin returns how many of the last items fit in budget bytes
// (each as WireSize counts its JSON, with its comma), at least one of a
// list that has any. It fails when an item cannot be encoded.
func NewestWithin[T any](items []T, budget int) (int, error) {
	used := 0
	for i := len(items) - 1; i >= 0; i-- {
		b, err := json.Marshal(items[i])
		if err != nil {
			return 0, err
		}
		used += WireSize(b) + 1
		if used > budget && i < len(items)-1 {
			return len(items) - 1 - i, nil
		}
	}
	return len(items), nil
}

// WireSize is the bytes JSON b takes in the answer of a buffered Lambda
// function (lambdahttp): its body travels as a JSON string of the
// response event, in which each quote and backslash of b is escaped
// again. Nothing else grows: json.Marshal has escaped the control
// characters, <, >, & and U+2028/2029 already, and the rest is kept as
// it is.
func WireSize(b []byte) int {
	return len(b) + bytes.Count(b, []byte{'"'}) + bytes.Count(b, []byte{'\\'})
}
