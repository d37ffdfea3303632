// Package lambdatest loads recorded Lambda event payloads from testdata and
// reads the responses, for tests that drive functions with real
// aws-lambda-go event types.
package lambdatest

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// LoadV2 reads an API Gateway HTTP API (payload v2) event from path.
func LoadV2(t testing.TB, path string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ev
}

// Cookie returns the cookie named name set by resp, or nil.
func Cookie(resp events.APIGatewayV2HTTPResponse, name string) *http.Cookie {
	for _, c := range resp.Cookies {
		if ck, err := http.ParseSetCookie(c); err == nil && ck.Name == name {
			return ck
		}
	}
	return nil
}

// DecodeBody decodes resp's JSON body into v.
func DecodeBody(t testing.TB, resp events.APIGatewayV2HTTPResponse, v any) {
	t.Helper()
	if err := json.NewDecoder(strings.NewReader(resp.Body)).Decode(v); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
}
