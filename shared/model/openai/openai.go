// Package openai is the model.Provider for OpenAI's Chat Completions API
// (https://platform.openai.com/docs/api-reference/chat) and for any
// OpenAI-compatible server reached through a base URL (Ollama, vLLM, LM
// Studio, llama.cpp). It streams replies with github.com/sashabaranov/go-openai
// (a dependency-free client of about 0.1 MB in an arm64 bootstrap, where the
// official SDK cost 17 MB or more: docs/decisions.md), offers tools as native
// function tools and maps provider failures to the service's errors:
// throttling, 5xx and network failures are errs.Unavailable
// (MODEL_UNAVAILABLE), every other failure errs.Internal
// (MODEL_PROVIDER_ERROR), with client-safe messages that never carry the API
// key or the provider's response bodies.
package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	sdk "github.com/sashabaranov/go-openai"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/model/providerhttp"
)

const (
	// ProviderName is the Provider of every model this package serves.
	ProviderName = "openai"
	// IDPrefix starts the registry id of every model this package serves:
	// "openai/<model>".
	IDPrefix = ProviderName + "/"

	// Error codes of the API contract.
	codeUnavailable   = model.CodeUnavailable
	codeProviderError = model.CodeProviderError

	// Client-safe messages.
	msgUnavailable = providerhttp.MsgUnavailable
	msgCredentials = providerhttp.MsgCredentials
	msgRejected    = providerhttp.MsgRejected
	msgMalformed   = "the model provider sent a malformed reply"
	msgBadToolArgs = "the model produced malformed tool call arguments"

	// responseHeaderTimeout bounds the wait for the response headers with
	// the default HTTP client (an OpenAI-compatible server may first load
	// the model); the body of a stream is bounded by ctx only, so long
	// replies are never cut.
	responseHeaderTimeout = 2 * time.Minute
	// maxRetryDelay caps the single retry: a provider that asks for a
	// longer wait (Retry-After) fails at once and the caller is told when
	// to retry instead of the request hanging.
	maxRetryDelay = 2 * time.Second
	// defaultRetryDelay is the wait before the retry when the provider
	// names none.
	defaultRetryDelay = 500 * time.Millisecond
)

// Options configure a Provider.
type Options struct {
	// APIKey is sent as a bearer token. Required unless BaseURL is set
	// (Ollama and vLLM usually need none).
	APIKey string
	// BaseURL is the API root of an OpenAI-compatible server including its
	// version path, as every OpenAI SDK expects, e.g.
	// "http://localhost:11434/v1"; requests go to BaseURL +
	// "/chat/completions". Empty means OpenAI (https://api.openai.com/v1).
	BaseURL string
	// Models are the model names served, e.g. "gpt-4o-mini" or
	// "llama3.2". Required.
	Models []string
	// HTTPClient sends the requests; nil means a client with a
	// response-header timeout and no overall timeout (streams last as long
	// as their ctx).
	HTTPClient *http.Client
	// Input says what a model takes besides text; nil means DefaultInput.
	Input func(name string) model.Input
}

// DefaultInput guesses what model name takes besides text from its name:
// images for OpenAI's vision models (gpt-4o, gpt-4.1, gpt-4-turbo,
// gpt-5, o1, o3 and o4, but o1-mini and o3-mini) and for the usual open
// vision models of compatible servers (llava, *-vision, *-vl, pixtral,
// gemma3, llama4, minicpm-v, moondream). Never PDFs: Chat Completions
// takes files only through the Files API, which this client does not use.
func DefaultInput(name string) model.Input {
	n := strings.ToLower(name)
	if n == "o1-mini" || strings.HasPrefix(n, "o1-mini-") || n == "o3-mini" || strings.HasPrefix(n, "o3-mini-") {
		return model.Input{}
	}
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-4-turbo", "gpt-5", "o1", "o3", "o4", "chatgpt-4o"} {
		if strings.HasPrefix(n, p) {
			return model.Input{Images: true}
		}
	}
	for _, sub := range []string{"vision", "llava", "-vl", "vl:", "pixtral", "gemma3", "llama4", "minicpm-v", "moondream"} {
		if strings.Contains(n, sub) {
			return model.Input{Images: true}
		}
	}
	return model.Input{}
}

// Provider is the model.Provider for OpenAI and OpenAI-compatible servers.
// It is immutable and safe for concurrent use.
type Provider struct {
	client *sdk.Client
	models []model.Model
	names  map[string]bool
	// input is what each model name takes besides text.
	input map[string]model.Input
	// compatible is true for a server other than OpenAI (BaseURL set).
	compatible bool
}

var _ model.Provider = (*Provider)(nil)

