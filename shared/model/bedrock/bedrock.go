// Package bedrock is the model.Provider for Amazon Bedrock, through the
// Converse API (ConverseStream). Its models are the configured Bedrock model
// or inference profile ids, registered as "bedrock/<model id>".
package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

// ProviderName is the Provider field of this package's models.
const ProviderName = "bedrock"

// idPrefix starts the registry id of every Bedrock model.
const idPrefix = ProviderName + "/"

// retryMaxAttempts bounds the SDK's attempts per call: a chat turn should
// fail fast and let the client retry rather than hang on backoff.
const retryMaxAttempts = 2

// Error codes and client-safe messages of Generate's failures.
const (
	codeUnavailable   = model.CodeUnavailable
	codeProviderError = model.CodeProviderError

	msgUnavailable  = "the model provider is unavailable; retry shortly"
	msgAccessDenied = "the service is not allowed to use this model"
	msgProviderErr  = "the model provider could not process the request"
	msgBadToolArgs  = "the model returned malformed tool call arguments"
	msgStreamEnded  = "the model provider ended the reply early; retry shortly"
)

// Options configures New.
type Options struct {
	// Region is the AWS region of the Bedrock runtime endpoint. Empty: the
	// region of the default AWS config (only consulted when Credentials is
	// nil).
	Region string
	// Models are the Bedrock model ids or inference profile ids to serve,
	// e.g. "anthropic.claude-3-5-haiku-20241022-v1:0" or
	// "us.anthropic.claude-3-5-haiku-20241022-v1:0".
	Models []string
	// Endpoint overrides the Bedrock runtime endpoint (tests, VPC
	// endpoints). Empty: the region's endpoint.
	Endpoint string
	// Credentials sign the requests. Nil: the default AWS credential chain
	// (environment, shared config, container or instance role).
	Credentials aws.CredentialsProvider
	// HTTPClient sends the requests. Nil: the SDK's default client.
	HTTPClient *http.Client
	// Input says what a model takes besides text; nil means DefaultInput.
	Input func(modelID string) model.Input
}

// DefaultInput guesses what Bedrock model (or inference profile) id takes
// besides text through Converse: images and PDF documents for Anthropic
// Claude 3 and later (Claude 3.5 Haiku: documents only) and for Amazon
// Nova Lite, Pro and Premier; documents for the other Nova models; images for Llama 3.2 11B and 90B, Llama 4
// and Pixtral. The rest: text only.
func DefaultInput(modelID string) model.Input {
	id := strings.ToLower(modelID)
	switch {
	case strings.Contains(id, "claude-3-5-haiku"):
		return model.Input{Documents: true} // text only on Bedrock: no vision
	case strings.Contains(id, "anthropic.claude") && !strings.Contains(id, "claude-v2") && !strings.Contains(id, "claude-instant"):
		return model.Input{Images: true, Documents: true}
	case strings.Contains(id, "amazon.nova-lite"), strings.Contains(id, "amazon.nova-pro"), strings.Contains(id, "amazon.nova-premier"):
		return model.Input{Images: true, Documents: true}
	case strings.Contains(id, "amazon.nova"):
		return model.Input{Documents: true}
	case strings.Contains(id, "llama3-2-11b"), strings.Contains(id, "llama3-2-90b"), strings.Contains(id, "llama4"), strings.Contains(id, "pixtral"):
		return model.Input{Images: true}
	}
	return model.Input{}
}

// Provider serves Bedrock models through the Converse API. It is safe for
// concurrent use.
type Provider struct {
	client *bedrockruntime.Client
	models []model.Model
	ids    map[string]string // registry id -> Bedrock model id
	input  map[string]model.Input
}

var _ model.Provider = (*Provider)(nil)

