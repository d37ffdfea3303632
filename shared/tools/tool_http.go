package tools

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/safehttp"
)

// userAgent is sent when the input sets no User-Agent header.
const userAgent = "workflowchat-tools/1.0 (+http_request)"

func httpRequestTool(cfg Config) *Tool {
	client := safehttp.NewClient(safehttp.Options{
		AllowPrivate: cfg.AllowPrivateNetworks,
		Timeout:      cfg.HTTPTimeout,
	})
	limit := cfg.MaxResponseBytes
	timeout := cfg.HTTPTimeout
	return &Tool{
		ID:       "http_request",
		Name:     "HTTP request",
		Category: CategoryWeb,
		Description: "Sends an HTTP request to a public http or https URL and returns the response: call a REST API, fetch a web page or a JSON document, post data to a webhook. " +
			"Fields: url (absolute http(s) URL, query string included), method (GET default, POST, PUT, PATCH, DELETE or HEAD), " +
			"headers (object of header name to value, e.g. {\"Accept\": \"application/json\", \"Authorization\": \"Bearer ...\"}), " +
			"body (request body as a string; for JSON, serialize it and set Content-Type: application/json). " +
			"Outputs: status (HTTP status code; 4xx and 5xx are returned, not errors), headers (response headers, lower-case names, repeated values joined with \", \"), " +
			"body (response body as text), json (the parsed body when the response is JSON). " +
			"Private, loopback and link-local addresses (including cloud metadata endpoints) are refused; up to 5 redirects are followed; " +
			fmt.Sprintf("bodies larger than %d bytes fail the call; the request times out after %s. ", limit, timeout) +
			`Example: {"url": "https://api.example.com/users/1", "headers": {"Accept": "application/json"}} returns {"status": 200, "headers": {"content-type": "application/json"}, "body": "{\"id\":1,\"name\":\"Ada\"}", "json": {"id": 1, "name": "Ada"}}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "maxLength": 8192, "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]", "description": "Absolute http or https URL, e.g. \"https://api.example.com/items?limit=10\".", "examples": ["https://api.example.com/items?limit=10"]},
    "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"], "default": "GET", "description": "HTTP method. GET and HEAD only read; POST, PUT, PATCH and DELETE may change data on the server."},
    "headers": {
      "type": "object", "default": {},
      "description": "Request headers, name to value, e.g. {\"Accept\": \"application/json\", \"Content-Type\": \"application/json\"}.",
      "propertyNames": {"pattern": "^[!#$%&'*+.^_` + "`" + `|~0-9A-Za-z-]+$"},
      "additionalProperties": {"type": "string", "pattern": "^[^\\r\\n]*$"}
    },
    "body": {"type": "string", "default": "", "description": "Request body, sent as is, e.g. \"{\\\"name\\\": \\\"Ada\\\"}\" with a Content-Type: application/json header. Ignored for HEAD."}
  },
  "required": ["url"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "status": {"type": "integer", "minimum": 100, "maximum": 999, "description": "HTTP status code of the final response (after redirects)."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Response headers with lower-case names; repeated headers joined with \", \"."},
    "body": {"type": "string", "description": "The response body as text (UTF-8; invalid bytes replaced by U+FFFD). Empty for HEAD."},
    "json": {"description": "The body parsed as JSON, present only when the response's Content-Type is JSON (application/json or *+json) and the body parses."}
  },
  "required": ["status", "headers", "body"],
  "additionalProperties": false
}`),
		// Not read-only and possibly destructive: POST, PUT, PATCH and DELETE
		// can change or delete data on the remote server. Not idempotent,
		// since POST is not. Open world: it reaches arbitrary servers.
		Annotations: Annotations{Destructive: true, OpenWorld: true},
		// A little longer than the client's own timeout, so that the client
		// reports a slow server with its own, more specific message.
		Timeout: timeout + 2*time.Second,
		Run: func(ctx context.Context, in map[string]any) (map[string]any, error) {
			return runHTTPRequest(ctx, client, limit, timeout, in)
		},
	}
}

