// Package modelsfn builds ModelsFunction: the models this deployment
// serves, users' model preferences and their monthly usage.
package modelsfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/usage"
)

// Models is ModelsFunction.
var Models = assembly.Function{
	LogicalID: "ModelsFunction",
	Required:  []string{"USERS_TABLE", "SESSIONS_TABLE"},
	Build:     build,
}

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	authn := d.Auth(cfg)
	routes := model.Routes(models, d.Users(cfg), authn)
	u := usage.Routes(d.Meter(cfg), authn)
	routes.Mount(u, u.Patterns()...)
	return routes, nil
}
