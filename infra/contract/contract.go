// Package contract holds the service to its OpenAPI document
// (docs/openapi.yaml) in tests.
//
// Load parses and validates the document as OpenAPI 3.1, whose schemas are
// JSON Schema 2020-12. Spec.Transport wraps an http.RoundTripper so that
// every response a test receives is checked against the document: the
// route and method must be documented, the status must be documented for
// that operation, and the headers and body must match the documented
// response. Spec.Routes lists the documented operations in Go 1.22
// http.ServeMux pattern syntax, so a test can compare them with the routes
// the code registers.
//
// Requests are matched to operations by path alone, with an http.ServeMux
// built from the documented paths: the document's servers are ignored (tests
// run on 127.0.0.1 at a random port), and matching follows exactly the rules
// the service's own router follows (no trailing-slash leniency, literal
// segments win over wildcards).
//
// Besides the formats kin-openapi checks by default (date-time, date, ...),
// "uuid" and "email" are asserted.
package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Spec is a loaded, validated OpenAPI document.
type Spec struct {
	doc    *openapi3.T
	mux    *http.ServeMux
	routes map[string]*routers.Route // by ServeMux pattern, "GET /api/x/{id}"
}

// htmlDecoder registers kin-openapi's decoder of text/html bodies once.
var htmlDecoder sync.Once

// Load parses and validates the OpenAPI document at path (3.1, JSON Schema
// 2020-12 semantics). It fails when the document is not OpenAPI 3.1 or
// later, does not validate, refers to other files, or documents a path that
// is not a valid http.ServeMux pattern or that conflicts with another.
func Load(path string) (*Spec, error) {
	// The OAuth pages (text/html) are checked as strings, as text/plain is.
	htmlDecoder.Do(func() {
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		// A chat's Markdown export, likewise.
		openapi3filter.RegisterBodyDecoder("text/markdown", openapi3filter.PlainBodyDecoder)
	})
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("contract: load %s: %w", path, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("contract: %s: openapi %q: want 3.1 or later (JSON Schema 2020-12)", path, doc.OpenAPI)
	}
	doc.SetStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))
	doc.SetStringFormatValidator("email", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForEmail))
	// Validate enables JSON Schema 2020-12 itself for a 3.1 document.
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("contract: %s is not a valid OpenAPI document: %w", path, err)
	}

	s := &Spec{doc: doc, mux: http.NewServeMux(), routes: map[string]*routers.Route{}}
	if doc.Paths == nil {
		return s, nil
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			pattern := method + " " + path
			if err := register(s.mux, pattern); err != nil {
				return nil, fmt.Errorf("contract: %s: operation %q: %w", path, pattern, err)
			}
			s.routes[pattern] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
		}
	}
	return s, nil
}

// register adds pattern to mux, turning its panic on a malformed or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("not a usable http.ServeMux pattern: %v", v)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return nil
}

// Doc returns the parsed document, for checks this package does not make.
func (s *Spec) Doc() *openapi3.T { return s.doc }

// Routes returns every documented operation as "METHOD /path/{param}" (Go
// 1.22 ServeMux pattern syntax), sorted.
func (s *Spec) Routes() []string {
	out := make([]string, 0, len(s.routes))
	for p := range s.routes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Operation returns the documented operation that serves r (method and
// path; host and servers are ignored), its pattern, and whether there is
// one. Like http.ServeMux, a HEAD request matches a GET operation.
func (s *Spec) Operation(r *http.Request) (*openapi3.Operation, string, bool) {
	route, ok := s.route(r)
	if !ok {
		return nil, "", false
	}
	return route.Operation, route.Method + " " + route.Path, true
}

func (s *Spec) route(r *http.Request) (*routers.Route, bool) {
	if r.URL == nil {
		return nil, false
	}
	_, pattern := s.mux.Handler(r)
	route, ok := s.routes[pattern]
	return route, ok
}

// ValidateSchema validates the JSON document data against the named schema
// of components/schemas, with the same options responses are validated
// with (JSON Schema 2020-12, asserted formats). It is meant for payloads a
// Transport does not see, such as the events of a text/event-stream body.
func (s *Spec) ValidateSchema(name string, data []byte) error {
	ref := s.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("contract: no schema %q in components/schemas", name)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("contract: not JSON: %w", err)
	}
	opts := append(s.doc.GetSchemaValidationOptions(), openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse(),
		openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(schemaErrorMessage))
	if err := ref.Value.VisitJSON(v, opts...); err != nil {
		return fmt.Errorf("contract: does not match schema %s: %w", name, err)
	}
	return nil
}

// Transport returns an http.RoundTripper that sends requests through base
// (nil = http.DefaultTransport) and checks every response against the
// spec: the route and method must be documented, the status must be
// documented for that operation, the documented response headers must match
// (required ones present), and the body must validate against the
// documented schema for that status and content type. JSON bodies are read
// in full and validated; text/event-stream bodies are not read (only their
// content type is checked); a response documented without content must have
// an empty body. Any violation is reported with t.Errorf, naming method,
// path, status and the validation error: the test fails, but the response
// is still returned to the caller unchanged (the body is restored). Errors
// from base are returned as they are, unchecked.
func (s *Spec) Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{spec: s, t: t, base: base}
}

