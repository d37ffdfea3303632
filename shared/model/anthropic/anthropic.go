// Package anthropic is the model.Provider for the Anthropic Messages API
// (https://docs.anthropic.com/en/api/messages). It streams replies with
// github.com/liushuangls/go-anthropic (a dependency-free client of about
// 0.1 MB in an arm64 bootstrap, where the official SDK cost 5 MB or more:
// docs/decisions.md), offers tools natively and
// maps provider failures to the service's errors: throttling, overload,
// 5xx and network failures are errs.Unavailable (MODEL_UNAVAILABLE), every
// other failure errs.Internal (MODEL_PROVIDER_ERROR), with client-safe
// messages that never carry the API key or the provider's response bodies.
package anthropic

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	sdk "github.com/liushuangls/go-anthropic/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/providerhttp"
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
	msgUnavailable = providerhttp.MsgUnavailable
	msgCredentials = providerhttp.MsgCredentials
	msgRejected    = providerhttp.MsgRejected
	msgMalformed   = "the model provider sent a malformed reply"
	msgCutOff      = "the model's reply reached the token limit in the middle of a tool call"
	msgBadRequest  = "the conversation cannot be sent to the model provider"

	// responseHeaderTimeout bounds the wait for the response headers of the
	// default HTTP client; a stream's body is bounded by ctx only.
	responseHeaderTimeout = 2 * time.Minute
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
	// Input says what a model takes besides text; nil means DefaultInput.
	Input func(name string) model.Input
}

// DefaultInput is what Claude model name takes besides text: images and
// PDF documents, but for the models before Claude 3 (claude-2*,
// claude-instant*), which take text only.
func DefaultInput(name string) model.Input {
	n := strings.ToLower(name)
	if strings.HasPrefix(n, "claude-2") || strings.HasPrefix(n, "claude-instant") {
		return model.Input{}
	}
	return model.Input{Images: true, Documents: true}
}

// Provider is the model.Provider for the Anthropic Messages API. It is
// immutable and safe for concurrent use.
type Provider struct {
	client *sdk.Client
	models []model.Model
	names  map[string]bool
	input  map[string]model.Input
}

var _ model.Provider = (*Provider)(nil)

// New returns the provider of o.Models. It fails when o.APIKey or o.Models
// is empty, when a model name is blank or repeated, or when o.BaseURL is
// not an absolute http(s) URL. It makes no request.
//
// The client reads nothing from the environment (no ANTHROPIC_* variables,
// no credential profiles): o is the whole configuration. It retries nothing
// either, so that a throttled or overloaded provider fails fast and the
// caller, told when to retry, decides.
func New(o Options) (*Provider, error) {
	if strings.TrimSpace(o.APIKey) == "" {
		return nil, errors.New("anthropic: an API key is required")
	}
	if len(o.Models) == 0 {
		return nil, errors.New("anthropic: at least one model is required")
	}
	p := &Provider{names: make(map[string]bool, len(o.Models)), input: map[string]model.Input{}}
	inputOf := o.Input
	if inputOf == nil {
		inputOf = DefaultInput
	}
	for _, name := range o.Models {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, errors.New("anthropic: blank model name")
		}
		if p.names[name] {
			return nil, fmt.Errorf("anthropic: model %q listed twice", name)
		}
		p.names[name] = true
		p.input[name] = inputOf(name)
		p.models = append(p.models, model.Model{ID: IDPrefix + name, Name: name + " (Anthropic)", Provider: ProviderName, Input: p.input[name]})
	}

	hc := o.HTTPClient
	if hc == nil {
		hc = model.StreamingHTTPClient(responseHeaderTimeout)
	}
	baseURL := "https://api.anthropic.com"
	if o.BaseURL != "" {
		u, err := url.Parse(o.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("anthropic: the base URL must be an absolute http(s) URL")
		}
		baseURL = strings.TrimRight(o.BaseURL, "/")
	}
	// The client's errors keep neither the status nor the headers of an
	// error answer: recording wraps the transport to keep them.
	rc := *hc
	rc.Transport = recording{next: hc.Transport}
	p.client = sdk.NewClient(o.APIKey, sdk.WithBaseURL(baseURL+"/v1"), sdk.WithHTTPClient(&rc))
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

	// The client reports events through callbacks that cannot fail: when
	// emit fails, the request's context is cancelled to abandon the
	// stream, and emit's error returned.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sctx, info := providerhttp.WithAnswer(sctx)
	var (
		emitErr error
		stopped bool
	)
	send := func(text string) {
		if text == "" || emitErr != nil {
			return
		}
		if err := ctx.Err(); err != nil {
			return
		}
		if err := emit(model.Chunk{Delta: text}); err != nil {
			emitErr = err
			cancel()
		}
	}
	msg, err := p.client.CreateMessagesStream(sctx, sdk.MessagesStreamRequest{
		MessagesRequest: params,
		OnContentBlockStart: func(d sdk.MessagesEventContentBlockStartData) {
			if d.ContentBlock.Type == sdk.MessagesContentTypeText && d.ContentBlock.Text != nil {
				send(*d.ContentBlock.Text)
			}
		},
		OnContentBlockDelta: func(d sdk.MessagesEventContentBlockDeltaData) {
			if d.Delta.Type == sdk.MessagesContentTypeTextDelta && d.Delta.Text != nil {
				send(*d.Delta.Text)
			}
		},
		OnMessageStop: func(sdk.MessagesEventMessageStopData) { stopped = true },
	})
	if emitErr != nil {
		return model.Result{}, emitErr
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return model.Result{}, ctxErr
	}
	if err != nil {
		return model.Result{}, classify(op, err, info)
	}
	if !stopped {
		return model.Result{}, errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).
			WithCause(errors.New("anthropic: the stream ended before message_stop"))
	}
	return result(op, &msg)
}

