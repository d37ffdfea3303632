package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolserver"
)

// These tests reproduce the ways a monthly token budget used to leak, and
// hold the bound: whatever the calls and their concurrency, the tokens
// spent never pass the budget by more than 10% (with the built-in model,
// whose token counts the estimates match, they never pass it at all).

// withinBudget fails t when used passes budget by more than 10%.
func withinBudget(t *testing.T, what string, used, budget int) {
	t.Helper()
	if used*10 > budget*11 {
		t.Errorf("%s: %d tokens spent of a budget of %d", what, used, budget)
	}
}

// TestBudgetToolOutputFeedsTheNextCall: a reply whose tool returns 20,000
// words (40 KB: kept whole in the blob store, cut to 32 KiB, some 16,000
// words, for the event and the model) must not send them to its second
// model call when the budget (300 tokens) has no room for them: the first call runs, the second is
// refused with an error event BUDGET_EXCEEDED, and the tokens spent stay
// within the budget. (Before reservations the second call was checked
// against what had been spent, passed, and spent 40,000 tokens and more.)
func TestBudgetToolOutputFeedsTheNextCall(t *testing.T) {
	t.Parallel()
	const budget = 300
	srv := startServer(t, fmt.Sprintf("USER_MONTHLY_TOKEN_BUDGET=%d", budget))
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "budget.toolfed@example.com")
	chat := newChat(t, c, map[string]any{})
	res := c.stream(chat.ID, map[string]any{
		"content": `run json_query with {"query": "[range(20000)] | map(\"w\") | join(\" \")", "input": {}}`,
		"modelId": "builtin", "userId": userID,
	})
	if res.Status != 200 {
		t.Fatalf("stream: %d %s", res.Status, res.Body)
	}
	var types []string
	var errEvent streamEvent
	for _, e := range res.Events {
		types = append(types, e.Type)
		if e.Type == "tool_result" && (e.ResultSize < 40000 || len(e.Result) < toolResultBound-100) {
			t.Errorf("tool result of %d bytes (whole %d), want the 20,000 words cut to %d bytes", len(e.Result), e.ResultSize, toolResultBound)
		}
		if e.Type == "error" {
			errEvent = e
		}
	}
	if got := squeeze(types); errEvent.Error != "BUDGET_EXCEEDED" || !strings.Contains(got, "tool_call tool_result error end") {
		t.Fatalf("events %s, error %+v: want the tool round, then BUDGET_EXCEEDED", got, errEvent)
	}
	u := getUsage(t, c, userID, "")
	withinBudget(t, "after a reply whose tool output would feed its second call", u.Budget.UsedTokens, budget)
	if u.Total.Requests != 1 {
		t.Errorf("%d model calls counted, want 1 (the second was not made)", u.Total.Requests)
	}
}

// squeeze joins event types, a run of the same type written once with its
// count ("content x4000").
func squeeze(types []string) string {
	var out []string
	for i := 0; i < len(types); {
		j := i
		for j < len(types) && types[j] == types[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s x%d", types[i], j-i))
		} else {
			out = append(out, types[i])
		}
		i = j
	}
	return strings.Join(out, " ")
}

// TestBudgetParallelMessages: 16 messages of 16,000 words streamed at once
// by one user. With a budget of 300 none fits: every one is refused with
// 429 BUDGET_EXCEEDED before its stream starts and nothing is spent
// (before reservations, all passed the same check and 3 of them spent
// 48,510 tokens). With a budget of 50,000 some fit and run, the others are
// refused the same way (or, having waited for the running ones to settle
// while they might have left room, 429 BUDGET_BUSY), and the total stays
// within the budget.
func TestBudgetParallelMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		budget     int
		atLeastRun int
	}{{300, 0}, {50000, 1}} {
		t.Run(fmt.Sprint(tc.budget), func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, fmt.Sprintf("USER_MONTHLY_TOKEN_BUDGET=%d", tc.budget))
			c := newClient(t, srv.API)
			userID := signUpChatUser(t, c, fmt.Sprintf("budget.parallel.%d@example.com", tc.budget))
			const n = 16
			content := strings.TrimSpace(strings.Repeat("a ", 16000))
			chats := make([]string, n)
			for i := range chats {
				chats[i] = newChat(t, c, map[string]any{}).ID
			}
			results := make([]streamResult, n)
			var wg sync.WaitGroup
			for i, id := range chats {
				wg.Go(func() {
					results[i] = c.stream(id, map[string]any{"content": content, "modelId": "builtin", "userId": userID})
				})
			}
			wg.Wait()
			ran := 0
			for i, r := range results {
				if r.Status == 200 {
					ran++
					if last := r.Events[len(r.Events)-1]; last.Type != "end" || last.Reason != "completed" {
						t.Errorf("stream %d ended %+v", i, last)
					}
					continue
				}
				// Where a reply fits once the others settle, a refused
				// one may also have waited for them in vain: BUDGET_BUSY.
				code := "BUDGET_EXCEEDED"
				if tc.atLeastRun > 0 && bytes.Contains(r.Body, []byte(`"BUDGET_BUSY"`)) {
					code = "BUDGET_BUSY"
				}
				expectError(t, fmt.Sprintf("stream %d", i), r.response(), 429, code)
			}
			u := getUsage(t, c, userID, "")
			t.Logf("%d of %d replies ran, %d tokens spent of %d", ran, n, u.Budget.UsedTokens, tc.budget)
			withinBudget(t, fmt.Sprintf("after %d parallel messages (%d ran)", n, ran), u.Budget.UsedTokens, tc.budget)
			if ran < tc.atLeastRun || u.Total.Requests != ran || ran == n {
				t.Errorf("%d of %d replies ran, %d model calls counted", ran, n, u.Total.Requests)
			}
		})
	}
}

