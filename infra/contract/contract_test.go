package contract_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/workflowchat/service/infra/contract"
)

const specPath = "../../docs/openapi.yaml"

func loadSpec(t *testing.T) *contract.Spec {
	t.Helper()
	spec, err := contract.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// recorder is a testing.TB that records Errorf calls instead of failing.
// Everything else goes to the real test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// canned is a fixed response.
type canned struct {
	status int
	header http.Header
	body   string
}

func (c canned) serve(w http.ResponseWriter, _ *http.Request) {
	for k, vs := range c.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(c.status)
	_, _ = io.WriteString(w, c.body)
}

func jsonHeader(extra ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "X-Request-Id": {"req-1"}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Add(extra[i], extra[i+1])
	}
	return h
}

const (
	userJSON     = `{"id":"9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10","email":"ada@example.com","name":"Ada","createdAt":"2024-01-02T10:00:00.123456789Z","updatedAt":"2024-01-02T10:00:00Z"}`
	sessionJSON  = `{"data":{"user":` + userJSON + `,"session":{"expiresAt":"2024-01-09T10:00:00Z"}}}`
	setCookie    = "session_token=abc123; Path=/; Expires=Tue, 09 Jan 2024 10:00:00 GMT; Max-Age=604800; HttpOnly; SameSite=Lax"
	clearCookie  = "session_token=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; HttpOnly; SameSite=Lax"
	livenessJSON = `{"status":"ok","timestamp":"2024-01-02T10:00:00.123456789Z"}`
	modelsJSON   = `{"data":{"models":[{"id":"builtin","name":"Built-in offline model","provider":"builtin"}]}}`
	unauthJSON   = `{"error":"Unauthorized","message":"a valid session is required","code":"UNAUTHORIZED"}`
)

func TestLoadValidatesTheServiceDocument(t *testing.T) {
	spec := loadSpec(t)
	if got := spec.Doc().OpenAPI; got != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", got)
	}
	if len(spec.Routes()) == 0 {
		t.Fatal("no routes documented")
	}
}