// result extracts the tool calls and the usage of an accumulated message.
func result(op string, msg *sdk.MessagesResponse) (model.Result, error) {
	res := model.Result{Usage: model.Usage{
		InputTokens:  int(msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens),
		OutputTokens: int(msg.Usage.OutputTokens),
	}}
	for i, b := range msg.Content {
		if b.Type != sdk.MessagesContentTypeToolUse || b.MessageContentToolUse == nil {
			continue
		}
		tu := b.MessageContentToolUse
		if msg.StopReason == sdk.MessagesStopReasonMaxTokens && i == len(msg.Content)-1 {
			return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgCutOff).
				WithCause(fmt.Errorf("anthropic: stop_reason max_tokens in tool_use %s (%s)", tu.ID, tu.Name))
		}
		args := bytes.TrimSpace(tu.Input)
		if len(args) == 0 {
			args = []byte("{}")
		}
		if !json.Valid(args) || args[0] != '{' {
			return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgMalformed).
				WithCause(fmt.Errorf("anthropic: tool_use %s (%s) input is not a JSON object", tu.ID, tu.Name))
		}
		res.ToolCalls = append(res.ToolCalls, model.ToolCall{ID: tu.ID, Name: tu.Name, Args: bytes.Clone(args)})
	}
	return res, nil
}

