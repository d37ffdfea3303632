package toolgate_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

const key = "toolgate-test-service-key-0123456789"

// budget is the monthly budget of the budgeted gates.
const budget = 500

var now = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

// env is a gate over the real tool server (the built-in tools,
// llm_generate on the built-in model) and real storage on the embedded
// engine.
type env struct {
	db       *storetest.DB
	usage    *store.Usage
	policies *toolpolicy.Service
	catalog  *toolclient.Catalog
	// gates by budget: none, and budget tokens a month.
	unbudgeted, budgeted *toolgate.Gate
	seq                  atomic.Int64
}

func newEnv(t testing.TB) *env {
	t.Helper()
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{Generator: toolserver.Models(models), DefaultModelID: model.BuiltinID})...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	db := storetest.New(t)
	e := &env{db: db, usage: store.NewUsage(db.DB, db.Users())}
	e.catalog = toolclient.NewCatalog(toolclient.NewClient(srv.URL, key, nil), time.Minute, nil)
	e.policies = toolpolicy.NewService(store.NewToolPolicies(db.DB, db.Users()), e.catalog)
	clock := func() time.Time { return now }
	e.unbudgeted = toolgate.New(toolgate.Options{Tools: e.catalog, Policies: e.policies, Meter: usage.NewMeter(e.usage, 0, nil, clock)})
	e.budgeted = toolgate.New(toolgate.Options{Tools: e.catalog, Policies: e.policies, Meter: usage.NewMeter(e.usage, budget, nil, clock)})
	return e
}

// user returns a new user whose policy of tool is policy ("" keeps the
// default) and who has spent spent tokens this month.
func (e *env) user(t testing.TB, tool, policy string, spent int64) string {
	t.Helper()
	id := fmt.Sprintf("user-%d", e.seq.Add(1))
	ctx := context.Background()
	if policy != "" {
		if err := store.NewToolPolicies(e.db.DB, e.db.Users()).SetToolPolicy(ctx, id, tool, policy); err != nil {
			t.Fatal(err)
		}
	}
	if spent > 0 {
		if err := e.usage.Settle(ctx, id, usage.Month(now), "earlier", spent, usage.Counts{Requests: 1, InputTokens: spent}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// Budget states of a case.
const (
	noBudget = "no budget"
	room     = "budget with room"
	spent    = "budget spent"
)

// expect is the outcome the gate must give: Run, Refuse with a code, Ask.
type expect struct {
	kind toolgate.Kind
	code string
}

// want is the contract of Gate.Run, written out: the policy first (a
// chat's decision, then deny and ask; a workflow step only refused by
// deny; an agent's call refused by deny and ask, no one being there to
// answer), then the budget of a metered tool.
func want(origin toolgate.Origin, policy string, d toolgate.Decision, metered bool, budget string) expect {
	switch {
	case origin == toolgate.Chat && d == toolgate.Denied:
		return expect{toolgate.Refuse, toolgate.CodeToolDenied}
	case origin == toolgate.Chat && d == toolgate.Approved:
	case policy == toolpolicy.Deny:
		return expect{toolgate.Refuse, toolgate.CodeToolDenied}
	case origin == toolgate.Chat && policy == toolpolicy.Ask:
		return expect{kind: toolgate.Ask}
	case origin == toolgate.Agent && policy == toolpolicy.Ask:
		return expect{toolgate.Refuse, toolgate.CodeApprovalRequired}
	}
	if metered && budget == spent {
		return expect{toolgate.Refuse, usage.CodeBudgetExceeded}
	}
	return expect{kind: toolgate.Run}
}

// TestGate: every origin x policy x decision x tool (metered or not) x
// budget state gives the outcome the contract says; a call that runs or
// is refused is announced first, one that asks is not; a metered call that
// runs has its usage recorded, a refused one spends nothing.
func TestGate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type tool struct {
		id      string
		metered bool
		input   map[string]any
	}
	toolsUnderTest := []tool{
		{"json_query", false, map[string]any{"query": ".a", "input": map[string]any{"a": 1}}},
		{"llm_generate", true, map[string]any{"prompt": "say something short"}},
	}
	for _, origin := range []toolgate.Origin{toolgate.Chat, toolgate.Workflow, toolgate.Agent} {
		for _, policy := range []string{"", toolpolicy.Allow, toolpolicy.Ask, toolpolicy.Deny} {
			decisions := []toolgate.Decision{toolgate.Undecided}
			if origin == toolgate.Chat {
				decisions = append(decisions, toolgate.Approved, toolgate.Denied)
			}
			for _, d := range decisions {
				for _, tl := range toolsUnderTest {
					for _, b := range []string{noBudget, room, spent} {
						name := fmt.Sprintf("origin %d/policy %q/decision %d/%s/%s", origin, policy, d, tl.id, b)
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							g, already := e.budgeted, int64(0)
							switch b {
							case noBudget:
								g = e.unbudgeted
							case spent:
								already = budget - 2 // less than any prompt
							}
							userID := e.user(t, tl.id, policy, already)
							announced := 0
							out, err := g.Run(context.Background(), toolgate.Call{Origin: origin, UserID: userID, ToolID: tl.id, Input: tl.input, Decision: d,
								Announce: func() error { announced++; return nil }})
							if err != nil {
								t.Fatal(err)
							}
							w := want(origin, policy, d, tl.metered, b)
							if out.Kind != w.kind || out.Code != w.code {
								t.Fatalf("outcome %+v, want %+v", out, w)
							}
							if (announced == 1) != (w.kind != toolgate.Ask) || announced > 1 {
								t.Errorf("announced %d times for %+v", announced, w)
							}
							switch w.kind {
							case toolgate.Run:
								if out.ToolError != nil || out.Output == nil {
									t.Fatalf("run: %+v", out)
								}
							case toolgate.Refuse:
								if out.Message == "" || out.Output != nil {
									t.Errorf("refusal %+v", out)
								}
							}
							got, err := e.usage.MonthUsage(context.Background(), userID, usage.Month(now))
							if err != nil {
								t.Fatal(err)
							}
							ran := w.kind == toolgate.Run && tl.metered
							if u := got[model.BuiltinID]; (u.Requests == 1) != ran || ran && (out.Usage == nil || u.InputTokens != int64(out.Usage.InputTokens) || u.OutputTokens == 0) {
								t.Errorf("builtin usage %+v (outcome usage %+v), want a request: %v", u, out.Usage, ran)
							}
							if committed, _ := e.usage.Committed(context.Background(), userID, usage.Month(now)); committed != already+got[model.BuiltinID].Tokens() {
								t.Errorf("committed %d, want %d spent before plus %d", committed, already, got[model.BuiltinID].Tokens())
							}
						})
					}
				}
			}
		}
	}
}