// TestMeteredLLMGenerate: llm_generate's model call counts in the user's
// usage (its tokens come back from the tool server with the tool's
// result), in a chat and in a workflow run; and a step whose prompt alone
// does not fit in what remains of the budget fails BUDGET_EXCEEDED without
// calling the model.
func TestMeteredLLMGenerate(t *testing.T) {
	t.Parallel()
	const budget = 2000
	srv := startServer(t, fmt.Sprintf("USER_MONTHLY_TOKEN_BUDGET=%d", budget))
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "budget.llm@example.com")
	chat := newChat(t, c, map[string]any{})
	res := c.stream(chat.ID, map[string]any{"content": `run llm_generate with {"prompt": "say hello to the whole team"}`, "modelId": "builtin", "userId": userID})
	if res.Status != 200 || res.Events[len(res.Events)-1].Reason != "completed" {
		t.Fatalf("stream: %d %s %+v", res.Status, res.Body, res.Events)
	}
	var result struct{ Text string }
	for _, e := range res.Events {
		if e.Type == "tool_result" {
			_ = json.Unmarshal(e.Result, &result)
		}
	}
	if !strings.Contains(result.Text, "say hello to the whole team") {
		t.Fatalf("llm_generate result %+v", result)
	}
	in, out := storedTokens(t, c, chat.ID)
	u := getUsage(t, c, userID, "")
	// The reply's two calls are on the message; llm_generate's call (6
	// words in, its answer's words out) is counted beside them.
	llmIn, llmOut := 6, len(strings.Fields(result.Text))
	if u.Total.Requests != 3 || u.Total.InputTokens != in+llmIn || u.Total.OutputTokens != out+llmOut {
		t.Errorf("usage %+v, want 3 requests, %d+%d in, %d+%d out", u.Total, in, llmIn, out, llmOut)
	}

	w := createWorkflow(t, c, userID, "llm")
	w = applyProposal(t, c, w.ID, propose(t, c, w, `add a step using llm_generate with {"prompt": "one two three"}`).ID)
	wch := newChat(t, c, map[string]any{"workflowId": w.ID})
	r := c.do("POST", "/api/chats/"+wch.ID+"/workflow-runs", map[string]string{"workflowId": w.ID})
	var run struct{ Data runJSON }
	r.decode(t, &run)
	if r.Status != 201 || run.Data.Status != "completed" {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	after := getUsage(t, c, userID, "")
	if after.Total.Requests != 4 || after.Total.InputTokens != u.Total.InputTokens+3 {
		t.Errorf("usage after the step %+v, want one more request of 3 words in", after.Total)
	}

	w2 := createWorkflow(t, c, userID, "llm too big")
	prompt := strings.TrimSpace(strings.Repeat("word ", budget))
	w2 = applyProposal(t, c, w2.ID, propose(t, c, w2, `add a step using llm_generate with {"prompt": "`+prompt+`"}`).ID)
	wch2 := newChat(t, c, map[string]any{"workflowId": w2.ID})
	r = c.do("POST", "/api/chats/"+wch2.ID+"/workflow-runs", map[string]string{"workflowId": w2.ID})
	r.decode(t, &run)
	if r.Status != 201 || run.Data.Status != "failed" || !strings.Contains(run.Data.Steps[0].Error, "BUDGET_EXCEEDED") {
		t.Errorf("run of a prompt over budget: %d %s", r.Status, r.Body)
	}
	if final := getUsage(t, c, userID, ""); final.Total != after.Total {
		t.Errorf("usage after the refused step %+v, want unchanged %+v", final.Total, after.Total)
	}
	withinBudget(t, "metered calls", getUsage(t, c, userID, "").Budget.UsedTokens, budget)
}

