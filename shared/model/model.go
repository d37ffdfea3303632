// Package model is the registry of the AI models this deployment can serve
// and the interface every model provider implements. The built-in offline
// model is always registered; provider adapters (Bedrock, OpenAI-compatible,
// Anthropic) register their models when configured.
package model

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/workflowchat/service/shared/tracing"
)

// Model describes a model a user can pick.
type Model struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Input is what the model takes besides text; attachments it does
	// not take reach it as notes (UserParts).
	Input Input `json:"-"`
}

// Roles of conversation messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	// RoleTool carries the result of a tool call back to the model.
	RoleTool = "tool"
)

// Message is one turn of a conversation sent to a model.
type Message struct {
	Role    string
	Content string
	// ToolCalls are the calls an assistant turn made (RoleAssistant).
	ToolCalls []ToolCall
	// ToolCallID names the call a RoleTool message answers.
	ToolCallID string
	// Attachments are the files of a RoleUser message: each provider
	// sends them the way its API takes them (UserParts).
	Attachments []Attachment
}

// ToolSpec offers a tool to a model for native tool calling.
type ToolSpec struct {
	// Name is the tool id (matches ^[a-z][a-z0-9_]{0,63}$, valid for every
	// provider).
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments ("type": "object").
	InputSchema json.RawMessage
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	// ID is the provider's id of the call, echoed in the tool result.
	ID   string
	Name string
	// Args is the JSON object of arguments.
	Args json.RawMessage
}

// Request asks a model for its next turn.
type Request struct {
	ModelID  string
	System   string
	Messages []Message
	// Tools are offered to the model; it may answer with ToolCalls.
	Tools []ToolSpec
	// MaxTokens bounds the reply's output tokens (every provider sends it
	// as its API's output cap; the built-in model stops after that many
	// words); zero means the provider's default. A metered call sets it
	// to what its budget reservation allows (package usage).
	MaxTokens int
}

// Chunk is a piece of a streamed reply.
type Chunk struct {
	Delta string
}

