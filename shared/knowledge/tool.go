package knowledge

import (
	"context"
	"encoding/json"
	"math"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// ToolID is the built-in tool that searches one of the caller's
// knowledge bases: {knowledgeBaseId, query, topK?} -> {results}, the
// results of Query. The tool catalog declares it (shared/tools); the
// service runs it in process (Tool) behind the tool gate.
const ToolID = "knowledge_search"

// Tool is ToolID over a Service, served in process for the user a call
// is made for.
type Tool struct{ S *Service }

// Run searches userID's knowledge base input.knowledgeBaseId for
// input.query (topK results, default DefaultTopK) and returns {results:
// [...]} as Query answers them. Errors: Invalid INVALID_PARAMS naming the
// field at fault, Query's (NotFound KNOWLEDGE_BASE_NOT_FOUND for another
// user's knowledge base too, Invalid QUERY_TOO_LONG).
func (t Tool) Run(ctx context.Context, userID string, input map[string]any) (map[string]any, error) {
	const op = "knowledge.Tool"
	bad := func(msg string) error { return errs.E(op, errs.Invalid, "INVALID_PARAMS", msg) }
	id, _ := input["knowledgeBaseId"].(string)
	if !httpapi.IsUUID(id) {
		return nil, bad("knowledgeBaseId must be the id (a UUID) of one of your knowledge bases")
	}
	q, ok := input["query"].(string)
	if !ok {
		return nil, bad("query must be a string")
	}
	req := QueryRequest{Query: q}
	if v, ok := input["topK"]; ok && v != nil {
		f, isNum := v.(float64)
		if n, isInt := v.(int); isInt {
			f, isNum = float64(n), true
		}
		if !isNum || f != math.Trunc(f) || f < 1 || f > MaxTopK {
			return nil, bad("topK must be an integer from 1 to 50")
		}
		k := int(f)
		req.TopK = &k
	}
	rs, err := t.S.Query(ctx, userID, id, req)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	b, err := json.Marshal(map[string]any{"results": rs})
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, errs.Wrap(op, err)
	}
	return out, nil
}
