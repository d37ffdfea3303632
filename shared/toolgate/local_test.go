package toolgate_test

import (
	"context"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/toolpolicy"
)

// echo is a tool served in process: it returns the user it ran for and
// its input, or fails when the input asks it to.
type echo struct{ calls int }

func (e *echo) Run(_ context.Context, userID string, input map[string]any) (map[string]any, error) {
	e.calls++
	if input["fail"] == true {
		return nil, errs.E("echo", errs.Invalid, "INVALID_PARAMS", "asked to fail")
	}
	return map[string]any{"user": userID, "input": input}, nil
}

// TestWithLocal: a tool served in process runs for the call's user
// without the tool server, announced first, its error the call's tool
// error; the user's policies decide it as any tool's (deny refuses, ask
// asks in a chat, a step is refused only by the user's own deny); the
// gate it came from does not serve it; no budget is reserved (a budgeted
// gate runs it for a user with no budget left).
func TestWithLocal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tool := &echo{}
	gate := e.budgeted.WithLocal("kb_echo", tool)

	spent := e.user(t, "kb_echo", "", budget)
	announced := 0
	out, err := gate.Run(ctx, toolgate.Call{Origin: toolgate.Chat, UserID: spent, ToolID: "kb_echo", Input: map[string]any{"q": "x"},
		Announce: func() error { announced++; return nil }})
	if err != nil || out.Kind != toolgate.Run || out.ToolError != nil || out.Output["user"] != spent || announced != 1 || tool.calls != 1 {
		t.Fatalf("allowed call: %+v, %v; announced %d, calls %d", out, err, announced, tool.calls)
	}
	out, err = gate.Run(ctx, toolgate.Call{Origin: toolgate.Workflow, UserID: spent, ToolID: "kb_echo", Input: map[string]any{"fail": true}})
	if err != nil || out.Kind != toolgate.Run || errs.CodeOf(out.ToolError) != "INVALID_PARAMS" {
		t.Fatalf("failing call: %+v, %v", out, err)
	}

	denier := e.user(t, "kb_echo", toolpolicy.Deny, 0)
	for _, origin := range []toolgate.Origin{toolgate.Chat, toolgate.Workflow, toolgate.Agent} {
		out, err := gate.Run(ctx, toolgate.Call{Origin: origin, UserID: denier, ToolID: "kb_echo"})
		if err != nil || out.Kind != toolgate.Refuse || out.Code != toolgate.CodeToolDenied {
			t.Fatalf("origin %d, policy deny: %+v, %v", origin, out, err)
		}
	}
	asker := e.user(t, "kb_echo", toolpolicy.Ask, 0)
	if out, err := gate.Run(ctx, toolgate.Call{Origin: toolgate.Chat, UserID: asker, ToolID: "kb_echo"}); err != nil || out.Kind != toolgate.Ask {
		t.Fatalf("chat, policy ask: %+v, %v", out, err)
	}
	if out, err := gate.Run(ctx, toolgate.Call{Origin: toolgate.Workflow, UserID: asker, ToolID: "kb_echo"}); err != nil || out.Kind != toolgate.Run {
		t.Fatalf("step, policy ask: %+v, %v", out, err)
	}
	calls := tool.calls
	if out, err := e.budgeted.Run(ctx, toolgate.Call{Origin: toolgate.Workflow, UserID: asker, ToolID: "kb_echo"}); err != nil || out.Kind != toolgate.Run || out.ToolError == nil || tool.calls != calls {
		t.Fatalf("the gate without the local tool: %+v, %v (calls %d -> %d)", out, err, calls, tool.calls)
	}
}
