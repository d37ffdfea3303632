package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/safehttp"
)

// Remote connects to remote MCP servers with the go-sdk's Streamable HTTP
// client, through an SSRF-safe HTTP client: it follows no redirect (a
// redirect answer fails the request), and each answer's body is cut at
// MaxResponseBytes.
type Remote struct {
	http         *http.Client
	allowPrivate bool
	timeout      time.Duration
}

// NewRemote returns the Remote; allowPrivate lets it reach loopback and
// private addresses (TOOLS_ALLOW_PRIVATE_NETWORKS: local tests only).
func NewRemote(allowPrivate bool) *Remote {
	c := safehttp.NewClient(safehttp.Options{AllowPrivate: allowPrivate, Timeout: ListTimeout, MaxRedirects: -1})
	c.Transport = boundedTransport{next: c.Transport}
	return &Remote{http: c, allowPrivate: allowPrivate, timeout: ListTimeout}
}

// WithTimeout returns a copy of r whose listing is bounded by d instead of
// ListTimeout (tests of a server that never answers).
func (r *Remote) WithTimeout(d time.Duration) *Remote {
	c := *r
	c.timeout = d
	return &c
}

// Endpoint is where and how to reach one server.
type Endpoint struct {
	URL string
	// Header and Value are a header auth's header, when Header is set.
	Header, Value string
}

// ListTools connects to e and returns its tools (every page, at most
// MaxTools, valid names only), bounded by ListTimeout. A failure is a
// *Problem (its code says what failed; its message is safe to show and
// names no secret).
func (r *Remote) ListTools(ctx context.Context, e Endpoint) ([]Tool, *Problem) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	seen := &observed{ctx: ctx}
	session, err := r.connect(ctx, e, seen)
	if err != nil {
		return nil, seen.problem(ctx, err)
	}
	defer session.Close()
	var out []Tool
	size := 0
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, &Problem{Code: CodeToolListTooLarge, Message: fmt.Sprintf("the tool list has more than %d pages", maxListPages)}
		}
		res, err := session.ListTools(ctx, params)
		if err != nil {
			return nil, seen.problem(ctx, err)
		}
		for _, t := range res.Tools {
			if t == nil || !ValidToolName(t.Name) {
				continue
			}
			tool, err := toolOf(t)
			if err != nil {
				continue
			}
			b, _ := json.Marshal(tool)
			size += len(b)
			out = append(out, tool)
			if len(out) > MaxTools || size > MaxToolListBytes {
				return nil, &Problem{Code: CodeToolListTooLarge,
					Message: fmt.Sprintf("the server lists more tools than are kept (at most %d tools, %d KiB)", MaxTools, MaxToolListBytes>>10)}
			}
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	if out == nil {
		out = []Tool{}
	}
	return out, nil
}

func (r *Remote) connect(ctx context.Context, e Endpoint, seen *observed) (*mcp.ClientSession, error) {
	c0 := *r.http
	client := &c0
	client.Transport = observeTransport{next: r.http.Transport, seen: seen}
	if e.Header != "" {
		client.Transport = headerTransport{next: client.Transport, name: e.Header, value: e.Value}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "workflow-chat-service", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL, HTTPClient: client, MaxRetries: -1,
		DisableStandaloneSSE: true, MaxEventSize: MaxResponseBytes}, nil)
}

// toolOf keeps what the service shows of t: name, description (cut at
// MaxToolDescription), input schema (an object schema; "{type: object}"
// when it gives none), annotations.
func toolOf(t *mcp.Tool) (Tool, error) {
	out := Tool{Name: t.Name, Description: cut(t.Description, MaxToolDescription)}
	schema := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return Tool{}, err
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(b, &obj) != nil {
			return Tool{}, errors.New("input schema is not an object")
		}
		schema = b
	}
	out.InputSchema = schema
	if a := t.Annotations; a != nil {
		out.Annotations = &Annotations{Title: cut(a.Title, 256), ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
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

// errTooLarge is an answer's body cut at MaxResponseBytes.
var errTooLarge = errors.New("answer over the size limit")

// problemOf says what a failed connection or request was, for the user:
// never the raw error, which may quote the server's answer.
func problemOf(ctx context.Context, err error) *Problem {
	var ae *safehttp.AddressError
	switch {
	case errors.As(err, &ae):
		return &Problem{Code: CodeInvalidURL, Message: "the server's address is not allowed: " + ae.Error()}
	case errors.Is(err, safehttp.ErrForbiddenAddress):
		return &Problem{Code: CodeInvalidURL, Message: "the server's address is not allowed"}
	case errors.Is(err, errTooLarge):
		return &Problem{Code: CodeResponseTooLarge, Message: fmt.Sprintf("the server answered more than %d MiB", MaxResponseBytes>>20)}
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return &Problem{Code: CodeRemoteTimeout, Message: "the server did not answer in time"}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &Problem{Code: CodeUnreachable, Message: "the server closed the connection in the middle of its answer"}
	}
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &de) || errors.As(err, &oe) || errors.As(err, &ne) {
		return &Problem{Code: CodeUnreachable, Message: "the server could not be reached"}
	}
	return &Problem{Code: CodeInvalidResponse, Message: "the server's answer is not a valid MCP answer"}
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
func (o *observed) problem(ctx context.Context, err error) *Problem {
	o.mu.Lock()
	status, tooLarge, broken := o.status, o.tooLarge, o.broken
	o.mu.Unlock()
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &Problem{Code: CodeUnauthorizedByRmt, Message: fmt.Sprintf("the server refused the service's credentials (%d)", status)}
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

// boundedTransport cuts every answer's body at MaxResponseBytes: reading
// past it fails with errTooLarge.
type boundedTransport struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (b boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := b.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = &limitedBody{r: res.Body, left: MaxResponseBytes}
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
