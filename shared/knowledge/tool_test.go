package knowledge_test

import (
	"context"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/tools"
)

// TestToolRefusesBadInput: knowledge_search's input is checked before
// any read (a bad id, a missing query, topK outside 1-50 or not an
// integer: INVALID_PARAMS), and the tool the service runs is the one
// the catalog declares.
func TestToolRefusesBadInput(t *testing.T) {
	t.Parallel()
	if knowledge.ToolID != tools.KnowledgeSearchID {
		t.Fatalf("the service runs %q, the catalog declares %q", knowledge.ToolID, tools.KnowledgeSearchID)
	}
	const id = "0190a6c4-0000-7000-8000-000000000000"
	for name, in := range map[string]map[string]any{
		"no id":          {"query": "x"},
		"bad id":         {"knowledgeBaseId": "kb-1", "query": "x"},
		"no query":       {"knowledgeBaseId": id},
		"query a number": {"knowledgeBaseId": id, "query": 3.0},
		"topK 0":         {"knowledgeBaseId": id, "query": "x", "topK": 0.0},
		"topK 51":        {"knowledgeBaseId": id, "query": "x", "topK": 51.0},
		"topK 1.5":       {"knowledgeBaseId": id, "query": "x", "topK": 1.5},
		"topK a string":  {"knowledgeBaseId": id, "query": "x", "topK": "2"},
	} {
		// A nil service: nothing is read before the input is checked.
		_, err := knowledge.Tool{}.Run(context.Background(), "user-1", in)
		if errs.CodeOf(err) != "INVALID_PARAMS" || !errs.Is(err, errs.Invalid) {
			t.Errorf("%s: %v, want Invalid INVALID_PARAMS", name, err)
		}
	}
}