// New returns the provider of o.Models. It fails when Models is empty or
// holds a blank or duplicate id, when the default AWS config cannot be
// loaded (Credentials nil), or when no region is known.
func New(ctx context.Context, o Options) (*Provider, error) {
	if len(o.Models) == 0 {
		return nil, errors.New("bedrock: no models configured")
	}
	p := &Provider{ids: make(map[string]string, len(o.Models)), input: map[string]model.Input{}}
	inputOf := o.Input
	if inputOf == nil {
		inputOf = DefaultInput
	}
	for _, m := range o.Models {
		m = strings.TrimSpace(m)
		if m == "" {
			return nil, errors.New("bedrock: blank model id")
		}
		id := idPrefix + m
		if _, dup := p.ids[id]; dup {
			return nil, fmt.Errorf("bedrock: duplicate model id %q", m)
		}
		p.ids[id] = m
		p.input[id] = inputOf(m)
		p.models = append(p.models, model.Model{ID: id, Name: m + " (Bedrock)", Provider: ProviderName, Input: p.input[id]})
	}

	endpoint := strings.TrimRight(o.Endpoint, "/")
	// The client options are applied last, over the AWS config and the
	// SDK's defaults: an HTTPClient given here wins over the config's
	// (AWS_CA_BUNDLE and the like only apply to the SDK's own client), and
	// whichever client results is wrapped in bodyGuard.
	clientOptions := func(co *bedrockruntime.Options) {
		if endpoint != "" {
			co.BaseEndpoint = aws.String(endpoint)
		}
		if o.HTTPClient != nil {
			co.HTTPClient = o.HTTPClient
		}
		co.HTTPClient = bodyGuard{next: co.HTTPClient}
	}
	if o.Credentials == nil {
		loaders := []func(*awsconfig.LoadOptions) error{awsconfig.WithRetryMaxAttempts(retryMaxAttempts)}
		if o.Region != "" {
			loaders = append(loaders, awsconfig.WithRegion(o.Region))
		}
		cfg, err := awsconfig.LoadDefaultConfig(ctx, loaders...)
		if err != nil {
			return nil, fmt.Errorf("bedrock: load AWS config: %w", err)
		}
		if cfg.Region == "" {
			return nil, errors.New("bedrock: no AWS region configured")
		}
		p.client = bedrockruntime.NewFromConfig(cfg, clientOptions)
		return p, nil
	}

	if o.Region == "" {
		return nil, errors.New("bedrock: no AWS region configured")
	}
	creds := o.Credentials
	if _, cached := creds.(*aws.CredentialsCache); !cached {
		creds = aws.NewCredentialsCache(creds)
	}
	co := bedrockruntime.Options{Region: o.Region, Credentials: creds, RetryMaxAttempts: retryMaxAttempts}
	p.client = bedrockruntime.New(co, clientOptions)
	return p, nil
}

// Models lists the configured models, in configuration order, with ids
// "bedrock/<model id>".
func (p *Provider) Models() []model.Model { return slices.Clone(p.models) }

// Generate streams the model's next turn through ConverseStream: text
// deltas go to emit in order, tool calls and token usage come back in the
// Result. It fails with Invalid INVALID_MODEL for a model id it does not
// serve; with ctx's error when ctx is done; with emit's error, unchanged,
// when emit fails; with Unavailable MODEL_UNAVAILABLE when Bedrock
// throttles, is unavailable or unreachable, or cuts the stream short; and
// with Internal MODEL_PROVIDER_ERROR when Bedrock rejects the request
// (access denied, validation, unknown model) or the reply is malformed.
func (p *Provider) Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	const op = "bedrock.Generate"
	modelID, ok := p.ids[req.ModelID]
	if !ok {
		return model.Result{}, model.UnknownModel(op, req.ModelID)
	}
	in, err := buildInput(modelID, req, p.input[req.ModelID])
	if err != nil {
		return model.Result{}, errs.Wrap(op, err)
	}

	out, err := p.client.ConverseStream(ctx, in)
	if err != nil {
		return model.Result{}, classify(ctx, op, err)
	}
	stream := out.GetStream()
	defer stream.Close()

	var (
		res     model.Result
		calls   []*toolCall
		byIndex = map[int32]*toolCall{}
		stopped bool
	)
	callAt := func(index *int32) *toolCall {
		i := aws.ToInt32(index)
		c := byIndex[i]
		if c == nil {
			c = &toolCall{}
			byIndex[i] = c
			calls = append(calls, c)
		}
		return c
	}
	events := stream.Events()
	for {
		var ev types.ConverseStreamOutput
		select {
		case <-ctx.Done():
			return model.Result{}, ctx.Err()
		case e, open := <-events:
			if !open {
				if err := stream.Err(); err != nil {
					return model.Result{}, classify(ctx, op, err)
				}
				if err := ctx.Err(); err != nil {
					return model.Result{}, err
				}
				if !stopped {
					return model.Result{}, errs.E(op, errs.Unavailable, codeUnavailable, msgStreamEnded).
						WithCause(errors.New("event stream ended before messageStop"))
				}
				for _, c := range calls {
					if c.id == "" || c.name == "" {
						return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgProviderErr).
							WithCause(errors.New("toolUse content block without contentBlockStart id and name"))
					}
					args, err := model.ObjectArgs(c.input.Bytes())
					if err != nil {
						return model.Result{}, errs.E(op, errs.Internal, codeProviderError, msgBadToolArgs).WithCause(err)
					}
					res.ToolCalls = append(res.ToolCalls, model.ToolCall{ID: c.id, Name: c.name, Args: args})
				}
				return res, nil
			}
			ev = e
		}

		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			if tu, ok := v.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				c := callAt(v.Value.ContentBlockIndex)
				c.id, c.name = aws.ToString(tu.Value.ToolUseId), aws.ToString(tu.Value.Name)
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			switch d := v.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				if d.Value == "" {
					continue
				}
				if err := emit(model.Chunk{Delta: d.Value}); err != nil {
					return model.Result{}, err
				}
			case *types.ContentBlockDeltaMemberToolUse:
				callAt(v.Value.ContentBlockIndex).input.WriteString(aws.ToString(d.Value.Input))
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stopped = true
		case *types.ConverseStreamOutputMemberMetadata:
			if u := v.Value.Usage; u != nil {
				res.Usage = model.Usage{InputTokens: int(aws.ToInt32(u.InputTokens)), OutputTokens: int(aws.ToInt32(u.OutputTokens))}
			}
		}
	}
}

