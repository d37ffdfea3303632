package oauthclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ErrTooLarge is returned, wrapped, for a metadata document, registration
// or token answer over its size bound.
var ErrTooLarge = errors.New("oauthclient: answer over the size limit")

// statusError is an answer with an unexpected HTTP status.
type statusError struct{ status int }

func (e *statusError) Error() string { return fmt.Sprintf("answered HTTP %d", e.status) }

// readBounded reads at most limit bytes of r: ErrTooLarge past it.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit)
	}
	return b, nil
}

// getJSON fetches a metadata document at u into v: a 200 answer of JSON
// (application/json or +json) of at most MaxMetadataBytes.
func (c *Client) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return &statusError{res.StatusCode}
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return fmt.Errorf("not JSON (%q)", mt)
	}
	b, err := readBounded(res.Body, MaxMetadataBytes)
	if err != nil {
		return err
	}
	return ParseJSONObject(b, v)
}

// ParseJSONObject decodes b, which must be one JSON object, into v.
func ParseJSONObject(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(b, v)
}

// probe sends an unauthenticated MCP request to the server and returns
// the resource_metadata and scope its 401 challenge names (RFC 9728
// section 5.1); both empty when it names none.
func (c *Client) probe(ctx context.Context, serverURL string) (metadataURL, scope string, err error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"workflow-chat-service","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := c.http.Do(req)
	if err != nil {
		return "", "", err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusUnauthorized {
		return "", "", nil
	}
	metadataURL, scope = ParseChallenge(res.Header.Values("WWW-Authenticate"))
	return metadataURL, scope, nil
}

// ParseChallenge returns the resource_metadata and scope parameters of
// the Bearer challenge of a 401's WWW-Authenticate headers (empty when
// absent or malformed).
func ParseChallenge(headers []string) (metadataURL, scope string) {
	cs, err := oauthex.ParseWWWAuthenticate(headers)
	if err != nil {
		return "", ""
	}
	for _, ch := range cs {
		if ch.Scheme == "bearer" {
			return ch.Params["resource_metadata"], ch.Params["scope"]
		}
	}
	return "", ""
}

// ResourceMetadataURLs returns where the protected resource metadata of
// the server at serverURL is looked for, in order: the challenge's
// resource_metadata (when given), then the well-known URL with the
// server's path, then the origin's well-known URL (the MCP authorization
// spec's fallbacks).
func ResourceMetadataURLs(serverURL, fromChallenge string) ([]string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		return nil, errors.New("not an absolute URL")
	}
	var out []string
	if fromChallenge != "" {
		out = append(out, fromChallenge)
	}
	origin := u.Scheme + "://" + u.Host
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		out = append(out, origin+"/.well-known/oauth-protected-resource"+p)
	}
	return append(out, origin+"/.well-known/oauth-protected-resource"), nil
}

// ServerMetadataURLs returns where the metadata of the authorization
// server issuer is looked for, in order (RFC 8414 section 3.1, then
// OpenID Connect Discovery, both with the issuer's path inserted and, for
// OpenID, appended).
func ServerMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("the issuer is not an absolute URL without query or fragment")
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}, nil
	}
	return []string{origin + "/.well-known/oauth-authorization-server" + p, origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration"}, nil
}

// discovered is what discovery found for one server.
type discovered struct {
	resource string
	scope    string
	issuer   string
	meta     *oauthex.AuthServerMeta
}

