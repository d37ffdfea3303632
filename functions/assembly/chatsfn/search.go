package chatsfn

import (
	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/search"
)

// searchRoutes is the search route, limited per user by
// RATE_LIMIT_SEARCH.
func searchRoutes(s *search.Service, cfg config.Config, d assembly.Deps) *httpapi.Router {
	return search.Routes(s, d.Auth(cfg), search.Limits{Limiter: d.Limiter(cfg), Search: cfg.RateLimitSearch})
}