func TestLoadRejects(t *testing.T) {
	const paths = `
paths:
  /things/{id}:
    get:
      operationId: getThing
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "200": {description: ok}
`
	tests := []struct {
		name, doc, want string
	}{
		{"openapi 3.0", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\n" + paths, "want 3.1"},
		{"invalid document", "openapi: 3.1.0\n" + paths, "not a valid OpenAPI document"},
		{"path that is not a ServeMux pattern", `openapi: 3.1.0
info: {title: t, version: '1'}
paths:
  /things/{thing-id}:
    get:
      parameters:
        - {name: thing-id, in: path, required: true, schema: {type: string}}
      responses:
        "200": {description: ok}
`, "ServeMux pattern"},
		{"external reference", `openapi: 3.1.0
info: {title: t, version: '1'}
paths:
  /things:
    get:
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: "other.yaml#/Thing"}
`, "other.yaml"},
		{"missing file", "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "openapi.yaml")
			if tt.doc != "" {
				if err := os.WriteFile(path, []byte(tt.doc), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := contract.Load(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load: err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestTransport(t *testing.T) {
	spec := loadSpec(t)
	tests := []struct {
		name         string
		method, path string
		resp         canned
		// want lists substrings of the one expected violation; empty means
		// the response conforms.
		want []string
	}{
		// Conforming responses.
		{"liveness", "GET", "/api/liveness", canned{200, jsonHeader(), livenessJSON}, nil},
		{"liveness without request id", "GET", "/api/liveness", canned{200, http.Header{"Content-Type": {"application/json"}}, livenessJSON}, nil},
		{"HEAD of a GET operation", "HEAD", "/api/liveness", canned{200, jsonHeader(), ""}, nil},
		{"sign-up", "POST", "/api/auth/sign-up/email", canned{200, jsonHeader("Set-Cookie", setCookie), sessionJSON}, nil},
		{"sign-in", "POST", "/api/auth/sign-in/email", canned{200, jsonHeader("Set-Cookie", setCookie), sessionJSON}, nil},
		{"session", "GET", "/api/auth/session", canned{200, jsonHeader(), sessionJSON}, nil},
		{"session renewed", "GET", "/api/auth/session", canned{200, jsonHeader("Set-Cookie", setCookie), sessionJSON}, nil},
		{"sign-out", "POST", "/api/auth/sign-out", canned{200, jsonHeader("Set-Cookie", clearCookie), `{"data":{"success":true}}`}, nil},
		{"models", "GET", "/api/models", canned{200, jsonHeader(), modelsJSON}, nil},
		{"model preference", "POST", "/api/users/9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10/model-preference", canned{200, jsonHeader(),
			`{"data":{"userId":"9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10","modelId":"builtin"}}`}, nil},
		{"validation error with details", "POST", "/api/auth/sign-up/email", canned{400, jsonHeader(),
			`{"error":"Bad Request","message":"request validation failed","code":"VALIDATION_FAILED","details":[{"field":"email","message":"is required"},{"field":"name","message":"is required"}]}`}, nil},
		{"invalid model", "POST", "/api/users/u1/model-preference", canned{400, jsonHeader(),
			`{"error":"Bad Request","message":"unknown model id \"x\"","code":"INVALID_MODEL","details":[{"field":"modelId","message":"must be one of the ids listed by GET /api/models"}]}`}, nil},
		{"unauthorized", "GET", "/api/models", canned{401, jsonHeader(), unauthJSON}, nil},
		{"storage unavailable", "GET", "/api/models", canned{503, jsonHeader("Retry-After", "1"),
			`{"error":"Service Unavailable","message":"storage is temporarily unavailable; retry shortly","code":"STORAGE_UNAVAILABLE"}`}, nil},

		// Undocumented routes and statuses.
		{"undocumented path", "GET", "/api/nope", canned{404, jsonHeader(),
			`{"error":"Not Found","message":"no route","code":"ROUTE_NOT_FOUND"}`}, []string{"undocumented route"}},
		{"undocumented method", "DELETE", "/api/models", canned{405, jsonHeader(),
			`{"error":"Method Not Allowed","message":"method not allowed","code":"METHOD_NOT_ALLOWED"}`}, []string{"undocumented route"}},
		{"trailing slash", "GET", "/api/models/", canned{200, jsonHeader(), modelsJSON}, []string{"undocumented route"}},
		{"undocumented status", "GET", "/api/models", canned{404, jsonHeader(),
			`{"error":"Not Found","message":"x","code":"NOT_FOUND"}`}, []string{"undocumented status 404", "listModels", "200, 401, 500, 503"}},

		// Bodies that do not match.
		{"missing required field", "GET", "/api/liveness", canned{200, jsonHeader(), `{"status":"ok"}`}, []string{"timestamp"}},
		{"nested missing required field", "GET", "/api/auth/session", canned{200, jsonHeader(),
			`{"data":{"user":{"id":"9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10","email":"ada@example.com","createdAt":"2024-01-02T10:00:00Z","updatedAt":"2024-01-02T10:00:00Z"},"session":{"expiresAt":"2024-01-09T10:00:00Z"}}}`}, []string{"name"}},
		{"wrong type", "GET", "/api/models", canned{200, jsonHeader(),
			`{"data":{"models":[{"id":"builtin","name":"Built-in","provider":5}]}}`}, []string{"provider"}},
		{"extra property", "GET", "/api/auth/session", canned{200, jsonHeader(),
			`{"data":{"user":{"id":"9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10","email":"ada@example.com","name":"Ada","passwordHash":"x","createdAt":"2024-01-02T10:00:00Z","updatedAt":"2024-01-02T10:00:00Z"},"session":{"expiresAt":"2024-01-09T10:00:00Z"}}}`}, []string{"passwordHash"}},
		{"extra property in an error", "GET", "/api/models", canned{401, jsonHeader(),
			`{"error":"Unauthorized","message":"m","code":"UNAUTHORIZED","stack":"..."}`}, []string{"stack"}},
		{"unwrapped body", "GET", "/api/models", canned{200, jsonHeader(),
			`{"models":[{"id":"builtin","name":"Built-in","provider":"builtin"}]}`}, []string{"data"}},
		{"value outside the enum", "GET", "/api/liveness", canned{200, jsonHeader(),
			`{"status":"degraded","timestamp":"2024-01-02T10:00:00Z"}`}, []string{"status"}},
		{"malformed uuid", "GET", "/api/auth/session", canned{200, jsonHeader(), strings.Replace(sessionJSON, "9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10", "42", 1)}, []string{"uuid"}},
		{"malformed date-time", "GET", "/api/liveness", canned{200, jsonHeader(), `{"status":"ok","timestamp":"yesterday"}`}, []string{"date-time"}},
		{"error code not allowed for the status", "GET", "/api/models", canned{401, jsonHeader(),
			`{"error":"Unauthorized","message":"m","code":"FORBIDDEN"}`}, []string{"code"}},
		{"error without message", "GET", "/api/models", canned{401, jsonHeader(),
			`{"error":"Unauthorized","code":"UNAUTHORIZED"}`}, []string{"message"}},
		{"empty body", "GET", "/api/models", canned{200, jsonHeader(), ""}, []string{"decode"}},
		{"undocumented content type", "GET", "/api/liveness", canned{200, http.Header{"Content-Type": {"text/plain"}}, "ok"}, []string{"text/plain"}},

		// Headers that do not match.
		{"missing required Set-Cookie", "POST", "/api/auth/sign-in/email", canned{200, jsonHeader(), sessionJSON}, []string{"Set-Cookie"}},
		{"wrong cookie", "POST", "/api/auth/sign-in/email", canned{200, jsonHeader("Set-Cookie", "sid=abc; Path=/"), sessionJSON}, []string{"Set-Cookie"}},
		{"malformed request id", "GET", "/api/liveness", canned{200, http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"bad id!"}}, livenessJSON}, []string{"X-Request-Id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(tt.resp.serve))
			defer srv.Close()
			rec := &recorder{TB: t}
			client := &http.Client{Transport: spec.Transport(rec, nil)}

			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			wantBody := tt.resp.body
			if tt.method == http.MethodHead {
				wantBody = ""
			}
			if string(body) != wantBody || resp.StatusCode != tt.resp.status {
				t.Errorf("caller got %d %q, want the response unchanged: %d %q", resp.StatusCode, body, tt.resp.status, wantBody)
			}

			errs := rec.errors()
			if len(tt.want) == 0 {
				for _, e := range errs {
					t.Errorf("unexpected violation: %s", e)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("got %d violations %q, want 1", len(errs), errs)
			}
			t.Log(errs[0])
			for _, want := range append([]string{tt.method, tt.path, strconv.Itoa(tt.resp.status)}, tt.want...) {
				if !strings.Contains(errs[0], want) {
					t.Errorf("violation %q does not mention %q", errs[0], want)
				}
			}
		})
	}
}

// miniSpec documents what docs/openapi.yaml does not have yet: an event
// stream, a 204 and a literal segment beside a wildcard.
const miniSpec = `openapi: 3.1.0
info: {title: mini, version: "1"}
servers:
  - url: https://api.example.com
paths:
  /events:
    get:
      operationId: streamEvents
      responses:
        "200":
          description: events
          content:
            text/event-stream:
              schema: {type: string}
  /things/{id}:
    get:
      operationId: getThing
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "200":
          description: a thing
          content:
            application/json:
              schema:
                type: object
                required: [id]
                additionalProperties: false
                properties:
                  id: {type: string, format: uuid}
    delete:
      operationId: deleteThing
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "204": {description: deleted}
  /things/special:
    get:
      operationId: getSpecialThing
      responses:
        "200":
          description: the special thing
          content:
            application/json:
              schema:
                type: object
                required: [special]
                additionalProperties: false
                properties:
                  special: {type: boolean}
`

func loadMini(t *testing.T) *contract.Spec {
	t.Helper()
	path := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(path, []byte(miniSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := contract.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestRoutes(t *testing.T) {
	spec := loadMini(t)
	want := []string{"DELETE /things/{id}", "GET /events", "GET /things/special", "GET /things/{id}"}
	if got := spec.Routes(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Routes() = %q, want %q", got, want)
	}
}

func TestTransportMatching(t *testing.T) {
	spec := loadMini(t)
	tests := []struct {
		name, method, path string
		resp               canned
		want               string // substring of the one violation; "" for none
	}{
		{"wildcard", "GET", "/things/9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10", canned{200, jsonHeader(), `{"id":"9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10"}`}, ""},
		{"literal segment wins over the wildcard", "GET", "/things/special", canned{200, jsonHeader(), `{"special":true}`}, ""},
		{"literal segment body checked against its own schema", "GET", "/things/special", canned{200, jsonHeader(), `{"id":"9b2f1c1e-3c57-4c4e-9d1a-0f8f2d4f1a10"}`}, "special"},
		{"servers are ignored", "GET", "/things/special", canned{200, jsonHeader(), `{"special":false}`}, ""},
		{"no content", "DELETE", "/things/x", canned{204, http.Header{}, ""}, ""},
		{"body where none is documented", "DELETE", "/things/x", canned{200, jsonHeader(), `{}`}, "undocumented status 200"},
		{"extra segment", "GET", "/things/x/y", canned{200, jsonHeader(), `{}`}, "undocumented route"},
		{"stream with the wrong content type", "GET", "/events", canned{200, jsonHeader(), `{}`}, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(tt.resp.serve))
			defer srv.Close()
			rec := &recorder{TB: t}
			client := &http.Client{Transport: spec.Transport(rec, nil)}
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != tt.resp.body {
				t.Errorf("caller got body %q, want %q", body, tt.resp.body)
			}
			errs := rec.errors()
			switch {
			case tt.want == "" && len(errs) != 0:
				t.Errorf("unexpected violations: %q", errs)
			case tt.want != "" && (len(errs) != 1 || !strings.Contains(errs[0], tt.want)):
				t.Errorf("violations %q, want one mentioning %q", errs, tt.want)
			}
		})
	}
}

// TestTransportDoesNotReadEventStreams streams an event and then holds the
// response open: a Transport that read the body would never return.
func TestTransportDoesNotReadEventStreams(t *testing.T) {
	spec := loadMini(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "data: {\"type\":\"start\",\"messageId\":\"m1\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "data: {\"type\":\"end\",\"messageId\":\"m1\"}\n\n")
	}))
	defer srv.Close()
	defer close(release)

	rec := &recorder{TB: t}
	client := &http.Client{Transport: spec.Transport(rec, nil), Timeout: 10 * time.Second}
	resp, err := client.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := "data: {\"type\":\"start\",\"messageId\":\"m1\"}\n"; line != want {
		t.Errorf("first line = %q, want %q", line, want)
	}
	if errs := rec.errors(); len(errs) != 0 {
		t.Errorf("unexpected violations: %q", errs)
	}
}

func TestTransportPassesTransportErrorsThrough(t *testing.T) {
	spec := loadSpec(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	rec := &recorder{TB: t}
	client := &http.Client{Transport: spec.Transport(rec, nil)}
	if _, err := client.Get(url + "/api/liveness"); err == nil {
		t.Fatal("want a connection error")
	}
	if errs := rec.errors(); len(errs) != 0 {
		t.Errorf("unexpected violations: %q", errs)
	}
}

func TestValidateSchema(t *testing.T) {
	spec := loadSpec(t)
	tests := []struct {
		schema, body, want string
	}{
		{"User", userJSON, ""},
		{"User", `{"id":"x"}`, "does not match schema User"},
		{"Error", `{"error":"Bad Request","message":"m","code":"lower"}`, "code"},
		{"NoSuchSchema", `{}`, "no schema"},
		{"User", `{`, "not JSON"},
	}
	for _, tt := range tests {
		err := spec.ValidateSchema(tt.schema, []byte(tt.body))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ValidateSchema(%s, %s) = %v, want nil", tt.schema, tt.body, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ValidateSchema(%s, %s) = %v, want an error mentioning %q", tt.schema, tt.body, err, tt.want)
		}
	}
}

// TestDocumentConventions keeps docs/openapi.yaml complete and uniform as
// operations are added.
func TestDocumentConventions(t *testing.T) {
	spec := loadSpec(t)
	doc := spec.Doc()
	ids := map[string]string{}
	for _, route := range spec.Routes() {
		method, path, _ := strings.Cut(route, " ")
		op := doc.Paths.Value(path).GetOperation(method)
		t.Run(route, func(t *testing.T) {
			if op.OperationID == "" {
				t.Error("no operationId")
			} else if other, dup := ids[op.OperationID]; dup {
				t.Errorf("operationId %q also used by %s", op.OperationID, other)
			}
			ids[op.OperationID] = route
			if op.Summary == "" {
				t.Error("no summary")
			}
			if len(op.Tags) != 1 {
				t.Errorf("tags = %q, want exactly one", op.Tags)
			}
			security := doc.Security
			if op.Security != nil {
				security = *op.Security
			}
			codes := op.Responses.Map()
			// An operation whose formats an external protocol fixes (OAuth,
			// MCP) takes forms or JSON-RPC from any origin and never acts on
			// the session cookie: no cross-site or media-type refusal, and
			// OAuth's own error body.
			_, protocol := op.Extensions["x-protocol"]
			if len(security) > 0 && codes["401"] == nil {
				t.Error("requires a session but does not document 401")
			}
			// The dev server's signed blob URLs stand outside the API's
			// body rules: the signature authorizes any body of the signed
			// type and size.
			signedURL := strings.HasPrefix(path, "/blobs/")
			if (method == "POST" || method == "PUT" || method == "PATCH") && codes["413"] == nil && !signedURL {
				t.Error("takes a body but does not document 413")
			}
			if !protocol && (method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE") && !signedURL {
				if !slices.Contains(errorCodes(codes["403"]), "ORIGIN_NOT_ALLOWED") {
					t.Error("changes data but does not document 403 ORIGIN_NOT_ALLOWED (a cross-site request)")
				}
				if !slices.Contains(errorCodes(codes["415"]), "UNSUPPORTED_MEDIA_TYPE") {
					t.Error("changes data but does not document 415 UNSUPPORTED_MEDIA_TYPE (a body that is not JSON)")
				}
			}
			success := false
			for code, ref := range codes {
				r := ref.Value
				if code[0] == '2' {
					success = true
				}
				if r.Headers["X-Request-Id"] == nil {
					t.Errorf("%s: X-Request-Id header not documented", code)
				}
				for ct, mt := range r.Content {
					if mt.Schema == nil {
						t.Errorf("%s %s: no schema", code, ct)
						continue
					}
					if (code[0] == '4' || code[0] == '5') && protocol && ct != "application/json" {
						// An HTML page of the authorization endpoint.
					} else if code[0] == '4' || code[0] == '5' {
						// A protocol fixes its own error body: OAuth's, and
						// JSON-RPC's (MCP's refusal of a batch).
						protocolError := mt.Schema.Ref == "#/components/schemas/OAuthError" || mt.Schema.Ref == "#/components/schemas/JSONRPCMessage"
						if !isErrorSchema(mt.Schema) && !(protocol && protocolError) {
							t.Errorf("%s %s: error responses must use #/components/schemas/Error", code, ct)
						}
					} else if ct == "application/json" && mt.Schema.Ref == "" {
						t.Errorf("%s %s: success bodies must $ref a named schema", code, ct)
					}
				}
			}
			if !success {
				t.Error("no 2xx response documented")
			}
		})
	}
}

// errorCodes returns the codes an error response documents: the enum of
// `code` in the second member of its allOf.
func errorCodes(ref *openapi3.ResponseRef) []string {
	if ref == nil || ref.Value == nil {
		return nil
	}
	mt := ref.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil || len(mt.Schema.Value.AllOf) < 2 || mt.Schema.Value.AllOf[1].Value == nil {
		return nil
	}
	code := mt.Schema.Value.AllOf[1].Value.Properties["code"]
	if code == nil || code.Value == nil {
		return nil
	}
	var out []string
	for _, v := range code.Value.Enum {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func isErrorSchema(s *openapi3.SchemaRef) bool {
	if s.Ref == "#/components/schemas/Error" {
		return true
	}
	return s.Value != nil && len(s.Value.AllOf) > 0 && s.Value.AllOf[0].Ref == "#/components/schemas/Error"
}