// Usage is the token usage a provider reports.
type Usage struct {
	InputTokens  int
	OutputTokens int
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Result is the end of one model turn: the text was streamed through emit;
// ToolCalls, when any, ask the caller to run tools and call again with
// their results appended (an assistant Message with the ToolCalls, then a
// RoleTool Message per call).
type Result struct {
	ToolCalls []ToolCall
	Usage     Usage
}

// Provider generates replies for its models.
type Provider interface {
	// Models lists the models the provider serves. Their ids are unique
	// across the registry.
	Models() []Model
	// Generate streams one turn of a reply to req through emit, in order,
	// and returns the tool calls the model made and the usage. It stops
	// with ctx's error when ctx is done and with emit's error when emit
	// fails. Provider failures are errs.Unavailable (retryable: throttling,
	// 5xx, network) or errs.Internal, with client-safe messages.
	Generate(ctx context.Context, req Request, emit func(Chunk) error) (Result, error)
}

// InputCounter is implemented by a provider that knows exactly how many
// input tokens a request costs it (the built-in model, which counts
// words). EstimateInput uses it instead of the estimate.
type InputCounter interface {
	CountInput(req Request) int
}

// EstimateTokens estimates the input tokens of req for a provider whose
// tokenizer this service does not have: the UTF-8 bytes of every text the
// provider receives (the system prompt, each message's content and tool
// call arguments and ids, each offered tool's name, description and input
// schema) divided by 3, rounded up, plus 4 per message and per tool for
// the framing, and never less than the words of that text. Tokenizers of
// the current providers average about 4 bytes per token on English prose
// and 2.5 to 3.5 on code, JSON and most other languages, so the estimate
// is high for prose and close for JSON: an estimate is what a budget
// reservation holds before the call, and settling corrects it to the
// provider's count after. Attachments count too: a text file's text as
// text, an image sent as one ImageTokens, a PDF sent as ImageTokens plus
// one token per DocumentBytesPerToken bytes (a file sent as a note, and
// the framing UserParts adds, cost a few words, not counted).
func EstimateTokens(req Request) int {
	bytes, words, parts := 0, 0, len(req.Messages)+len(req.Tools)
	add := func(s string) {
		bytes += len(s)
		words += len(strings.Fields(s))
	}
	add(req.System)
	media := 0
	for _, m := range req.Messages {
		add(m.Content)
		add(m.ToolCallID)
		for _, a := range m.Attachments {
			add(a.Text)
			switch {
			case len(a.Data) == 0:
			case a.Kind() == KindImage:
				media += ImageTokens
			default:
				media += ImageTokens + len(a.Data)/DocumentBytesPerToken
			}
		}
		for _, c := range m.ToolCalls {
			add(c.ID)
			add(c.Name)
			add(string(c.Args))
		}
	}
	for _, t := range req.Tools {
		add(t.Name)
		add(t.Description)
		add(string(t.InputSchema))
	}
	return max((bytes+2)/3+4*parts, words) + media
}

// Estimates of what images and documents cost a provider, whose counts
// depend on pixels and pages this service does not measure: ImageTokens
// is about what the current providers charge for an image at their
// default resolution (Anthropic about 1,600 for 1.15 megapixels; OpenAI
// up to about 1,100 in high detail), and a PDF is counted as an image
// plus one token per DocumentBytesPerToken bytes of the file. Settling
// corrects the reservation to the provider's count.
const (
	ImageTokens           = 1600
	DocumentBytesPerToken = 64
)

// Registry maps model ids to the providers that serve them. It is
// immutable after construction and safe for concurrent use.
type Registry struct {
	models    []Model
	providers map[string]Provider
}

// NewRegistry returns a registry of the providers' models, in the order
// given. It fails when two models share an id.
func NewRegistry(providers ...Provider) (*Registry, error) {
	r := &Registry{providers: map[string]Provider{}}
	for _, p := range providers {
		for _, m := range p.Models() {
			if _, dup := r.providers[m.ID]; dup {
				return nil, fmt.Errorf("model: duplicate model id %q", m.ID)
			}
			r.providers[m.ID] = p
			r.models = append(r.models, m)
		}
	}
	return r, nil
}

// List returns every model, in registration order.
func (r *Registry) List() []Model { return slices.Clone(r.models) }

// Lookup returns the model with id. Invalid INVALID_MODEL when there is
// none: callers get a model id from a client, so an unknown one is bad
// input.
func (r *Registry) Lookup(id string) (Model, error) {
	if _, ok := r.providers[id]; ok {
		for _, m := range r.models {
			if m.ID == id {
				return m, nil
			}
		}
	}
	return Model{}, UnknownModel("model.Lookup", id)
}

// Generate streams a reply from the model req.ModelID names. Invalid
// INVALID_MODEL for an unknown model; otherwise the provider's errors.
func (r *Registry) Generate(ctx context.Context, req Request, emit func(Chunk) error) (res Result, err error) {
	m, err := r.Lookup(req.ModelID)
	if err != nil {
		return Result{}, err
	}
	ctx, span := tracing.StartModelCall(ctx, m.Provider, m.ID, req.MaxTokens)
	defer func() { tracing.EndModelCall(span, res.Usage.InputTokens, res.Usage.OutputTokens, err) }()
	if m.Provider == "builtin" {
		// The built-in model names a remote tool by its whole id.
		return r.providers[req.ModelID].Generate(ctx, req, emit)
	}
	req, back := wireNames(req)
	res, err = r.providers[req.ModelID].Generate(ctx, req, emit)
	for i, c := range res.ToolCalls {
		if id, ok := back[c.Name]; ok {
			res.ToolCalls[i].Name = id
		}
	}
	return res, err
}

// EstimateInput returns the input tokens req will cost: the exact count
// of a provider that is an InputCounter, else EstimateTokens. An unknown
// model gets the estimate.
func (r *Registry) EstimateInput(req Request) int {
	if c, ok := r.providers[req.ModelID].(InputCounter); ok {
		return c.CountInput(req)
	}
	return EstimateTokens(req)
}

// GenerateText returns the whole reply of modelID to a single prompt,
// with at most maxTokens output tokens (zero: the provider's default),
// and the usage the provider reported (also on an error, for what was
// spent).
func (r *Registry) GenerateText(ctx context.Context, modelID, system, prompt string, maxTokens int) (string, Usage, error) {
	var b strings.Builder
	res, err := r.Generate(ctx, Request{ModelID: modelID, System: system, Messages: []Message{{Role: "user", Content: prompt}}, MaxTokens: maxTokens},
		func(c Chunk) error { b.WriteString(c.Delta); return nil })
	return b.String(), res.Usage, err
}
