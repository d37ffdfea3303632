package blob

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
)

// Local makes a Backend a Store by signing its URLs itself, as S3 signs
// presigned URLs, and serving them (Handler). The dev server mounts the
// handler at PathPrefix on its REST port, beside the API but outside the
// API's middleware: the signature, not a session, authorizes these
// requests, and their bodies are files, not JSON of at most 1 MiB.
//
// A URL is BaseURL + "/blobs/" + the path-escaped key (its slashes as
// %2F, one path segment), with the query parameters X-Blob-Expires (Unix
// seconds), for a PUT X-Blob-Content-Type and X-Blob-Size, and
// X-Blob-Signature: the base64url HMAC-SHA256, under the Local's secret,
// of the method, the key, the expiry, and for a PUT the content type, the
// size and whether it may only create (X-Blob-Create-Only), each
// length-prefixed. The handler answers 403 SIGNATURE_INVALID when the
// signature does not match the request (a changed key, expiry, method,
// type, size or create-only flag), 403 URL_EXPIRED after the expiry, 403
// SIGNED_HEADER_MISMATCH when a PUT's Content-Type, Content-Length or
// If-None-Match differs from the signed ones, 411 without a
// Content-Length, 412 PRECONDITION_FAILED for a create-only PUT over a
// blob, 404 BLOB_NOT_FOUND for a GET of a missing blob.
type Local struct {
	Backend
	base    string
	secret  []byte
	now     func() time.Time
	origins []string
}

// LocalOptions configure NewLocal.
type LocalOptions struct {
	// BaseURL is the origin the handler is served at, e.g.
	// http://127.0.0.1:3000 (no path, no trailing slash needed).
	BaseURL string
	// Secret is the HMAC key of the signatures (SecretFile keeps one
	// across restarts); nil means 32 random bytes, so that URLs signed by
	// one process stop working when it exits.
	Secret []byte
	// Now is the clock of expiries; nil means time.Now.
	Now func() time.Time
	// AllowedOrigins are the browser origins the handler answers CORS
	// requests of (ALLOWED_ORIGINS).
	AllowedOrigins []string
}

// PathPrefix is where Local's handler is mounted.
const PathPrefix = "/blobs/"

// The query parameters of a Local URL.
const (
	ParamExpires     = "X-Blob-Expires"
	ParamContentType = "X-Blob-Content-Type"
	ParamSize        = "X-Blob-Size"
	ParamCreateOnly  = "X-Blob-Create-Only"
	ParamSignature   = "X-Blob-Signature"
)

// Error codes of the Local handler.
const (
	CodeSignatureInvalid = "SIGNATURE_INVALID"
	CodeURLExpired       = "URL_EXPIRED"
	CodeHeaderMismatch   = "SIGNED_HEADER_MISMATCH"
)

// NewLocal returns the Store of b whose URLs start at o.BaseURL. It fails
// when o.BaseURL is not an http(s) origin or a random secret cannot be
// made.
func NewLocal(b Backend, o LocalOptions) (*Local, error) {
	base := strings.TrimRight(o.BaseURL, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return nil, fmt.Errorf("blob: local base URL %q: want an origin like http://127.0.0.1:3000", o.BaseURL)
	}
	secret := o.Secret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("blob: local signing secret: %w", err)
		}
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	origins := make([]string, 0, len(o.AllowedOrigins))
	for _, or := range o.AllowedOrigins {
		origins = append(origins, strings.TrimRight(or, "/"))
	}
	return &Local{Backend: b, base: base, secret: secret, now: now, origins: origins}, nil
}

// SecretFile returns the signing secret kept in the file at path (64 hex
// digits: 32 random bytes), creating it with a new secret, mode 0600,
// when it is missing, so that the URLs a Local signs keep working across
// restarts of the process. The file appears whole or not at all (written
// aside, then linked into place), and when two processes create it at
// once both use the one that won. It fails when the file cannot be read
// or created, or holds anything but 64 hex digits (naming the file).
func SecretFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := createSecretFile(path); err != nil {
			return nil, fmt.Errorf("blob: signing secret file %s: %w", path, err)
		}
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("blob: signing secret file: %w", err)
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(secret) != 32 {
		return nil, fmt.Errorf("blob: signing secret file %s: want 64 hex digits; delete it to make a new secret (signed URLs then stop working)", path)
	}
	return secret, nil
}