// New returns the provider of o.Models. It fails when o.Models is empty or
// holds a blank or repeated name, when neither o.APIKey nor o.BaseURL is
// set, or when o.BaseURL is not an absolute http(s) URL. It makes no
// request.
//
// The API key and the base URL come from o only (the client reads no
// environment variable), so a key from the environment is never sent to an
// OpenAI-compatible server. Without an API key no Authorization header is
// sent. A failed request is retried at most once and never after waiting
// longer than a couple of seconds, so a throttled or failing provider fails
// fast.
func New(o Options) (*Provider, error) {
	if len(o.Models) == 0 {
		return nil, errors.New("openai: at least one model is required")
	}
	apiKey := strings.TrimSpace(o.APIKey)
	baseURL := strings.TrimRight(strings.TrimSpace(o.BaseURL), "/")
	if apiKey == "" && baseURL == "" {
		return nil, errors.New("openai: an API key is required unless a base URL names an OpenAI-compatible server")
	}
	if baseURL != "" {
		u, err := url.Parse(baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("openai: base URL must be an absolute http(s) URL, got %q", o.BaseURL)
		}
	}
	p := &Provider{names: make(map[string]bool, len(o.Models)), input: map[string]model.Input{}, compatible: baseURL != ""}
	inputOf := o.Input
	if inputOf == nil {
		inputOf = DefaultInput
	}
	label := " (OpenAI)"
	if p.compatible {
		label = " (OpenAI-compatible)"
	}
	for _, name := range o.Models {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, errors.New("openai: blank model name")
		}
		if p.names[name] {
			return nil, fmt.Errorf("openai: model %q listed twice", name)
		}
		p.names[name] = true
		in := inputOf(name)
		in.Documents = false // see DefaultInput
		p.input[name] = in
		p.models = append(p.models, model.Model{ID: IDPrefix + name, Name: name + label, Provider: ProviderName, Input: in})
	}
	if baseURL == "" {
		baseURL = "https://api.openai.com/v1"
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = model.StreamingHTTPClient(responseHeaderTimeout)
	}
	cfg := sdk.DefaultConfig(apiKey)
	cfg.BaseURL = baseURL
	cfg.HTTPClient = retrying{hc}
	p.client = sdk.NewClientWithConfig(cfg)
	return p, nil
}

// Models lists the configured models, ids "openai/<model>".
func (p *Provider) Models() []model.Model { return slices.Clone(p.models) }

// Generate streams one turn of the model req.ModelID names through emit,
// every content delta in order as it arrives, and returns the tool calls
// the model made and the usage the provider reported.
//
// It fails with ctx's error when ctx is done (the stream is closed at
// once), with emit's error when emit fails, with errs.Invalid
// INVALID_MODEL for a model this provider does not serve, with
// errs.Unavailable MODEL_UNAVAILABLE for throttling (429), 5xx, network
// failures and streams that end early (RetryAfter from the provider's
// Retry-After when present), and with errs.Internal MODEL_PROVIDER_ERROR
// for rejected credentials (401, 403), other rejected requests, malformed
// replies and malformed tool call arguments.
func (p *Provider) Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	const op = "openai.Generate"
	name, ok := strings.CutPrefix(req.ModelID, IDPrefix)
	if !ok || !p.names[name] {
		return model.Result{}, model.UnknownModel(op, req.ModelID)
	}
	params, err := p.params(name, req)
	if err != nil {
		return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgRejected).WithCause(err)
	}
	if err := ctx.Err(); err != nil {
		return model.Result{}, err
	}

	// The retrying client records the provider's last answer headers here,
	// for the Retry-After of an error.
	actx, info := providerhttp.WithAnswer(ctx)
	stream, err := p.client.CreateChatCompletionStream(actx, params)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return model.Result{}, ctxErr
		}
		_, header := info.Get()
		return model.Result{}, mapError(op, err, header)
	}
	defer stream.Close()
	// The transport aborts a blocked read when ctx is done; closing the
	// stream as well makes that prompt whatever the HTTP client.
	stop := context.AfterFunc(ctx, func() { _ = stream.Close() })
	defer stop()

	var (
		calls    toolCalls
		usage    model.Usage
		finished bool
	)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return model.Result{}, ctxErr
		}
		if err != nil {
			return model.Result{}, mapError(op, err, nil)
		}
		if chunk.Usage != nil {
			usage = model.Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
		}
		for _, choice := range chunk.Choices {
			if choice.Index != 0 {
				continue // only one choice is requested
			}
			for _, text := range []string{choice.Delta.Content, choice.Delta.Refusal} {
				if text == "" {
					continue
				}
				if err := emit(model.Chunk{Delta: text}); err != nil {
					return model.Result{}, err
				}
			}
			calls.add(choice.Delta.ToolCalls)
			if choice.FinishReason != "" {
				finished = true
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return model.Result{}, err
	}
	if !finished {
		return model.Result{}, errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).
			WithCause(errors.New("the stream ended before the reply finished"))
	}
	toolCalls, err := calls.result()
	if err != nil {
		return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgBadToolArgs).WithCause(err)
	}
	return model.Result{ToolCalls: toolCalls, Usage: usage}, nil
}

