package authserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/safehttp"
	"github.com/workflowchat/service/shared/truncate"
)

// Bounds of client metadata (registration and metadata documents alike).
const (
	MaxRedirectURIs   = 10
	MaxURILen         = 2048
	MaxClientNameLen  = 200
	MaxRegistration   = 64 << 10
	MaxClientDocument = 16 << 10
	// DocumentTimeout bounds the fetch of a oauth.Client ID Metadata Document.
	DocumentTimeout = 5 * time.Second
	// Document cache: entries, and how long a document (bounded by its
	// Cache-Control max-age) or a failure is kept.
	maxCachedDocuments = 512
	minDocumentTTL     = time.Minute
	defaultDocumentTTL = 5 * time.Minute
	maxDocumentTTL     = 24 * time.Hour
	failedDocumentTTL  = 30 * time.Second
)

var errUnknownClient = errs.E("oauth.client", errs.NotFound, "CLIENT_NOT_FOUND", "unknown client")

// client resolves a client id: an https URL is a oauth.Client ID Metadata
// Document, fetched (and cached); anything else a registered client.
// Errors: NotFound CLIENT_NOT_FOUND for an unknown registered client;
// Invalid INVALID_CLIENT_DOCUMENT when a document cannot be fetched or is
// not acceptable (the message says why); storage errors.
func (s *Server) client(ctx context.Context, id string) (oauth.Client, error) {
	if id == "" || len(id) > MaxURILen {
		return oauth.Client{}, errUnknownClient
	}
	if strings.HasPrefix(id, "https://") || (s.docs.allowHTTP && strings.HasPrefix(id, "http://")) {
		return s.docs.get(ctx, id)
	}
	c, err := s.store.Client(ctx, id)
	if err != nil {
		return oauth.Client{}, err
	}
	if !s.now().Before(c.ExpiresAt) {
		return oauth.Client{}, errUnknownClient
	}
	return c, nil
}

// documentCache fetches and caches oauth.Client ID Metadata Documents.
type documentCache struct {
	hc        *http.Client
	allowHTTP bool
	now       func() time.Time

	mu      sync.Mutex
	entries map[string]documentEntry
}

type documentEntry struct {
	client  oauth.Client
	err     error
	expires time.Time
}

func newDocumentCache(hc *http.Client, allowHTTP bool, now func() time.Time) *documentCache {
	if hc == nil {
		hc = safehttp.NewClient(safehttp.Options{Timeout: DocumentTimeout, MaxRedirects: -1})
	}
	return &documentCache{hc: hc, allowHTTP: allowHTTP, now: now, entries: map[string]documentEntry{}}
}

func invalidDocument(format string, args ...any) error {
	return errs.E("oauth.document", errs.Invalid, "INVALID_CLIENT_DOCUMENT", "client metadata document: "+fmt.Sprintf(format, args...))
}

// get returns the client the document at id describes, from the cache
// when fresh.
func (d *documentCache) get(ctx context.Context, id string) (oauth.Client, error) {
	now := d.now()
	d.mu.Lock()
	e, ok := d.entries[id]
	d.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.client, e.err
	}
	c, ttl, err := d.fetch(ctx, id)
	if err != nil {
		if errs.Is(err, errs.Unavailable) || ctx.Err() != nil {
			return oauth.Client{}, err // not the document's fault: not cached
		}
		ttl = failedDocumentTTL
	}
	d.mu.Lock()
	if len(d.entries) >= maxCachedDocuments {
		for k, v := range d.entries { // drop the expired, else any one
			if !now.Before(v.expires) || len(d.entries) >= maxCachedDocuments {
				delete(d.entries, k)
			}
			if len(d.entries) < maxCachedDocuments/2 {
				break
			}
		}
	}
	d.entries[id] = documentEntry{client: c, err: err, expires: now.Add(ttl)}
	d.mu.Unlock()
	return c, err
}