// TestCallerIdentity: the tool server runs a runTool for the user its
// signed identity names; an identity signed with another key, expired, or
// malformed is 401 UNAUTHORIZED like a wrong service key; none is an
// anonymous call.
func TestCallerIdentity(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	body := `{"method":"runTool","params":{"toolId":"llm_generate","input":{"prompt":"hi there"}}}`
	post := func(identity string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.MCP, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(toolserver.ServiceKeyHeader, srv.Key)
		if identity != "-" {
			req.Header[toolclient.IdentityHeader] = []string{identity}
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", srv.MCP, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	key := toolclient.NewIdentityKey(srv.Key)
	valid := key.Sign(toolclient.Identity{UserID: "user-1", MaxOutput: 2, Expires: time.Now().Add(time.Minute)})
	for _, tc := range []struct {
		name, identity string
		status         int
	}{
		{"signed", valid, 200},
		{"none (anonymous)", "-", 200},
		{"forged", toolclient.NewIdentityKey("not-the-service-key").Sign(toolclient.Identity{UserID: "user-1", Expires: time.Now().Add(time.Minute)}), 401},
		{"expired", key.Sign(toolclient.Identity{UserID: "user-1", Expires: time.Now().Add(-time.Second)}), 401},
		{"tampered", strings.Replace(valid, ".", ".e", 1), 401},
		{"empty", "", 401},
	} {
		status, b := post(tc.identity)
		if status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, b, tc.status)
			continue
		}
		if status == 401 {
			var e errorBody
			if err := json.Unmarshal(b, &e); err != nil || e.Code != "UNAUTHORIZED" {
				t.Errorf("%s: %s, want UNAUTHORIZED", tc.name, b)
			}
			continue
		}
		var ran struct{ Data toolclient.RunResult }
		if err := json.Unmarshal(b, &ran); err != nil || ran.Data.Usage == nil || ran.Data.Usage.ModelID != "builtin" || ran.Data.Usage.InputTokens != 2 {
			t.Errorf("%s: %s, want llm_generate's usage", tc.name, b)
		}
		// The signed identity's cap reaches the model: 2 words.
		if text, _ := ran.Data.Result["text"].(string); tc.name == "signed" && (len(strings.Fields(text)) != 2 || ran.Data.Usage.OutputTokens != 2) {
			t.Errorf("signed with cap 2: %s", b)
		}
	}
}

// TestBudgetForEachOfLLMGenerate: a forEach of 64 llm_generate at
// concurrency 16 under a budget of 2,000 tokens. One call under way holds
// nearly all of what remains (its output cap is lowered to it), so the
// others wait for it to settle: every element runs, or at worst is
// refused BUDGET_BUSY (retry later); none is refused BUDGET_EXCEEDED
// while the calls spent leave room (before, 58 of 64 were, with 270
// tokens spent).
func TestBudgetForEachOfLLMGenerate(t *testing.T) {
	t.Parallel()
	const budget, n = 2000, 64
	srv := durableServer(t, fmt.Sprintf("USER_MONTHLY_TOKEN_BUDGET=%d", budget))
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "budget.foreach@example.com")
	wfID := defineWorkflow(t, c, userID, "fan out llm", `{
	  "inputSchema": {"type": "object", "properties": {"items": {"type": "array"}}},
	  "steps": [{"id": "each", "toolId": "llm_generate", "inputs": {"prompt": "say {{item}}"}, "forEach": "{{input.items}}", "concurrency": 16, "continueOnError": true}]}`)
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint("word", i)
	}
	chatID := newChat(t, c, map[string]string{"title": "fan out"}).ID
	status, run := startRun(t, c, chatID, wfID, map[string]any{"items": items})
	if status != 201 && status != 202 {
		t.Fatalf("start: %d", status)
	}
	run = waitRun(t, c, wfID, run.ID, "ended", ended)
	results, _ := run.Steps[0].Output["results"].([]any)
	if len(results) != n {
		t.Fatalf("run %s: %d results, want %d: %+v", run.Status, len(results), n, run.Steps[0])
	}
	ran, busy, exceeded := 0, 0, 0
	for i, r := range results {
		out, _ := r.(map[string]any)
		msg, _ := out["error"].(string)
		switch {
		case msg == "" && out["text"] != nil:
			ran++
		case strings.HasPrefix(msg, "BUDGET_BUSY"):
			busy++
		case strings.HasPrefix(msg, "BUDGET_EXCEEDED"):
			exceeded++
		default:
			t.Errorf("element %d: %v", i, r)
		}
	}
	u := getUsage(t, c, userID, "")
	t.Logf("%d ran, %d busy, %d exceeded; %d tokens spent of %d", ran, busy, exceeded, u.Budget.UsedTokens, budget)
	if exceeded > 0 && u.Budget.UsedTokens < budget-100 {
		t.Errorf("%d elements refused BUDGET_EXCEEDED with %d of %d tokens spent", exceeded, u.Budget.UsedTokens, budget)
	}
	if ran == 0 || int(u.Total.Requests) != ran {
		t.Errorf("%d ran, %d model calls counted", ran, u.Total.Requests)
	}
	withinBudget(t, "a forEach of llm_generate", u.Budget.UsedTokens, budget)
}
