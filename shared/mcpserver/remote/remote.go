// Package remote is the MCP client side of the users' servers: it connects
// to a remote MCP server with the go-sdk's Streamable HTTP client and lists
// its tools. It is apart from package mcpserver so that what links the
// store does not link the SDK.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/safehttp"
	"github.com/workflowchat/service/shared/schema"
)

// Remote connects to remote MCP servers with the go-sdk's Streamable HTTP
// client, through an SSRF-safe HTTP client: it follows no redirect (a
// redirect answer fails the request), and each answer's body is cut at
// mcpserver.MaxResponseBytes.
type Remote struct {
	http         *http.Client
	allowPrivate bool
	timeout      time.Duration
	// calls is the client of tool calls: bounded by
	// mcpserver.CallTimeout and mcpserver.MaxCallResponseBytes.
	calls       *http.Client
	callTimeout time.Duration
}

// NewRemote returns the Remote; allowPrivate lets it reach loopback and
// private addresses (TOOLS_ALLOW_PRIVATE_NETWORKS: local tests only).
func New(allowPrivate bool) *Remote {
	c := safehttp.NewClient(safehttp.Options{AllowPrivate: allowPrivate, Timeout: mcpserver.ListTimeout, MaxRedirects: -1})
	c.Transport = boundedTransport{next: c.Transport, max: mcpserver.MaxResponseBytes}
	cc := safehttp.NewClient(safehttp.Options{AllowPrivate: allowPrivate, Timeout: mcpserver.CallTimeout, MaxRedirects: -1})
	cc.Transport = boundedTransport{next: cc.Transport, max: mcpserver.MaxCallResponseBytes}
	return &Remote{http: c, allowPrivate: allowPrivate, timeout: mcpserver.ListTimeout, calls: cc, callTimeout: mcpserver.CallTimeout}
}

// WithCallTimeout returns a copy of r whose tool calls are bounded by d
// instead of mcpserver.CallTimeout (tests of a server that never answers).
func (r *Remote) WithCallTimeout(d time.Duration) *Remote {
	c := *r
	c.callTimeout = d
	return &c
}

// WithTimeout returns a copy of r whose listing is bounded by d instead of
// mcpserver.ListTimeout (tests of a server that never answers).
func (r *Remote) WithTimeout(d time.Duration) *Remote {
	c := *r
	c.timeout = d
	return &c
}

// ListTools connects to e and returns its tools (every page, at most
// mcpserver.MaxTools, valid names only), bounded by mcpserver.ListTimeout. A failure is a
// *mcpserver.Problem (its code says what failed; its message is safe to show and
// names no secret).
func (r *Remote) ListTools(ctx context.Context, e mcpserver.Endpoint) ([]mcpserver.Tool, *mcpserver.Problem) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	seen := &observed{ctx: ctx}
	session, err := r.connect(ctx, r.http, e, seen)
	if err != nil {
		return nil, seen.problem(ctx, err)
	}
	defer session.Close()
	var out []mcpserver.Tool
	names := map[string]bool{}
	size := 0
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, &mcpserver.Problem{Code: mcpserver.CodeToolListTooLarge, Message: fmt.Sprintf("the tool list has more than %d pages", maxListPages)}
		}
		res, err := session.ListTools(ctx, params)
		if err != nil {
			return nil, seen.problem(ctx, err)
		}
		for _, t := range res.Tools {
			if t == nil || !mcpserver.ValidToolName(t.Name) {
				continue
			}
			// A second tool of the same name would reach the model as a
			// duplicate function, which providers refuse (every chat of the
			// user would fail): the first one listed is kept.
			if names[t.Name] {
				logging.FromContext(ctx).WarnContext(ctx, "remote MCP tool skipped", "tool", t.Name, "reason", "duplicate name")
				continue
			}
			tool, err := toolOf(t)
			if err != nil {
				logging.FromContext(ctx).WarnContext(ctx, "remote MCP tool skipped", "tool", t.Name, "reason", err.Error())
				continue
			}
			names[t.Name] = true
			b, _ := json.Marshal(tool)
			size += len(b)
			out = append(out, tool)
			if len(out) > mcpserver.MaxTools || size > mcpserver.MaxToolListBytes {
				return nil, &mcpserver.Problem{Code: mcpserver.CodeToolListTooLarge,
					Message: fmt.Sprintf("the server lists more tools than are kept (at most %d tools, %d KiB)", mcpserver.MaxTools, mcpserver.MaxToolListBytes>>10)}
			}
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	if out == nil {
		out = []mcpserver.Tool{}
	}
	return out, nil
}