// discover finds the server's resource identifier and its authorization
// server's metadata.
func (c *Client) discover(ctx context.Context, serverURL string) (discovered, error) {
	fromChallenge, scope, err := c.probe(ctx, serverURL)
	if err != nil {
		return discovered{}, unreachable("the MCP server could not be reached", err)
	}
	urls, err := ResourceMetadataURLs(serverURL, fromChallenge)
	if err != nil {
		return discovered{}, invalid("the MCP server's URL is not an absolute URL")
	}
	var prm *oauthex.ProtectedResourceMetadata
	var last error
	for _, u := range urls {
		if err := c.checkEndpoint(u); err != nil {
			last = err
			continue
		}
		var m oauthex.ProtectedResourceMetadata
		if err := c.getJSON(ctx, u, &m); err != nil {
			last = err
			continue
		}
		prm = &m
		break
	}
	if prm == nil {
		return discovered{}, discoveryFailed("the MCP server's protected resource metadata (RFC 9728) could not be read", last)
	}
	if err := CheckResource(prm.Resource, serverURL); err != nil {
		return discovered{}, discoveryFailed("the MCP server's protected resource metadata "+err.Error(), nil)
	}
	if len(prm.AuthorizationServers) == 0 {
		return discovered{}, discoveryFailed("the MCP server's protected resource metadata names no authorization server", nil)
	}
	d := discovered{resource: prm.Resource, scope: scope, issuer: prm.AuthorizationServers[0]}
	if d.scope == "" && len(prm.ScopesSupported) > 0 {
		d.scope = strings.Join(prm.ScopesSupported, " ")
	}
	if err := c.checkEndpoint(d.issuer); err != nil {
		return discovered{}, discoveryFailed("the authorization server's issuer "+err.Error(), nil)
	}
	murls, err := ServerMetadataURLs(d.issuer)
	if err != nil {
		return discovered{}, discoveryFailed(err.Error(), nil)
	}
	for _, u := range murls {
		var m oauthex.AuthServerMeta
		if err := c.getJSON(ctx, u, &m); err != nil {
			last = err
			continue
		}
		if err := c.CheckServerMetadata(&m, d.issuer); err != nil {
			return discovered{}, discoveryFailed("the authorization server's metadata "+err.Error(), nil)
		}
		d.meta = &m
		return d, nil
	}
	return discovered{}, discoveryFailed("the authorization server's metadata (RFC 8414) could not be read", last)
}

// CheckResource accepts the resource of a protected resource metadata
// document for the server at serverURL: the same scheme and host, and a
// path the server's path is at or under.
func CheckResource(resource, serverURL string) error {
	r, err := url.Parse(resource)
	if err != nil || r.Host == "" || r.Fragment != "" {
		return errors.New("names no valid resource")
	}
	s, _ := url.Parse(serverURL)
	if !strings.EqualFold(r.Scheme, s.Scheme) || !strings.EqualFold(r.Host, s.Host) {
		return fmt.Errorf("names the resource %q, not this server", resource)
	}
	rp, sp := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(s.Path, "/")
	if sp != rp && !strings.HasPrefix(sp, rp+"/") {
		return fmt.Errorf("names the resource %q, not this server", resource)
	}
	return nil
}

// CheckServerMetadata checks authorization server metadata fetched for
// issuer: the same issuer (RFC 8414 section 3.3), the code flow with PKCE
// S256, and authorization, token and registration endpoints that are
// URLs the service may use.
func (c *Client) CheckServerMetadata(m *oauthex.AuthServerMeta, issuer string) error {
	if strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
		return fmt.Errorf("names the issuer %q, not %q", m.Issuer, issuer)
	}
	if !slices.Contains(m.CodeChallengeMethodsSupported, "S256") {
		return errors.New("does not list PKCE S256 in code_challenge_methods_supported")
	}
	if len(m.ResponseTypesSupported) > 0 && !slices.Contains(m.ResponseTypesSupported, "code") {
		return errors.New("does not support the authorization code flow")
	}
	if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
		return errors.New("has no authorization or token endpoint")
	}
	for name, u := range map[string]string{"authorization_endpoint": m.AuthorizationEndpoint, "token_endpoint": m.TokenEndpoint,
		"registration_endpoint": m.RegistrationEndpoint} {
		if u == "" {
			continue
		}
		if err := c.checkEndpoint(u); err != nil {
			return fmt.Errorf("%s %v", name, err)
		}
	}
	return nil
}

// checkEndpoint accepts an https URL (http too when private networks are
// allowed) without credentials or fragment.
func (c *Client) checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.User != nil || u.Fragment != "" || len(raw) > 2048 {
		return errors.New("is not an absolute URL")
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && c.allowPrivate) {
		return errors.New("is not an https URL")
	}
	return nil
}
