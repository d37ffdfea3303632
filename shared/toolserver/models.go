package toolserver

import (
	"context"

	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/tools"
)

// Models adapts the model registry to the tools' TextGenerator
// (llm_generate): one model call with the request's output cap, its
// usage as the provider reported it.
func Models(reg *model.Registry) tools.TextGenerator { return textGenerator{reg} }

type textGenerator struct{ reg *model.Registry }

func (g textGenerator) GenerateText(ctx context.Context, req tools.TextRequest) (tools.TextResult, error) {
	text, used, err := g.reg.GenerateText(ctx, req.ModelID, req.System, req.Prompt, req.MaxTokens)
	return tools.TextResult{Text: text, InputTokens: used.InputTokens, OutputTokens: used.OutputTokens}, err
}
