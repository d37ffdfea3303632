package mcpserver

import (
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Limits are the rate limits of the routes.
type Limits struct {
	Limiter *ratelimit.Limiter
	// Connect limits the writes that may connect to a remote server
	// (create, PATCH, refresh) per user (RATE_LIMIT_MCP_SERVERS).
	Connect ratelimit.Rule
}

// Routes returns the /api/mcp-servers endpoints, behind the session.
func Routes(s *Service, authn *auth.Service, l Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	const base = "/api/mcp-servers"
	limit := l.Limiter.Limit(l.Connect)
	r.Handle("POST "+base, authn.Require(limit(handleCreate(s))))
	r.Handle("GET "+base, authn.Require(handleList(s)))
	r.Handle("GET "+base+"/{serverId}", authn.Require(httpapi.PathIDs(handleGet(s), "serverId")))
	r.Handle("PATCH "+base+"/{serverId}", authn.Require(httpapi.PathIDs(limit(handleUpdate(s)), "serverId")))
	r.Handle("DELETE "+base+"/{serverId}", authn.Require(httpapi.PathIDs(handleDelete(s), "serverId")))
	r.Handle("POST "+base+"/{serverId}/refresh", authn.Require(httpapi.PathIDs(limit(handleRefresh(s)), "serverId")))
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

func handleCreate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in CreateRequest) (View, error) {
		srv, err := s.Create(r.Context(), in)
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
