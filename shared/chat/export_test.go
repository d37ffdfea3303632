package chat_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestExportFitsALambdaAnswer: an export is bounded as a buffered
// Lambda's answer carries it (the file a JSON string of the response
// event: each quote, backslash and line break twice, another control
// character six times), not by its bytes alone, so that what it answers
// stays under the 6 MB a Lambda may return; a longer one is 409
// EXPORT_TOO_LARGE. A file of 3.2 MB of quotes was answered 200 and
// took 6.4 MB in the Lambda's answer.
func TestExportFitsALambdaAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, 0)
	quotes := func(n int) string { return strings.Repeat(`"`, n) }
	tests := []struct {
		name     string
		format   string
		content  string
		messages int
		tooLarge bool
	}{
		{"markdown of quotes", "markdown", quotes(32000), 100, true},
		{"json of quotes", "json", quotes(32000), 80, true},
		{"markdown of control characters", "markdown", strings.Repeat("\x01", 32000), 35, true},
		{"markdown of line breaks and tabs", "markdown", strings.Repeat("\t\n", 16000), 100, true},
		{"markdown of U+2028", "markdown", strings.Repeat("\u2028", 16000), 70, true},
		{"markdown within the bound", "markdown", quotes(16000), 100, false},
		{"json within the bound", "json", quotes(8000), 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := f.newChat(t)
			contents := make([]string, tt.messages)
			for i := range contents {
				contents[i] = tt.content
			}
			f.chain(t, id, contents...)
			resp := f.do(t, "GET", "/api/chats/"+id+"/export?format="+tt.format, "")
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.tooLarge {
				var e struct{ Code string }
				if resp.StatusCode != 409 || json.Unmarshal(b, &e) != nil || e.Code != "EXPORT_TOO_LARGE" {
					t.Fatalf("%d (%d bytes, %d in a Lambda's answer), want 409 EXPORT_TOO_LARGE", resp.StatusCode, len(b), lambdaPayload(t, string(b)))
				}
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("%d %.200s, want 200", resp.StatusCode, b)
			}
			if n := lambdaPayload(t, string(b)); n >= 6_000_000 {
				t.Fatalf("a file of %d bytes is %d in a Lambda's answer", len(b), n)
			}
		})
	}
}
