package oauth

import (
	"net/http"
	"regexp"
	"strings"
)

// Paths of the endpoints.
const (
	AuthorizationServerMetadataPath = "/.well-known/oauth-authorization-server"
	ProtectedResourceMetadataPath   = "/.well-known/oauth-protected-resource"
	// ResourcePath is the protected resource: the per-user MCP endpoint.
	ResourcePath  = "/api/mcp"
	AuthorizePath = "/oauth/authorize"
	TokenPath     = "/oauth/token"
	RevokePath    = "/oauth/revoke"
	RegisterPath  = "/oauth/register"
	JWKSPath      = "/oauth/jwks"
)

var hostPattern = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$`)

// ViewerHostHeader carries the host name the client used, set by the
// CloudFront distribution's viewer-request function: behind it, API
// Gateway and function URLs see their own host names in Host.
const ViewerHostHeader = "X-Viewer-Host"

// BaseURL returns the service's public origin, the issuer of its tokens:
// configured, the configured value (PUBLIC_BASE_URL); else from r, https
// when r came over TLS or with X-Forwarded-Proto https, and the host of
// X-Viewer-Host, or else r.Host. A host that is not a plain host[:port]
// yields "".
//
// A caller that reaches an origin directly could name any host, but only
// for its own requests: tokens are bound to the audience their own
// request computed, and the gateway computes its audience the same way,
// so a forged host buys a token good only on a forged host.
func BaseURL(configured string, r *http.Request) string {
	if configured != "" {
		return configured
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	host := r.Host
	if vh := r.Header.Get(ViewerHostHeader); vh != "" {
		host, _, _ = strings.Cut(vh, ",")
		host = strings.TrimSpace(host)
	}
	if !hostPattern.MatchString(host) {
		return ""
	}
	return scheme + "://" + strings.ToLower(host)
}

// ResourceURL returns the resource identifier of the MCP endpoint under
// base.
func ResourceURL(base string) string { return base + ResourcePath }

// ResourceMetadataURL returns the URL of the MCP endpoint's protected
// resource metadata under base (RFC 9728 section 3.1: the well-known
// path, then the resource's path).
func ResourceMetadataURL(base string) string {
	return base + ProtectedResourceMetadataPath + ResourcePath
}

// Audiences are the resource indicators the MCP endpoint accepts tokens
// for: its own URL, and the service's origin, which is the resource of
// the root protected resource metadata document.
func Audiences(base string) []string { return []string{ResourceURL(base), base} }
