package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/paging"
)

type createReq struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (c createReq) Validate() error {
	var f errs.FieldErrors
	if c.Name == "" {
		f.Add("name", "is required")
	}
	if c.Count < 0 {
		f.Add("count", "must be 0 or more")
	}
	return f.Err("test.create")
}

type created struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func newAPI() http.Handler {
	r := httpapi.NewRouter()
	r.Handle("POST /things", httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in createReq) (created, error) {
		if in.Name == "taken" {
			return created{}, errs.E("test", errs.Conflict, "NAME_TAKEN", "name is taken")
		}
		if in.Name == "boom" {
			return created{}, errors.New("database password=hunter2 exploded")
		}
		if in.Name == "panic" {
			panic("kaboom")
		}
		return created{Name: in.Name, Count: in.Count}, nil
	}))
	r.Handle("GET /things/{id}", httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (map[string]string, error) {
		id, err := httpapi.PathUUID(r, "id")
		if err != nil {
			return nil, err
		}
		return map[string]string{"id": id}, nil
	}))
	r.Handle("PUT /things", httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in createReq) (created, error) {
		return created(in), nil
	}))
	r.Handle("DELETE /things/{id}", httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		return httpapi.Empty{}, nil
	}))
	r.Handle("GET /pages", httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (paging.Page, error) {
		return httpapi.ParsePage(r)
	}))
	return httpapi.Stack(r, httpapi.Options{AllowedOrigins: []string{"https://app.example.com"}})
}

type errorBody struct {
	Error   string            `json:"error"`
	Message string            `json:"message"`
	Code    string            `json:"code"`
	Details []errs.FieldError `json:"details"`
}

func TestEndpointErrors(t *testing.T) {
	t.Parallel()
	api := newAPI()
	const uuid = "0b7c9a38-8f0c-4e43-9d7a-5bb1a3c5d0e1"
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
		field                    string
		leak                     string
	}{
		{"malformed json", "POST", "/things", `{"name":`, 400, "INVALID_JSON", "", ""},
		{"empty body", "POST", "/things", ``, 400, "INVALID_JSON", "", ""},
		{"not an object", "POST", "/things", `["a"]`, 400, "INVALID_JSON", "", ""},
		{"trailing data", "POST", "/things", `{"name":"a"} {}`, 400, "INVALID_JSON", "", ""},
		{"trailing data after a type error", "POST", "/things", `{"count":"x"}0`, 400, "INVALID_JSON", "", ""},
		{"wrong type", "POST", "/things", `{"name":"a","count":"x"}`, 400, "VALIDATION_FAILED", "count", ""},
		{"missing field", "POST", "/things", `{"count":1}`, 400, "VALIDATION_FAILED", "name", ""},
		{"domain conflict", "POST", "/things", `{"name":"taken"}`, 409, "NAME_TAKEN", "", ""},
		{"internal error hides cause", "POST", "/things", `{"name":"boom"}`, 500, "INTERNAL_ERROR", "", "hunter2"},
		{"panic recovered", "POST", "/things", `{"name":"panic"}`, 500, "INTERNAL_ERROR", "", "kaboom"},
		{"too large", "POST", "/things", `{"name":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}`, 413, "PAYLOAD_TOO_LARGE", "", ""},
		{"bad uuid", "GET", "/things/not-a-uuid", "", 400, "INVALID_ID", "id", ""},
		{"uuid without dashes", "GET", "/things/0b7c9a388f0c4e439d7a5bb1a3c5d0e1", "", 400, "INVALID_ID", "id", ""},
		{"unknown route", "GET", "/nope", "", 404, "ROUTE_NOT_FOUND", "", ""},
		{"wrong method", "PATCH", "/things", "", 405, "METHOD_NOT_ALLOWED", "", ""},
		{"limit too big", "GET", "/pages?limit=101", "", 400, "INVALID_PAGINATION", "limit", ""},
		{"limit zero", "GET", "/pages?limit=0", "", 400, "INVALID_PAGINATION", "limit", ""},
		{"limit not a number", "GET", "/pages?limit=ten", "", 400, "INVALID_PAGINATION", "limit", ""},
		{"negative offset", "GET", "/pages?offset=-1", "", 400, "INVALID_PAGINATION", "offset", ""},
		{"offset past the bound", "GET", "/pages?offset=10001", "", 400, "INVALID_PAGINATION", "offset", ""},
		{"offset of the largest int", "GET", "/pages?offset=9223372036854775807", "", 400, "INVALID_PAGINATION", "offset", ""},
		{"offset beyond int64", "GET", "/pages?offset=99999999999999999999", "", 400, "INVALID_PAGINATION", "offset", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.status, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			var b errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if b.Code != tt.code || b.Error != http.StatusText(tt.status) || b.Message == "" {
				t.Errorf("body = %+v, want code %s and error %q", b, tt.code, http.StatusText(tt.status))
			}
			if tt.field != "" && (len(b.Details) == 0 || b.Details[0].Field != tt.field) {
				t.Errorf("details = %+v, want field %q", b.Details, tt.field)
			}
			if tt.leak != "" && strings.Contains(rec.Body.String(), tt.leak) {
				t.Errorf("body leaks %q: %s", tt.leak, rec.Body)
			}
			if rec.Header().Get(httpapi.RequestIDHeader) == "" {
				t.Error("no request id header")
			}
		})
	}
}

