// Package providers builds the model registry of a deployment from its
// configuration: the built-in offline model always, and each provider whose
// configuration is present (Amazon Bedrock, OpenAI or an OpenAI-compatible
// server, Anthropic).
package providers

import (
	"context"
	"fmt"

	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/anthropic"
	"github.com/workflowchat/service/shared/model/bedrock"
	"github.com/workflowchat/service/shared/model/openai"
)

// Registry returns the registry of every usable model of cfg. It fails,
// naming the variables, when a configured provider cannot be built.
func Registry(ctx context.Context, cfg config.Config) (*model.Registry, error) {
	ps := []model.Provider{model.Builtin{ChunkDelay: cfg.BuiltinChunkDelay}}
	if len(cfg.OpenAIModels) > 0 {
		p, err := openai.New(openai.Options{APIKey: cfg.OpenAIAPIKey, BaseURL: cfg.OpenAIBaseURL, Models: cfg.OpenAIModels})
		if err != nil {
			return nil, fmt.Errorf("providers: OPENAI_*: %w", err)
		}
		ps = append(ps, p)
	}
	if len(cfg.AnthropicModels) > 0 {
		p, err := anthropic.New(anthropic.Options{APIKey: cfg.AnthropicAPIKey, BaseURL: cfg.AnthropicBaseURL, Models: cfg.AnthropicModels})
		if err != nil {
			return nil, fmt.Errorf("providers: ANTHROPIC_*: %w", err)
		}
		ps = append(ps, p)
	}
	if len(cfg.BedrockModels) > 0 {
		p, err := bedrock.New(ctx, bedrock.Options{Region: cfg.Region, Models: cfg.BedrockModels, Endpoint: cfg.BedrockEndpoint})
		if err != nil {
			return nil, fmt.Errorf("providers: BEDROCK_MODELS: %w", err)
		}
		ps = append(ps, p)
	}
	reg, err := model.NewRegistry(ps...)
	if err != nil {
		return nil, fmt.Errorf("providers: %w", err)
	}
	return reg, nil
}