// bodyGuard works around a race between the SDK and net/http that cuts
// response streams short. The SDK closes a request's body as soon as the
// response headers arrive; when the transport has not yet made its
// end-of-body check, the SDK's body wrapper answers that check (through
// io.WriterTo) with io.EOF, which net/http takes for a write error and
// closes the connection, response stream included. Hiding WriterTo makes
// the check a plain Read, for which a closed body is a clean end of data.
// It matters most against fast local endpoints but can happen anywhere.
type bodyGuard struct{ next bedrockruntime.HTTPClient }

// Do sends r with its body stripped down to Read and Close.
func (g bodyGuard) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readOnlyBody{r.Body}
	}
	return g.next.Do(r)
}

// readOnlyBody exposes only Read and Close of the body it wraps.
type readOnlyBody struct{ io.ReadCloser }

// toolCall accumulates one toolUse content block of the reply.
type toolCall struct {
	id, name string
	input    bytes.Buffer
}

// buildInput converts req into a ConverseStream request for modelID. It
// fails (Internal) when a tool schema or tool call's arguments are not
// valid JSON or a message has an unknown role.
func buildInput(modelID string, req model.Request, input model.Input) (*bedrockruntime.ConverseStreamInput, error) {
	msgs, err := convertMessages(req.Messages, input)
	if err != nil {
		return nil, err
	}
	in := &bedrockruntime.ConverseStreamInput{ModelId: aws.String(modelID), Messages: msgs}
	if strings.TrimSpace(req.System) != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	if len(req.Tools) > 0 {
		tc := &types.ToolConfiguration{}
		for _, t := range req.Tools {
			schema := map[string]any{"type": "object"}
			if len(bytes.TrimSpace(t.InputSchema)) > 0 {
				schema = nil
				if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema == nil {
					return nil, fmt.Errorf("input schema of tool %q is not a JSON object: %v", t.Name, err)
				}
			}
			spec := types.ToolSpecification{
				Name:        aws.String(t.Name),
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
			}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
		in.ToolConfig = tc
	}
	if req.MaxTokens > 0 {
		in.InferenceConfig = &types.InferenceConfiguration{MaxTokens: aws.Int32(int32(min(req.MaxTokens, math.MaxInt32)))}
	}
	return in, nil
}

// convertMessages maps the conversation onto Converse messages: user text,
// assistant text and toolUse blocks, and tool results as toolResult blocks
// of a user message. Converse wants roles to alternate, so consecutive
// messages of the same role merge into one, with toolResult blocks first
// in a user message; blank texts (which Converse rejects) are dropped. A
// user message's images and PDFs the model takes (input) are image and
// document blocks before its text, which carries its text files as
// context and notes for the rest (model.UserParts).
func convertMessages(in []model.Message, input model.Input) ([]types.Message, error) {
	var out []types.Message
	docNames := map[string]bool{} // Converse wants the documents' names unique
	for i, m := range in {
		var (
			role   types.ConversationRole
			blocks []types.ContentBlock
		)
		switch m.Role {
		case model.RoleUser:
			role = types.ConversationRoleUser
			text, parts := model.UserParts(m, input)
			blocks = append(blocks, attachmentBlocks(parts, docNames)...)
			if strings.TrimSpace(text) != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: text})
			}
		case model.RoleAssistant:
			role = types.ConversationRoleAssistant
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: m.Content})
			}
			for _, c := range m.ToolCalls {
				args := map[string]any{}
				if len(bytes.TrimSpace(c.Args)) > 0 {
					args = nil
					if err := json.Unmarshal(c.Args, &args); err != nil || args == nil {
						return nil, fmt.Errorf("message %d: arguments of tool call %q are not a JSON object: %v", i, c.ID, err)
					}
				}
				blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(c.ID),
					Name:      aws.String(c.Name),
					Input:     document.NewLazyDocument(args),
				}})
			}
		case model.RoleTool:
			role = types.ConversationRoleUser
			text := m.Content
			if strings.TrimSpace(text) == "" {
				text = "(no output)"
			}
			blocks = append(blocks, &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
				ToolUseId: aws.String(m.ToolCallID),
				Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: text}},
			}})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, types.Message{Role: role, Content: blocks})
	}
	for i := range out {
		if out[i].Role == types.ConversationRoleUser {
			slices.SortStableFunc(out[i].Content, func(a, b types.ContentBlock) int {
				return toolResultRank(a) - toolResultRank(b)
			})
		}
	}
	return out, nil
}