type transport struct {
	spec *Spec
	t    testing.TB
	base http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.base.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	if problem := tr.spec.check(req, resp); problem != "" {
		tr.t.Errorf("contract: %s %s -> %d: %s", req.Method, req.URL.Path, resp.StatusCode, problem)
	}
	return resp, nil
}

// check returns what is wrong with resp as the answer to req, or "".
func (s *Spec) check(req *http.Request, resp *http.Response) string {
	route, ok := s.route(req)
	if !ok {
		return fmt.Sprintf("undocumented route: no operation in the spec serves %s %s", req.Method, req.URL.Path)
	}
	op := fmt.Sprintf("operation %s (%s %s)", route.Operation.OperationID, route.Method, route.Path)
	ref := route.Operation.Responses.Status(resp.StatusCode)
	if ref == nil || ref.Value == nil {
		return fmt.Sprintf("undocumented status %d for %s (documented: %s)", resp.StatusCode, op, strings.Join(statuses(route.Operation), ", "))
	}
	response := ref.Value

	contentType := resp.Header.Get("Content-Type")
	stream := isEventStream(contentType)
	var body []byte
	if !stream && resp.Body != nil && resp.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			// Hand the caller what was read, then the same error.
			resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
			return fmt.Sprintf("%s: reading the response body: %v", op, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}

	var problems []string
	switch {
	case len(response.Content) == 0 && len(body) > 0:
		problems = append(problems, fmt.Sprintf("documented without a body, but the response has %d bytes (%s)", len(body), contentType))
	case len(response.Content) > 0 && stream && response.Content.Get(contentType) == nil:
		problems = append(problems, fmt.Sprintf("content type %q is not documented for status %d (documented: %s)", contentType, resp.StatusCode, strings.Join(sortedKeys(response.Content), ", ")))
	}

	opts := &openapi3filter.Options{
		IncludeResponseStatus:   true,
		MultiError:              true,
		ExcludeResponseBody:     stream,
		SchemaValidationOptions: s.doc.GetSchemaValidationOptions(),
	}
	opts.WithCustomSchemaErrorFunc(schemaErrorMessage)
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, Route: route, Options: opts},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(context.WithoutCancel(req.Context()), input); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return ""
	}
	return op + ": " + strings.Join(problems, "; ")
}

// schemaErrorMessage keeps schema errors to one line each: where, what and
// the offending value (shortened), without kin-openapi's dump of the schema.
func schemaErrorMessage(e *openapi3.SchemaError) string {
	where := ""
	if p := e.JSONPointer(); len(p) > 0 {
		where = fmt.Sprintf("error at %q: ", "/"+strings.Join(p, "/"))
	}
	var msg string
	switch {
	case e.Origin != nil:
		msg = e.Origin.Error()
		if strings.Contains(msg, "error at ") || strings.Contains(msg, "(value: ") {
			return msg // nested errors, each with its own location and value
		}
	case e.Reason != "":
		msg = e.Reason
	default:
		msg = "does not match schema keyword " + strconv.Quote(e.SchemaField)
	}
	if !strings.HasPrefix(msg, "error at ") {
		msg = where + msg
	}
	if v, err := json.Marshal(e.Value); err == nil {
		const max = 200
		if len(v) > max {
			v = append(v[:max], "..."...)
		}
		msg += " (value: " + string(v) + ")"
	}
	return msg
}

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

func statuses(op *openapi3.Operation) []string {
	var out []string
	for code := range op.Responses.Map() {
		out = append(out, code)
	}
	slices.SortFunc(out, func(a, b string) int {
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if errA != nil || errB != nil {
			return strings.Compare(a, b)
		}
		return x - y
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
