package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/mcprpc"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/oauth/bearer"
	"github.com/workflowchat/service/shared/tracing"
)

// Implementation identifies the gateway to MCP clients.
var Implementation = mcp.Implementation{Name: "workflowchat-workflows", Title: "Workflow Chat: your workflows", Version: "1.0.0"}

var errUnknownTool = errs.E("mcpgateway.Call", errs.NotFound, "TOOL_NOT_FOUND", "no such tool")

// Verifier checks a bearer token (bearer.Verifier).
type Verifier interface {
	Verify(ctx context.Context, token string, r *http.Request) (bearer.Principal, error)
}

// Options configure Routes.
type Options struct {
	Tools    WorkflowTools
	Verifier Verifier
	// BaseURL is PUBLIC_BASE_URL ("": from each request, oauth.BaseURL).
	BaseURL string
	Logger  *slog.Logger
	// Limit, when set, limits each user's requests (RATE_LIMIT_MCP); it
	// runs after the token is verified, so that it counts per user.
	Limit httpapi.Middleware
}

// Routes returns the handler of POST /api/mcp (McpGatewayFunction), an
// Open route: bearer tokens only, never the session cookie. Each user's
// requests are limited by o.Limit; each body is validated as one JSON-RPC
// message (a batch is refused) before the SDK sees it.
func Routes(o Options) *httpapi.Router {
	if o.Tools == nil {
		o.Tools = NoTools{}
	}
	g := &gateway{tools: o.Tools}
	opts := func(jsonResponse bool) *mcp.StreamableHTTPOptions {
		// The SDK's DNS rebinding protection (a loopback connection with a
		// foreign Host is refused) guards unauthenticated local servers; this
		// endpoint takes bearer tokens only, which a rebinding page cannot
		// have, and a dev server reached through a tunnel must keep working.
		return &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: jsonResponse, Logger: o.Logger, DisableLocalhostProtection: true}
	}
	g.json = mcp.NewStreamableHTTPHandler(g.server, opts(true))
	g.sse = mcp.NewStreamableHTTPHandler(g.server, opts(false))
	var h http.Handler = g
	if o.Limit != nil {
		h = o.Limit(h)
	}
	r := httpapi.NewRouter()
	r.HandleAccess("POST "+oauth.ResourcePath, RequireBearer(o.Verifier, o.BaseURL, h), httpapi.Open)
	return r
}

type principalKey struct{}

// PrincipalFrom returns the principal RequireBearer put in ctx.
func PrincipalFrom(ctx context.Context) (bearer.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(bearer.Principal)
	return p, ok
}

// RequireBearer lets a request through only with a valid bearer token in
// the Authorization header (the session cookie is never read): it puts the
// principal in the context (PrincipalFrom, and auth.UserID through
// auth.ActingFor). Otherwise it answers 401 UNAUTHORIZED with
// WWW-Authenticate: Bearer resource_metadata="..." (RFC 9728), plus
// error="invalid_token" when a token was presented (RFC 6750); a storage
// or key failure is 503. It does what go-sdk's auth.RequireBearerToken
// does, with the metadata URL computed per request (the origin may come
// from the request) and the service's JSON error bodies.
func RequireBearer(v Verifier, baseURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const op = "mcpgateway.RequireBearer"
		challenge := "Bearer"
		if base := oauth.BaseURL(baseURL, r); base != "" {
			challenge += fmt.Sprintf(` resource_metadata="%s"`, oauth.ResourceMetadataURL(base))
		}
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		if !strings.EqualFold(scheme, "Bearer") || token == "" {
			w.Header().Set("WWW-Authenticate", challenge)
			httpapi.WriteError(w, r, errs.E(op, errs.Unauthenticated, "UNAUTHORIZED", "a bearer token is required (Authorization: Bearer <token>)"))
			return
		}
		p, err := v.Verify(r.Context(), token, r)
		if err != nil {
			if errs.Is(err, errs.Unauthenticated) {
				w.Header().Set("WWW-Authenticate", challenge+`, error="invalid_token", error_description="the token is invalid, expired or revoked"`)
				httpapi.WriteError(w, r, errs.E(op, errs.Unauthenticated, "UNAUTHORIZED", "the bearer token is invalid, expired or revoked"))
				return
			}
			httpapi.WriteError(w, r, errs.Wrap(op, err))
			return
		}
		ctx := context.WithValue(auth.ActingFor(r.Context(), p.UserID), principalKey{}, p)
		ctx = logging.WithLogger(ctx, logging.FromContext(ctx).With("userId", p.UserID, "clientId", p.ClientID))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// gateway serves the MCP requests of authenticated users.
type gateway struct {
	tools     WorkflowTools
	json, sse http.Handler
}

// ServeHTTP validates the body as one JSON-RPC message, as the tool
// server does (mcprpc: a batch, an id that is not a string or an
// integer, a response and the rest are refused as JSON-RPC errors before
// the SDK sees them), and hands its canonical form to the JSON or the
// SSE handler: SSE only for a tools/call whose params carry
// _meta.progressToken and are a valid tools/call's.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpapi.WriteError(w, r, httpapi.BodyTooLarge("mcpgateway", tooLarge.Limit))
			return
		}
		httpapi.WriteError(w, r, errs.E("mcpgateway", errs.Invalid, "INVALID_BODY", "could not read the request body").WithCause(err))
		return
	}
	m, fault := mcprpc.Parse(body, r.Header.Get("MCP-Protocol-Version"))
	if fault != nil {
		mcprpc.WriteFault(w, r, *fault)
		return
	}
	h := g.json
	if wantsProgress(m) {
		h = g.sse
	}
	mcprpc.Serve(w, r, m, h)
}

