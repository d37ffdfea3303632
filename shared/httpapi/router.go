package httpapi

import (
	"net/http"
	"strings"

	"github.com/workflowchat/service/shared/errs"
)

// Router is an http.ServeMux (Go 1.22 method patterns) whose unmatched
// requests get JSON errors: 404 ROUTE_NOT_FOUND, or 405 METHOD_NOT_ALLOWED
// with an Allow header.
type Router struct {
	mux      *http.ServeMux
	patterns []string
	access   map[string]Access // by pattern; absent: Cookie
}

// Access is how the standard stack (Stack) treats a route's cross-origin
// requests.
type Access uint8

const (
	// Cookie is every route's default: it may act on the session cookie,
	// so CORS allows only ALLOWED_ORIGINS and CrossSiteWrites applies.
	Cookie Access = iota
	// Open is a protocol endpoint that never reads the session cookie
	// (bearer tokens, OAuth clients, public metadata): CORS allows any
	// origin without credentials, and CrossSiteWrites does not apply,
	// since the protocol fixes its body types (OAuth's forms) and no
	// ambient credential can be abused through it.
	Open
	// OwnForms is a page that takes form posts and defends them itself
	// (an origin check and a CSRF token): CrossSiteWrites does not apply;
	// CORS is Cookie's.
	OwnForms
)

// NewRouter returns an empty Router.
func NewRouter() *Router { return &Router{mux: http.NewServeMux(), access: map[string]Access{}} }

// HandleAccess registers h for pattern, as Handle, with access a.
func (rt *Router) HandleAccess(pattern string, h http.Handler, a Access) {
	rt.Handle(pattern, h)
	if a != Cookie {
		rt.access[pattern] = a
	}
}

// AccessOf returns the access of the route r matches (Cookie when none
// does); a CORS preflight is matched as the request it announces.
func (rt *Router) AccessOf(r *http.Request) Access {
	if len(rt.access) == 0 {
		return Cookie
	}
	if m := r.Header.Get("Access-Control-Request-Method"); r.Method == http.MethodOptions && m != "" {
		c := *r
		c.Method = m
		r = &c
	}
	_, pattern := rt.mux.Handler(r)
	return rt.access[pattern]
}

// Handle registers h for pattern, e.g. "GET /api/chats/{chatId}". It panics
// on a malformed or conflicting pattern, like http.ServeMux.
func (rt *Router) Handle(pattern string, h http.Handler) {
	rt.mux.Handle(pattern, h)
	rt.patterns = append(rt.patterns, pattern)
}

// Patterns returns the registered patterns, in registration order. The
// template check and the dev server use it to see which routes a function
// serves.
func (rt *Router) Patterns() []string { return append([]string(nil), rt.patterns...) }

// Mount registers every pattern of patterns to h; it lets one router compose
// several route groups (the local dev server). When h is a *Router, each
// pattern keeps its access.
func (rt *Router) Mount(h http.Handler, patterns ...string) {
	sub, _ := h.(*Router)
	for _, p := range patterns {
		a := Cookie
		if sub != nil {
			a = sub.access[p]
		}
		rt.HandleAccess(p, h, a)
	}
}

// ServeHTTP dispatches r, answering unmatched requests with JSON errors.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := rt.mux.Handler(r); pattern != "" {
		rt.mux.ServeHTTP(w, r)
		return
	}
	// Let the mux decide between 404 and 405, then replace its plain-text body.
	probe := &headerProbe{header: http.Header{}}
	rt.mux.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		allowed := strings.ReplaceAll(probe.header.Get("Allow"), ",", ", ")
		WriteError(w, r, errs.E("httpapi.Router", errs.MethodNotAllowed, "", "method not allowed; allowed: "+allowed))
		return
	}
	WriteError(w, r, errs.E("httpapi.Router", errs.NotFound, "ROUTE_NOT_FOUND", "no route for "+r.Method+" "+r.URL.Path))
}

// headerProbe captures the status and headers the mux's fallback writes.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(code int)        { p.status = code }
