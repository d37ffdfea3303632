package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"
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

// BodyWireSize is the bytes body b, any text (a file, not only
// json.Marshal's output), takes in the answer of a buffered Lambda
// function (lambdahttp, through aws-lambda-go-api-proxy): valid UTF-8
// travels as a JSON string of the response event, which aws-lambda-go
// encodes without HTML escaping, so a quote, a backslash, \b, \f, \n, \r
// and \t take two bytes, another C0 control six (\u00XX), U+2028 and
// U+2029 six (three as UTF-8), the rest what it takes; a body that is not
// UTF-8 travels as base64.
func BodyWireSize(b []byte) int {
	if !utf8.Valid(b) {
		return base64.StdEncoding.EncodedLen(len(b))
	}
	n := len(b)
	for i, c := range b {
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c < 0x20:
			n += 5
		case c == 0xe2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9):
			n += 3
		}
	}
	return n
}
