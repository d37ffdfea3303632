// Package anthropic is the model.Provider for the Anthropic Messages API
// (https://docs.anthropic.com/en/api/messages). It streams replies with
// Messages.NewStreaming of the official Go SDK, offers tools natively and
// maps provider failures to the service's errors: throttling, overload,
// 5xx and network failures are errs.Unavailable (MODEL_UNAVAILABLE), every
// other failure errs.Internal (MODEL_PROVIDER_ERROR), with client-safe
// messages that never carry the API key or the provider's response bodies.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

const (
	// ProviderName is the Provider of every model this package serves.
	ProviderName = "anthropic"
	// IDPrefix starts the registry id of every model this package serves:
	// "anthropic/<model>".
	IDPrefix = ProviderName + "/"
	// DefaultMaxTokens is the reply bound sent when Request.MaxTokens is
	// zero; the Messages API requires one.
	DefaultMaxTokens = 4096

	// Error codes of the API contract.
	codeUnavailable   = model.CodeUnavailable
	codeProviderError = model.CodeProviderError

	// Client-safe messages.
	msgUnavailable = "the model provider is unavailable; retry shortly"
	msgCredentials = "the model provider rejected the service's credentials"
	msgRejected    = "the model provider could not handle the request"
	msgMalformed   = "the model provider sent a malformed reply"
	msgCutOff      = "the model's reply reached the token limit in the middle of a tool call"
	msgBadRequest  = "the conversation cannot be sent to the model provider"

	// responseHeaderTimeout bounds the wait for the response headers of the
	// default HTTP client; a stream's body is bounded by ctx only.
	responseHeaderTimeout = 2 * time.Minute
	// maxCauseMessage bounds the provider's error message kept in a cause.
	maxCauseMessage = 300
	// maxRetryAfter bounds RetryAfter, in seconds.
	maxRetryAfter = 3600
)

// Options configure a Provider.
type Options struct {
	// APIKey is sent as x-api-key. Required.
	APIKey string
	// BaseURL is the API's base URL, e.g. "https://api.anthropic.com" (the
	// default when empty) or a test server's URL. Requests go to
	// BaseURL + "/v1/messages".
	BaseURL string
	// Models are the Anthropic model names served, e.g.
	// "claude-sonnet-4-5". Required.
	Models []string
	// HTTPClient sends the requests; nil means a client with a
	// response-header timeout and no overall timeout (streams last as long
	// as their ctx).
	HTTPClient *http.Client
}

// Provider is the model.Provider for the Anthropic Messages API. It is
// immutable and safe for concurrent use.
type Provider struct {
	messages sdk.MessageService
	models   []model.Model
	names    map[string]bool
}

var _ model.Provider = (*Provider)(nil)

// New returns the provider of o.Models. It fails when o.APIKey or o.Models
// is empty, when a model name is blank or repeated, or when o.BaseURL is
// not an absolute http(s) URL. It makes no request.
//
// The SDK reads nothing from the environment (no ANTHROPIC_* variables, no
// credential profiles): o is the whole configuration. It retries nothing
// either, so that a throttled or overloaded provider fails fast and the
// caller, told when to retry, decides.
func New(o Options) (*Provider, error) {
	if strings.TrimSpace(o.APIKey) == "" {
		return nil, errors.New("anthropic: an API key is required")
	}
	if len(o.Models) == 0 {
		return nil, errors.New("anthropic: at least one model is required")
	}
	p := &Provider{names: make(map[string]bool, len(o.Models))}
	for _, name := range o.Models {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, errors.New("anthropic: blank model name")
		}
		if p.names[name] {
			return nil, fmt.Errorf("anthropic: model %q listed twice", name)
		}
		p.names[name] = true
		p.models = append(p.models, model.Model{ID: IDPrefix + name, Name: name + " (Anthropic)", Provider: ProviderName})
	}

	hc := o.HTTPClient
	if hc == nil {
		hc = model.StreamingHTTPClient(responseHeaderTimeout)
	}
	opts := []option.RequestOption{
		option.WithEnvironmentProduction(),
		option.WithAPIKey(o.APIKey),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if o.BaseURL != "" {
		u, err := url.Parse(o.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("anthropic: the base URL must be an absolute http(s) URL")
		}
		opts = append(opts, option.WithBaseURL(strings.TrimRight(o.BaseURL, "/")+"/"))
	}
	p.messages = sdk.NewMessageService(opts...)
	return p, nil
}

// Models lists the configured models, ids "anthropic/<model>", in the
// order configured.
func (p *Provider) Models() []model.Model { return slices.Clone(p.models) }

