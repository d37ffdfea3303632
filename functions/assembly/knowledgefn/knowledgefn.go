// Package knowledgefn builds KnowledgeFunction: the knowledge bases
// (/api/knowledge-bases, their documents and queries) over the process's
// knowledge service (knowledgecore) with the configured embedder.
package knowledgefn

import (
	"context"
	"fmt"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/knowledgecore"
	"github.com/workflowchat/service/functions/assembly/knowledgeuse"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/bedrockembed"
	"github.com/workflowchat/service/shared/knowledge/openaiembed"
)

// Knowledge is KnowledgeFunction.
var Knowledge = assembly.Function{
	LogicalID: "KnowledgeFunction",
	Required:  []string{"SESSIONS_TABLE", "DATA_TABLE", "BLOB_BUCKET", "RATE_LIMITS_TABLE"},
	Build:     build,
}

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	s, err := Service(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	// Adding a document (an indexing) is limited per user by
	// RATE_LIMIT_KNOWLEDGE_DOCUMENTS.
	return knowledge.RoutesWith(s, d.Auth(cfg), knowledge.Limits{Limiter: d.Limiter(cfg), Documents: cfg.RateLimitKnowledgeDocuments}), nil
}

// Service returns the process's knowledge service with the embedder
// KNOWLEDGE_EMBEDDER names (knowledgecore.Service). It fails when the
// embedder, the blob store or the vector index cannot be built.
func Service(ctx context.Context, cfg config.Config, d assembly.Deps) (*knowledge.Service, error) {
	emb, err := Embedder(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return knowledgecore.Service(ctx, cfg, d, emb)
}

// Embedder returns the embedder KNOWLEDGE_EMBEDDER names: the built-in
// lexical one, Bedrock's Titan Text Embeddings V2 (in AWS_REGION;
// KNOWLEDGE_EMBEDDING_MODEL overrides the model), or the OpenAI-compatible
// endpoint KNOWLEDGE_EMBEDDING_URL. It fails when Bedrock's configuration
// cannot be loaded or the endpoint lacks its model.
func Embedder(ctx context.Context, cfg config.Config) (knowledge.Embedder, error) {
	switch cfg.KnowledgeEmbedder {
	case "bedrock":
		return bedrockembed.New(ctx, bedrockembed.Options{Region: cfg.Region, Model: cfg.KnowledgeEmbeddingModel, Endpoint: cfg.BedrockEndpoint})
	case "openai":
		e, err := openaiembed.New(openaiembed.Options{BaseURL: cfg.KnowledgeEmbeddingURL, Model: cfg.KnowledgeEmbeddingModel, Key: cfg.KnowledgeEmbeddingKey})
		if err != nil {
			return nil, fmt.Errorf("KNOWLEDGE_EMBEDDING_MODEL: required with KNOWLEDGE_EMBEDDER=openai: %w", err)
		}
		return e, nil
	}
	return knowledge.Lexical{}, nil
}

// NewLazy returns the process's knowledge service (Service) built at its
// first use (knowledgeuse.Lazy), for the chat functions and the runner
// (knowledge_search in steps): their cold start
// builds no embedder or vector client. blobs, when not nil, is the
// function's blob store, shared instead of opened again.
func NewLazy(ctx context.Context, cfg config.Config, d assembly.Deps, blobs blob.Store) knowledgeuse.Lazy {
	if blobs != nil {
		d.Blobs = blobs
	}
	ctx = context.WithoutCancel(ctx)
	return knowledgeuse.NewLazy(func() (*knowledge.Service, error) { return Service(ctx, cfg, d) })
}
