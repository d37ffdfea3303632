package toolclient

import (
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the REST tool endpoints (ToolsFunction).
// Every route requires a session.
//
//   - GET /api/tools lists the catalog from c's in-memory copy of the list,
//     which lives for its TTL (TOOLS_CACHE_TTL; 0 reloads on every request);
//     refresh=true or refresh=1 reloads it. When a reload fails the
//     previous copy is served; with none, 500 TOOLS_UNAVAILABLE.
//   - GET /api/tools/search?q= asks the source (the tool server ranks the
//     matches); 400 VALIDATION_FAILED when q is missing, blank or longer
//     than MaxSearchQuery characters.
//   - GET /api/tools/{toolId} returns one tool with its output schema,
//     cached like the list; 404 TOOL_NOT_FOUND for an unknown or malformed
//     id.
//
// The catalog is shared with the process's other users of the tool list.
func Routes(c *Catalog, authn *auth.Service) *httpapi.Router {
	return RoutesWith(c, authn)
}

// RoutesWith is Routes over tools, which lists, searches and gets the
// tools of the signed-in user (the catalog's and the user's own remote
// tools: usertools.Catalog).
func RoutesWith(tools Tools, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("GET /api/tools", authn.Require(handleList(tools)))
	r.Handle("GET /api/tools/search", authn.Require(handleSearch(tools)))
	r.Handle("GET /api/tools/{toolId}", authn.Require(handleGet(tools)))
	return r
}