// params builds the streaming request for the model name. It fails on a
// message role it does not know or a tool schema that is not a JSON object.
func (p *Provider) params(name string, req model.Request) (sdk.ChatCompletionRequest, error) {
	params := sdk.ChatCompletionRequest{
		Model:         name,
		StreamOptions: &sdk.StreamOptions{IncludeUsage: true},
	}
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.ChatCompletionMessage{Role: sdk.ChatMessageRoleSystem, Content: req.System})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case model.RoleUser:
			params.Messages = append(params.Messages, userMessage(m, p.input[name]))
		case model.RoleAssistant:
			a := sdk.ChatCompletionMessage{Role: sdk.ChatMessageRoleAssistant, Content: m.Content}
			for _, c := range m.ToolCalls {
				args := strings.TrimSpace(string(c.Args))
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, sdk.ToolCall{
					ID: c.ID, Type: sdk.ToolTypeFunction,
					Function: sdk.FunctionCall{Name: c.Name, Arguments: args},
				})
			}
			params.Messages = append(params.Messages, a)
		case model.RoleTool:
			params.Messages = append(params.Messages, sdk.ChatCompletionMessage{Role: sdk.ChatMessageRoleTool, Content: m.Content, ToolCallID: m.ToolCallID})
		default:
			return params, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		schema := map[string]any{"type": "object", "properties": map[string]any{}}
		if len(t.InputSchema) > 0 {
			schema = nil
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema == nil {
				return params, fmt.Errorf("tool %q: the input schema is not a JSON object", t.Name)
			}
		}
		params.Tools = append(params.Tools, sdk.Tool{
			Type:     sdk.ToolTypeFunction,
			Function: &sdk.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: schema},
		})
	}
	if req.MaxTokens > 0 {
		// OpenAI replaced max_tokens by max_completion_tokens (its reasoning
		// models refuse the former); compatible servers know max_tokens.
		if p.compatible {
			params.MaxTokens = req.MaxTokens
		} else {
			params.MaxCompletionTokens = req.MaxTokens
		}
	}
	return params, nil
}

// userMessage is a user turn: plain text, or, with images the model
// takes, the images as data URLs (image_url parts) followed by the text
// (model.UserParts: text attachments as context, notes for the rest).
func userMessage(m model.Message, in model.Input) sdk.ChatCompletionMessage {
	text, parts := model.UserParts(m, in)
	if len(parts) == 0 {
		return sdk.ChatCompletionMessage{Role: sdk.ChatMessageRoleUser, Content: text}
	}
	msg := sdk.ChatCompletionMessage{Role: sdk.ChatMessageRoleUser}
	for _, a := range parts {
		msg.MultiContent = append(msg.MultiContent, sdk.ChatMessagePart{Type: sdk.ChatMessagePartTypeImageURL,
			ImageURL: &sdk.ChatMessageImageURL{URL: "data:" + a.ContentType + ";base64," + base64.StdEncoding.EncodeToString(a.Data), Detail: sdk.ImageURLDetailAuto}})
	}
	if text != "" {
		msg.MultiContent = append(msg.MultiContent, sdk.ChatMessagePart{Type: sdk.ChatMessagePartTypeText, Text: text})
	}
	return msg
}

// toolCalls accumulates streamed tool call fragments: the first fragment
// of a call carries its id and name, the next ones pieces of its arguments,
// all under the call's index.
type toolCalls struct {
	calls   []*toolCall
	byIndex map[int]*toolCall
}

type toolCall struct {
	id, name string
	args     strings.Builder
}

// add records the fragments of one delta.
func (tc *toolCalls) add(deltas []sdk.ToolCall) {
	for _, d := range deltas {
		if tc.byIndex == nil {
			tc.byIndex = map[int]*toolCall{}
		}
		idx := 0 // some servers send none, or -1, for a single call
		if d.Index != nil {
			idx = max(*d.Index, 0)
		}
		c := tc.byIndex[idx]
		// A new id under a used index is a new call: some servers send
		// every (whole) call with index 0.
		if c == nil || (d.ID != "" && c.id != "" && d.ID != c.id) {
			c = &toolCall{}
			tc.byIndex[idx] = c
			tc.calls = append(tc.calls, c)
		}
		if d.ID != "" {
			c.id = d.ID
		}
		if n := d.Function.Name; n != "" && n != c.name {
			c.name += n
		}
		c.args.WriteString(d.Function.Arguments)
	}
}

