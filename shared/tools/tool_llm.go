package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

func llmGenerateTool(gen TextGenerator, defaultModel string) *Tool {
	return &Tool{
		ID:       "llm_generate",
		Name:     "Generate text with a language model",
		Category: CategoryAI,
		Description: "Sends a prompt to a language model and returns the text it writes: summarize, classify, translate, extract or draft text as a workflow step. " +
			"Fields: prompt (the instruction and any data it needs, in one string), system (optional system instruction setting role, tone or output format), " +
			"modelId (optional model id from the model list; the deployment's default model when omitted). " +
			"The answer may differ between calls with the same input. " +
			`Example: {"prompt": "Summarize in one sentence: The meeting moved to Friday because the venue was unavailable.", "system": "You are concise."} returns {"text": "The meeting was moved to Friday since the venue was unavailable."}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "prompt": {"type": "string", "minLength": 1, "maxLength": 100000, "description": "What the model should do, including the text or data to work on.", "examples": ["Translate to French: Good morning"]},
    "system": {"type": "string", "maxLength": 20000, "default": "", "description": "Optional system instruction, e.g. \"Answer with a single word\" or \"You are a helpful assistant\"."},
    "modelId": {"type": "string", "maxLength": 200, "description": "Optional id of the model to use (as listed by the models endpoint). Omit to use the default model."}
  },
  "required": ["prompt"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The model's answer."}
  },
  "required": ["text"],
  "additionalProperties": false
}`),
		// Read-only: it changes nothing, it only asks a model. Not idempotent:
		// sampling makes answers differ between calls and each call spends
		// provider quota. Closed world: it talks only to the deployment's
		// configured model, never to destinations chosen by the input.
		Annotations: Annotations{ReadOnly: true},
		// Metered: each call spends its caller's token budget, which the
		// service reserves before and settles after from ReportModelUsage.
		Metered: true,
		Timeout: 2 * time.Minute,
		Run: func(ctx context.Context, in map[string]any) (map[string]any, error) {
			return runLLMGenerate(ctx, gen, defaultModel, in)
		},
	}
}

// runLLMGenerate asks gen to answer input "prompt", with at most ctx's
// output cap (MaxOutput), and reports the model's usage to ctx's report
// (ReportModelUsage), also when the model failed. It fails when no
// generator is configured; with INVALID_PARAMS when the generator reports
// the model unknown (errs.NotFound) or the request invalid (errs.Invalid);
// otherwise with the generator's client-safe message (an *errs.Error's
// Message) or a generic message, so that a provider's raw error text never
// reaches a client.
func runLLMGenerate(ctx context.Context, gen TextGenerator, defaultModel string, in map[string]any) (map[string]any, error) {
	prompt, err := stringArg(in, "prompt", true, "")
	if err != nil {
		return nil, err
	}
	system, err := stringArg(in, "system", false, "")
	if err != nil {
		return nil, err
	}
	model, err := stringArg(in, "modelId", false, "")
	if err != nil {
		return nil, err
	}
	if model == "" {
		model = defaultModel
	}
	if gen == nil {
		return nil, errors.New("no language model is configured for llm_generate in this deployment")
	}
	res, err := gen.GenerateText(ctx, TextRequest{ModelID: model, System: system, Prompt: prompt, MaxTokens: MaxOutput(ctx)})
	if res.InputTokens > 0 || res.OutputTokens > 0 {
		ReportModelUsage(ctx, ModelUsage{ModelID: model, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens})
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		name := model
		if name == "" {
			name = "the default model"
		}
		var e *errs.Error
		if errors.As(err, &e) && e.Kind == errs.NotFound {
			return nil, invalidField("modelId", "unknown model %q", model)
		}
		if errors.As(err, &e) && e.Kind == errs.Invalid && e.Message != "" {
			return nil, &errs.Error{Kind: errs.Invalid, Message: fmt.Sprintf("model %s rejected the request: %s", name, e.Message), Details: e.Details, Err: err}
		}
		if errors.As(err, &e) && e.Message != "" {
			return nil, &errs.Error{Kind: errs.Internal, Message: fmt.Sprintf("model %s failed: %s", name, e.Message), Err: err}
		}
		return nil, &errs.Error{Kind: errs.Internal, Message: fmt.Sprintf("model %s failed to generate text", name), Err: err}
	}
	return map[string]any{"text": res.Text}, nil
}
