package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/workflowchat/service/shared/httpapi"
)

// lambdaPayload is the size of the response event of a buffered Lambda
// function answering body, encoded as aws-lambda-go encodes it.
func lambdaPayload(t *testing.T, body []byte) int {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: string(body)}); err != nil {
		t.Fatal(err)
	}
	return buf.Len()
}

func TestNewestWithin(t *testing.T) {
	t.Parallel()
	type item struct{ Text string }
	many := func(n int, text string) []item {
		out := make([]item, n)
		for i := range out {
			out[i] = item{text}
		}
		return out
	}
	tests := []struct {
		name   string
		items  []item
		budget int
		want   int
	}{
		{"none", nil, 10, 0},
		{"all fit", many(3, "a"), 100, 3},
		{"exactly at the budget", many(2, "ab"), 2 * (len(`{"Text":"ab"}`) + 4 + 1), 2},
		{"one byte under it", many(2, "ab"), 2*(len(`{"Text":"ab"}`)+4+1) - 1, 1},
		{"the last one always", many(2, strings.Repeat("x", 100)), 10, 1},
		{"quotes count twice", many(10, `"""""`), 10 * (len(`{"Text":"\"\"\"\"\""}`) + 4 + 10 + 1) / 2, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := httpapi.NewestWithin(tt.items, tt.budget)
			if err != nil || got != tt.want {
				t.Errorf("NewestWithin = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
	// What it keeps of a list of quote-heavy items fits a Lambda's
	// answer; counted by its bytes alone it would not.
	items := many(400, strings.Repeat(`{"k":"v\\"}`, 2000))
	keep, err := httpapi.NewestWithin(items, httpapi.MaxListBytes)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"data": map[string]any{"messages": items[len(items)-keep:]}})
	if err != nil {
		t.Fatal(err)
	}
	if n := lambdaPayload(t, body); n >= 6_000_000 || keep == len(items) {
		t.Errorf("kept %d of %d: a Lambda answer of %d bytes", keep, len(items), n)
	}
}

// TestBodyWireSize: BodyWireSize is the length of the body in a Lambda's
// response event, as aws-lambda-go encodes it, for any text.
func TestBodyWireSize(t *testing.T) {
	t.Parallel()
	empty := lambdaPayload(t, nil)
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"plain", "# Title\n\nsome text, <b>&</b>"},
		{"quotes and backslashes", `"a\b"\\`},
		{"short escapes", "\b\f\n\r\t"},
		{"other controls", "\x00\x01\x1b\x1f\x7f"},
		{"separators", "a\u2028b\u2029c\u2027\u202a"},
		{"multi-byte", "😀 crème ß \u0085"},
		{"not UTF-8", "ab\xff\xfecd"},
		{"not UTF-8 with quotes", "\"\xff\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := lambdaPayload(t, []byte(tt.body)) - empty
			if !utf8.ValidString(tt.body) {
				// The proxy sends it as base64, and says so.
				want = len(base64.StdEncoding.EncodeToString([]byte(tt.body)))
			}
			if got := httpapi.BodyWireSize([]byte(tt.body)); got != want {
				t.Errorf("BodyWireSize(%q) = %d, want %d", tt.body, got, want)
			}
		})
	}
}
