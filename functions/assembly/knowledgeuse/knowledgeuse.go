// Package knowledgeuse is the knowledge bases as the functions that only
// read them use them: the chat service's retrieval (chat.Knowledge) and
// knowledge_search served in process behind the tool gate
// (toolgate.Local), over a knowledge service built at its first use. It
// links no vector index or embedding client: the function's builder
// gives the service (knowledgefn's, with the configured embedder and
// vector index, for the chat functions and the runner). Service is the
// one construction of the knowledge service.
package knowledgeuse

import (
	"context"
	"sync"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolgate"
)

// Lazy is a knowledge service built at its first use. A service that
// cannot be built (a configuration KnowledgeFunction refuses to start
// with) fails each use, Unavailable KNOWLEDGE_UNAVAILABLE.
type Lazy struct {
	get func() (*knowledge.Service, error)
}

var (
	_ chat.Knowledge = Lazy{}
	_ toolgate.Local = Lazy{}
)

// NewLazy returns the Lazy service build builds (once).
func NewLazy(build func() (*knowledge.Service, error)) Lazy {
	return Lazy{get: sync.OnceValues(func() (*knowledge.Service, error) {
		s, err := build()
		if err != nil {
			return nil, errs.E("knowledgeuse.Lazy", errs.Unavailable, "KNOWLEDGE_UNAVAILABLE", "knowledge bases are unavailable").WithCause(err)
		}
		return s, nil
	})}
}

// CheckKnowledgeBase returns nil when id is userID's knowledge base:
// NotFound KNOWLEDGE_BASE_NOT_FOUND otherwise.
func (l Lazy) CheckKnowledgeBase(ctx context.Context, userID, id string) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	_, err = s.Get(ctx, userID, id)
	return err
}

// Search queries userID's knowledge base kbID with query cut to the
// longest query allowed; a query without a word finds nothing.
func (l Lazy) Search(ctx context.Context, userID, kbID, query string, topK int) ([]chat.Passage, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	if r := []rune(query); len(r) > knowledge.MaxQueryChars {
		query = string(r[:knowledge.MaxQueryChars])
	}
	if len(knowledge.Terms(query)) == 0 {
		return nil, nil
	}
	topK = min(max(topK, 1), knowledge.MaxTopK)
	rs, err := s.Query(ctx, userID, kbID, knowledge.QueryRequest{Query: query, TopK: &topK})
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

// Run is knowledge_search for userID (knowledge.Tool).
func (l Lazy) Run(ctx context.Context, userID string, input map[string]any) (map[string]any, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return knowledge.Tool{S: s}.Run(ctx, userID, input)
}

// Service builds a knowledge service, the one construction of it, with
// every option: the Data table's knowledge bases, the attachments, the
// blob store's segments (blobs), the lease of indexing jobs
// (GENERATION_LEASE), the per-user cap (KNOWLEDGE_BASES_PER_USER), the
// clock and the logger, over the embedder, vector index and dispatcher
// the function gives (knowledgecore.Service's), and the PDF reader pdf
// (knowledgecore.PDF: worker processes).
func Service(cfg config.Config, d assembly.Deps, blobs blob.Store, emb knowledge.Embedder, vectors knowledge.VectorIndex, dispatch knowledge.Dispatcher, pdf knowledge.PDFExtractor) *knowledge.Service {
	return knowledge.NewService(knowledge.Options{Store: store.NewKnowledge(d.DB, cfg.DataTable), Files: blobstore.Attachments(cfg, d, blobs),
		Blobs: blobs, Embedder: emb, Vectors: vectors, Dispatch: dispatch, PDF: pdf, Lease: cfg.GenerationLease,
		MaxKnowledgeBases: cfg.KnowledgeBasesPerUser, Now: d.Now, Logger: d.Logger})
}
