// Package knowledgeindexfn builds KnowledgeIndexFunction: the worker of
// knowledge base indexing jobs in AWS. KnowledgeFunction (a document
// added) and the sweeper (a job whose lease ended, as a new attempt)
// invoke it asynchronously with the job's knowledge.Ref; it runs that
// attempt (knowledge.Service.Index: extract, chunk, embed, write the
// vectors and the segment, record the outcome) over the process's one
// knowledge service with the configured embedder (knowledgefn.Service).
// It serves no route; the dev server runs the same service's worker in
// process.
package knowledgeindexfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/knowledgefn"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/knowledge"
)

// LogicalID is the function's resource name in template.yaml.
const LogicalID = "KnowledgeIndexFunction"

// Required are the variables the bootstrap refuses to start without.
var Required = []string{"DATA_TABLE", "BLOB_BUCKET"}

// Handler runs one attempt of an indexing job.
type Handler func(ctx context.Context, ref knowledge.Ref) error

// Indexer builds the handler over the knowledge service of the
// configuration (knowledgefn.Service: the embedder KNOWLEDGE_EMBEDDER
// names, the vector index of KNOWLEDGE_VECTOR_BUCKET and
// KNOWLEDGE_VECTOR_INDEX). A reference that is not the job's current
// attempt, or whose document is gone or no longer indexing, is a no-op;
// the handler fails only when the outcome could not be recorded (the
// sweeper then starts the job again when its lease ends). It fails when
// the embedder, the blob store or the vector index cannot be built.
func Indexer(ctx context.Context, cfg config.Config, d assembly.Deps) (Handler, error) {
	s, err := knowledgefn.Service(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ref knowledge.Ref) error {
		if ref.KnowledgeBaseID == "" || ref.DocumentID == "" || ref.Attempt < 1 {
			// Not a job's reference (nothing to index): an event sent
			// by hand, or malformed.
			d.Logger.WarnContext(ctx, "knowledge index: not a job reference", "knowledgeBaseId", ref.KnowledgeBaseID, "documentId", ref.DocumentID)
			return nil
		}
		return s.Index(ctx, ref)
	}, nil
}

// Lambda builds the handler of the Lambda bootstrap: the configuration
// from getenv (its errors name the variables at fault), Deps, Indexer;
// each invocation's spans are exported before it returns.
func Lambda(ctx context.Context, getenv func(string) string) (func(context.Context, knowledge.Ref) error, error) {
	cfg, d, err := assembly.Load(ctx, getenv, Required...)
	if err != nil {
		return nil, err
	}
	h, err := Indexer(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return assembly.Flushing(func(ctx context.Context, ref knowledge.Ref) error { return h(ctx, ref) }), nil
}
