// Command knowledgeindex is KnowledgeIndexFunction: invoked
// asynchronously (InvocationType Event) by KnowledgeFunction and the
// sweeper with an indexing job's reference, it runs one attempt of that
// job: the document's text extracted, chunked, embedded (Bedrock's Titan
// Text Embeddings V2), its vectors written to S3 Vectors and its
// segment to the blob store, the outcome recorded. The dev server runs
// the same service's worker in process.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/knowledgeindexfn"
	"github.com/workflowchat/service/shared/knowledge"
)

func main() {
	// A PDF worker of this binary's knowledge service (knowledgecore.PDF).
	if knowledge.IsPDFWorker() {
		knowledge.ServePDFWorker() // never returns
	}
	assembly.Main(newHandler, func(h func(context.Context, knowledge.Ref) error) { lambda.Start(h) })
}

// newHandler builds the function from its builder, knowledgeindexfn.Lambda.
func newHandler(ctx context.Context, getenv func(string) string) (func(context.Context, knowledge.Ref) error, error) {
	return knowledgeindexfn.Lambda(ctx, getenv)
}