func (r *Remote) connect(ctx context.Context, hc *http.Client, e mcpserver.Endpoint, seen *observed) (*mcp.ClientSession, error) {
	c0 := *hc
	client := &c0
	client.Transport = observeTransport{next: hc.Transport, seen: seen}
	if e.Header != "" {
		client.Transport = headerTransport{next: client.Transport, name: e.Header, value: e.Value}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "workflow-chat-service", Version: "1"}, nil)
	maxEvent := mcpserver.MaxResponseBytes
	if hc == r.calls {
		maxEvent = mcpserver.MaxCallResponseBytes
	}
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL, HTTPClient: client, MaxRetries: -1,
		DisableStandaloneSSE: true, MaxEventSize: maxEvent}, nil)
}

// toolOf keeps what the service shows of t: name, description (cut at
// mcpserver.MaxToolDescription), input schema (an object schema; "{type: object}"
// when it gives none), annotations. An input schema that does not compile
// or whose "type" is not "object" is an error: the tool's calls could not
// be checked, and the model providers refuse such parameters (every chat
// of the user would fail).
func toolOf(t *mcp.Tool) (mcpserver.Tool, error) {
	out := mcpserver.Tool{Name: t.Name, Description: cut(t.Description, mcpserver.MaxToolDescription)}
	raw := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return mcpserver.Tool{}, err
		}
		if err := CheckInputSchema(b); err != nil {
			return mcpserver.Tool{}, err
		}
		raw = b
	}
	out.InputSchema = raw
	if a := t.Annotations; a != nil {
		out.Annotations = &mcpserver.Annotations{Title: cut(a.Title, 256), ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
			IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	return out, nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// errTooLarge is an answer's body cut at mcpserver.MaxResponseBytes.
var errTooLarge = errors.New("answer over the size limit")

// problemOf says what a failed connection or request was, for the user:
// never the raw error, which may quote the server's answer.
func problemOf(ctx context.Context, err error) *mcpserver.Problem {
	var ae *safehttp.AddressError
	switch {
	case errors.As(err, &ae):
		return &mcpserver.Problem{Code: mcpserver.CodeInvalidURL, Message: "the server's address is not allowed: " + ae.Error()}
	case errors.Is(err, safehttp.ErrForbiddenAddress):
		return &mcpserver.Problem{Code: mcpserver.CodeInvalidURL, Message: "the server's address is not allowed"}
	case errors.Is(err, errTooLarge):
		return &mcpserver.Problem{Code: mcpserver.CodeResponseTooLarge, Message: "the server's answer is over the size limit"}
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return &mcpserver.Problem{Code: mcpserver.CodeRemoteTimeout, Message: "the server did not answer in time"}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &mcpserver.Problem{Code: mcpserver.CodeUnreachable, Message: "the server closed the connection in the middle of its answer"}
	}
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &de) || errors.As(err, &oe) || errors.As(err, &ne) {
		return &mcpserver.Problem{Code: mcpserver.CodeUnreachable, Message: "the server could not be reached"}
	}
	return &mcpserver.Problem{Code: mcpserver.CodeInvalidResponse, Message: "the server's answer is not a valid MCP answer"}
}

// observed is what the answers of one connection showed: whether the
// server refused the credentials (401 or 403) and the resource metadata
// URL its challenge named.
//
// It also ties every request to ctx, the listing's context: the SDK may
// send a request under a context of its own, and a request still running
// when the listing ends is cancelled then.
type observed struct {
	ctx              context.Context
	mu               sync.Mutex
	status           int
	resourceMetadata string
	tooLarge         bool
	broken           error // a transport failure: connection refused, reset, cut answer
}

// problem says what err was, from what the transport saw first: the
// SDK's errors do not always wrap their cause.
func (o *observed) problem(ctx context.Context, err error) *mcpserver.Problem {
	o.mu.Lock()
	status, tooLarge, broken := o.status, o.tooLarge, o.broken
	o.mu.Unlock()
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &mcpserver.Problem{Code: mcpserver.CodeUnauthorizedByRmt, Message: fmt.Sprintf("the server refused the service's credentials (%d)", status)}
	case tooLarge:
		return problemOf(ctx, errTooLarge)
	case broken != nil && ctx.Err() == nil:
		return problemOf(ctx, broken)
	}
	return problemOf(ctx, err)
}

