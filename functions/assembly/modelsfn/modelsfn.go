// Package modelsfn builds ModelsFunction: the models this deployment
// serves and users' model preferences.
package modelsfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/providers"
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
	return model.Routes(models, d.Users(cfg), d.Auth(cfg)), nil
}
