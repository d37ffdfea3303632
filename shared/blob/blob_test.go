package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/blob/blobtest"
	"github.com/workflowchat/service/shared/errs"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const frontend = "https://app.example.com"

// serve returns b as a Local store served by an httptest server.
func serve(t *testing.T, b blob.Backend, now func() time.Time) (*blob.Local, string) {
	t.Helper()
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	l, err := blob.NewLocal(b, blob.LocalOptions{BaseURL: srv.URL, Now: now, AllowedOrigins: []string{frontend}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(blob.PathPrefix, l.Handler())
	h = mux
	return l, srv.URL
}

func TestMemoryContract(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blob.Store {
		l, _ := serve(t, blob.NewMemory(nil), nil)
		return l
	})
}

func TestFolderContract(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blob.Store {
		f, err := blob.NewFolder(filepath.Join(t.TempDir(), "blobs"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { checkNoStrays(t, f.Dir()) })
		l, _ := serve(t, f, nil)
		return l
	})
}

// checkNoStrays fails when dir holds anything but blob files and the
// directories leading to them: no temporary file outlives a write.
func checkNoStrays(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, "~") {
			t.Errorf("stray file %s", p)
		}
		return nil
	})
}

func TestFolderKeepsBlobsAcrossReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := blob.NewFolder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put, err := blob.PutBytes(ctx, f, "attachments/u/1", []byte("kept"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	again, err := blob.NewFolder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, info, err := blob.ReadAll(ctx, again, "attachments/u/1", 100)
	if err != nil || string(b) != "kept" || info.ETag != put.ETag || info.ContentType != "text/plain" {
		t.Fatalf("after reopen: %q %+v %v", b, info, err)
	}
	// Files stay inside the folder, named after their keys.
	if _, err := os.Stat(filepath.Join(dir, "attachments", "u", "1~")); err != nil {
		t.Fatalf("blob file: %v", err)
	}
}

func TestFolderRefusesDamagedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := blob.NewFolder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := blob.PutBytes(ctx, f, "chats/c/v", []byte("value"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "chats", "c", "v~")
	for name, damage := range map[string]func([]byte) []byte{
		"cut":          func(b []byte) []byte { return b[:len(b)-3] },
		"bytes added":  func(b []byte) []byte { return append([]byte("x"), b...) },
		"no trailer":   func([]byte) []byte { return []byte("value") },
		"empty":        func([]byte) []byte { return nil },
		"bad metadata": func(b []byte) []byte { return bytes.Replace(b, []byte(`"size"`), []byte(`"size":"`), 1) },
	} {
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, damage(orig), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = f.Get(ctx, "chats/c/v")
		if errs.KindOf(err) != errs.Internal || err == nil {
			t.Errorf("%s: get = %v, want an internal error", name, err)
		}
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewFolderRefusesAFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.NewFolder(p, nil); err == nil {
		t.Fatal("NewFolder on a file: no error")
	}
}

func TestNewLocalRefusesBadBaseURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:3000", "ftp://x", "http://x/path", "http://"} {
		if _, err := blob.NewLocal(blob.NewMemory(nil), blob.LocalOptions{BaseURL: u}); err == nil {
			t.Errorf("base URL %q accepted", u)
		}
	}
}

