package tools

import (
	"context"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// KnowledgeSearchID is the id of the search of one of the caller's
// knowledge bases. It is in the catalog so that models are offered it
// and workflow definitions validate its inputs, but the service carries
// it out (a chat's reply, a workflow step, an agent step's call), over
// the caller's knowledge bases, which the tool server cannot read:
// running it on the tool server fails with INVALID_PARAMS.
const KnowledgeSearchID = "knowledge_search"

func knowledgeSearchTool() *Tool {
	return &Tool{
		ID:       KnowledgeSearchID,
		Name:     "Knowledge search",
		Category: CategoryData,
		Description: "Search one of the user's knowledge bases (documents the user added: text, Markdown, CSV, JSON, PDF text) for the passages " +
			"best for a query: a hybrid of vector similarity and BM25, fused by rank. Returns the best chunks first, each with its document, " +
			`text, score and byte offsets in the document's text. Example: {"knowledgeBaseId": "0190a6c4-...", "query": "vacation days", "topK": 3}.`,
		InputSchema: []byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{` +
			`"knowledgeBaseId":{"type":"string","format":"uuid","description":"the id of one of the user's knowledge bases"},` +
			`"query":{"type":"string","minLength":1,"maxLength":10000,"description":"what to look for"},` +
			`"topK":{"type":"integer","minimum":1,"maximum":50,"default":8,"description":"how many passages to return"}},` +
			`"required":["knowledgeBaseId","query"],"additionalProperties":false}`),
		OutputSchema: []byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{` +
			`"results":{"type":"array","description":"the passages, best first: each chunk's document, text, score and byte offsets (start, end) in the document's text","items":{"type":"object","properties":{` +
			`"documentId":{"type":"string"},"documentName":{"type":"string"},"chunkId":{"type":"string"},"text":{"type":"string"},` +
			`"score":{"type":"number"},"start":{"type":"integer"},"end":{"type":"integer"}},` +
			`"required":["documentId","documentName","chunkId","text","score","start","end"]}}},"required":["results"]}`),
		Annotations: Annotations{ReadOnly: true, Idempotent: true},
		Timeout:     time.Second,
		Run:         runKnowledgeSearch,
	}
}

const errKnowledgeInService = KnowledgeSearchID + " runs in the service (a chat's reply or a workflow step), over the caller's knowledge bases"

func runKnowledgeSearch(context.Context, map[string]any) (map[string]any, error) {
	return nil, &errs.Error{Kind: errs.Invalid, Code: CodeInvalidParams, Message: errKnowledgeInService,
		Details: []errs.FieldError{{Field: "toolId", Message: errKnowledgeInService}}}
}
