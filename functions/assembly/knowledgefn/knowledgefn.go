// Package knowledgefn builds KnowledgeFunction: the knowledge bases
// (/api/knowledge-bases, their documents and queries), and the one
// knowledge.Service of a process, which the sweeper also uses to resume
// an interrupted indexing.
package knowledgefn

import (
	"context"
	"fmt"
	"sync"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/bedrockembed"
	"github.com/workflowchat/service/shared/knowledge/openaiembed"
	"github.com/workflowchat/service/shared/knowledge/s3vectorindex"
	"github.com/workflowchat/service/shared/store"
)

// Knowledge is KnowledgeFunction.
var Knowledge = assembly.Function{
	LogicalID: "KnowledgeFunction",
	Required:  []string{"SESSIONS_TABLE", "DATA_TABLE", "BLOB_BUCKET"},
	Build:     build,
}

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	s, err := Service(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return knowledge.Routes(s, d.Auth(cfg)), nil
}

// services holds one Service per DynamoDB client: a process (the dev
// server mounts every function over one client) has one embedded vector
// index and one worker of indexing jobs, shared by the routes and the
// sweeper's handler.
var services sync.Map // *dynamo.DB -> *knowledge.Service

// Service returns the process's knowledge service of the configuration:
// the Data table's knowledge bases, the attachments, the blob store's
// segments, the configured embedder and vector index. It fails when the
// blob store, the embedder or the vector index cannot be built.
func Service(ctx context.Context, cfg config.Config, d assembly.Deps) (*knowledge.Service, error) {
	if s, ok := services.Load(d.DB); ok {
		return s.(*knowledge.Service), nil
	}
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	emb, err := Embedder(ctx, cfg)
	if err != nil {
		return nil, err
	}
	vectors, err := Vectors(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := knowledge.NewService(knowledge.Options{Store: store.NewKnowledge(d.DB, cfg.DataTable), Files: blobstore.Attachments(cfg, d, blobs),
		Blobs: blobs, Embedder: emb, Vectors: vectors, Lease: cfg.GenerationLease, MaxKnowledgeBases: cfg.KnowledgeBasesPerUser,
		Now: d.Now, Logger: d.Logger})
	actual, _ := services.LoadOrStore(d.DB, s)
	return actual.(*knowledge.Service), nil
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

// Vectors returns the vector index: S3 Vectors when
// KNOWLEDGE_VECTOR_BUCKET is set (AWS), else the embedded one beside
// DATA_FILE (DATA_FILE.vectors; memory without DATA_FILE).
func Vectors(ctx context.Context, cfg config.Config) (knowledge.VectorIndex, error) {
	if cfg.KnowledgeVectorBucket != "" {
		return s3vectorindex.New(ctx, s3vectorindex.Options{Bucket: cfg.KnowledgeVectorBucket, Index: cfg.KnowledgeVectorIndex, Region: cfg.Region})
	}
	dir := ""
	if cfg.DataFile != "" {
		dir = cfg.DataFile + ".vectors"
	}
	return knowledge.NewEmbedded(dir, knowledge.Dimensions)
}