// TestGateLowersTheCap: a metered call whose budget has room for its
// prompt but not its whole output cap runs with the cap lowered to what
// remains; the model keeps to it and the usage never passes the budget.
func TestGateLowersTheCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	input := map[string]any{"prompt": "tell me about the weather today please"}
	est := int64(toolgate.EstimateInput(input))
	userID := e.user(t, "", "", budget-est-3) // room for the prompt and 3 words
	out, err := e.budgeted.Run(context.Background(), toolgate.Call{Origin: toolgate.Workflow, UserID: userID, ToolID: "llm_generate", Input: input})
	if err != nil || out.Kind != toolgate.Run || out.ToolError != nil {
		t.Fatalf("run: %+v, %v", out, err)
	}
	if text, _ := out.Output["text"].(string); len(strings.Fields(text)) != 3 || out.Usage.OutputTokens != 3 {
		t.Errorf("text %q, usage %+v: want 3 words", text, out.Usage)
	}
	committed, _ := e.usage.Committed(context.Background(), userID, usage.Month(now))
	if committed > budget {
		t.Errorf("committed %d of %d", committed, budget)
	}
	// The settle gave back what the estimate held over the real count; a
	// prompt longer than what remains is not sent.
	prompt := strings.Repeat("word ", int(budget-committed)+1)
	out, err = e.budgeted.Run(context.Background(), toolgate.Call{Origin: toolgate.Workflow, UserID: userID, ToolID: "llm_generate", Input: map[string]any{"prompt": prompt}})
	if err != nil || out.Kind != toolgate.Refuse || out.Code != usage.CodeBudgetExceeded || out.RetryAfter <= 0 {
		t.Errorf("second call: %+v, %v", out, err)
	}
}