// clientDocument is what a oauth.Client ID Metadata Document may say.
type clientDocument struct {
	oauthex.ClientRegistrationMetadata
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// fetch downloads and checks the document at id. It returns the client
// and how long to cache it.
func (d *documentCache) fetch(ctx context.Context, id string) (oauth.Client, time.Duration, error) {
	u, err := url.Parse(id)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" || u.Path == "" || u.Path == "/" ||
		strings.Contains(u.Path, "/./") || strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/..") || strings.HasSuffix(u.Path, "/.") {
		return oauth.Client{}, 0, invalidDocument("the client id must be an https URL with a path, without credentials, query or fragment")
	}
	ctx, cancel := context.WithTimeout(ctx, DocumentTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return oauth.Client{}, 0, invalidDocument("the client id is not a URL that can be fetched")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.hc.Do(req)
	if err != nil {
		if errors.Is(err, safehttp.ErrForbiddenAddress) {
			return oauth.Client{}, 0, invalidDocument("the client id's host is not a public address")
		}
		return oauth.Client{}, 0, invalidDocument("could not be fetched")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return oauth.Client{}, 0, invalidDocument("fetching it answered HTTP %d (redirects are not followed)", resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return oauth.Client{}, 0, invalidDocument("it is not served as application/json")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxClientDocument+1))
	if err != nil {
		return oauth.Client{}, 0, invalidDocument("could not be read")
	}
	if len(body) > MaxClientDocument {
		return oauth.Client{}, 0, invalidDocument("it is larger than %d bytes", MaxClientDocument)
	}
	var doc clientDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return oauth.Client{}, 0, invalidDocument("it is not a JSON object of client metadata")
	}
	if doc.ClientID != id {
		return oauth.Client{}, 0, invalidDocument("its client_id is not the URL it was fetched from")
	}
	if doc.ClientSecret != "" {
		return oauth.Client{}, 0, invalidDocument("it must not hold a client_secret")
	}
	if m := doc.TokenEndpointAuthMethod; m != "" && m != "none" {
		return oauth.Client{}, 0, invalidDocument("token_endpoint_auth_method %q is not supported; use none (PKCE)", m)
	}
	c, err := checkMetadata(&doc.ClientRegistrationMetadata)
	if err != nil {
		return oauth.Client{}, 0, invalidDocument("%s", errs.MessageOf(err, "invalid metadata"))
	}
	c.ID, c.Document, c.AuthMethod = id, true, "none"
	if c.Name == "" {
		c.Name = u.Host
	}
	return c, documentTTL(resp.Header.Get("Cache-Control")), nil
}

// documentTTL reads max-age from a Cache-Control header, bounded.
func documentTTL(cc string) time.Duration {
	ttl := defaultDocumentTTL
	for _, d := range strings.Split(cc, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(strings.ToLower(d)), "=")
		switch k {
		case "no-store", "no-cache":
			return minDocumentTTL
		case "max-age":
			var n int
			if _, err := fmt.Sscanf(v, "%d", &n); err == nil {
				ttl = time.Duration(n) * time.Second
			}
		}
	}
	return min(max(ttl, minDocumentTTL), maxDocumentTTL)
}

