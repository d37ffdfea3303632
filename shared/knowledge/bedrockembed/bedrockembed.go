// Package bedrockembed is the knowledge.Embedder of Amazon Bedrock's Titan
// Text Embeddings V2 (InvokeModel, one text per call, 512 dimensions,
// normalized).
package bedrockembed

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
)

// DefaultModel is Titan Text Embeddings V2.
const DefaultModel = "amazon.titan-embed-text-v2:0"

// concurrency bounds the InvokeModel calls of one Embed.
const concurrency = 8

// Options configure an Embedder.
type Options struct {
	Region string
	// Model is the model id; empty means DefaultModel.
	Model string
	// Endpoint overrides Bedrock's (tests).
	Endpoint string
	// Credentials override the AWS environment's (tests).
	Credentials aws.CredentialsProvider
}

// Embedder embeds with Bedrock.
type Embedder struct {
	// client returns the client, made at the first call.
	client func() (*bedrockruntime.Client, error)
	model  string
}

// New returns an Embedder. With a region given, the AWS configuration
// (the SDK's default chain) is loaded at the first Embed, not here, so
// that a cold start that embeds nothing does not pay for it, and a
// failure to load it fails that call (Unavailable). Without one, it is
// loaded here, and New fails when it cannot be loaded or names no
// region.
func New(ctx context.Context, o Options) (*Embedder, error) {
	if o.Model == "" {
		o.Model = DefaultModel
	}
	opt := func(co *bedrockruntime.Options) {
		if o.Endpoint != "" {
			co.BaseEndpoint = aws.String(o.Endpoint)
		}
	}
	if o.Credentials != nil {
		c := bedrockruntime.New(bedrockruntime.Options{Region: o.Region, Credentials: o.Credentials}, opt)
		return &Embedder{client: func() (*bedrockruntime.Client, error) { return c, nil }, model: o.Model}, nil
	}
	load := func() (*bedrockruntime.Client, error) {
		var loaders []func(*awsconfig.LoadOptions) error
		if o.Region != "" {
			loaders = append(loaders, awsconfig.WithRegion(o.Region))
		}
		cfg, err := awsconfig.LoadDefaultConfig(context.WithoutCancel(ctx), loaders...)
		if err != nil {
			return nil, fmt.Errorf("bedrockembed: load AWS config: %w", err)
		}
		if cfg.Region == "" {
			return nil, fmt.Errorf("bedrockembed: no AWS region configured")
		}
		return bedrockruntime.NewFromConfig(cfg, opt), nil
	}
	if o.Region != "" {
		return &Embedder{client: sync.OnceValues(load), model: o.Model}, nil
	}
	c, err := load()
	if err != nil {
		return nil, err
	}
	return &Embedder{client: func() (*bedrockruntime.Client, error) { return c, nil }, model: o.Model}, nil
}

// Name is "bedrock/<model>".
func (e *Embedder) Name() string { return "bedrock/" + e.model }

// Dimensions is knowledge.Dimensions.
func (e *Embedder) Dimensions() int { return knowledge.Dimensions }

type request struct {
	InputText  string `json:"inputText"`
	Dimensions int    `json:"dimensions"`
	Normalize  bool   `json:"normalize"`
}

type response struct {
	Embedding []float32 `json:"embedding"`
}

// Embed calls InvokeModel once per text, 8 at once. Unavailable when
// Bedrock cannot be reached or refuses a call; Internal when it answers a
// vector of the wrong length.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	const op = "bedrockembed.Embed"
	client, err := e.client()
	if err != nil {
		return nil, errs.E(op, errs.Unavailable, "EMBEDDING_UNAVAILABLE", "the embedding model could not be reached; retry shortly").WithCause(err)
	}
	out := make([][]float32, len(texts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, t := range texts {
		g.Go(func() error {
			body, _ := json.Marshal(request{InputText: t, Dimensions: knowledge.Dimensions, Normalize: true})
			res, err := client.InvokeModel(gctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String(e.model), Body: body,
				ContentType: aws.String("application/json"), Accept: aws.String("application/json")})
			if err != nil {
				return errs.E(op, errs.Unavailable, "EMBEDDING_UNAVAILABLE", "the embedding model could not be reached; retry shortly").WithCause(err)
			}
			var r response
			if err := json.Unmarshal(res.Body, &r); err != nil || len(r.Embedding) != knowledge.Dimensions {
				return errs.E(op, errs.Internal, "", "the embedding model answered no vector of the expected length").WithCause(fmt.Errorf("%d dimensions: %v", len(r.Embedding), err))
			}
			out[i] = r.Embedding
			return nil
		})
	}
	return out, g.Wait()
}

var _ knowledge.Embedder = (*Embedder)(nil)
