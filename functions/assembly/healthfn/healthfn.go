// Package healthfn builds HealthFunction: GET /api/liveness. Unlike the
// other builders it takes only the clock, not assembly.Deps, so that the
// health function links no DynamoDB client and stays the smallest, fastest
// function.
package healthfn

import (
	"time"

	"github.com/workflowchat/service/shared/health"
	"github.com/workflowchat/service/shared/httpapi"
)

// LogicalID is the function's resource name in template.yaml.
const LogicalID = "HealthFunction"

// Health builds the liveness router, reporting the time from now.
func Health(now func() time.Time) *httpapi.Router {
	return health.Routes(now)
}