// checkMetadata validates client metadata (RFC 7591 section 2) and returns
// the client it describes (without id or authentication). Its errors are
// Invalid with the OAuth code as their code (invalid_redirect_uri,
// invalid_client_metadata).
func checkMetadata(m *oauthex.ClientRegistrationMetadata) (oauth.Client, error) {
	const op = "oauth.checkMetadata"
	bad := func(code, format string, args ...any) error {
		return errs.E(op, errs.Invalid, code, fmt.Sprintf(format, args...))
	}
	if len(m.RedirectURIs) == 0 || len(m.RedirectURIs) > MaxRedirectURIs {
		return oauth.Client{}, bad("invalid_redirect_uri", "redirect_uris must list 1 to %d URIs", MaxRedirectURIs)
	}
	for _, r := range m.RedirectURIs {
		if err := checkRedirectURI(r); err != nil {
			return oauth.Client{}, bad("invalid_redirect_uri", "redirect_uris: %q: %v", truncate.Ellipsis(r, 100), err)
		}
	}
	grants := m.GrantTypes
	if len(grants) == 0 {
		grants = []string{"authorization_code"}
	}
	for _, g := range grants {
		if g != "authorization_code" && g != "refresh_token" {
			return oauth.Client{}, bad("invalid_client_metadata", "grant_types: %q is not supported (authorization_code, refresh_token)", truncate.Ellipsis(g, 50))
		}
	}
	if !slices.Contains(grants, "authorization_code") {
		return oauth.Client{}, bad("invalid_client_metadata", "grant_types must include authorization_code")
	}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return oauth.Client{}, bad("invalid_client_metadata", "response_types: %q is not supported (code)", truncate.Ellipsis(rt, 50))
		}
	}
	if utf8.RuneCountInString(m.ClientName) > MaxClientNameLen {
		return oauth.Client{}, bad("invalid_client_metadata", "client_name must be at most %d characters", MaxClientNameLen)
	}
	if m.ClientURI != "" {
		if u, err := url.Parse(m.ClientURI); err != nil || u.Scheme != "https" || u.Host == "" || len(m.ClientURI) > MaxURILen {
			return oauth.Client{}, bad("invalid_client_metadata", "client_uri must be an https URL")
		}
	}
	return oauth.Client{Name: strings.TrimSpace(m.ClientName), URI: m.ClientURI, RedirectURIs: slices.Clone(m.RedirectURIs), GrantTypes: grants}, nil
}

// forbiddenSchemes can never be redirect targets.
var forbiddenSchemes = []string{"javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss"}

// checkRedirectURI accepts an absolute URI without a fragment: https; http
// only to a loopback host (RFC 8252 section 7.3); or a private-use scheme
// of a native app (section 7.1).
func checkRedirectURI(raw string) error {
	if len(raw) > MaxURILen {
		return fmt.Errorf("longer than %d characters", MaxURILen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return errors.New("not an absolute URI")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("must not have a fragment")
	}
	if u.User != nil {
		return errors.New("must not carry credentials")
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https":
		if u.Host == "" {
			return errors.New("no host")
		}
	case scheme == "http":
		if !isLoopbackHost(u.Hostname()) {
			return errors.New("http is allowed only to a loopback host (127.0.0.1, [::1], localhost)")
		}
	case slices.Contains(forbiddenSchemes, scheme):
		return fmt.Errorf("scheme %s is not allowed", scheme)
	}
	return nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// redirectAllowed reports whether uri is one of registered, compared
// exactly, or, for a loopback http URI, equal but for the port (a native
// app listens on whatever port is free, RFC 8252 section 7.3).
func redirectAllowed(registered []string, uri string) bool {
	if slices.Contains(registered, uri) {
		return true
	}
	got, err := url.Parse(uri)
	if err != nil || got.Scheme != "http" || !isLoopbackHost(got.Hostname()) || got.User != nil || got.Fragment != "" {
		return false
	}
	for _, r := range registered {
		reg, err := url.Parse(r)
		if err != nil || reg.Scheme != "http" || !isLoopbackHost(reg.Hostname()) {
			continue
		}
		if reg.Hostname() == got.Hostname() && reg.EscapedPath() == got.EscapedPath() && reg.RawQuery == got.RawQuery {
			return true
		}
	}
	return false
}

// registrationResponse is the answer to a registration (RFC 7591 section
// 3.2.1).
type registrationResponse struct {
	oauthex.ClientRegistrationMetadata
	ClientID              string `json:"client_id"`
	ClientSecret          string `json:"client_secret,omitempty"`
	ClientIDIssuedAt      int64  `json:"client_id_issued_at"`
	ClientSecretExpiresAt *int64 `json:"client_secret_expires_at,omitempty"`
}

// handleRegister registers a client (RFC 7591), rate limited per client
// address.
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	if err := s.limiter.Allow(r.Context(), "oauth-register:"+auth.ClientAddress(r), s.regRule); err != nil {
		writeOAuthError(w, 0, fromServiceError(err))
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeOAuthError(w, http.StatusBadRequest, oauthError{Code: "invalid_client_metadata", Description: "the body must be JSON (Content-Type: application/json)"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRegistration))
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		// 413 as for any body over a limit (the edge answers a declared
		// length over 1 MiB the same way), naming this one.
		httpapi.WriteError(w, r, httpapi.BodyTooLarge("authserver.handleRegister", tooLarge.Limit))
		return
	}
	if err != nil {
		writeOAuthError(w, http.StatusBadRequest, oauthError{Code: "invalid_client_metadata", Description: "the body could not be read"})
		return
	}
	var m oauthex.ClientRegistrationMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		writeOAuthError(w, http.StatusBadRequest, oauthError{Code: "invalid_client_metadata", Description: "the body is not a JSON object of client metadata"})
		return
	}
	c, err := checkMetadata(&m)
	if err != nil {
		writeOAuthError(w, http.StatusBadRequest, oauthError{Code: errs.CodeOf(err), Description: errs.MessageOf(err, "invalid client metadata")})
		return
	}
	method := m.TokenEndpointAuthMethod
	if method == "" {
		method = "client_secret_basic" // RFC 7591 section 2
	}
	switch method {
	case "none", "client_secret_post", "client_secret_basic":
	default:
		writeOAuthError(w, http.StatusBadRequest, oauthError{Code: "invalid_client_metadata", Description: "token_endpoint_auth_method must be none, client_secret_post or client_secret_basic"})
		return
	}
	now := s.now().UTC()
	c.ID, c.AuthMethod, c.CreatedAt, c.ExpiresAt = uuid.NewString(), method, now, now.Add(oauth.ClientTTL)
	if c.Name == "" {
		c.Name = "Unnamed client"
	}
	var secret string
	if method != "none" {
		secret = newSecret("wcs_")
		c.SecretHash = oauth.HashSecret(secret)
	}
	if err := s.store.CreateClient(r.Context(), c); err != nil {
		writeOAuthError(w, 0, fromServiceError(err))
		return
	}
	out := registrationResponse{ClientRegistrationMetadata: m, ClientID: c.ID, ClientSecret: secret, ClientIDIssuedAt: now.Unix()}
	out.TokenEndpointAuthMethod, out.GrantTypes, out.ResponseTypes, out.ClientName = method, c.GrantTypes, []string{"code"}, c.Name
	if secret != "" {
		never := int64(0)
		out.ClientSecretExpiresAt = &never
	}
	writeJSON(w, http.StatusCreated, out)
}