// result returns the accumulated calls in the order they began, each with
// a JSON object of arguments ("{}" when the model sent none). It fails on
// a call without a name or with arguments that are not a JSON object.
func (tc *toolCalls) result() ([]model.ToolCall, error) {
	var out []model.ToolCall
	for i, c := range tc.calls {
		if c.name == "" {
			return nil, fmt.Errorf("tool call %d has no name", i)
		}
		id := c.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i) // servers that send no id ignore it
		}
		args, err := model.ObjectArgs([]byte(c.args.String()))
		if err != nil {
			return nil, fmt.Errorf("tool call %d (%s): %w", i, c.name, err)
		}
		out = append(out, model.ToolCall{ID: id, Name: c.name, Args: args})
	}
	return out, nil
}

// mapError turns a failure of the client into the service's error: an
// APIError with an HTTP status, or a RequestError, is a request the
// provider answered with an HTTP error (header holds that answer's
// headers); an APIError without a status is an error event in the stream,
// the provider failing mid-reply; a reply that does not decode is
// malformed; anything else is a network failure or a stream cut short.
func mapError(op string, err error, header http.Header) error {
	var reqErr *sdk.RequestError
	if errors.As(err, &reqErr) {
		// The body is not an OpenAI error object (a gateway's HTML, vLLM's
		// {"error":"Unauthorized"}): keep the status only. (Checked first:
		// a RequestError may wrap a partly decoded APIError.)
		return statusError(op, reqErr.HTTPStatusCode, "an error answer that is not OpenAI's error object", header)
	}
	var apiErr *sdk.APIError
	if errors.As(err, &apiErr) {
		if apiErr.HTTPStatusCode == 0 {
			return errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).
				WithCause(fmt.Errorf("error event in the stream: type=%q message=%q", apiErr.Type, providerhttp.Excerpt(apiErr.Message)))
		}
		detail := fmt.Sprintf("type=%q code=\"%v\"", apiErr.Type, apiErr.Code)
		if apiErr.Param != nil {
			detail += fmt.Sprintf(" param=%q", *apiErr.Param)
		}
		if s := apiErr.HTTPStatusCode; s != http.StatusUnauthorized && s != http.StatusForbidden && apiErr.Message != "" {
			detail += fmt.Sprintf(" message=%q", providerhttp.Excerpt(apiErr.Message))
		}
		return statusError(op, apiErr.HTTPStatusCode, detail, header)
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) || errors.Is(err, sdk.ErrTooManyEmptyStreamMessages) {
		return errs.E(op, errs.Internal, codeProviderError, msgMalformed).WithCause(err)
	}
	return errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).WithCause(err)
}

// statusError maps an HTTP error answer of the provider. The cause keeps
// the status and detail for the logs: the provider's error type, code and
// param, and its message unless the credentials were rejected (that
// message may quote part of the key).
func statusError(op string, status int, detail string, header http.Header) error {
	return providerhttp.StatusError(op, status, header, fmt.Errorf("openai: status %d (%s)", status, detail))
}

// retrying sends a request with hc and retries it once when the provider
// is throttling or failing (408, 409, 429, 5xx, or a network failure),
// unless it says not to (X-Should-Retry: false) or asks for a wait longer
// than maxRetryDelay; X-Should-Retry: true retries any answer. The
// request body is replayed through GetBody. It records the last answer's
// status and headers in the request context's providerhttp.Answer.
type retrying struct{ hc *http.Client }

// Do sends req; it fails as hc.Do does, or with ctx's error while waiting
// to retry.
func (r retrying) Do(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		res, err := r.hc.Do(req)
		providerhttp.Record(req, res)
		delay, again := shouldRetry(res, err)
		if !again || attempt > 0 || req.GetBody == nil || req.Context().Err() != nil {
			return res, err
		}
		if res != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
			_ = res.Body.Close()
		}
		t := time.NewTimer(delay)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = body
	}
}

// shouldRetry tells whether the answer (res, err) is worth one retry, and
// after how long.
func shouldRetry(res *http.Response, err error) (time.Duration, bool) {
	if err != nil {
		return defaultRetryDelay, true
	}
	switch strings.ToLower(res.Header.Get("X-Should-Retry")) {
	case "false":
		return 0, false
	case "true":
	default:
		s := res.StatusCode
		if s != http.StatusRequestTimeout && s != http.StatusConflict && s != http.StatusTooManyRequests && s < 500 {
			return 0, false
		}
	}
	delay := defaultRetryDelay
	if secs := providerhttp.RetryAfter(res.Header, time.Now()); secs > 0 {
		delay = time.Duration(secs) * time.Second
	}
	if delay > maxRetryDelay {
		return 0, false
	}
	return delay, true
}