// ErrBatch is the message of the JSON-RPC error a batch is answered
// with.
const ErrBatch = mcprpc.ErrBatch

// wantsProgress reports whether m is a tools/call with a progress token
// whose params the SDK can read. Params it cannot read go to the JSON
// handler, whose answer is checked whole (mcprpc.Serve): the SDK's
// decoding error would name Go types, and an SSE stream is passed on as
// it is written.
func wantsProgress(m mcprpc.Message) bool {
	if m.Method != "tools/call" {
		return false
	}
	var p mcp.CallToolParamsRaw
	if json.Unmarshal(m.Params, &p) != nil {
		return false
	}
	var meta struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(m.Params, &meta) != nil {
		return false
	}
	tok, ok := meta.Meta["progressToken"]
	return ok && string(tok) != "null"
}

// server builds the MCP server of the request's user.
func (g *gateway) server(r *http.Request) *mcp.Server {
	ctx := r.Context()
	p, _ := PrincipalFrom(ctx)
	impl := Implementation
	srv := mcp.NewServer(&impl, &mcp.ServerOptions{
		Instructions: "Your Workflow Chat workflows that you marked to expose as tools. Each runs as a durable workflow run; a long run answers with its runId and status.",
		// Every list is one user's own: the SDK's default cacheScope
		// "public" would let a shared intermediary serve it to others.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
	})
	tools, err := g.tools.Tools(ctx, p.UserID)
	if err != nil {
		logging.FromContext(ctx).ErrorContext(ctx, "mcpgateway: list tools", "err", err.Error())
		return srv // no tools: tools/list answers an empty list rather than a broken session
	}
	for _, t := range tools {
		if err := addTool(srv, t, g.call(p.UserID, t.Name)); err != nil {
			logging.FromContext(ctx).WarnContext(ctx, "mcpgateway: tool skipped", "tool", t.Name, "err", err.Error())
		}
	}
	return srv
}

// addTool registers t, refusing an input schema that is not an object
// schema (the SDK would panic on it).
func addTool(srv *mcp.Server, t Tool, h mcp.ToolHandler) (err error) {
	in := t.InputSchema
	if len(in) == 0 {
		in = json.RawMessage(`{"type":"object"}`)
	}
	var probe struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(in, &probe) != nil || probe.Type != "object" {
		return errors.New(`input schema is not {"type":"object", ...}`)
	}
	tool := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: in}
	if len(t.OutputSchema) > 0 {
		tool.OutputSchema = t.OutputSchema
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("rejected by the MCP SDK: %v", v)
		}
	}()
	srv.AddTool(tool, h)
	return nil
}

// call is the tools/call handler of tool name for userID.
func (g *gateway) call(userID, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (_ *mcp.CallToolResult, err error) {
		ctx, span := tracing.StartMCPCall(ctx, req.Params.GetMeta())
		defer func() { tracing.End(span, err) }()
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		var progress func(Progress)
		if tok := req.Params.GetProgressToken(); tok != nil {
			progress = func(p Progress) {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(p.Step), Total: float64(p.Total), Message: p.Message,
				}); err != nil {
					// A client that left misses it; the run goes on.
					logging.FromContext(ctx).InfoContext(ctx, "mcpgateway: progress not delivered", "message", p.Message, "err", err.Error())
				}
			}
		}
		res, err := g.tools.Call(ctx, userID, name, args, progress)
		if err != nil {
			return nil, err
		}
		return toResult(res), nil
	}
}

// toResult turns a CallResult into the MCP result: structured content
// with its JSON as text, isError with the message, or a still-running
// run's {runId, status}.
func toResult(res CallResult) *mcp.CallToolResult {
	switch {
	case res.IsError:
		text := res.Text
		if text == "" {
			text = "the workflow run failed"
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	case res.RunID != "":
		out := map[string]string{"runId": res.RunID, "status": res.Status}
		text := res.Text
		if text == "" {
			text = fmt.Sprintf("The workflow run %s is still %s.", res.RunID, res.Status)
		}
		return &mcp.CallToolResult{StructuredContent: out, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	}
	out := res.Output
	if len(out) == 0 {
		out = json.RawMessage(`{}`)
	}
	text := res.Text
	if text == "" {
		text = string(out)
	}
	return &mcp.CallToolResult{StructuredContent: out, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
