package authserver

import (
	"testing"
	"time"
)

// The helpers below decide what may be redirected to; they are tested on
// their own, table-driven, besides the end-to-end tests of infra/local.

func TestRedirectAllowed(t *testing.T) {
	t.Parallel()
	registered := []string{"https://app.example.com/cb", "http://127.0.0.1/callback", "http://[::1]:8080/cb", "http://localhost/cb?x=1", "com.example.app:/oauth"}
	for uri, want := range map[string]bool{
		"https://app.example.com/cb":        true,
		"https://app.example.com/cb/":       false,
		"https://app.example.com:444/cb":    false,
		"https://APP.example.com/cb":        false,
		"https://app.example.com/cb?x=1":    false,
		"http://app.example.com/cb":         false,
		"http://127.0.0.1/callback":         true,
		"http://127.0.0.1:49152/callback":   true,
		"http://127.0.0.1:49152/other":      false,
		"http://127.0.0.1:49152/callback#f": false,
		"http://127.0.0.2:1/callback":       false,
		"http://[::1]/cb":                   true,
		"http://[::1]:9/cb":                 true,
		"http://localhost:5555/cb?x=1":      true,
		"http://localhost:5555/cb":          false,
		"http://user@127.0.0.1:1/callback":  false,
		"https://127.0.0.1:1/callback":      false,
		"com.example.app:/oauth":            true,
		"com.example.app:/other":            false,
	} {
		if got := redirectAllowed(registered, uri); got != want {
			t.Errorf("%s: %v, want %v", uri, got, want)
		}
	}
}

func TestCheckRedirectURI(t *testing.T) {
	t.Parallel()
	for uri, ok := range map[string]bool{
		"https://app.example.com/cb":    true,
		"http://127.0.0.1:3000/cb":      true,
		"http://localhost/cb":           true,
		"http://[::1]/cb":               true,
		"cursor://anysphere.cursor/cb":  true,
		"http://app.example.com/cb":     false,
		"https:///cb":                   false,
		"javascript:alert(1)":           false,
		"data:text/html,x":              false,
		"/relative":                     false,
		"https://a.example/cb#fragment": false,
		"https://u:p@a.example/cb":      false,
	} {
		if err := checkRedirectURI(uri); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", uri, err, ok)
		}
	}
}

func TestDocumentTTL(t *testing.T) {
	t.Parallel()
	for cc, want := range map[string]time.Duration{
		"":                         defaultDocumentTTL,
		"max-age=600":              10 * time.Minute,
		"public, max-age=5":        minDocumentTTL,
		"max-age=999999999":        maxDocumentTTL,
		"no-store":                 minDocumentTTL,
		"max-age=nonsense":         defaultDocumentTTL,
		"private, max-age=3600, x": time.Hour,
	} {
		if got := documentTTL(cc); got != want {
			t.Errorf("%q: %v, want %v", cc, got, want)
		}
	}
}

func TestFormTarget(t *testing.T) {
	t.Parallel()
	for uri, want := range map[string]string{
		"http://127.0.0.1:5000/cb?x=1": "http://127.0.0.1:5000",
		"https://app.example.com/cb":   "https://app.example.com",
		"vscode://ext/cb":              "vscode:",
		"https://a.example/cb;x":       "",
		"https://a.example/c'b":        "",
	} {
		if got := formTargetOf(uri); got != want {
			t.Errorf("%s: %q, want %q", uri, got, want)
		}
	}
}
