package runnerfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/knowledgefn"
	"github.com/workflowchat/service/shared/agentstep"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/usertools"
)

// AgentSteps builds the runner's tool runner: the tool gate over catalog
// (Deps.Gate, with knowledge_search served in process) for every step, and agent steps run with the configured
// models (DEFAULT_MODEL_ID when a step names none) under the usage meter,
// their calls through the same gate and catalog a chat uses. It fails
// when the models cannot be configured.
func AgentSteps(ctx context.Context, cfg config.Config, d assembly.Deps, catalog *usertools.Catalog) (*agentstep.Steps, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// knowledge_search, a step's or an agent's call, runs in process
	// over the run's user's knowledge bases with the chats' hybrid
	// ranking (the configured embedder and vector index, fused with
	// BM25), over the knowledge service built at its first use: a cold
	// start that runs no knowledge_search builds no embedder or vector
	// client, and linking them costs the runner's package init 62 KiB
	// and 670 allocations (docs/decisions.md, Knowledge in chats).
	gate := d.Gate(cfg, catalog).WithLocal(knowledge.ToolID, knowledgefn.NewLazy(ctx, cfg, d, d.Blobs))
	return agentstep.New(agentstep.Options{
		Next: gate.Steps(), Gate: gate, Tools: catalog, Models: models, Meter: d.Meter(cfg), DefaultModelID: cfg.DefaultModelID,
	}), nil
}