// runHTTPRequest sends the request described by in. It fails with
// INVALID_PARAMS for a URL that is not absolute http(s) or header values
// the protocol forbids; with TOOL_TIMEOUT when the server does not answer
// within timeout; and with an execution failure when the destination is
// not allowed ("destination not allowed: ..."), the host does not resolve,
// the connection or TLS handshake fails, there are too many redirects, or
// the body exceeds limit bytes. Messages name the host, never the path,
// query or credentials of the URL.
func runHTTPRequest(ctx context.Context, client *http.Client, limit int64, timeout time.Duration, in map[string]any) (map[string]any, error) {
	rawURL, err := stringArg(in, "url", true, "")
	if err != nil {
		return nil, err
	}
	method, err := stringArg(in, "method", false, http.MethodGet)
	if err != nil {
		return nil, err
	}
	headers, err := objectArg(in, "headers")
	if err != nil {
		return nil, err
	}
	body, err := stringArg(in, "body", false, "")
	if err != nil {
		return nil, err
	}

	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, invalidField("url", "must be an absolute http or https URL")
	}
	method = strings.ToUpper(method)
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead:
	default:
		return nil, invalidField("method", "must be one of GET, POST, PUT, PATCH, DELETE, HEAD")
	}
	var reqBody io.Reader
	if body != "" && method != http.MethodHead {
		reqBody = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, reqBody)
	if err != nil {
		return nil, invalidField("url", "must be an absolute http or https URL")
	}
	req.Header.Set("User-Agent", userAgent)
	for name, v := range headers {
		s, ok := v.(string)
		if !ok {
			return nil, invalidField("headers/"+name, "must be a string")
		}
		if strings.EqualFold(name, "Host") {
			req.Host = s
			continue
		}
		req.Header.Set(name, s)
	}

	host := u.Hostname()
	resp, err := client.Do(req)
	if err != nil {
		return nil, requestError(ctx, host, timeout, err)
	}
	defer resp.Body.Close()

	if resp.ContentLength > limit {
		return nil, fmt.Errorf("the response body from %s is %d bytes, over the %d-byte limit", host, resp.ContentLength, limit)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, requestError(ctx, host, timeout, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("the response body from %s is over the %d-byte limit", host, limit)
	}

	out := map[string]any{
		"status":  resp.StatusCode,
		"headers": responseHeaders(resp.Header),
		"body":    strings.ToValidUTF8(string(data), "\uFFFD"),
	}
	if isJSON(resp.Header.Get("Content-Type")) && len(data) > 0 {
		var v any
		if json.Unmarshal(data, &v) == nil {
			out["json"] = v
		}
	}
	return out, nil
}

// responseHeaders flattens h: lower-case names, values joined with ", ".
func responseHeaders(h http.Header) map[string]any {
	out := make(map[string]any, len(h))
	for name, vs := range h {
		out[strings.ToLower(name)] = strings.Join(vs, ", ")
	}
	return out
}

// isJSON reports whether a Content-Type is application/json or a +json
// type.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// requestError turns a client error into a client-safe message that names
// only the host. A refused destination says "destination not allowed"; a
// timeout is TOOL_TIMEOUT.
func requestError(ctx context.Context, host string, timeout time.Duration, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr // the Registry classifies its own deadline and the caller's
	}
	var ae *safehttp.AddressError
	switch {
	case errors.As(err, &ae):
		if ae.Addr.String() == strings.Trim(host, "[]") {
			return fmt.Errorf("destination not allowed: %s is a %s address", host, ae.Reason)
		}
		return fmt.Errorf("destination not allowed: %s resolves to %s, a %s address", host, ae.Addr, ae.Reason)
	case errors.Is(err, safehttp.ErrForbiddenAddress):
		return fmt.Errorf("destination not allowed: %s", host)
	case errors.Is(err, safehttp.ErrTooManyRedirects):
		return fmt.Errorf("too many redirects from %s (at most %d are followed)", host, safehttp.DefaultMaxRedirects)
	case errors.Is(err, safehttp.ErrScheme):
		return fmt.Errorf("%s redirected to a URL that is not http or https", host)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &errs.Error{Kind: errs.Timeout, Message: fmt.Sprintf("request to %s timed out after %s", host, timeout), Err: err}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("cannot resolve host %s", host)
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return fmt.Errorf("cannot connect to %s", host)
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return fmt.Errorf("the TLS certificate of %s is not valid", host)
	}
	var recErr tls.RecordHeaderError
	if errors.As(err, &recErr) {
		return fmt.Errorf("%s did not answer with TLS; try http:// instead", host)
	}
	return fmt.Errorf("request to %s failed", host)
}