// do sends a request and returns its status and body.
func do(t *testing.T, method, u string, body []byte, header map[string]string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := blobtest.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// tamper returns u with the query parameter name set to value, or with
// its path changed by path when set.
func tamper(t *testing.T, u, name, value string, path func(string) string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if path != nil {
		p.RawPath = path(p.EscapedPath())
		p.Path, _ = url.PathUnescape(p.RawPath)
	}
	if name != "" {
		q := p.Query()
		q.Set(name, value)
		p.RawQuery = q.Encode()
	}
	return p.String()
}

func TestLocalURLsRefuseTamperingAndExpiry(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	l, _ := serve(t, blob.NewMemory(c.Now), c.Now)
	ctx := context.Background()
	body := []byte("hello, world")
	up, err := l.PresignPut(ctx, "uploads/u/a", blob.PutOptions{ContentType: "text/plain", Size: int64(len(body))}, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blob.PutBytes(ctx, l, "attachments/u/b", []byte("other user's file"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	down, err := l.PresignGet(ctx, "uploads/u/a", 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	later := strconv.FormatInt(c.Now().Add(time.Hour).Unix(), 10)
	otherKey := func(p string) string { return strings.Replace(p, "uploads%2Fu%2Fa", "attachments%2Fu%2Fb", 1) }
	ct := map[string]string{"Content-Type": "text/plain"}

	cases := []struct {
		name   string
		method string
		url    string
		body   []byte
		header map[string]string
		status int
		code   string
	}{
		{"put: another key", "PUT", tamper(t, up.URL, "", "", otherKey), body, ct, 403, blob.CodeSignatureInvalid},
		{"put: later expiry", "PUT", tamper(t, up.URL, blob.ParamExpires, later, nil), body, ct, 403, blob.CodeSignatureInvalid},
		{"put: larger size", "PUT", tamper(t, up.URL, blob.ParamSize, "100", nil), make([]byte, 100), ct, 403, blob.CodeSignatureInvalid},
		{"put: other type", "PUT", tamper(t, up.URL, blob.ParamContentType, "text/html", nil), body, map[string]string{"Content-Type": "text/html"}, 403, blob.CodeSignatureInvalid},
		{"put: no signature", "PUT", tamper(t, up.URL, blob.ParamSignature, "", nil), body, ct, 403, blob.CodeSignatureInvalid},
		{"put: garbage signature", "PUT", tamper(t, up.URL, blob.ParamSignature, "!!!", nil), body, ct, 403, blob.CodeSignatureInvalid},
		{"put: wrong Content-Type header", "PUT", up.URL, body, map[string]string{"Content-Type": "text/html"}, 403, blob.CodeHeaderMismatch},
		{"put: no Content-Type header", "PUT", up.URL, body, nil, 403, blob.CodeHeaderMismatch},
		{"put: body one byte short", "PUT", up.URL, body[:len(body)-1], ct, 403, blob.CodeHeaderMismatch},
		{"put: body one byte over", "PUT", up.URL, append(append([]byte{}, body...), '!'), ct, 403, blob.CodeHeaderMismatch},
		{"put URL used to GET", "GET", up.URL, nil, nil, 403, blob.CodeSignatureInvalid},
		{"get URL used to PUT", "PUT", down.URL, body, ct, 403, blob.CodeSignatureInvalid},
		{"get: another key", "GET", tamper(t, down.URL, "", "", otherKey), nil, nil, 403, blob.CodeSignatureInvalid},
		{"get: later expiry", "GET", tamper(t, down.URL, blob.ParamExpires, later, nil), nil, nil, 403, blob.CodeSignatureInvalid},
	}
	for _, tc := range cases {
		status, _, b := do(t, tc.method, tc.url, tc.body, tc.header)
		if status != tc.status || !strings.Contains(b, `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, b, tc.status, tc.code)
		}
	}
	if _, err := l.Stat(ctx, "uploads/u/a"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a refused PUT stored something: %v", err)
	}
	if b, _, _ := blob.ReadAll(ctx, l, "attachments/u/b", 100); string(b) != "other user's file" {
		t.Fatalf("the other key's blob changed: %q", b)
	}

	// The genuine URLs work until their expiry, to the second.
	if status, h, b := do(t, "PUT", up.URL, body, ct); status != 200 || h.Get("ETag") == "" {
		t.Fatalf("genuine PUT: %d %s", status, b)
	}
	if status, h, b := do(t, "GET", down.URL, nil, nil); status != 200 || b != string(body) || h.Get("Content-Type") != "text/plain" ||
		h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("genuine GET: %d %q %v", status, b, h)
	}
	c.Add(15*time.Minute - time.Second)
	if status, _, b := do(t, "GET", down.URL, nil, nil); status != 200 {
		t.Fatalf("GET a second before expiry: %d %s", status, b)
	}
	c.Add(time.Second)
	for _, u := range []struct{ method, url string }{{"GET", down.URL}, {"PUT", up.URL}} {
		status, _, b := do(t, u.method, u.url, body, ct)
		if status != 403 || !strings.Contains(b, blob.CodeURLExpired) {
			t.Errorf("%s at expiry: %d %s, want 403 %s", u.method, status, b, blob.CodeURLExpired)
		}
	}
}

func TestLocalURLsOfAnotherSecretFail(t *testing.T) {
	t.Parallel()
	mem := blob.NewMemory(nil)
	a, base := serve(t, mem, nil)
	b, err := blob.NewLocal(mem, blob.LocalOptions{BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := blob.PutBytes(ctx, a, "chats/c/v", []byte("v"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	other, err := b.PresignGet(ctx, "chats/c/v", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := do(t, "GET", other.URL, nil, nil); status != 403 {
		t.Fatalf("URL signed by another process: %d %s", status, body)
	}
}

func TestLocalUploadNeedsALength(t *testing.T) {
	t.Parallel()
	l, _ := serve(t, blob.NewMemory(nil), nil)
	up, err := l.PresignPut(context.Background(), "uploads/u/x", blob.PutOptions{ContentType: "text/plain", Size: 3}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", up.URL, io.MultiReader(strings.NewReader("abc"))) // unknown length: chunked
	req.Header.Set("Content-Type", "text/plain")
	resp, err := blobtest.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusLengthRequired || !strings.Contains(string(b), "LENGTH_REQUIRED") {
		t.Fatalf("chunked upload: %d %s", resp.StatusCode, b)
	}
}

func TestLocalCORS(t *testing.T) {
	t.Parallel()
	l, _ := serve(t, blob.NewMemory(nil), nil)
	up, err := l.PresignPut(context.Background(), "uploads/u/x", blob.PutOptions{ContentType: "image/png", Size: 4}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	preflight := func(origin, method string) (int, http.Header) {
		status, h, _ := do(t, "OPTIONS", up.URL, nil, map[string]string{"Origin": origin, "Access-Control-Request-Method": method,
			"Access-Control-Request-Headers": "content-type"})
		return status, h
	}
	status, h := preflight(frontend, "PUT")
	if status != 204 || h.Get("Access-Control-Allow-Origin") != frontend || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "PUT") ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "content-type") || h.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("preflight from the frontend: %d %v", status, h)
	}
	if status, h := preflight("https://evil.example", "PUT"); status != 403 || h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %v", status, h)
	}
	if status, _ := preflight(frontend, "DELETE"); status != 403 {
		t.Fatalf("preflight for DELETE: %d", status)
	}
	// The PUT itself, as the browser sends it: Origin, no cookie.
	status, h, b := do(t, "PUT", up.URL, []byte("\x89PNG"), map[string]string{"Origin": frontend, "Content-Type": "image/png"})
	if status != 200 || h.Get("Access-Control-Allow-Origin") != frontend || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "ETag") {
		t.Fatalf("PUT from the frontend: %d %v %s", status, h, b)
	}
	// Another origin's page gets no CORS headers (its script cannot read
	// the answer); the signature, not the origin, authorizes the write.
	status, h, _ = do(t, "PUT", up.URL, []byte("\x89PNG"), map[string]string{"Origin": "https://evil.example", "Content-Type": "image/png"})
	if status != 200 || h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("PUT from another origin: %d %v", status, h)
	}
}

func TestLocalRoutes(t *testing.T) {
	t.Parallel()
	l, err := blob.NewLocal(blob.NewMemory(nil), blob.LocalOptions{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(l.Routes().Patterns(), ",")
	if got != "GET /blobs/{key},PUT /blobs/{key}" {
		t.Fatalf("routes %s", got)
	}
	u, err := l.PresignGet(context.Background(), "attachments/u/1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u.URL, "http://127.0.0.1:1/blobs/attachments%2Fu%2F1?") {
		t.Fatalf("URL %s: want the key as one escaped path segment", u.URL)
	}
}

func TestKinds(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, k := range blob.Kinds {
		if err := blob.CheckPrefix(k.Prefix); err != nil || !strings.HasSuffix(k.Prefix, "/") || strings.Count(k.Prefix, "/") != 1 {
			t.Errorf("kind prefix %q: want one segment and a slash (%v)", k.Prefix, err)
		}
		if seen[k.Prefix] || k.ExpiresDays < 0 || k.What == "" {
			t.Errorf("kind %+v", k)
		}
		seen[k.Prefix] = true
	}
}

func TestLocalCreateOnlyIsSigned(t *testing.T) {
	t.Parallel()
	l, _ := serve(t, blob.NewMemory(nil), nil)
	up, err := l.PresignPut(context.Background(), "uploads/u/once", blob.PutOptions{ContentType: "text/plain", Size: 2, CreateOnly: true}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Dropping the flag from the URL breaks the signature; leaving out the
	// header breaks the request.
	stripped := strings.Replace(up.URL, blob.ParamCreateOnly+"=1&", "", 1)
	if stripped == up.URL {
		t.Fatalf("URL %s has no %s", up.URL, blob.ParamCreateOnly)
	}
	if status, _, b := do(t, "PUT", stripped, []byte("hi"), map[string]string{"Content-Type": "text/plain"}); status != 403 || !strings.Contains(b, blob.CodeSignatureInvalid) {
		t.Fatalf("without the create-only flag: %d %s", status, b)
	}
	if status, _, b := do(t, "PUT", up.URL, []byte("hi"), map[string]string{"Content-Type": "text/plain"}); status != 403 || !strings.Contains(b, blob.CodeHeaderMismatch) {
		t.Fatalf("without If-None-Match: %d %s", status, b)
	}
	if status, _, b := do(t, "PUT", up.URL, []byte("hi"), up.Headers); status != 200 {
		t.Fatalf("genuine: %d %s", status, b)
	}
	if status, _, b := do(t, "PUT", up.URL, []byte("ho"), up.Headers); status != 412 || !strings.Contains(b, "PRECONDITION_FAILED") {
		t.Fatalf("again: %d %s", status, b)
	}
}

// TestCopyExactly covers the body check every backend's Put shares (S3's
// included): a body off its size, over an http.MaxBytesReader's limit or
// broken off is refused with a client's error.
func TestCopyExactly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body io.Reader
		size int64
		code string
	}{
		{"exact", strings.NewReader("abc"), 3, ""},
		{"short", strings.NewReader("ab"), 3, blob.CodeSize},
		{"long", strings.NewReader("abcd"), 3, blob.CodeSize},
		{"over a request's limit", http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader("abcd")), 2), 3, blob.CodeSize},
		{"broken off", io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(errors.New("connection reset"))), 3, "BODY_INCOMPLETE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var dst bytes.Buffer
			_, err := blob.CopyExactly(&dst, tt.body, tt.size)
			if tt.code == "" {
				if err != nil || dst.String() != "abc" {
					t.Fatalf("got %q, %v", dst.String(), err)
				}
				return
			}
			if errs.CodeOf(err) != tt.code || !errs.Is(err, errs.Invalid) {
				t.Fatalf("err %v (code %s), want Invalid %s", err, errs.CodeOf(err), tt.code)
			}
		})
	}
}

// TestSecretFile: the secret is created once, mode 0600, and read back
// the same by later calls, also by calls racing to create it; a damaged
// file is an error naming it, never a new secret; a Local over the same
// secret honours the URLs another one signed (a restarted dev server).
func TestSecretFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "data.json.blob-secret")
	secrets := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range secrets {
		wg.Go(func() {
			s, err := blob.SecretFile(path)
			if err != nil {
				t.Error(err)
			}
			secrets[i] = s
		})
	}
	wg.Wait()
	for _, s := range secrets {
		if len(s) != 32 || !bytes.Equal(s, secrets[0]) {
			t.Fatalf("secrets %x: want one of 32 bytes", secrets)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v, %v; want mode 0600", fi, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d files beside the secret, want none (temporary files removed)", len(entries)-1)
	}

	mem := blob.NewMemory(nil)
	first, err := blob.NewLocal(mem, blob.LocalOptions{BaseURL: "http://127.0.0.1:1", Secret: secrets[0]})
	if err != nil {
		t.Fatal(err)
	}
	up, err := first.PresignPut(context.Background(), "uploads/u/a", blob.PutOptions{ContentType: "text/plain", Size: 2, CreateOnly: true}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := blob.SecretFile(path)
	second, err := blob.NewLocal(mem, blob.LocalOptions{BaseURL: "http://127.0.0.1:1", Secret: again})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	req := httptest.NewRequest("PUT", u.RequestURI(), strings.NewReader("hi"))
	for k, v := range up.Headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	second.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("a URL signed before the restart: %d %s", rec.Code, rec.Body)
	}

	for name, content := range map[string]string{"empty": "", "short": "abcd", "not hex": strings.Repeat("z", 64)} {
		bad := filepath.Join(t.TempDir(), "bad")
		if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := blob.SecretFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s file: %v, want an error naming it", name, err)
		}
		if b, _ := os.ReadFile(bad); string(b) != content {
			t.Errorf("%s file was changed to %q", name, b)
		}
	}
}
