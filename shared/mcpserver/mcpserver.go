// Package mcpserver is a user's own remote MCP servers: their
// registration (name, Streamable HTTP URL, how to authenticate), the tool
// list each one gives, which the service keeps as the server's cache, and
// the calls of those tools. Secrets (an API key's header value) are sealed
// by the vault before they are stored and are never shown again.
//
// Outbound requests go through an SSRF-safe client (shared/safehttp):
// every address dialed, redirects included, must be public unless private
// networks are allowed (local tests), and every answer is bounded in time
// and size.
package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/safehttp"
)

// Limits.
const (
	// MaxServers is how many servers one user may have.
	MaxServers = 20
	// MaxURLLen bounds a server's URL.
	MaxURLLen = 2048
	// MaxHeaderNameLen and MaxHeaderValueLen bound a header auth.
	MaxHeaderNameLen  = 64
	MaxHeaderValueLen = 4096
	// MaxTools is how many tools of one server are kept; a server that
	// lists more is in status error (TOOL_LIST_TOO_LARGE).
	MaxTools = 256
	// MaxToolListBytes bounds the kept tool list of one server (its
	// JSON), so that it fits one stored item with room to spare.
	MaxToolListBytes = 192 << 10
	// MaxToolDescription bounds one tool's kept description; longer ones
	// are cut.
	MaxToolDescription = 2048
	// MaxResponseBytes bounds one answer of a remote server read while
	// listing its tools.
	MaxResponseBytes = 4 << 20
	// ListTimeout bounds connecting to a server and listing its tools.
	ListTimeout = 20 * time.Second
	// CallTimeout bounds one call of a remote tool, connecting included.
	CallTimeout = 60 * time.Second
	// MaxCallResponseBytes bounds one answer of a remote server to a tool
	// call: a result of up to 8 MiB of JSON (a tool result's limit) with
	// room for its framing.
	MaxCallResponseBytes = 9 << 20
)

// The auth types.
const (
	AuthNone   = "none"
	AuthHeader = "header"
	AuthOAuth  = "oauth"
)

// The statuses of a server.
const (
	StatusConnected          = "connected"
	StatusNeedsAuthorization = "needs_authorization"
	StatusError              = "error"
)

// The error codes of this package.
const (
	CodeNotFound          = "MCP_SERVER_NOT_FOUND"
	CodeNameTaken         = "NAME_TAKEN"
	CodeServerLimit       = "SERVER_LIMIT"
	CodeInvalidURL        = "INVALID_URL"
	CodeToolListTooLarge  = "TOOL_LIST_TOO_LARGE"
	CodeUnreachable       = "SERVER_UNREACHABLE"
	CodeRemoteRefused     = "SERVER_REFUSED"
	CodeInvalidResponse   = "INVALID_RESPONSE"
	CodeResponseTooLarge  = "RESPONSE_TOO_LARGE"
	CodeRemoteTimeout     = "SERVER_TIMEOUT"
	CodeUnauthorizedByRmt = "SERVER_UNAUTHORIZED"
	// CodeToolFailed is a remote tool's own failure (a result with
	// isError, or its server's JSON-RPC error to the call).
	CodeToolFailed = "REMOTE_TOOL_ERROR"
	// CodeResultTooLarge is a remote tool's result over MaxResultBytes.
	CodeResultTooLarge = "TOOL_VALUE_TOO_LARGE"
	// The Authorizer's failures to start an authorization (discovery,
	// an authorization server it cannot use, registration): a new
	// server's error when its authorization cannot start.
	CodeOAuthDiscovery    = "OAUTH_DISCOVERY_FAILED"
	CodeOAuthUnsupported  = "OAUTH_UNSUPPORTED"
	CodeOAuthRegistration = "OAUTH_REGISTRATION_FAILED"
)

// MaxResultBytes bounds a remote tool's result (its JSON), as every tool
// result is bounded.
const MaxResultBytes = 8 << 20

