package agentstep_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/agent"
	"github.com/workflowchat/service/shared/agentstep"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/toolpolicy"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/usage"
)

const key = "agentstep-test-service-key-0123456789"

var now = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

// rogue is a model that calls a tool it was not offered, then answers.
type rogue struct{}

func (rogue) Models() []model.Model {
	return []model.Model{{ID: "rogue", Name: "rogue", Provider: "test"}}
}

func (rogue) Generate(_ context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	if req.Messages[len(req.Messages)-1].Role == model.RoleTool {
		return model.Result{Usage: model.Usage{InputTokens: 1, OutputTokens: 1}}, emit(model.Chunk{Delta: "done"})
	}
	return model.Result{ToolCalls: []model.ToolCall{{ID: "c1", Name: "hash", Args: json.RawMessage(`{"text":"x","algorithm":"md5"}`)}},
		Usage: model.Usage{InputTokens: 1, OutputTokens: 1}}, nil
}

// env is the runner over the real tool server (the built-in tools),
// the tool gate and policies on real storage, and the built-in model.
type env struct {
	db       *storetest.DB
	usage    *store.Usage
	policies *store.ToolPolicies
	steps    *agentstep.Steps // no budget
	budgeted *agentstep.Steps // 10000 tokens a month
	seq      atomic.Int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	models, err := model.NewRegistry(model.Builtin{}, rogue{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	db := storetest.New(t)
	e := &env{db: db, usage: store.NewUsage(db.DB, db.Users()), policies: store.NewToolPolicies(db.DB, db.Users())}
	catalog := toolclient.NewCatalog(toolclient.NewClient(srv.URL, key, nil), time.Minute, nil)
	policies := toolpolicy.NewService(e.policies, catalog)
	clock := func() time.Time { return now }
	build := func(budget int64) *agentstep.Steps {
		meter := usage.NewMeter(e.usage, budget, nil, clock)
		gate := toolgate.New(toolgate.Options{Tools: catalog, Policies: policies, Meter: meter})
		return agentstep.New(agentstep.Options{Next: gate.Steps(), Gate: gate, Tools: catalog, Models: models, Meter: meter})
	}
	e.steps, e.budgeted = build(0), build(10000)
	return e
}

// user returns the context of a new user.
func (e *env) user() (context.Context, string) {
	id := fmt.Sprintf("user-%d", e.seq.Add(1))
	return auth.WithSession(context.Background(), auth.Session{User: auth.User{ID: id}}), id
}

func step(instructions string, toolIDs []string, extra map[string]any) map[string]any {
	ids := make([]any, len(toolIDs))
	for i, id := range toolIDs {
		ids[i] = id
	}
	in := map[string]any{"instructions": instructions, "toolIds": ids}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

func TestAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type call struct{ tool, output, err string }
	tests := []struct {
		name     string
		in       map[string]any
		policy   map[string]string // tool -> the user's policy
		turns    int
		calls    []call
		textPart string
	}{
		{"answers without tools", step("Say hello.", nil, nil), nil, 1, nil, `You said: "Say hello.`},
		{"one call", step(`run json_query with {"query": ".a", "input": {"a": 7}}`, []string{"json_query"}, nil), nil,
			2, []call{{tool: "json_query", output: `{"result":7}`}}, `The json_query tool returned: {"result":7}`},
		{"two calls in two turns", step(`run json_query with {"query": ".a", "input": {"a": 7}} then hash with {"text": "abc", "algorithm": "md5"}`, []string{"json_query", "hash"}, nil), nil,
			3, []call{{tool: "json_query", output: `{"result":7}`}, {tool: "hash", output: `{"digest":"900150983cd24fb0d6963f7d28e17f72"}`}}, "The hash tool returned"},
		{"maxTurns stops the loop: the last turn has no tools", step(`run json_query with {"query": ".a", "input": {"a": 7}} then hash with {"text": "abc", "algorithm": "md5"}`, []string{"json_query", "hash"}, map[string]any{"maxTurns": 2.0}), nil,
			2, []call{{tool: "json_query", output: `{"result":7}`}}, "The json_query tool returned"},
		{"maxTurns 1 offers no tools", step(`run json_query with {"query": ".a", "input": {"a": 7}}`, []string{"json_query"}, map[string]any{"maxTurns": 1.0}), nil,
			1, nil, "You said"},
		{"a tool not given is not offered", step(`run hash with {"text": "abc", "algorithm": "md5"}`, []string{"json_query"}, nil), nil,
			1, nil, "You said"},
		{"a tool error is the call's, the step goes on", step(`run json_query with {"query": ".["}`, []string{"json_query"}, nil), nil,
			2, []call{{tool: "json_query", err: "INVALID_PARAMS"}}, "The json_query tool returned"},
		{"a denied tool is refused", step(`run json_query with {"query": "."}`, []string{"json_query"}, nil), map[string]string{"json_query": toolpolicy.Deny},
			2, []call{{tool: "json_query", err: "TOOL_DENIED"}}, "TOOL_DENIED"},
		{"a tool that asks is refused: no one is there", step(`run json_query with {"query": "."}`, []string{"json_query"}, nil), map[string]string{"json_query": toolpolicy.Ask},
			2, []call{{tool: "json_query", err: "TOOL_APPROVAL_REQUIRED"}}, "TOOL_APPROVAL_REQUIRED"},
		{"the input reaches the model", step("Summarize.", nil, map[string]any{"input": map[string]any{"k": "v"}}), nil, 1, nil, `{\"k\":\"v\"}`},
		{"a model calling a tool it was not given gets an error", step("anything", []string{"json_query"}, map[string]any{"modelId": "rogue"}), nil,
			2, []call{{tool: "hash", err: "TOOL_NOT_GIVEN"}}, "done"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, userID := e.user()
			for tool, p := range tc.policy {
				if err := e.policies.SetToolPolicy(ctx, userID, tool, p); err != nil {
					t.Fatal(err)
				}
			}
			out, err := e.steps.Run(ctx, agent.ID, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(out)
			var got agent.Output
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.Turns != tc.turns || len(got.ToolCalls) != len(tc.calls) || !strings.Contains(got.Text, tc.textPart) {
				t.Fatalf("output %s, want %d turns, %d calls, text with %q", b, tc.turns, len(tc.calls), tc.textPart)
			}
			for i, w := range tc.calls {
				c := got.ToolCalls[i]
				o, _ := json.Marshal(c.Output)
				if c.ToolID != w.tool || (w.output != "" && string(o) != w.output) || !strings.HasPrefix(c.Error, w.err) || (w.err == "") != (c.Error == "") || c.Input == nil {
					t.Errorf("call %d = %+v (output %s), want %+v", i, c, o, w)
				}
			}
		})
	}
}

func TestAgentBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name  string
		in    map[string]any
		code  string
		field string
	}{
		{"maxTurns 0", step("x", nil, map[string]any{"maxTurns": 0.0}), "INVALID_PARAMS", "maxTurns"},
		{"maxTurns 21", step("x", nil, map[string]any{"maxTurns": 21.0}), "INVALID_PARAMS", "maxTurns"},
		{"maxTurns 2.5", step("x", nil, map[string]any{"maxTurns": 2.5}), "INVALID_PARAMS", "maxTurns"},
		{"no instructions", map[string]any{"toolIds": []any{}}, "INVALID_PARAMS", "instructions"},
		{"blank instructions", step("  ", nil, nil), "INVALID_PARAMS", "instructions"},
		{"instructions over the limit", step(strings.Repeat("x", agent.MaxInstructionsLen+1), nil, nil), "INVALID_PARAMS", "instructions"},
		{"no toolIds", map[string]any{"instructions": "x"}, "INVALID_PARAMS", "toolIds"},
		{"too many tools", step("x", strings.Split(strings.Repeat("t,", agent.MaxTools+1)[:2*(agent.MaxTools+1)-1], ","), nil), "INVALID_PARAMS", "toolIds"},
		{"a repeated tool", step("x", []string{"hash", "hash"}, nil), "INVALID_PARAMS", "toolIds[1]"},
		{"agent itself", step("x", []string{"agent"}, nil), "INVALID_PARAMS", "toolIds[0]"},
		{"ask_human", step("x", []string{"ask_human"}, nil), "INVALID_PARAMS", "toolIds[0]"},
		{"another field", step("x", nil, map[string]any{"temperature": 1.0}), "INVALID_PARAMS", "temperature"},
		{"unknown tool", step("x", []string{"no_such_tool"}, nil), agentstep.CodeToolNotFound, "toolIds"},
		{"unknown model", step("x", nil, map[string]any{"modelId": "no-such-model"}), "INVALID_MODEL", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, _ := e.user()
			_, err := e.steps.Run(ctx, agent.ID, tc.in)
			var ee *errs.Error
			if !errors.As(err, &ee) || ee.Code != tc.code || ee.Kind != errs.Invalid || !strings.HasPrefix(ee.Message, tc.code+": ") {
				t.Fatalf("err = %v, want Invalid %s with a message starting with it", err, tc.code)
			}
			if tc.field != "" && (len(ee.Details) == 0 || ee.Details[0].Field != tc.field) {
				t.Errorf("details %v, want field %s", ee.Details, tc.field)
			}
		})
	}
}

