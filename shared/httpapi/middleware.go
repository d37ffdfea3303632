package httpapi

import (
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/tracing"
)

// Middleware wraps a handler.
type Middleware func(http.Handler) http.Handler

// Chain applies mws to h so that the first runs first.
func Chain(h http.Handler, mws ...Middleware) http.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Options configures Stack.
type Options struct {
	Logger         *slog.Logger
	AllowedOrigins []string
}

// Stack wraps h in the standard middleware, outermost first: security
// headers, request id, the client's origin (ClientOrigin), the request's trace span, request logging, panic
// recovery, CORS, the refusal
// of cross-site writes and of bodies that are not JSON, and the body
// limit. When h is a *Router, its routes' Access adjusts CORS and the
// cross-site check (see Access).
func Stack(h http.Handler, o Options) http.Handler {
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	access := func(*http.Request) Access { return Cookie }
	if rt, ok := h.(*Router); ok {
		access = rt.AccessOf
	}
	cors, writes := CORS(o.AllowedOrigins), CrossSiteWrites(o.AllowedOrigins)
	return Chain(h, SecurityHeaders, RequestID(logger), ClientOrigin, Trace, AccessLog, Recover,
		func(next http.Handler) http.Handler {
			viaCORS, open := cors(next), OpenCORS(next)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if access(r) == Open {
					open.ServeHTTP(w, r)
					return
				}
				viaCORS.ServeHTTP(w, r)
			})
		},
		func(next http.Handler) http.Handler {
			checked := writes(next)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if access(r) != Cookie {
					next.ServeHTTP(w, r)
					return
				}
				checked.ServeHTTP(w, r)
			})
		},
		LimitBody(MaxBodyBytes))
}

