package chat_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/usertools"
)

// TestMessageToolIDs: a message's toolIds are at most usertools.MaxOnly
// remote tool ids, none repeated, never with a workflowId; each bad one
// is named (400 VALIDATION_FAILED), for the stream as for a message.
func TestMessageToolIDs(t *testing.T) {
	t.Parallel()
	idsOf := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("mcp/files/t%d", i)
		}
		return out
	}
	wf := "0b0f7d5e-8f0a-4c39-9d44-3e6f2d1c7a10"
	user := "u1"
	for _, c := range []struct {
		name  string
		ids   []string
		wf    *string
		field string
	}{
		{name: "absent"},
		{name: "empty", ids: []string{}},
		{name: "at the limit", ids: idsOf(usertools.MaxOnly)},
		{name: "one over", ids: idsOf(usertools.MaxOnly + 1), field: "toolIds"},
		{name: "far over", ids: idsOf(100 * usertools.MaxOnly), field: "toolIds"},
		{name: "built-in id", ids: []string{"mcp/files/a", "json_query"}, field: "toolIds[1]"},
		{name: "repeat", ids: []string{"mcp/files/a", "mcp/files/a"}, field: "toolIds[1]"},
		{name: "with a workflow", ids: []string{"mcp/files/a"}, wf: &wf, field: "toolIds"},
	} {
		for _, stream := range []bool{false, true} {
			req := chat.MessageRequest{Content: "hi", ModelID: "m", UserID: &user, WorkflowID: c.wf, ToolIDs: c.ids}
			var err error
			if stream {
				err = chat.StreamRequest{MessageRequest: req}.Validate()
			} else {
				err = req.Validate()
			}
			if c.field == "" {
				if err != nil {
					t.Errorf("%s (stream %v): %v", c.name, stream, err)
				}
				continue
			}
			var e *errs.Error
			if !errs.Is(err, errs.Invalid) || !errors.As(err, &e) || len(e.Details) == 0 || e.Details[0].Field != c.field {
				t.Errorf("%s (stream %v): %v; want Invalid naming %s", c.name, stream, err, c.field)
			} else if strings.Contains(e.Details[0].Message, "mcp/files/t") && c.field == "toolIds" {
				t.Errorf("%s: the message lists the ids: %s", c.name, e.Details[0].Message)
			}
		}
	}
}
