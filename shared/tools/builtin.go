package tools

import (
	"context"
	"time"
)

// Defaults for Config fields left zero.
const (
	DefaultHTTPTimeout      = 20 * time.Second
	DefaultMaxResponseBytes = 1 << 20 // 1 MiB
)

// maxTextOutput caps the text a tool builds (a rendered template, the
// matches extracted from HTML), so that a small input cannot produce an
// enormous output.
const maxTextOutput = 1 << 20

// TextRequest asks a language model to answer one prompt.
type TextRequest struct {
	// ModelID is the model (empty: the generator's default).
	ModelID string
	// System is the optional system instruction.
	System string
	Prompt string
	// MaxTokens caps the answer's output tokens; 0 is the model's default.
	MaxTokens int
}

// TextResult is a model's answer and what the call spent.
type TextResult struct {
	Text                      string
	InputTokens, OutputTokens int
}

// TextGenerator generates text with a language model (the tool server's
// adapter of the model registry, toolserver.Models); llm_generate uses it.
type TextGenerator interface {
	// GenerateText answers req. Errors that are *errs.Error carry a
	// client-safe message; the text of any other error is not shown to
	// clients. The result's token counts are set on an error too, for
	// what the call spent.
	GenerateText(ctx context.Context, req TextRequest) (TextResult, error)
}

// Config configures the built-in tools.
type Config struct {
	// AllowPrivateNetworks lets http_request reach loopback, private and
	// link-local addresses. Local development and tests only.
	AllowPrivateNetworks bool
	// HTTPTimeout bounds one http_request call, redirects and body
	// included. Zero means DefaultHTTPTimeout.
	HTTPTimeout time.Duration
	// MaxResponseBytes caps the response body http_request reads; a larger
	// body fails the call. Zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Generator serves llm_generate; nil makes llm_generate fail with a
	// message saying no model is configured.
	Generator TextGenerator
	// DefaultModelID is the model llm_generate uses when its input names
	// none.
	DefaultModelID string
	// Now returns the current time for datetime_now; nil means time.Now.
	Now func() time.Time
}

// Builtin returns the built-in tools, configured by cfg: http_request,
// html_extract, json_query, csv_parse, text_template, regex_extract,
// math_evaluate, datetime_now, llm_generate, hash, ask_human (which only
// the workflow engine carries out), code, agent and run_workflow
// (which only the workflow runner carries out) and knowledge_search
// (which the service carries out over the caller's knowledge bases).
// Each call returns new Tool values.
func Builtin(cfg Config) []*Tool {
	if cfg.HTTPTimeout <= 0 {
		cfg.HTTPTimeout = DefaultHTTPTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return []*Tool{
		httpRequestTool(cfg),
		htmlExtractTool(),
		jsonQueryTool(),
		csvParseTool(),
		textTemplateTool(),
		regexExtractTool(),
		mathEvaluateTool(),
		datetimeNowTool(cfg.Now),
		llmGenerateTool(cfg.Generator, cfg.DefaultModelID),
		hashTool(),
		askHumanTool(),
		codeTool(),
		agentTool(),
		runWorkflowTool(),
		knowledgeSearchTool(),
	}
}

// computeOnly returns the annotations of a tool that only computes from
// its input: read-only, idempotent, closed world.
func computeOnly() Annotations {
	return Annotations{ReadOnly: true, Idempotent: true}
}