// params converts req into the Messages API's request.
func (p *Provider) params(req model.Request) (sdk.MessagesRequest, error) {
	name, ok := strings.CutPrefix(req.ModelID, IDPrefix)
	if !ok || !p.names[name] {
		return sdk.MessagesRequest{}, model.UnknownModel("", req.ModelID)
	}
	msgs, err := convertMessages(req.Messages, p.input[name])
	if err != nil {
		return sdk.MessagesRequest{}, err
	}
	tools, err := convertTools(req.Tools)
	if err != nil {
		return sdk.MessagesRequest{}, err
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := sdk.MessagesRequest{
		Model:     sdk.Model(name),
		MaxTokens: maxTokens,
		Messages:  msgs,
		Tools:     tools,
	}
	if req.System != "" {
		params.MultiSystem = []sdk.MessageSystemPart{{Type: "text", Text: req.System}}
	}
	return params, nil
}

// textBlock is a text content block.
func textBlock(s string) sdk.MessageContent {
	return sdk.MessageContent{Type: sdk.MessagesContentTypeText, Text: &s}
}

// convertMessages turns the conversation into Anthropic's shape: tool
// results are tool_result blocks of a user message, assistant tool calls
// tool_use blocks, and consecutive messages of one role are merged, since
// the API wants the roles to alternate. Empty texts are left out (the API
// rejects empty text blocks), and so are messages left with no block. A
// user message's images and PDFs the model takes (input) are image and
// document blocks (base64) before its text, which carries its text files
// as context and notes for the rest (model.UserParts).
func convertMessages(in []model.Message, input model.Input) ([]sdk.Message, error) {
	var out []sdk.Message
	add := func(role sdk.ChatRole, blocks ...sdk.MessageContent) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, sdk.Message{Role: role, Content: blocks})
	}
	for i, m := range in {
		switch m.Role {
		case model.RoleUser:
			text, parts := model.UserParts(m, input)
			var blocks []sdk.MessageContent
			for _, a := range parts {
				data := base64.StdEncoding.EncodeToString(a.Data)
				if a.Kind() == model.KindImage {
					blocks = append(blocks, sdk.NewImageMessageContent(sdk.NewMessageContentSource(sdk.MessagesContentSourceTypeBase64, a.ContentType, data)))
				} else {
					blocks = append(blocks, sdk.NewPDFDocumentMessageContent(data, a.Name, "", false))
				}
			}
			if text != "" {
				blocks = append(blocks, textBlock(text))
			}
			add(sdk.RoleUser, blocks...)
		case model.RoleAssistant:
			var blocks []sdk.MessageContent
			if m.Content != "" {
				blocks = append(blocks, textBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				args := bytes.TrimSpace(c.Args)
				if len(args) == 0 {
					args = []byte("{}")
				}
				if c.ID == "" || c.Name == "" || !json.Valid(args) || args[0] != '{' {
					return nil, badRequest(fmt.Errorf("anthropic: message %d: tool call %q (%s) lacks an id, a name or a JSON object of arguments", i, c.ID, c.Name))
				}
				blocks = append(blocks, sdk.MessageContent{
					Type:                  sdk.MessagesContentTypeToolUse,
					MessageContentToolUse: &sdk.MessageContentToolUse{ID: c.ID, Name: c.Name, Input: json.RawMessage(args)},
				})
			}
			add(sdk.RoleAssistant, blocks...)
		case model.RoleTool:
			if m.ToolCallID == "" {
				return nil, badRequest(fmt.Errorf("anthropic: message %d: tool result without a tool call id", i))
			}
			r := &sdk.MessageContentToolResult{ToolUseID: &m.ToolCallID}
			if m.Content != "" {
				r.Content = []sdk.MessageContent{textBlock(m.Content)}
			}
			add(sdk.RoleUser, sdk.MessageContent{Type: sdk.MessagesContentTypeToolResult, MessageContentToolResult: r})
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
func convertTools(in []model.ToolSpec) ([]sdk.ToolDefinition, error) {
	var out []sdk.ToolDefinition
	for _, t := range in {
		schema := bytes.TrimSpace(t.InputSchema)
		if len(schema) == 0 {
			schema = []byte(`{"type":"object","properties":{}}`)
		}
		if t.Name == "" || !json.Valid(schema) || schema[0] != '{' {
			return nil, badRequest(fmt.Errorf("anthropic: tool %q lacks a name or a JSON object schema", t.Name))
		}
		out = append(out, sdk.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(schema)})
	}
	return out, nil
}

// badRequest is the error for a request the service built wrong: a bug,
// not the client's fault.
func badRequest(cause error) error {
	return errs.E("", errs.Internal, codeProviderError, msgBadRequest).WithCause(cause)
}

// classify maps an error of the client to the service's error. info holds
// the status and headers of the provider's answer, when there was one.
func classify(op string, err error, info *providerhttp.Answer) error {
	status, header := info.Get()
	var reqErr *sdk.RequestError
	if errors.As(err, &reqErr) {
		// An error answer whose body is not Anthropic's error object (a
		// proxy's page): the status decides.
		return classifyAPI(op, reqErr.StatusCode, "", "", header)
	}
	var apiErr *sdk.APIError
	if errors.As(err, &apiErr) {
		if status < 400 {
			status = 0 // an error event in a stream answered 200
		}
		return classifyAPI(op, status, string(apiErr.Type), apiErr.Message, header)
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) || errors.Is(err, sdk.ErrTooManyEmptyStreamMessages) {
		return errs.E(op, errs.Internal, codeProviderError, msgMalformed).WithCause(fmt.Errorf("anthropic: %w", err))
	}
	// Anything else is the transport's: the network, TLS, a dropped stream.
	return errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).WithCause(fmt.Errorf("anthropic: %w", err))
}

// classifyAPI maps an error answer (status), or an error event of a stream
// (status 0), by error type and then by status (providerhttp.StatusError).
// Its cause is rebuilt from the status, the type, the provider's message
// and the request id, so that it keeps neither the request (and its
// x-api-key header) nor the raw body.
func classifyAPI(op string, status int, typ, message string, header http.Header) error {
	cause := fmt.Errorf("anthropic: status %d, error type %q: %q (request-id %q)", status, typ, providerhttp.Excerpt(message), header.Get("request-id"))
	switch {
	case typ == string(sdk.ErrTypeAuthentication) || typ == string(sdk.ErrTypePermission):
		return errs.E(op, errs.Internal, codeProviderError, msgCredentials).WithCause(cause)
	case status == 0 && (typ == string(sdk.ErrTypeInvalidRequest) || typ == string(sdk.ErrTypeNotFound) || typ == "billing_error" || typ == string(sdk.ErrTypeTooLarge)):
		// An error event in a stream that retrying will not fix.
		return errs.E(op, errs.Internal, codeProviderError, msgRejected).WithCause(cause)
	}
	return providerhttp.StatusError(op, status, header, cause)
}

// recording is a transport that records each answer's status and headers
// in its request context's providerhttp.Answer. It also sends the JSON body's
// Content-Type as the API documents it, without the client's charset
// parameter.
type recording struct{ next http.RoundTripper }

// RoundTrip sends req with the next transport (http.DefaultTransport when
// nil) and fails as it does.
func (r recording) RoundTrip(req *http.Request) (*http.Response, error) {
	next := r.next
	if next == nil {
		next = http.DefaultTransport
	}
	if strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
		req = req.Clone(req.Context())
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := next.RoundTrip(req)
	providerhttp.Record(req, res)
	return res, err
}