// Generate streams one turn of the model req.ModelID names through emit,
// one call per text delta in the order received, and returns the tool calls
// the model made and the token usage.
//
// It fails with Invalid INVALID_MODEL when req.ModelID is not one of
// Models; with ctx's error as soon as ctx is done, mid-stream included;
// with emit's error, unchanged, when emit fails (the stream is then
// abandoned); with Unavailable MODEL_UNAVAILABLE when the provider throttles
// (429), is overloaded (529 or an error event in the stream), fails (5xx),
// cannot be reached or drops the stream, RetryAfter set from the
// retry-after header when present; and with Internal MODEL_PROVIDER_ERROR
// when the provider rejects the credentials (401, 403) or the request
// (other 4xx), sends a malformed stream, or runs out of tokens mid tool
// call. Every error's cause is for logs and holds neither the API key nor
// a raw response body.
func (p *Provider) Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	const op = "anthropic.Generate"
	params, err := p.params(req)
	if err != nil {
		return model.Result{}, errs.Wrap(op, err)
	}

	stream := p.messages.NewStreaming(ctx, params)
	defer stream.Close()

	send := func(text string) error {
		if text == "" {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return emit(model.Chunk{Delta: text})
	}
	var msg sdk.Message
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return model.Result{}, ctxErr
			}
			return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgMalformed).WithCause(fmt.Errorf("anthropic: %w", err))
		}
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "text" {
				err = send(ev.ContentBlock.Text)
			}
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" {
				err = send(ev.Delta.Text)
			}
		case "message_stop":
			stopped = true
		}
		if err != nil {
			return model.Result{}, err
		}
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return model.Result{}, ctxErr
	}
	if err := stream.Err(); err != nil {
		return model.Result{}, classify(op, err)
	}
	if !stopped {
		return model.Result{}, errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).
			WithCause(errors.New("anthropic: the stream ended before message_stop"))
	}
	return result(op, &msg)
}

// result extracts the tool calls and the usage of an accumulated message.
func result(op string, msg *sdk.Message) (model.Result, error) {
	res := model.Result{Usage: model.Usage{
		InputTokens:  int(msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens),
		OutputTokens: int(msg.Usage.OutputTokens),
	}}
	for i, b := range msg.Content {
		if b.Type != "tool_use" {
			continue
		}
		if msg.StopReason == sdk.StopReasonMaxTokens && i == len(msg.Content)-1 {
			return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgCutOff).
				WithCause(fmt.Errorf("anthropic: stop_reason max_tokens in tool_use %s (%s)", b.ID, b.Name))
		}
		args := bytes.TrimSpace(b.Input)
		if len(args) == 0 {
			args = []byte("{}")
		}
		if !json.Valid(args) || args[0] != '{' {
			return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgMalformed).
				WithCause(fmt.Errorf("anthropic: tool_use %s (%s) input is not a JSON object", b.ID, b.Name))
		}
		res.ToolCalls = append(res.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Args: bytes.Clone(args)})
	}
	return res, nil
}

// params converts req into the Messages API's request.
func (p *Provider) params(req model.Request) (sdk.MessageNewParams, error) {
	name, ok := strings.CutPrefix(req.ModelID, IDPrefix)
	if !ok || !p.names[name] {
		return sdk.MessageNewParams{}, model.UnknownModel("", req.ModelID)
	}
	msgs, err := convertMessages(req.Messages)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	tools, err := convertTools(req.Tools)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(name),
		MaxTokens: int64(maxTokens),
		Messages:  msgs,
		Tools:     tools,
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	return params, nil
}

// convertMessages turns the conversation into Anthropic's shape: tool
// results are tool_result blocks of a user message, assistant tool calls
// tool_use blocks, and consecutive messages of one role are merged, since
// the API wants the roles to alternate. Empty texts are left out (the API
// rejects empty text blocks), and so are messages left with no block.
func convertMessages(in []model.Message) ([]sdk.MessageParam, error) {
	var out []sdk.MessageParam
	add := func(role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	for i, m := range in {
		switch m.Role {
		case model.RoleUser:
			if m.Content != "" {
				add(sdk.MessageParamRoleUser, sdk.NewTextBlock(m.Content))
			}
		case model.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				args := bytes.TrimSpace(c.Args)
				if len(args) == 0 {
					args = []byte("{}")
				}
				if c.ID == "" || c.Name == "" || !json.Valid(args) || args[0] != '{' {
					return nil, badRequest(fmt.Errorf("anthropic: message %d: tool call %q (%s) lacks an id, a name or a JSON object of arguments", i, c.ID, c.Name))
				}
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, json.RawMessage(args), c.Name))
			}
			add(sdk.MessageParamRoleAssistant, blocks...)
		case model.RoleTool:
			if m.ToolCallID == "" {
				return nil, badRequest(fmt.Errorf("anthropic: message %d: tool result without a tool call id", i))
			}
			r := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			add(sdk.MessageParamRoleUser, sdk.ContentBlockParamUnion{OfToolResult: &r})
		default:
			return nil, badRequest(fmt.Errorf("anthropic: message %d: unknown role %q", i, m.Role))
		}
	}
	if len(out) == 0 {
		return nil, badRequest(errors.New("anthropic: no message to send"))
	}
	return out, nil
}