// authenticateClient identifies the client of a token or revocation
// request (RFC 6749 section 2.3): client_secret_basic, client_secret_post,
// or a public client's client_id alone. A confidential client must prove
// its secret; a public client must not present one.
func (s *Server) authenticateClient(r *http.Request) (oauth.Client, *oauthError) {
	id, secret, basic := r.BasicAuth()
	if basic {
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			e := errInvalidClient("malformed client credentials")
			return oauth.Client{}, &e
		}
		if r.PostForm.Get("client_secret") != "" {
			e := errInvalidRequest("use one client authentication method")
			return oauth.Client{}, &e
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id == "" {
		e := errInvalidClient("client authentication is required (client_id)")
		return oauth.Client{}, &e
	}
	if form := r.PostForm.Get("client_id"); basic && form != "" && form != id {
		e := errInvalidClient("client_id does not match the authenticated client")
		return oauth.Client{}, &e
	}
	c, err := s.client(r.Context(), id)
	switch {
	case errs.Is(err, errs.NotFound), errs.Is(err, errs.Invalid):
		e := errInvalidClient("unknown client")
		if errs.Is(err, errs.Invalid) {
			e.Description = errs.MessageOf(err, "invalid client")
		}
		return oauth.Client{}, &e
	case err != nil:
		e := fromServiceError(err)
		return oauth.Client{}, &e
	}
	if c.AuthMethod == "none" {
		if secret != "" {
			e := errInvalidClient("this client is public: it authenticates with PKCE, not a secret")
			return oauth.Client{}, &e
		}
		return c, nil
	}
	if secret == "" || subtle.ConstantTimeCompare([]byte(oauth.HashSecret(secret)), []byte(c.SecretHash)) != 1 {
		e := errInvalidClient("client authentication failed")
		return oauth.Client{}, &e
	}
	return c, nil
}