// imageFormats are the Converse formats of the image types.
var imageFormats = map[string]types.ImageFormat{"image/png": types.ImageFormatPng, "image/jpeg": types.ImageFormatJpeg,
	"image/webp": types.ImageFormatWebp, "image/gif": types.ImageFormatGif}

// attachmentBlocks are the image and document blocks of parts (raw bytes:
// the SDK encodes them); an image of another type is left out.
func attachmentBlocks(parts []model.Attachment, docNames map[string]bool) []types.ContentBlock {
	var out []types.ContentBlock
	for _, a := range parts {
		if a.Kind() == model.KindImage {
			if f, ok := imageFormats[a.ContentType]; ok {
				out = append(out, &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: f, Source: &types.ImageSourceMemberBytes{Value: a.Data}}})
			}
			continue
		}
		out = append(out, &types.ContentBlockMemberDocument{Value: types.DocumentBlock{
			Format: types.DocumentFormatPdf, Name: aws.String(documentName(a.Name, docNames)), Source: &types.DocumentSourceMemberBytes{Value: a.Data},
		}})
	}
	return out
}

// documentName makes name a Converse document name, unique among used:
// letters, digits, single spaces, hyphens, parentheses and square
// brackets only (others become spaces), at most 200 characters.
func documentName(name string, used map[string]bool) string {
	var b strings.Builder
	space := false
	for _, r := range strings.TrimSuffix(name, ".pdf") {
		ok := unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-()[]", r)
		if !ok {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		b.WriteRune(r)
		space = false
	}
	base := strings.TrimSpace(b.String())
	if base == "" {
		base = "document"
	}
	if r := []rune(base); len(r) > 200 {
		base = strings.TrimSpace(string(r[:200]))
	}
	n := base
	for i := 2; used[n]; i++ {
		n = fmt.Sprintf("%s (%d)", base, i)
	}
	used[n] = true
	return n
}

func toolResultRank(b types.ContentBlock) int {
	if _, ok := b.(*types.ContentBlockMemberToolResult); ok {
		return 0
	}
	return 1
}

// Bedrock error codes (smithy.APIError.ErrorCode) worth retrying.
var retryableCodes = []string{
	"ThrottlingException",
	"ServiceUnavailableException",
	"ModelNotReadyException",
	"InternalServerException",
	"ModelStreamErrorException",
	"ModelTimeoutException",
	"ServiceQuotaExceededException",
}

// classify turns an SDK or stream error into the service's error: ctx's
// error when ctx is done, Unavailable for throttling, server-side and
// network failures, Internal otherwise. The cause is kept for logs; the
// message never carries Bedrock's text.
func classify(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	unavailable := errs.E(op, errs.Unavailable, codeUnavailable, msgUnavailable).WithCause(err)
	generic := errs.E(op, errs.Internal, codeProviderError, msgProviderErr).WithCause(err)
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code := apiErr.ErrorCode()
		for _, c := range retryableCodes {
			if strings.EqualFold(code, c) {
				return unavailable
			}
		}
		if strings.EqualFold(code, "AccessDeniedException") {
			return errs.E(op, errs.Internal, codeProviderError, msgAccessDenied).WithCause(err)
		}
	}
	var (
		sendErr *smithyhttp.RequestSendError
		netErr  net.Error
	)
	if errors.As(err, &sendErr) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return unavailable
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode() != 0 {
		if s := respErr.HTTPStatusCode(); s == http.StatusTooManyRequests || s >= 500 {
			return unavailable
		}
		return generic
	}
	if apiErr != nil {
		return generic
	}
	return generic
}
