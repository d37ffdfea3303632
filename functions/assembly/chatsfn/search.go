package chatsfn

import (
	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/search"
	"github.com/workflowchat/service/shared/store"
)

// SearchService is the search over users' chats, its index in the Data
// table (store.SearchIndex).
func SearchService(cfg config.Config, d assembly.Deps) *search.Service {
	return search.NewService(store.NewSearchIndex(d.DB, cfg.DataTable), d.Now)
}

// searchRoutes is the search route, limited per user by
// RATE_LIMIT_SEARCH.
func searchRoutes(s *search.Service, cfg config.Config, d assembly.Deps) *httpapi.Router {
	return search.Routes(s, d.Auth(cfg), search.Limits{Limiter: d.Limiter(cfg), Search: cfg.RateLimitSearch})
}