// Server is one registered remote MCP server.
type Server struct {
	ID      string
	UserID  string
	Name    string
	URL     string
	Auth    Auth
	Enabled bool
	Status  string
	// Error is why Status is error.
	Error *Problem
	// AuthorizationURL is where the user authorizes the service, when
	// Status is needs_authorization and a flow has been started.
	AuthorizationURL string
	// Tools is the server's tool list as last read (the cache).
	Tools []Tool
	// Secret is the sealed secret (the header value), empty when none.
	Secret string
	// Version counts the writes of the server; every update is
	// conditioned on it.
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
	// ToolsAt is when Tools were last read.
	ToolsAt time.Time
}

// Auth is how the service authenticates to a server. A header auth's
// value is never part of it: it is sealed in Server.Secret.
type Auth struct {
	Type string `json:"type"`
	// Name is a header auth's header name.
	Name string `json:"name,omitempty"`
}

// Problem is why a server is in status error.
type Problem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Tool is one tool a remote server lists.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations *Annotations    `json:"annotations,omitempty"`
}

// Annotations are a remote tool's hints, as the server gives them.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  bool   `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// AuthInput is the auth of a create or update request. Value is write-only.
type AuthInput struct {
	Type  string `json:"type"`
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
}

// CreateRequest is POST /api/mcp-servers.
type CreateRequest struct {
	Name string     `json:"name"`
	URL  string     `json:"url"`
	Auth *AuthInput `json:"auth,omitempty"`
}

// UpdateRequest is PATCH /api/mcp-servers/{serverId}: the fields given
// change.
type UpdateRequest struct {
	Name    *string    `json:"name,omitempty"`
	URL     *string    `json:"url,omitempty"`
	Auth    *AuthInput `json:"auth,omitempty"`
	Enabled *bool      `json:"enabled,omitempty"`
}

// The forms of names, checked by hand rather than by regular
// expressions: a counted repetition such as {1,128} compiles into one copy
// of its class per count, and every function that links this package
// would pay for the compile at its cold start.

// nameChar reports whether c may follow a server name's first letter:
// [a-z0-9_].
func nameChar(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' }

// toolNameChar is [A-Za-z0-9_.-].
func toolNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// tokenChar is RFC 9110's tchar, the characters of a token (a header
// name): [!#$%&'*+.^_`|~0-9A-Za-z-].
func tokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// every reports whether s has from min to max bytes, each one ok.
func every(s string, min, max int, ok func(byte) bool) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// isHeaderToken reports whether s is a token (RFC 9110), the form of a
// header name.
func isHeaderToken(s string) bool { return every(s, 1, len(s), tokenChar) }

// reservedHeaders are headers the transport sets itself or that change
// how a request is routed or framed: a header auth may not name them.
var reservedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Content-Type": true, "Accept": true, "Transfer-Encoding": true,
	"Connection": true, "Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
	"Expect": true, "Cookie": true, "Origin": true, "Accept-Encoding": true,
}

// ValidName reports whether name is a server name.
func ValidName(name string) bool {
	return name != "" && name[0] >= 'a' && name[0] <= 'z' && every(name[1:], 0, 31, nameChar)
}

// ValidToolName reports whether name is a remote tool's name the service
// can name in a tool id.
func ValidToolName(name string) bool { return every(name, 1, 128, toolNameChar) }

// ObjectSchema returns why raw cannot be a remote tool's input schema
// as model providers take one, or nil: a JSON object whose "type", when
// present, is "object" (they refuse other parameter schemas, failing
// every chat that offers the tool). Whether it compiles is the listing's
// check (remote.CheckInputSchema), which links the JSON Schema library.
func ObjectSchema(raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return errors.New("input schema is not an object")
	}
	var typ string
	if t, ok := obj["type"]; ok && (json.Unmarshal(t, &typ) != nil || typ != "object") {
		return errors.New(`input schema's type is not "object"`)
	}
	return nil
}

// UsableTools returns tools without those the model providers refuse (an
// input schema ObjectSchema refuses, or an earlier tool with the same
// name: duplicate function names), for lists kept from before a listing
// dropped them.
// It returns tools itself when it drops none.
func UsableTools(tools []Tool) []Tool {
	var out []Tool
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		ok := !seen[t.Name] && (len(t.InputSchema) == 0 || ObjectSchema(t.InputSchema) == nil)
		seen[t.Name] = true
		switch {
		case ok && out != nil:
			out = append(out, t)
		case !ok && out == nil:
			out = append(make([]Tool, 0, len(tools)-1), tools[:i]...)
		}
	}
	if out == nil {
		return tools
	}
	return out
}