// createSecretFile writes a new random secret to path unless a file is
// there already.
func createSecretFile(path string) error {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".blob-secret-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(secret) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// PresignGet implements Store.PresignGet.
func (l *Local) PresignGet(ctx context.Context, key string, ttl time.Duration) (Presigned, error) {
	const op = "blob.Local.PresignGet"
	if err := CheckKey(key); err != nil {
		return Presigned{}, errs.Wrap(op, err)
	}
	if err := checkTTL(op, ttl); err != nil {
		return Presigned{}, err
	}
	exp := l.expiry(ttl)
	q := url.Values{ParamExpires: {strconv.FormatInt(exp.Unix(), 10)}}
	q.Set(ParamSignature, l.sign(http.MethodGet, key, q.Get(ParamExpires), "", "", ""))
	return Presigned{URL: l.url(key, q), Method: http.MethodGet, ExpiresAt: exp}, nil
}

// PresignPut implements Store.PresignPut.
func (l *Local) PresignPut(ctx context.Context, key string, o PutOptions, ttl time.Duration) (Presigned, error) {
	const op = "blob.Local.PresignPut"
	if err := CheckKey(key); err != nil {
		return Presigned{}, errs.Wrap(op, err)
	}
	if err := checkTTL(op, ttl); err != nil {
		return Presigned{}, err
	}
	if err := CheckSize(op, o.Size); err != nil {
		return Presigned{}, err
	}
	ct := ContentTypeOr(o.ContentType)
	exp := l.expiry(ttl)
	q := url.Values{
		ParamExpires:     {strconv.FormatInt(exp.Unix(), 10)},
		ParamContentType: {ct},
		ParamSize:        {strconv.FormatInt(o.Size, 10)},
	}
	headers := map[string]string{"Content-Type": ct}
	if o.CreateOnly {
		q.Set(ParamCreateOnly, "1")
		headers["If-None-Match"] = "*"
	}
	q.Set(ParamSignature, l.sign(http.MethodPut, key, q.Get(ParamExpires), ct, q.Get(ParamSize), q.Get(ParamCreateOnly)))
	return Presigned{URL: l.url(key, q), Method: http.MethodPut, Headers: headers, ExpiresAt: exp}, nil
}

// expiry is now plus ttl, to the second (the URL carries Unix seconds).
func (l *Local) expiry(ttl time.Duration) time.Time {
	return l.now().Add(ttl).Truncate(time.Second).UTC()
}

func (l *Local) url(key string, q url.Values) string {
	return l.base + PathPrefix + url.PathEscape(key) + "?" + q.Encode()
}

// sign returns the signature of a request's signed parts: each part is
// prefixed with its length, so no two sets of parts sign alike.
func (l *Local) sign(method, key, expires, contentType, size, createOnly string) string {
	mac := hmac.New(sha256.New, l.secret)
	for _, part := range []string{"wcblob-v1", method, key, expires, contentType, size, createOnly} {
		fmt.Fprintf(mac, "%d:%s;", len(part), part)
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Routes returns the handler's routes, without its CORS layer: GET and
// PUT /blobs/{key}. The dev server lists them with the API's.
func (l *Local) Routes() *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("GET "+PathPrefix+"{key}", http.HandlerFunc(l.serveGet))
	r.Handle("PUT "+PathPrefix+"{key}", http.HandlerFunc(l.servePut))
	return r
}

// Handler serves the signed URLs: Routes behind CORS for the allowed
// origins (a browser's PUT from the frontend, with its preflight) and
// headers that keep a served file from acting as a page of this origin.
func (l *Local) Handler() http.Handler {
	routes := l.Routes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if l.cors(w, r) {
			return
		}
		routes.ServeHTTP(w, r)
	})
}

// cors sets the CORS headers of a request from an allowed origin and
// answers preflights itself, reporting whether it answered. A preflight
// from another origin, or for a method other than GET and PUT, is 403
// ORIGIN_NOT_ALLOWED. Credentials are not allowed: the URL's signature is
// the credential.
func (l *Local) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := strings.TrimRight(r.Header.Get("Origin"), "/")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if origin == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	allowed := slices.Contains(l.origins, origin)
	if preflight {
		m := r.Header.Get("Access-Control-Request-Method")
		if !allowed || (m != http.MethodGet && m != http.MethodPut) {
			httpapi.WriteError(w, r, errs.E("blob.Local.cors", errs.Forbidden, "ORIGIN_NOT_ALLOWED", "origin or method not allowed"))
			return true
		}
		h.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		h.Set("Access-Control-Allow-Methods", "GET, PUT")
		h.Set("Access-Control-Allow-Headers", "Content-Type, If-None-Match")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	if allowed {
		h.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		h.Set("Access-Control-Expose-Headers", "ETag, Content-Length")
	}
	return false
}