// TestAgentBudget: every model turn is metered against the user's budget;
// a step with no room left fails BUDGET_EXCEEDED and holds nothing.
func TestAgentBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, userID := e.user()
	in := step(`run json_query with {"query": ".a", "input": {"a": 7}}`, []string{"json_query"}, nil)
	if _, err := e.budgeted.Run(ctx, agent.ID, in); err != nil {
		t.Fatal(err)
	}
	c, err := e.usage.MonthUsage(ctx, userID, usage.Month(now))
	if err != nil || c[model.BuiltinID].Requests != 2 || c[model.BuiltinID].Tokens() == 0 {
		t.Fatalf("usage after a two-turn step: %+v, %v; want 2 requests of the built-in model", c, err)
	}
	if err := e.usage.Settle(ctx, userID, usage.Month(now), "earlier", 10000, usage.Counts{Requests: 1, InputTokens: 10000}); err != nil {
		t.Fatal(err)
	}
	_, err = e.budgeted.Run(ctx, agent.ID, in)
	if errs.CodeOf(err) != usage.CodeBudgetExceeded || errs.KindOf(err) != errs.RateLimited || !strings.HasPrefix(errs.MessageOf(err, ""), usage.CodeBudgetExceeded+": ") {
		t.Fatalf("over budget: %v, want RateLimited BUDGET_EXCEEDED", err)
	}
}

// TestOtherStepsGoOn: a step of another tool runs through the gate.
func TestOtherStepsGoOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, _ := e.user()
	out, err := e.steps.Run(ctx, "json_query", map[string]any{"query": ".a", "input": map[string]any{"a": 1}})
	if err != nil || fmt.Sprint(out["result"]) != "1" {
		t.Fatalf("json_query step: %v, %v", out, err)
	}
}
