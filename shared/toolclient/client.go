// Package toolclient is the service's side of the tool server: the client
// of its service protocol (Client), the process's one cached tool catalog
// over it (Catalog), which serves the REST tool endpoints (Routes), the
// tools offered to models in chats (Specs, Run) and the tools workflow
// proposals are checked against (Details). It links none of the tools'
// implementations, so the functions that only call the tool server stay
// small.
package toolclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/tracing"
)

// DefaultClientTimeout bounds one call of a Client made without an
// http.Client: longer than a tool's own 30 s timeout (the tools' DefaultTimeout),
// so that the tool server reports TOOL_TIMEOUT before the client gives up.
const DefaultClientTimeout = 35 * time.Second

// MaxResponseBytes caps the response body a Client reads: a result of
// MaxValueBytes inline and its envelope. A larger one is an unusable
// response (TOOLS_UNAVAILABLE).
const MaxResponseBytes = MaxValueBytes + 1<<20

// Client calls the tool server's service protocol (POST {baseURL}/mcp
// with the X-Service-Key header). It is safe for concurrent use.
//
// Errors are *errs.Error values. The tool server's own errors come back
// with its kind, code, message and details: TOOL_NOT_FOUND (NotFound),
// INVALID_PARAMS and the other 400 codes (Invalid), TOOL_TIMEOUT (Timeout),
// TOOL_EXECUTION_FAILED (Internal, with the tool's message). A rejected
// service key is an Internal error (a misconfiguration of this deployment,
// not the user's 401). Network failures, timeouts and unusable responses
// are Unavailable with code TOOLS_UNAVAILABLE, the cause kept for logs.
// The service key never appears in an error.
type Client struct {
	endpoint string
	key      string
	idKey    IdentityKey
	hc       *http.Client
	now      func() time.Time
	// blobs, when set, carries inputs and results too large for a
	// request or a response (WithBlobs).
	blobs blob.Backend
}

// WithBlobs returns a copy of c that passes tool inputs larger than
// InlineBytes to the tool server by reference, and takes large results
// the same way, through b (blob.PrefixCalls; both sides need it).
func (c *Client) WithBlobs(b blob.Backend) *Client {
	d := *c
	d.blobs = b
	return &d
}