func TestEndpointSuccess(t *testing.T) {
	t.Parallel()
	api := newAPI()
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"created envelope", "POST", "/things", `{"name":"a","count":2,"unknown":true}`, 201, `{"data":{"name":"a","count":2}}`},
		{"uuid path, lower-cased", "GET", "/things/0B7C9A38-8F0C-4E43-9D7A-5BB1A3C5D0E1", "", 200, `{"data":{"id":"0b7c9a38-8f0c-4e43-9d7a-5bb1a3c5d0e1"}}`},
		{"no content", "DELETE", "/things/x", "", 204, ``},
		{"page defaults", "GET", "/pages", "", 200, `{"data":{"Limit":20,"Offset":0}}`},
		{"page values", "GET", "/pages?limit=100&offset=40", "", 200, `{"data":{"Limit":100,"Offset":40}}`},
		{"largest offset", "GET", "/pages?limit=100&offset=10000", "", 200, `{"data":{"Limit":100,"Offset":10000}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.status, rec.Body)
			}
			if got := strings.TrimSpace(rec.Body.String()); got != tt.want {
				t.Errorf("body = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	api := newAPI()
	tests := []struct {
		name, method, origin, reqMethod string
		status                          int
		allowOrigin                     string
	}{
		{"preflight allowed", "OPTIONS", "https://app.example.com", "POST", 204, "https://app.example.com"},
		{"preflight refused", "OPTIONS", "https://evil.example", "POST", 403, ""},
		{"simple allowed", "GET", "https://app.example.com", "", 200, "https://app.example.com"},
		{"simple unknown origin gets no CORS headers", "GET", "https://evil.example", "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tt.method, "/pages", nil)
			req.Header.Set("Origin", tt.origin)
			if tt.reqMethod != "" {
				req.Header.Set("Access-Control-Request-Method", tt.reqMethod)
			}
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d", rec.Code, tt.status)
			}
			h := rec.Header()
			if got := h.Get("Access-Control-Allow-Origin"); got != tt.allowOrigin {
				t.Errorf("Allow-Origin = %q, want %q", got, tt.allowOrigin)
			}
			if tt.allowOrigin != "" && h.Get("Access-Control-Allow-Credentials") != "true" {
				t.Error("credentials not allowed")
			}
			if h.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("missing nosniff")
			}
		})
	}
}

func TestRequestIDPropagates(t *testing.T) {
	t.Parallel()
	api := newAPI()
	req := httptest.NewRequest("GET", "/pages", nil)
	req.Header.Set(httpapi.RequestIDHeader, "abc-123")
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	if got := rec.Header().Get(httpapi.RequestIDHeader); got != "abc-123" {
		t.Errorf("request id = %q, want abc-123", got)
	}
	req.Header.Set(httpapi.RequestIDHeader, "bad id\nwith newline")
	rec = httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	if got := rec.Header().Get(httpapi.RequestIDHeader); got == "" || strings.ContainsAny(got, " \n") {
		t.Errorf("malformed request id not replaced: %q", got)
	}
	_, _ = io.Copy(io.Discard, rec.Body)
}

// TestPageEnd checks that Page.End, the number of items a store reads to
// serve a page, never overflows, whatever a caller put in the Page.
func TestPageEnd(t *testing.T) {
	t.Parallel()
	const maxInt = int(^uint(0) >> 1)
	tests := []struct {
		name string
		page paging.Page
		want int
	}{
		{"defaults", paging.Page{Limit: httpapi.DefaultLimit}, httpapi.DefaultLimit},
		{"within bounds", paging.Page{Limit: 10, Offset: 30}, 40},
		{"largest parsed page", paging.Page{Limit: httpapi.MaxLimit, Offset: httpapi.MaxOffset}, httpapi.MaxLimit + httpapi.MaxOffset},
		{"largest int offset", paging.Page{Limit: httpapi.MaxLimit, Offset: maxInt}, httpapi.MaxLimit + httpapi.MaxOffset},
		{"largest int limit", paging.Page{Limit: maxInt, Offset: maxInt}, httpapi.MaxLimit + httpapi.MaxOffset},
		{"negative values", paging.Page{Limit: -5, Offset: -7}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.page.End(); got != tt.want {
				t.Errorf("%+v.End() = %d, want %d", tt.page, got, tt.want)
			}
		})
	}
}

// TestCrossSiteWrites checks the origin and media-type checks of the
// standard stack: a write from an origin that is neither the API's own
// nor allowed is 403 ORIGIN_NOT_ALLOWED, a write declaring a body that is
// not JSON is 415 UNSUPPORTED_MEDIA_TYPE, and everything else reaches the
// handler. httptest requests are addressed to http://example.com.
func TestCrossSiteWrites(t *testing.T) {
	t.Parallel()
	api := newAPI()
	const body = `{"name":"a"}`
	tests := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		code                     string
	}{
		// Origins.
		{"foreign origin", "POST", "/things", body, map[string]string{"Origin": "https://evil.example"}, 403, "ORIGIN_NOT_ALLOWED"},
		{"null origin", "POST", "/things", body, map[string]string{"Origin": "null"}, 403, "ORIGIN_NOT_ALLOWED"},
		{"sibling of an allowed origin", "POST", "/things", body, map[string]string{"Origin": "https://evil.example.com"}, 403, "ORIGIN_NOT_ALLOWED"},
		{"sibling, same-site by the browser", "POST", "/things", body, map[string]string{"Origin": "https://evil.example.com", "Sec-Fetch-Site": "same-site"}, 403, "ORIGIN_NOT_ALLOWED"},
		{"own host, another port", "POST", "/things", body, map[string]string{"Origin": "http://example.com:8080"}, 403, "ORIGIN_NOT_ALLOWED"},
		{"foreign origin, delete", "DELETE", "/things/x", "", map[string]string{"Origin": "https://evil.example"}, 403, "ORIGIN_NOT_ALLOWED"},
		{"foreign origin, put", "PUT", "/things", body, map[string]string{"Origin": "https://evil.example"}, 403, "ORIGIN_NOT_ALLOWED"},
		{"foreign origin and text/plain: origin first", "POST", "/things", body, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, 403, "ORIGIN_NOT_ALLOWED"},
		{"allowed origin", "POST", "/things", body, map[string]string{"Origin": "https://app.example.com"}, 201, ""},
		{"allowed origin, cross-site by the browser", "POST", "/things", body, map[string]string{"Origin": "https://app.example.com", "Sec-Fetch-Site": "cross-site"}, 201, ""},
		{"own origin", "POST", "/things", body, map[string]string{"Origin": "http://example.com"}, 201, ""},
		{"same-origin by the browser (behind CloudFront)", "POST", "/things", body, map[string]string{"Origin": "https://d111.cloudfront.net", "Sec-Fetch-Site": "same-origin"}, 201, ""},
		{"no origin", "POST", "/things", body, nil, 201, ""},
		{"foreign origin, read", "GET", "/pages", "", map[string]string{"Origin": "https://evil.example"}, 200, ""},
		{"own origin, delete", "DELETE", "/things/x", "", map[string]string{"Origin": "http://example.com"}, 204, ""},

		// Media types.
		{"text/plain", "POST", "/things", body, map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"form", "POST", "/things", body, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"multipart", "POST", "/things", "--b\r\n\r\n" + body + "\r\n--b--", map[string]string{"Content-Type": "multipart/form-data; boundary=b"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"another JSON type", "POST", "/things", body, map[string]string{"Content-Type": "application/merge-patch+json"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"JSON in another charset", "POST", "/things", body, map[string]string{"Content-Type": "application/json; charset=utf-16"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"malformed content type", "POST", "/things", body, map[string]string{"Content-Type": "application/json; charset"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"text/plain with an allowed origin", "POST", "/things", body, map[string]string{"Origin": "https://app.example.com", "Content-Type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"empty form, delete", "DELETE", "/things/x", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"json", "POST", "/things", body, map[string]string{"Content-Type": "application/json"}, 201, ""},
		{"json with charset", "POST", "/things", body, map[string]string{"Content-Type": "application/json; charset=utf-8"}, 201, ""},
		{"json, other spelling", "POST", "/things", body, map[string]string{"Content-Type": "Application/JSON;Charset=\"UTF-8\""}, 201, ""},
		{"no content type", "POST", "/things", body, nil, 201, ""},
		{"no body, no content type", "DELETE", "/things/x", "", nil, 204, ""},
		{"no body, json", "DELETE", "/things/x", "", map[string]string{"Content-Type": "application/json"}, 204, ""},
		{"read with text/plain", "GET", "/pages", "", map[string]string{"Content-Type": "text/plain"}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.status, rec.Body)
			}
			if tt.code == "" {
				return
			}
			var b errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Code != tt.code || b.Error != http.StatusText(tt.status) || b.Message == "" {
				t.Errorf("body = %s (%v), want code %s", rec.Body, err, tt.code)
			}
			if origin := tt.header["Origin"]; origin == "https://app.example.com" && rec.Header().Get("Access-Control-Allow-Origin") != origin {
				t.Error("an allowed origin's error has no CORS headers: the browser would hide it")
			}
		})
	}
}

// TestCrossSiteWritesDuplicateContentType refuses a request whose
// Content-Type is given twice: which one a parser would pick is not clear.
func TestCrossSiteWritesDuplicateContentType(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest("POST", "/things", strings.NewReader(`{"name":"a"}`))
	req.Header["Content-Type"] = []string{"application/json", "text/plain"}
	rec := httptest.NewRecorder()
	newAPI().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("status = %d, want 415; body %s", rec.Code, rec.Body)
	}
}

// TestRouteAccess: an Open route answers any origin without credentials
// and takes form bodies; an OwnForms route takes form bodies but keeps the
// cookie routes' CORS; a Cookie route refuses both; the access survives
// Mount.
func TestRouteAccess(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	inner := httpapi.NewRouter()
	inner.HandleAccess("POST /open", ok, httpapi.Open)
	inner.HandleAccess("POST /forms", ok, httpapi.OwnForms)
	inner.Handle("POST /cookie", ok)
	outer := httpapi.NewRouter()
	outer.Mount(inner, inner.Patterns()...)
	h := httpapi.Stack(outer, httpapi.Options{AllowedOrigins: []string{"https://app.example.com"}})
	send := func(method, path string, header map[string]string) *http.Response {
		r := httptest.NewRequest(method, path, strings.NewReader("a=b"))
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	crossForm := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}
	for path, want := range map[string]int{"/open": 204, "/forms": 204, "/cookie": 403} {
		if got := send("POST", path, crossForm).StatusCode; got != want {
			t.Errorf("cross-site form to %s: %d, want %d", path, got, want)
		}
	}
	if r := send("POST", "/open", crossForm); r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("open CORS: %v", r.Header)
	}
	preflight := map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
	if r := send("OPTIONS", "/open", preflight); r.StatusCode != 204 || !strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("open preflight: %d %v", r.StatusCode, r.Header)
	}
	for _, path := range []string{"/forms", "/cookie"} {
		if r := send("OPTIONS", path, preflight); r.StatusCode != 403 {
			t.Errorf("preflight of %s from another origin: %d, want 403", path, r.StatusCode)
		}
	}
}

// TestWriteErrorBodyTooLarge: a body read past its http.MaxBytesReader is
// 413 PAYLOAD_TOO_LARGE naming the reader's limit, however the handler
// passed the failed read on (raw, wrapped as internal, or classified as a
// bad body); other errors keep their status.
func TestWriteErrorBodyTooLarge(t *testing.T) {
	t.Parallel()
	read := func(r *http.Request, w http.ResponseWriter, limit int64) error {
		_, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		return err
	}
	tests := []struct {
		name    string
		limit   int64
		body    int
		wrap    func(error) error
		status  int
		code    string
		message string
	}{
		{"raw", 1 << 20, 1<<20 + 1, func(err error) error { return err }, 413, "PAYLOAD_TOO_LARGE", "1 MiB (1048576 bytes)"},
		{"wrapped as internal", 64 << 10, 1 << 20, func(err error) error { return errs.Wrap("test.read", err) }, 413, "PAYLOAD_TOO_LARGE", "64 KiB (65536 bytes)"},
		{"classified as a bad body", 1000, 1001, func(err error) error {
			return errs.E("test.read", errs.Invalid, "INVALID_BODY", "could not read the request body").WithCause(err)
		}, 413, "PAYLOAD_TOO_LARGE", "exceeds 1000 bytes"},
		{"at the limit", 1000, 1000, func(err error) error { return err }, 200, "", ""},
		{"another read error", 1000, 10, func(error) error {
			return errs.E("test.read", errs.Invalid, "INVALID_BODY", "could not read the request body").WithCause(io.ErrUnexpectedEOF)
		}, 400, "INVALID_BODY", "could not read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				err := read(r, w, tt.limit)
				if err == nil && tt.code == "" {
					w.WriteHeader(http.StatusOK)
					return
				}
				httpapi.WriteError(w, r, tt.wrap(err))
			})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", tt.body))))
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.code == "" {
				return
			}
			var b errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Code != tt.code || !strings.Contains(b.Message, tt.message) {
				t.Errorf("body %s, want %s naming %q", rec.Body, tt.code, tt.message)
			}
		})
	}
}

func TestSizeText(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		1 << 20:   "1 MiB (1048576 bytes)",
		8 << 20:   "8 MiB (8388608 bytes)",
		256 << 10: "256 KiB (262144 bytes)",
		1000:      "1000 bytes",
		0:         "0 bytes",
	} {
		if got := httpapi.SizeText(n); got != want {
			t.Errorf("SizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestStatusOfEveryKind pins the one mapping of error kinds to statuses,
// the 412 and 411 of the dev server's signed uploads included.
func TestStatusOfEveryKind(t *testing.T) {
	t.Parallel()
	tests := map[errs.Kind]int{
		errs.Internal: 500, errs.Invalid: 400, errs.Unauthenticated: 401, errs.Forbidden: 403,
		errs.NotFound: 404, errs.Conflict: 409, errs.TooLarge: 413, errs.RateLimited: 429,
		errs.Unavailable: 503, errs.Timeout: 504, errs.MethodNotAllowed: 405,
		errs.UnsupportedMediaType: 415, errs.PreconditionFailed: 412, errs.LengthRequired: 411,
	}
	for k, want := range tests {
		if got := httpapi.StatusOf(errs.E("op", k, "", "m")); got != want {
			t.Errorf("%v: status %d, want %d", k, got, want)
		}
	}
}

// TestWriteErrorClientGone: a cancellation from the request's own context
// (its client went away) is 499 with no body, not a 500; the same error
// on a live request, or another error on a gone one, stays a 500.
func TestWriteErrorClientGone(t *testing.T) {
	t.Parallel()
	cancelledCall := errs.Wrap("toolserver.call", errs.E("tools.Run", errs.Internal, "INTERNAL_ERROR", "tool code was canceled").WithCause(context.Canceled))
	tests := []struct {
		name   string
		gone   bool
		err    error
		status int
	}{
		{"client gone", true, cancelledCall, httpapi.StatusClientClosedRequest},
		{"cancelled inside a live request", false, cancelledCall, http.StatusInternalServerError},
		{"another failure of a gone request", true, errs.E("test.op", errs.Internal, "", "broke"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			if tt.gone {
				cancel()
			} else {
				defer cancel()
			}
			rec := httptest.NewRecorder()
			httpapi.WriteError(rec, httptest.NewRequest("POST", "/", nil).WithContext(ctx), tt.err)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.status == httpapi.StatusClientClosedRequest && rec.Body.Len() != 0 {
				t.Errorf("body %q for a client that is gone", rec.Body)
			}
		})
	}
}

// TestTypeErrorFieldsCarryIndices: a field of the wrong type inside an
// array is named with its index (steps[1].retry.maxAttempts), the first
// in the document's order; outside arrays as encoding/json names it.
func TestTypeErrorFieldsCarryIndices(t *testing.T) {
	t.Parallel()
	type step struct {
		ID    string `json:"id"`
		Retry *struct {
			MaxAttempts int `json:"maxAttempts"`
		} `json:"retry"`
		Tags []string `json:"tags"`
	}
	type body struct {
		Name  string         `json:"name"`
		Steps []step         `json:"steps"`
		Grid  [][]int        `json:"grid"`
		Sizes map[string]int `json:"sizes"`
	}
	for _, tc := range []struct{ body, field string }{
		{`{"name": 5}`, "name"},
		{`{"steps": [{"id": "a"}, {"id": "b", "retry": {"maxAttempts": "3"}}]}`, "steps[1].retry.maxAttempts"},
		{`{"steps": [{"retry": {"maxAttempts": 1.5}}]}`, "steps[0].retry.maxAttempts"},
		{`{"steps": [{"id": "a"}, {"id": 7}, {"id": 8}]}`, "steps[1].id"},
		{`{"steps": [{"tags": ["x", 2]}]}`, "steps[0].tags[1]"},
		{`{"steps": [{"tags": "x"}]}`, "steps[0].tags"},
		{`{"steps": {"id": "a"}}`, "steps"},
		{`{"grid": [[1], [2, "x"]]}`, "grid[1][1]"},
		{`{"sizes": {"a": 1, "b": "two"}}`, "sizes"}, // encoding/json names no map key
	} {
		var v body
		err := httpapi.UnmarshalStrict([]byte(tc.body), &v)
		var e *errs.Error
		if !errors.As(err, &e) || e.CodeOrDefault() != "VALIDATION_FAILED" || len(e.Details) != 1 || e.Details[0].Field != tc.field {
			t.Errorf("%s: %+v, want VALIDATION_FAILED naming %s", tc.body, err, tc.field)
		}
	}
}