// convertTools offers tools with their JSON schemas as input_schema,
// verbatim; an empty schema is an object with no properties.
func convertTools(in []model.ToolSpec) ([]sdk.ToolUnionParam, error) {
	var out []sdk.ToolUnionParam
	for _, t := range in {
		schema := bytes.TrimSpace(t.InputSchema)
		if len(schema) == 0 {
			schema = []byte(`{"type":"object","properties":{}}`)
		}
		if t.Name == "" || !json.Valid(schema) || schema[0] != '{' {
			return nil, badRequest(fmt.Errorf("anthropic: tool %q lacks a name or a JSON object schema", t.Name))
		}
		tool := sdk.ToolParam{
			Name:        t.Name,
			InputSchema: param.Override[sdk.ToolInputSchemaParam](json.RawMessage(schema)),
		}
		if t.Description != "" {
			tool.Description = sdk.String(t.Description)
		}
		out = append(out, sdk.ToolUnionParam{OfTool: &tool})
	}
	return out, nil
}

// badRequest is the error for a request the service built wrong: a bug,
// not the client's fault.
func badRequest(cause error) error {
	return errs.E("", errs.Internal, codeProviderError, msgBadRequest).WithCause(cause)
}

// classify maps an error of the SDK to the service's error.
func classify(op string, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return classifyAPI(op, apiErr)
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return errs.E(op, errs.Internal, codeProviderError, msgMalformed).WithCause(fmt.Errorf("anthropic: %w", err))
	}
	// Anything else is the transport's: the network, TLS, a dropped stream.
	return errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).WithCause(fmt.Errorf("anthropic: %w", err))
}

// classifyAPI maps an error response, or an error event of a stream (whose
// status is the stream's 200), by status and then by error type. Its cause
// is rebuilt from the status, the type, the provider's message and the
// request id, so that it keeps neither the request (and its x-api-key
// header) nor the raw body.
func classifyAPI(op string, apiErr *sdk.Error) error {
	typ := apiErr.Type()
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body)
	detail := body.Error.Message
	if len(detail) > maxCauseMessage {
		detail = detail[:maxCauseMessage] + "…"
	}
	cause := fmt.Errorf("anthropic: status %d, error type %q: %q (request-id %q)", apiErr.StatusCode, typ, detail, apiErr.RequestID)

	status := apiErr.StatusCode
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		typ == sdk.ErrorTypeAuthenticationError || typ == sdk.ErrorTypePermissionError:
		return errs.E(op, errs.Internal, codeProviderError, msgCredentials).WithCause(cause)
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		// 529 is Anthropic's "overloaded".
	case status >= 400:
		return errs.E(op, errs.Internal, codeProviderError, msgRejected).WithCause(cause)
	case typ == sdk.ErrorTypeInvalidRequestError || typ == sdk.ErrorTypeNotFoundError || typ == sdk.ErrorTypeBillingError || typ == "request_too_large":
		// An error event in a stream that retrying will not fix.
		return errs.E(op, errs.Internal, codeProviderError, msgRejected).WithCause(cause)
	}
	e := errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).WithCause(cause)
	if apiErr.Response != nil {
		e.RetryAfter = retryAfter(apiErr.Response.Header.Get("retry-after"))
	}
	return e
}

// retryAfter parses a retry-after header, in seconds or as an HTTP date,
// into whole seconds rounded up; 0 when absent or invalid.
func retryAfter(v string) int {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var secs float64
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		secs = s
	} else if t, err := http.ParseTime(v); err == nil {
		secs = time.Until(t).Seconds()
	}
	if !(secs > 0) || math.IsInf(secs, 0) {
		return 0
	}
	return int(math.Ceil(min(secs, maxRetryAfter)))
}