func (o *observed) fail(err error) {
	if err == nil || errors.Is(err, io.EOF) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if errors.Is(err, errTooLarge) {
		o.tooLarge = true
	} else if o.broken == nil {
		o.broken = err
	}
}

// observeTransport records refusals and failures into seen and bounds
// each request by seen.ctx.
type observeTransport struct {
	next http.RoundTripper
	seen *observed
}

// RoundTrip implements http.RoundTripper.
func (o observeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(o.seen.ctx, cancel)
	done := func() { stop(); cancel() }
	res, err := o.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		done()
		o.seen.fail(err)
		return nil, err
	}
	if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
		o.seen.mu.Lock()
		o.seen.status = res.StatusCode
		o.seen.resourceMetadata = challengeParam(res.Header.Values("WWW-Authenticate"), "resource_metadata")
		o.seen.mu.Unlock()
	}
	res.Body = &observedBody{ReadCloser: res.Body, seen: o.seen, done: done}
	return res, nil
}

// observedBody records a failed read and releases its request's context
// when closed.
type observedBody struct {
	io.ReadCloser
	seen *observed
	done func()
}

func (b *observedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.seen.fail(err)
	return n, err
}

func (b *observedBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// challengeParam returns the value of param in a Bearer challenge of
// values, empty when there is none.
func challengeParam(values []string, param string) string {
	for _, v := range values {
		i := strings.Index(v, param+"=")
		if i < 0 {
			continue
		}
		rest := v[i+len(param)+1:]
		if strings.HasPrefix(rest, `"`) {
			if j := strings.IndexByte(rest[1:], '"'); j >= 0 {
				return rest[1 : j+1]
			}
			continue
		}
		if j := strings.IndexAny(rest, ", "); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	return ""
}

// headerTransport sets a header auth's header on every request.
type headerTransport struct {
	next        http.RoundTripper
	name, value string
}

// RoundTrip implements http.RoundTripper.
func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(h.name, h.value)
	return h.next.RoundTrip(req)
}

// boundedTransport cuts every answer's body at max bytes: reading past it
// fails with errTooLarge.
type boundedTransport struct {
	next http.RoundTripper
	max  int64
}

// RoundTrip implements http.RoundTripper.
func (b boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := b.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = &limitedBody{r: res.Body, left: b.max}
	return res, nil
}

type limitedBody struct {
	r    io.ReadCloser
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedBody) Close() error { return l.r.Close() }

// maxListPages bounds the tools/list pages read from one server.
const maxListPages = 16

// CheckInputSchema returns why raw cannot be a remote tool's input schema,
// or nil: it must be a JSON Schema object (mcpserver.ObjectSchema) that
// compiles (shared/schema: no bad keyword, no external reference, no
// reference cycle); else a step's inputs could not be checked against it.
func CheckInputSchema(raw json.RawMessage) error {
	if err := mcpserver.ObjectSchema(raw); err != nil {
		return err
	}
	if _, err := schema.Compile(raw); err != nil {
		return fmt.Errorf("input schema: %w", err)
	}
	return nil
}