// ToolID returns the id of the tool tool of server: mcp/<server>/<tool>.
func ToolID(server, tool string) string { return "mcp/" + server + "/" + tool }

// ParseToolID splits a remote tool's id into its server and tool names.
// ok is false for any other id.
func ParseToolID(id string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(id, "mcp/")
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, "/")
	if !found || !ValidName(server) || !ValidToolName(tool) {
		return "", "", false
	}
	return server, tool, true
}

func checkName(name string, fe *errs.FieldErrors) {
	if !ValidName(name) {
		fe.Add("name", "must match ^[a-z][a-z0-9_]{0,31}$")
	}
}

// checkURL validates raw as a server URL: https (http too when private
// networks are allowed), a host, no credentials or fragment, at most
// MaxURLLen characters; with private networks refused, a host that is a
// literal non-public address is refused at once (names are checked when
// dialed). It returns the URL as given, or INVALID_URL.
func checkURL(op, raw string, allowPrivate bool) (string, error) {
	bad := func(msg string) error {
		e := errs.E(op, errs.Invalid, CodeInvalidURL, "url "+msg)
		e.Details = []errs.FieldError{{Field: "url", Message: msg}}
		return e
	}
	if raw == "" {
		return "", bad("is required")
	}
	if len(raw) > MaxURLLen {
		return "", bad("must be at most 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return "", bad("must be an absolute https URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	default:
		return "", bad("must be an https URL")
	}
	if u.User != nil {
		return "", bad("must not hold credentials")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "", bad("must not have a fragment")
	}
	if !allowPrivate {
		if err := checkHost(u.Hostname()); err != nil {
			return "", bad(err.Error())
		}
	}
	return raw, nil
}

// checkAuth validates in (nil: none) and returns the auth and the secret
// to seal.
func checkAuth(in *AuthInput, fe *errs.FieldErrors) (Auth, string) {
	if in == nil {
		return Auth{Type: AuthNone}, ""
	}
	switch in.Type {
	case AuthNone, "":
		if in.Name != "" || in.Value != "" {
			fe.Add("auth", "a none auth has no name or value")
		}
		return Auth{Type: AuthNone}, ""
	case AuthOAuth:
		if in.Name != "" || in.Value != "" {
			fe.Add("auth", "an oauth auth has no name or value")
		}
		return Auth{Type: AuthOAuth}, ""
	case AuthHeader:
		name := http.CanonicalHeaderKey(in.Name)
		switch {
		case in.Name == "" || len(in.Name) > MaxHeaderNameLen || !isHeaderToken(in.Name):
			fe.Add("auth.name", "must be a header name of 1-%d characters", MaxHeaderNameLen)
		case reservedHeaders[name] || strings.HasPrefix(name, "Sec-") || strings.HasPrefix(name, "Proxy-"):
			fe.Add("auth.name", "%s is set by the service and cannot carry a key", name)
		}
		if in.Value == "" || len(in.Value) > MaxHeaderValueLen || !validHeaderValue(in.Value) {
			fe.Add("auth.value", "must be 1-%d visible characters (no line breaks)", MaxHeaderValueLen)
		}
		return Auth{Type: AuthHeader, Name: name}, in.Value
	default:
		fe.Add("auth.type", "must be none, header or oauth")
		return Auth{}, ""
	}
}

func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(v) == v
}

// Endpoint is where and how to reach one server.
type Endpoint struct {
	URL string
	// Header and Value are a header auth's header, when Header is set.
	Header, Value string
}

// checkHost refuses a host that is a literal non-public address, or
// localhost: names are judged by the addresses they resolve to when
// dialed.
func checkHost(host string) error {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return errors.New("must not name a loopback host")
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return nil
	}
	if err := safehttp.CheckAddr(ip); err != nil {
		return fmt.Errorf("must name a public address: %v", err)
	}
	return nil
}