// TestGateEdges: unusable arguments are decided as any call, then fail
// without running; an Announce error ends the call and gives the
// reservation back; an unknown tool runs into the tool server's
// TOOL_NOT_FOUND; a catalog that cannot say whether a tool is metered
// runs nothing; Remember stores allow.
func TestGateEdges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bad := errs.E("test", errs.Invalid, "INVALID_PARAMS", "tool arguments must be a JSON object")

	u := e.user(t, "json_query", toolpolicy.Ask, 0)
	if out, err := e.budgeted.Run(ctx, toolgate.Call{Origin: toolgate.Chat, UserID: u, ToolID: "json_query", InputError: bad}); err != nil || out.Kind != toolgate.Ask {
		t.Errorf("bad arguments of an ask tool: %+v, %v; want Ask", out, err)
	}
	if out, err := e.budgeted.Run(ctx, toolgate.Call{Origin: toolgate.Chat, UserID: u, ToolID: "json_query", InputError: bad, Decision: toolgate.Approved}); err != nil || out.Kind != toolgate.Run || out.ToolError != bad {
		t.Errorf("bad arguments approved: %+v, %v; want the input error", out, err)
	}

	u = e.user(t, "", "", 0)
	stop := fmt.Errorf("client gone")
	_, err := e.budgeted.Run(ctx, toolgate.Call{Origin: toolgate.Chat, UserID: u, ToolID: "llm_generate", Input: map[string]any{"prompt": "hi"}, Announce: func() error { return stop }})
	if err == nil || !strings.Contains(err.Error(), "client gone") {
		t.Errorf("announce error: %v", err)
	}
	if c, _ := e.usage.Committed(ctx, u, usage.Month(now)); c != 0 {
		t.Errorf("committed %d after a call that did not run, want 0 (given back)", c)
	}

	out, err := e.budgeted.Run(ctx, toolgate.Call{Origin: toolgate.Workflow, UserID: u, ToolID: "no_such_tool"})
	if err != nil || out.Kind != toolgate.Run || errs.CodeOf(out.ToolError) != "TOOL_NOT_FOUND" {
		t.Errorf("unknown tool: %+v, %v", out, err)
	}

	// The tool server down, nothing cached: with a budget the gate cannot
	// tell whether the tool is metered and runs nothing (the catalog's
	// error); without one it needs no declaration and the run fails.
	down := httptest.NewServer(nil)
	down.Close()
	downCatalog := toolclient.NewCatalog(toolclient.NewClient(down.URL, key, nil), time.Minute, nil)
	for name, m := range map[string]*usage.Meter{"budget": usage.NewMeter(e.usage, budget, nil, nil), "no budget": nil} {
		g := toolgate.New(toolgate.Options{Tools: downCatalog, Meter: m})
		out, err = g.Run(ctx, toolgate.Call{Origin: toolgate.Workflow, UserID: u, ToolID: "llm_generate", Input: map[string]any{"prompt": "hi"}})
		if err != nil || out.Kind != toolgate.Run || errs.CodeOf(out.ToolError) != toolclient.CodeToolsUnavailable {
			t.Errorf("%s, catalog down: %+v, %v", name, out, err)
		}
		if wantCatalog := name == "budget"; strings.Contains(errs.MessageOf(out.ToolError, ""), "catalog") != wantCatalog {
			t.Errorf("%s, catalog down: %v; the catalog's error: %v", name, out.ToolError, wantCatalog)
		}
	}

	if err := e.budgeted.Remember(ctx, u, "http_request"); err != nil {
		t.Fatal(err)
	}
	if p, err := e.policies.Policy(ctx, u, "http_request"); err != nil || p != toolpolicy.Allow {
		t.Errorf("policy after Remember = %s, %v", p, err)
	}
}

