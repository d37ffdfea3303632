package mcpserver

import (
	"html/template"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/oauth"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Limits are the rate limits of the routes.
type Limits struct {
	Limiter *ratelimit.Limiter
	// Connect limits the writes that may connect to a remote server
	// (create, PATCH, refresh, authorize) per user, and the OAuth
	// callbacks per client address (RATE_LIMIT_MCP_SERVERS).
	Connect ratelimit.Rule
	// PublicBaseURL is the service's public origin (PUBLIC_BASE_URL);
	// empty: from each request (oauth.BaseURL).
	PublicBaseURL string
}

// Routes returns the /api/mcp-servers endpoints, behind the session, and
// the OAuth client side's public routes: GET /oauth/client.json (the
// service's Client ID Metadata Document, Open) and GET /oauth/callback
// (the redirect URI, a browser navigation that reads the session when
// there is one).
func Routes(s *Service, authn *auth.Service, l Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	const base = "/api/mcp-servers"
	limit := l.Limiter.Limit(l.Connect)
	r.Handle("POST "+base, authn.Require(limit(handleCreate(s, l.PublicBaseURL))))
	r.Handle("GET "+base, authn.Require(handleList(s)))
	r.Handle("GET "+base+"/{serverId}", authn.Require(httpapi.PathIDs(handleGet(s), "serverId")))
	r.Handle("PATCH "+base+"/{serverId}", authn.Require(httpapi.PathIDs(limit(handleUpdate(s)), "serverId")))
	r.Handle("DELETE "+base+"/{serverId}", authn.Require(httpapi.PathIDs(handleDelete(s), "serverId")))
	r.Handle("POST "+base+"/{serverId}/refresh", authn.Require(httpapi.PathIDs(limit(handleRefresh(s)), "serverId")))
	r.Handle("POST "+base+"/{serverId}/authorize", authn.Require(httpapi.PathIDs(limit(handleAuthorize(s, l.PublicBaseURL)), "serverId")))
	r.HandleAccess("GET "+ClientDocumentPath, handleClientDocument(s, l.PublicBaseURL), httpapi.Open)
	r.Handle("GET "+CallbackPath, handleCallback(s, authn, l))
	return r
}

// View is a server as the API shows it: never its secret.
type View struct {
	ID               string    `json:"id"`
	Name             string    `json:"name"`
	URL              string    `json:"url"`
	Auth             Auth      `json:"auth"`
	Enabled          bool      `json:"enabled"`
	Status           string    `json:"status"`
	AuthorizationURL string    `json:"authorizationUrl,omitempty"`
	Error            *Problem  `json:"error,omitempty"`
	Tools            []Tool    `json:"tools"`
	CreatedAt        time.Time `json:"createdAt"`
	UpdatedAt        time.Time `json:"updatedAt"`
}

// NewView returns s as the API shows it.
func NewView(s Server) View {
	tools := s.Tools
	if tools == nil {
		tools = []Tool{}
	}
	return View{ID: s.ID, Name: s.Name, URL: s.URL, Auth: s.Auth, Enabled: s.Enabled, Status: s.Status,
		AuthorizationURL: s.AuthorizationURL, Error: s.Error, Tools: tools, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

type serverList struct {
	MCPServers []View `json:"mcpServers"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// handleCreate creates the server; an oauth server waiting for its
// authorization comes back with an authorizationUrl, or in status error
// with the reason its authorization cannot start (StartAuthorization).
func handleCreate(s *Service, publicBase string) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in CreateRequest) (View, error) {
		srv, err := s.Create(r.Context(), in)
		if err == nil {
			srv = s.StartAuthorization(r.Context(), srv, oauth.BaseURL(publicBase, r))
		}
		return NewView(srv), err
	})
}

func handleList(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, err := httpapi.ParseCursorPage(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		list, next, err := s.List(r.Context(), page)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		out := serverList{MCPServers: make([]View, 0, len(list)), NextCursor: next}
		for _, srv := range list {
			out.MCPServers = append(out.MCPServers, NewView(srv))
		}
		httpapi.Respond(w, http.StatusOK, out)
	})
}

func handleGet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (View, error) {
		srv, err := s.Get(r.Context(), r.PathValue("serverId"))
		return NewView(srv), err
	})
}

func handleUpdate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in UpdateRequest) (View, error) {
		srv, err := s.Update(r.Context(), r.PathValue("serverId"), in)
		return NewView(srv), err
	})
}

func handleDelete(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		return httpapi.Empty{}, s.Delete(r.Context(), r.PathValue("serverId"))
	})
}

func handleRefresh(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv, err := s.Refresh(r.Context(), r.PathValue("serverId"))
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		httpapi.Respond(w, http.StatusOK, NewView(srv))
	})
}

// handleAuthorize takes an optional body (returnTo).
func handleAuthorize(s *Service, publicBase string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := httpapi.DecodeOptional[AuthorizeRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		u, err := s.Authorize(r.Context(), r.PathValue("serverId"), oauth.BaseURL(publicBase, r), in.ReturnTo)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		httpapi.Respond(w, http.StatusOK, AuthorizeResponse{AuthorizationURL: u})
	})
}

func handleClientDocument(s *Service, publicBase string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := oauth.BaseURL(publicBase, r)
		if base == "" || s.o.Document == nil {
			httpapi.WriteError(w, r, errs.E("mcpserver.ClientDocument", errs.NotFound, "NOT_FOUND", "no client metadata document here"))
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, s.o.Document(base))
	})
}

// handleCallback finishes an authorization and sends the browser back to
// the returnTo its authorize named, with ?mcpServer=<id>&status=connected
// or error; without one it answers a small page. It never answers a 5xx
// for what the authorization server or the browser sent.
func handleCallback(s *Service, authn *auth.Service, l Limits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if err := l.Limiter.Allow(ctx, "mcp-callback:"+auth.ClientAddress(r), l.Connect); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		var userID string
		if c, err := r.Cookie(auth.CookieName); err == nil {
			if sess, _, err := authn.Authenticate(ctx, c.Value); err == nil {
				userID = sess.User.ID
			}
		}
		cb, srv, err := s.Callback(ctx, r.URL.Query(), userID)
		status := StatusConnected
		if err != nil || srv.Status != StatusConnected {
			status = StatusError
		}
		if err != nil {
			logging.FromContext(ctx).Info("mcp server authorization failed", "serverId", cb.ServerID, "code", errs.CodeOf(err))
		}
		if cb.ReturnTo != "" {
			u, _ := url.Parse(cb.ReturnTo)
			q := u.Query()
			q.Set("mcpServer", cb.ServerID)
			q.Set("status", status)
			u.RawQuery = q.Encode()
			w.Header().Set("Location", u.String())
			w.WriteHeader(http.StatusSeeOther)
			return
		}
		page := callbackPage{Title: "Connected", Message: "The connection is made: " + srv.Name + " is connected. You can close this window."}
		code := http.StatusOK
		switch {
		case err != nil:
			page = callbackPage{Title: "Not connected", Message: "The connection was not made: " + errs.MessageOf(err, "the authorization failed") + "."}
			code = httpapi.StatusOf(err)
		case status != StatusConnected:
			page = callbackPage{Title: "Authorized, not connected", Message: "The authorization is made, but " + srv.Name +
				" could not list its tools; refresh it from the app."}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		w.WriteHeader(code)
		_ = callbackTemplate().Execute(w, page)
	})
}

type callbackPage struct{ Title, Message string }

// callbackTemplate is parsed on the first callback page, not at package
// init: every function that calls remote servers links this package, and
// html/template's parse is most of its init (cold starts pay for it).
var callbackTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}</style></head>
<body><h1>{{.Title}}</h1><p>{{.Message}}</p></body></html>
`))
})