// NewClient returns a client of the tool server at baseURL (the base URL,
// without /mcp; a trailing slash is ignored). hc nil means a client with
// DefaultClientTimeout. Redirects are never followed, so the key cannot be
// sent anywhere else.
func NewClient(baseURL, serviceKey string, hc *http.Client) *Client {
	var c http.Client
	if hc != nil {
		c = *hc
	} else {
		c.Timeout = DefaultClientTimeout
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{endpoint: strings.TrimRight(baseURL, "/") + "/mcp", key: serviceKey, idKey: NewIdentityKey(serviceKey), hc: &c, now: time.Now}
}

// ListTools returns every tool (listTools).
func (c *Client) ListTools(ctx context.Context) ([]ToolSummary, error) {
	var out ToolsResult
	if err := c.call(ctx, "toolserver.ListTools", MethodListTools, struct{}{}, &out, ""); err != nil {
		return nil, err
	}
	return nonNil(out.Tools), nil
}

// SearchTools returns the tools matching query, best first (searchTools).
func (c *Client) SearchTools(ctx context.Context, query string) ([]ToolSummary, error) {
	var out ToolsResult
	if err := c.call(ctx, "toolserver.SearchTools", MethodSearchTools, SearchParams{Query: query}, &out, ""); err != nil {
		return nil, err
	}
	return nonNil(out.Tools), nil
}

// GetTool returns one tool with its output schema (getTool).
func (c *Client) GetTool(ctx context.Context, id string) (ToolDetail, error) {
	var out ToolDetail
	if err := c.call(ctx, "toolserver.GetTool", MethodGetTool, GetParams{ToolID: id}, &out, ""); err != nil {
		return ToolDetail{}, err
	}
	return out, nil
}

// RunTool runs tool id with input (runTool) for no one in particular;
// nil input is {}.
func (c *Client) RunTool(ctx context.Context, id string, input map[string]any) (RunResult, error) {
	return c.RunToolAs(ctx, id, input, Identity{})
}

// RunToolAs runs tool id with input (runTool) for the user who names,
// whose identity travels signed in IdentityHeader (expiring IdentityTTL
// from now when who.Expires is zero); a zero who.UserID sends none (an
// anonymous call). nil input is {}. A metered tool keeps to
// who.MaxOutput and reports its usage in the result. Its errors are
// RunTool's; a tool server that refuses the identity answers 401, an
// Internal error as for a wrong service key.
func (c *Client) RunToolAs(ctx context.Context, id string, input map[string]any, who Identity) (RunResult, error) {
	if input == nil {
		input = map[string]any{}
	}
	var signed string
	if who.UserID != "" {
		if who.Expires.IsZero() {
			who.Expires = c.now().Add(IdentityTTL)
		}
		signed = c.idKey.Sign(who)
	}
	op := "toolserver.RunTool(" + id + ")"
	params := RunParams{ToolID: id, Input: input, ResultByRef: c.blobs != nil}
	if c.blobs != nil {
		// One buffer of the input's exact JSON (EncodeValue), not the
		// three json.Marshal holds at once for a large one.
		b, err := EncodeValue(input)
		if err != nil {
			return RunResult{}, errs.E(op, errs.Invalid, CodeInvalidParams, "the tool input is not JSON-encodable").WithCause(err)
		}
		if err := CheckValueSize(op, "the tool input", len(b)); err != nil {
			return RunResult{}, err
		}
		if len(b) > InlineBytes {
			key := NewValueKey()
			if _, err := blob.PutBytes(ctx, c.blobs, key, b, "application/json"); err != nil {
				return RunResult{}, errs.Wrap(op, err)
			}
			defer c.forget(ctx, key)
			params.Input, params.InputRef = nil, key
		}
	}
	var out RunResult
	if err := c.call(ctx, op, MethodRunTool, params, &out, signed); err != nil {
		return RunResult{}, err
	}
	if out.ResultRef != "" {
		if c.blobs == nil || !strings.HasPrefix(out.ResultRef, blob.PrefixCalls) {
			return RunResult{}, unusable(op, fmt.Errorf("a result by reference %q the client did not ask for", out.ResultRef))
		}
		defer c.forget(ctx, out.ResultRef)
		b, err := ReadValue(ctx, c.blobs, op, out.ResultRef)
		if err != nil {
			return RunResult{}, err
		}
		if err := json.Unmarshal(b, &out.Result); err != nil {
			return RunResult{}, unusable(op, fmt.Errorf("result %s: %w", out.ResultRef, err))
		}
	}
	if out.Result == nil {
		out.Result = map[string]any{}
	}
	return out, nil
}

// forget deletes a value passed by reference once the call is over; the
// store's expiry of blob.PrefixCalls takes it when this fails.
func (c *Client) forget(ctx context.Context, key string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = c.blobs.Delete(dctx, key)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// call posts {"method", "params"} and decodes the response's data into
// out; identity, when set, is sent as IdentityHeader.
func (c *Client) call(ctx context.Context, op, method string, params, out any, identity string) error {
	p, err := json.Marshal(params)
	if err != nil {
		return errs.E(op, errs.Invalid, CodeInvalidParams, "the tool input is not JSON-encodable").WithCause(err)
	}
	body, err := json.Marshal(Request{Method: method, Params: p})
	if err != nil {
		return errs.Wrap(op, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		// Only a malformed base URL gets here; the error names the URL,
		// never the key (which goes in a header below).
		return errs.E(op, errs.Internal, "", "the tool server URL is invalid").WithCause(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(ServiceKeyHeader, c.key)
	if identity != "" {
		req.Header.Set(IdentityHeader, identity)
	}

	// The call is a client span; its traceparent lets the tool server
	// continue the trace.
	var tool string
	if rp, ok := params.(RunParams); ok {
		tool = rp.ToolID
	}
	req, span := tracing.StartToolServerCall(req, method, tool)
	resp, err := c.hc.Do(req)
	if err != nil {
		tracing.EndClient(span, 0, err)
		return transportError(op, err)
	}
	defer resp.Body.Close()
	defer tracing.EndClient(span, resp.StatusCode, nil)
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return transportError(op, err)
	}
	if len(data) > MaxResponseBytes {
		return unusable(op, fmt.Errorf("status %d: response body exceeds %d bytes", resp.StatusCode, MaxResponseBytes))
	}
	if resp.StatusCode == http.StatusOK {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(data, &env); err != nil {
			return unusable(op, fmt.Errorf("status 200: %w", err))
		}
		if len(env.Data) == 0 || string(env.Data) == "null" {
			return unusable(op, errors.New("status 200: no data"))
		}
		if err := json.Unmarshal(env.Data, out); err != nil {
			return unusable(op, fmt.Errorf("status 200: data: %w", err))
		}
		return nil
	}
	return statusError(op, resp.StatusCode, data)
}

// transportError classifies a failure to get a response.
func transportError(op string, err error) error {
	msg := "the tool server could not be reached"
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		msg = "the tool server did not respond in time"
	}
	return errs.E(op, errs.Unavailable, CodeToolsUnavailable, msg).WithCause(err)
}

// unusable is the error of a response that is not the service protocol.
func unusable(op string, cause error) error {
	return errs.E(op, errs.Unavailable, CodeToolsUnavailable, "the tool server sent an unusable response").WithCause(cause)
}

// statusError maps a non-200 response back to the tool server's error.
func statusError(op string, status int, data []byte) error {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		// Our key (or the identity signed with it) is wrong: a
		// misconfiguration, never the user's 401.
		return &errs.Error{Op: op, Kind: errs.Internal, Message: "tool server rejected the service key or the caller identity",
			Err: fmt.Errorf("tool server answered %d", status)}
	}
	var body httpapi.ErrorBody
	if err := json.Unmarshal(data, &body); err != nil || body.Code == "" {
		if err == nil {
			err = errors.New("no error code")
		}
		return unusable(op, fmt.Errorf("status %d: not an error body: %w", status, err))
	}
	cause := fmt.Errorf("tool server answered %d %s", status, body.Code)
	e := &errs.Error{Op: op, Code: body.Code, Message: body.Message, Details: body.Details, Err: cause}
	switch {
	case status == http.StatusNotFound && body.Code == "ROUTE_NOT_FOUND", status == http.StatusMethodNotAllowed:
		// MCP_URL does not point at the tool server's base URL.
		return &errs.Error{Op: op, Kind: errs.Internal, Message: "the tool server URL does not serve POST /mcp", Err: cause}
	case status == http.StatusBadRequest:
		e.Kind = errs.Invalid
	case status == http.StatusNotFound:
		e.Kind = errs.NotFound
	case status == http.StatusRequestEntityTooLarge:
		e.Kind = errs.TooLarge
	case status == http.StatusTooManyRequests:
		e.Kind = errs.RateLimited
	case status == http.StatusGatewayTimeout || body.Code == CodeToolTimeout:
		e.Kind = errs.Timeout
	case status == http.StatusInternalServerError:
		e.Kind = errs.Internal
	default:
		// 502, 503 and anything unexpected: the tool server is not
		// (properly) there.
		return unusable(op, cause)
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}