// TestSteps: the workflow engine's runner passes each step through the
// gate for the user the context acts for: a denied tool and a metered
// tool over budget fail with errors whose code is theirs and whose
// message starts with it (the engine keeps a step's message); an ask tool
// runs.
func TestSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	steps := e.budgeted.Steps()
	tests := []struct {
		name, tool, policy string
		spent              int64
		input              map[string]any
		kind               errs.Kind
		code               string
	}{
		{"ask runs", "json_query", toolpolicy.Ask, 0, map[string]any{"query": ".", "input": 1}, 0, ""},
		{"deny fails", "json_query", toolpolicy.Deny, 0, map[string]any{"query": ".", "input": 1}, errs.Forbidden, toolgate.CodeToolDenied},
		{"over budget fails", "llm_generate", "", budget, map[string]any{"prompt": "hi"}, errs.RateLimited, usage.CodeBudgetExceeded},
		{"metered runs", "llm_generate", "", 0, map[string]any{"prompt": "hi"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := auth.ActingFor(context.Background(), e.user(t, tt.tool, tt.policy, tt.spent))
			out, err := steps.Run(ctx, tt.tool, tt.input)
			if tt.code == "" {
				if err != nil || out == nil {
					t.Fatalf("Run = %v, %v", out, err)
				}
				return
			}
			if errs.KindOf(err) != tt.kind || errs.CodeOf(err) != tt.code || !strings.HasPrefix(errs.MessageOf(err, ""), tt.code+": ") {
				t.Errorf("Run error = %v (kind %v, code %s, message %q)", err, errs.KindOf(err), errs.CodeOf(err), errs.MessageOf(err, ""))
			}
		})
	}
}

// TestGateConcurrentCallsShareTheBudget: the shape of a forEach of 64
// llm_generate steps at concurrency 16 under a budget of 2,000 tokens.
// Each call reserves its prompt plus an output cap lowered to what
// remains, so one call under way holds nearly the whole budget; the
// others wait for it to settle instead of being refused. Every call runs
// or is refused BUDGET_BUSY (retry shortly); BUDGET_EXCEEDED only once
// what the calls spent leaves no room; the usage never passes the budget.
func TestGateConcurrentCallsShareTheBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const budget, calls, concurrency = 2000, 64, 16
	gate := toolgate.New(toolgate.Options{Tools: e.catalog, Policies: e.policies, Meter: usage.NewMeter(e.usage, budget, nil, func() time.Time { return now })})
	userID := e.user(t, "", "", 0)
	ctx := context.Background()
	input := map[string]any{"prompt": "hi"}
	est := int64(toolgate.EstimateInput(input))
	var (
		next                atomic.Int64
		ran, busy, exceeded atomic.Int64
		failures            = make(chan error, calls)
		wg                  sync.WaitGroup
	)
	for range concurrency {
		wg.Go(func() {
			for next.Add(1) <= calls {
				out, err := gate.Run(ctx, toolgate.Call{Origin: toolgate.Workflow, UserID: userID, ToolID: "llm_generate", Input: input})
				switch {
				case err != nil:
					failures <- err
				case out.Kind == toolgate.Run && out.ToolError == nil:
					ran.Add(1)
				case out.Kind == toolgate.Refuse && out.Code == usage.CodeBudgetBusy && out.RetryAfter > 0:
					busy.Add(1)
				case out.Kind == toolgate.Refuse && out.Code == usage.CodeBudgetExceeded:
					exceeded.Add(1)
				default:
					failures <- fmt.Errorf("outcome %+v", out)
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	got, err := e.usage.MonthUsage(ctx, userID, usage.Month(now))
	if err != nil {
		t.Fatal(err)
	}
	var spentTokens, requests int64
	for _, c := range got {
		spentTokens += c.Tokens()
		requests += c.Requests
	}
	committed, _ := e.usage.Committed(ctx, userID, usage.Month(now))
	t.Logf("%d ran, %d busy, %d exceeded; %d tokens spent of %d", ran.Load(), busy.Load(), exceeded.Load(), spentTokens, budget)
	if ran.Load()+busy.Load()+exceeded.Load() != calls || requests != ran.Load() {
		t.Errorf("%d ran, %d busy, %d exceeded of %d calls; %d recorded", ran.Load(), busy.Load(), exceeded.Load(), calls, requests)
	}
	if exceeded.Load() > 0 && spentTokens+est < budget {
		t.Errorf("%d calls refused BUDGET_EXCEEDED with %d of %d tokens spent: a prompt of %d still fits", exceeded.Load(), spentTokens, budget, est)
	}
	if committed != spentTokens || spentTokens > budget*11/10 {
		t.Errorf("committed %d, spent %d, budget %d", committed, spentTokens, budget)
	}
	if ran.Load() == 0 {
		t.Error("no call ran")
	}
}