// signed is what a verified URL allows.
type signed struct {
	key, contentType string
	size             int64
	createOnly       bool
}

// verify checks r's signature and expiry for method and returns what the
// URL allows: the key and, for a PUT, the content type, size and whether
// it may only create.
func (l *Local) verify(r *http.Request, method string) (signed, error) {
	const op = "blob.Local.verify"
	s := signed{key: r.PathValue("key")}
	q := r.URL.Query()
	expires := q.Get(ParamExpires)
	var sizeParam, createOnly string
	if method == http.MethodPut {
		s.contentType, sizeParam, createOnly = q.Get(ParamContentType), q.Get(ParamSize), q.Get(ParamCreateOnly)
	}
	got, decErr := base64.RawURLEncoding.DecodeString(q.Get(ParamSignature))
	want, _ := base64.RawURLEncoding.DecodeString(l.sign(method, s.key, expires, s.contentType, sizeParam, createOnly))
	if decErr != nil || !hmac.Equal(got, want) {
		return signed{}, errs.E(op, errs.Forbidden, CodeSignatureInvalid, "the URL's signature does not match the request: the URL was changed, or not signed by this server")
	}
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || !l.now().Before(time.Unix(exp, 0)) {
		return signed{}, errs.E(op, errs.Forbidden, CodeURLExpired, "the URL has expired")
	}
	if err := CheckKey(s.key); err != nil {
		return signed{}, errs.Wrap(op, err)
	}
	if method == http.MethodPut {
		if s.size, err = strconv.ParseInt(sizeParam, 10, 64); err != nil {
			return signed{}, errs.E(op, errs.Forbidden, CodeSignatureInvalid, "the URL's signed size is malformed")
		}
		s.createOnly = createOnly == "1"
	}
	return s, nil
}

func (l *Local) serveGet(w http.ResponseWriter, r *http.Request) {
	s, err := l.verify(r, http.MethodGet)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	obj, err := l.Get(r.Context(), s.key)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	defer obj.Body.Close()
	h := w.Header()
	h.Set("Content-Type", obj.ContentType)
	h.Set("Content-Length", strconv.FormatInt(obj.Size, 10))
	h.Set("ETag", obj.ETag)
	h.Set("Last-Modified", obj.LastModified.UTC().Format(http.TimeFormat))
	// A file opened in a browser runs no script and loads nothing.
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, obj.Body); err != nil {
		logging.FromContext(r.Context()).InfoContext(r.Context(), "blob download ended early", "err", err.Error())
	}
}

func (l *Local) servePut(w http.ResponseWriter, r *http.Request) {
	const op = "blob.Local.servePut"
	s, err := l.verify(r, http.MethodPut)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if got := r.Header.Get("Content-Type"); got != s.contentType {
		httpapi.WriteError(w, r, errs.E(op, errs.Forbidden, CodeHeaderMismatch,
			fmt.Sprintf("Content-Type must be %q, as signed, got %q", s.contentType, got)))
		return
	}
	if s.createOnly && r.Header.Get("If-None-Match") != "*" {
		httpapi.WriteError(w, r, errs.E(op, errs.Forbidden, CodeHeaderMismatch, "the upload must send If-None-Match: *, as signed"))
		return
	}
	if r.ContentLength < 0 {
		httpapi.WriteError(w, r, errs.E(op, errs.LengthRequired, "", "the upload needs a Content-Length header"))
		return
	}
	if r.ContentLength != s.size {
		httpapi.WriteError(w, r, errs.E(op, errs.Forbidden, CodeHeaderMismatch,
			fmt.Sprintf("the body must be exactly %d bytes, as signed, got Content-Length %d", s.size, r.ContentLength)))
		return
	}
	info, err := l.Put(r.Context(), s.key, http.MaxBytesReader(w, r.Body, s.size), PutOptions{ContentType: s.contentType, Size: s.size, CreateOnly: s.createOnly})
	if errs.CodeOf(err) == CodeExists {
		httpapi.WriteError(w, r, errs.E(op, errs.PreconditionFailed, "",
			"this URL can no longer upload: a file is already there, or the upload was closed").WithCause(err))
		return
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	w.Header().Set("ETag", info.ETag)
	w.WriteHeader(http.StatusOK)
}

var _ Store = (*Local)(nil)
