// Package knowledgefn builds KnowledgeFunction: the knowledge bases
// (/api/knowledge-bases, their documents and queries) over the process's
// knowledge service (knowledgecore) with the configured embedder.
package knowledgefn

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/knowledgecore"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/bedrockembed"
	"github.com/workflowchat/service/shared/knowledge/openaiembed"
	"github.com/workflowchat/service/shared/model"
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

// ForChat is the chat service's view of the knowledge bases
// (chat.Knowledge): a chat's knowledgeBaseIds are checked with Get, and
// its replies retrieve with Query.
type ForChat struct{ S *knowledge.Service }

var _ chat.Knowledge = ForChat{}

// CheckKnowledgeBase returns nil when id is userID's knowledge base:
// NotFound KNOWLEDGE_BASE_NOT_FOUND otherwise.
func (k ForChat) CheckKnowledgeBase(ctx context.Context, userID, id string) error {
	_, err := k.S.Get(ctx, userID, id)
	return err
}

// Search queries userID's knowledge base kbID with query cut to the
// longest query allowed; a query without a word finds nothing.
func (k ForChat) Search(ctx context.Context, userID, kbID, query string, topK int) ([]chat.Passage, error) {
	if r := []rune(query); len(r) > knowledge.MaxQueryChars {
		query = string(r[:knowledge.MaxQueryChars])
	}
	if len(knowledge.Terms(query)) == 0 {
		return nil, nil
	}
	topK = min(max(topK, 1), knowledge.MaxTopK)
	rs, err := k.S.Query(ctx, userID, kbID, knowledge.QueryRequest{Query: query, TopK: &topK})
	if err != nil {
		return nil, err
	}
	out := make([]chat.Passage, len(rs))
	for i, r := range rs {
		out[i] = chat.Passage{KnowledgeBaseID: kbID, DocumentID: r.DocumentID, DocumentName: r.DocumentName, ChunkID: r.ChunkID,
			Text: r.Text, Start: r.Start, End: r.End, Score: r.Score}
	}
	return out, nil
}

// ChatTools returns the tools offered to chat models: tools' (the tool
// server's catalog) and knowledge_search, which the chat's tool gate
// serves in process (toolgate.Gate.WithLocal).
func ChatTools(tools chat.Tools) chat.Tools { return withSearch{tools} }

type withSearch struct{ chat.Tools }

// Specs returns the catalog's specs with knowledge_search's after them;
// the catalog's error (the reply goes on without tools) as it is.
func (w withSearch) Specs(ctx context.Context) ([]model.ToolSpec, error) {
	specs, err := w.Tools.Specs(ctx)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(specs, func(s model.ToolSpec) bool { return s.Name == knowledge.ToolID }) {
		return specs, nil
	}
	return append(slices.Clip(specs), model.ToolSpec{Name: knowledge.ToolID, Description: knowledge.ToolDescription,
		InputSchema: json.RawMessage(knowledge.ToolInputSchema)}), nil
}