// OpenCORS lets any origin call an Open route, without credentials: a
// preflight is answered 204 with the methods and headers a bearer-token
// or OAuth client sends; other requests get Access-Control-Allow-Origin *
// and the headers such a client reads (WWW-Authenticate above all).
func OpenCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", "WWW-Authenticate, X-Request-Id, Retry-After, Mcp-Session-Id, Mcp-Protocol-Version")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID, X-Request-Id")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SecurityHeaders sets headers that are right for every API response.
func SecurityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var requestIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._:=-]{1,128}$`) })

// RequestIDHeader carries the request id in requests and responses.
const RequestIDHeader = "X-Request-Id"

// RequestID takes a well-formed X-Request-Id from the request (API Gateway
// and load balancers set one) or makes one, echoes it in the response, and
// puts a logger carrying it into the request's context.
func RequestID(base *slog.Logger) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(RequestIDHeader)
			if !requestIDPattern().MatchString(id) {
				id = uuid.NewString()
			}
			w.Header().Set(RequestIDHeader, id)
			ctx := logging.WithLogger(r.Context(), base.With("requestId", id))
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// Trace makes a request the server span of its trace when tracing is on
// (package tracing): a child of the traceparent the request carries, named
// by the route the request matched ("POST /api/chats/{chatId}"), with the
// response's status; the request's logger gets the trace id. Off, it only
// passes the request on.
func Trace(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !tracing.Enabled() {
			next.ServeHTTP(w, r)
			return
		}
		ctx, span := tracing.StartServer(r)
		ctx = logging.WithLogger(ctx, logging.FromContext(ctx).With("traceId", tracing.TraceID(ctx)))
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		// The router sets r.Pattern on this very request when it matches.
		defer func() { tracing.EndServer(span, r.Pattern, loggedPath(r), sw.status) }()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter records the status and size of a response. It keeps the
// wrapped writer reachable for http.ResponseController (Flush, deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// Flush flushes the underlying writer when it can.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap returns the wrapped writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// secretPathValues are the path wildcards whose values are credentials:
// a share's id is the only key to its snapshot. The access log and the
// server span's url.path name the wildcard in their place.
var secretPathValues = map[string]bool{"shareId": true}

// loggedPath is r's path as the access log shows it: with the route's
// secret path values (secretPathValues) replaced by their wildcard, e.g.
// /api/shares/{shareId}. A request no route matched logs its path as
// sent.
func loggedPath(r *http.Request) string {
	_, path, ok := strings.Cut(r.Pattern, "/")
	if !ok || !strings.Contains(path, "{") {
		return r.URL.Path
	}
	secret := false
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		name, isWild := strings.CutPrefix(seg, "{")
		if !isWild {
			continue
		}
		name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
		if secretPathValues[name] {
			secret = true
			continue
		}
		segs[i] = r.PathValue(name)
	}
	if !secret {
		return r.URL.Path
	}
	return "/" + strings.Join(segs, "/")
}

// AccessLog logs one line per request: method, route, status, size and
// duration. It never logs bodies, queries or headers, nor path values
// that are credentials (loggedPath).
func AccessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		level := slog.LevelInfo
		if sw.status >= 500 {
			level = slog.LevelError
		}
		logging.FromContext(r.Context()).Log(r.Context(), level, "request",
			"method", r.Method, "path", loggedPath(r), "route", r.Pattern,
			"status", sw.status, "bytes", sw.bytes, "durationMs", time.Since(start).Milliseconds())
	})
}

// Recover turns a panic into a logged 500 INTERNAL_ERROR response. It
// re-panics http.ErrAbortHandler, which net/http uses to abort a response.
func Recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			logging.FromContext(r.Context()).ErrorContext(r.Context(), "panic", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			WriteError(w, r, errs.E("httpapi.Recover", errs.Internal, "", "internal error"))
		}()
		next.ServeHTTP(w, r)
	})
}

// LimitBody answers 413 PAYLOAD_TOO_LARGE for a request whose declared
// length exceeds limit, and caps the body it reads at limit (Decode turns
// the overflow into the same 413).
func LimitBody(limit int64) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				WriteError(w, r, BodyTooLarge("httpapi.LimitBody", limit))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		})
	}
}

// CORS allows the listed origins to call the API with credentials. A
// preflight (OPTIONS with Access-Control-Request-Method) from an allowed
// origin is answered 204; from any other origin it is refused with 403
// ORIGIN_NOT_ALLOWED. Ordinary requests from other origins get no CORS
// headers, so browsers will not expose the response.
func CORS(allowed []string) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			origin := r.Header.Get("Origin")
			preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
			if origin == "" {
				next.ServeHTTP(w, r)
				return
			}
			h := w.Header()
			h.Add("Vary", "Origin")
			if !slices.Contains(allowed, strings.TrimRight(origin, "/")) {
				if preflight {
					WriteError(w, r, errs.E("httpapi.CORS", errs.Forbidden, "ORIGIN_NOT_ALLOWED", "origin not allowed"))
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After, Location, Preference-Applied")
			if preflight {
				h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Content-Type, Accept, X-Request-Id, Prefer")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// CrossSiteWrites refuses the state-changing requests (every method but
// GET, HEAD and OPTIONS) a browser may have sent for a page of another
// origin, so that the session cookie alone never authorizes a change:
//
//   - A request from an origin that is neither the API's own nor one of
//     allowed is 403 ORIGIN_NOT_ALLOWED (the "null" origin of sandboxed
//     frames and local files included). The check is net/http's
//     CrossOriginProtection: a browser's Sec-Fetch-Site header decides
//     when present (same-origin passes, same-site and cross-site do not
//     unless Origin is allowed); without it, Origin must be absent, allowed,
//     or name the host the request was addressed to (r.Host). Requests with
//     neither header are not from a browser's page and pass.
//   - A request that declares its body in a type other than JSON is 415
//     UNSUPPORTED_MEDIA_TYPE: Content-Type, when present, must be
//     application/json, with no charset or UTF-8. This refuses the bodies a
//     page may send cross-site without a CORS preflight (text/plain, form,
//     multipart) even where the origin check lets a request through. A
//     request without Content-Type is read as JSON, and a body-less one
//     needs none.
//
// Origins in allowed that are not of the form scheme://host[:port] are
// ignored (config.Load refuses them).
func CrossSiteWrites(allowed []string) Middleware {
	const op = "httpapi.CrossSiteWrites"
	protection := http.NewCrossOriginProtection()
	for _, o := range allowed {
		_ = protection.AddTrustedOrigin(o)
	}
	protection.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, errs.E(op, errs.Forbidden, "ORIGIN_NOT_ALLOWED",
			"cross-site request refused: the request's origin is neither this API's own nor an allowed origin"))
	}))
	return func(next http.Handler) http.Handler {
		return protection.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
			default:
				if err := checkJSONContentType(r); err != nil {
					WriteError(w, r, errs.Wrap(op, err))
					return
				}
			}
			next.ServeHTTP(w, r)
		}))
	}
}

// checkJSONContentType fails with UNSUPPORTED_MEDIA_TYPE unless r's
// Content-Type is absent or blank, or application/json with no charset or
// UTF-8 (case-insensitive).
func checkJSONContentType(r *http.Request) error {
	const op = "httpapi.checkJSONContentType"
	unsupported := func(msg string) error {
		return errs.E(op, errs.UnsupportedMediaType, "", msg)
	}
	values := r.Header.Values("Content-Type")
	switch {
	case len(values) == 0 || len(values) == 1 && strings.TrimSpace(values[0]) == "":
		return nil
	case len(values) > 1:
		return unsupported("Content-Type is given more than once")
	}
	mediaType, params, err := mime.ParseMediaType(values[0])
	if err != nil || mediaType != "application/json" {
		return unsupported("request bodies must be JSON, sent with Content-Type: application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return unsupported("JSON request bodies must be UTF-8")
	}
	return nil
}
