package oauth_test

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/workflowchat/service/shared/oauth"
)

func TestBaseURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, configured, host string
		header                 map[string]string
		tls                    bool
		want                   string
	}{
		{"configured wins", "https://api.example.com", "evil.example", map[string]string{"X-Viewer-Host": "x.example"}, false, "https://api.example.com"},
		{"local", "", "127.0.0.1:3000", nil, false, "http://127.0.0.1:3000"},
		{"TLS", "", "api.example.com", nil, true, "https://api.example.com"},
		{"behind CloudFront", "", "abc.execute-api.us-east-1.amazonaws.com", map[string]string{"X-Viewer-Host": "d111.cloudfront.net", "X-Forwarded-Proto": "https"}, false, "https://d111.cloudfront.net"},
		{"upper case", "", "API.Example.com", nil, true, "https://api.example.com"},
		{"IPv6", "", "[::1]:3000", nil, false, "http://[::1]:3000"},
		{"header injection", "", "api.example.com", map[string]string{"X-Viewer-Host": `evil.example/"x`}, true, ""},
		{"path in host", "", "api.example.com/x", nil, true, ""},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = c.host
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		} else {
			r.TLS = nil
		}
		if got := oauth.BaseURL(c.configured, r); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := oauth.ResourceMetadataURL("https://a.example"); got != "https://a.example/.well-known/oauth-protected-resource/api/mcp" {
		t.Errorf("ResourceMetadataURL = %s", got)
	}
}
