package e2e_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// usageJSON is GET /api/users/{userId}/usage's data.
type usageJSON struct {
	Month  string `json:"month"`
	Models []struct {
		ModelID      string  `json:"modelId"`
		Requests     int     `json:"requests"`
		InputTokens  int     `json:"inputTokens"`
		OutputTokens int     `json:"outputTokens"`
		CostUSD      float64 `json:"costUsd"`
	} `json:"models"`
	Total struct {
		Requests     int     `json:"requests"`
		InputTokens  int     `json:"inputTokens"`
		OutputTokens int     `json:"outputTokens"`
		CostUSD      float64 `json:"costUsd"`
	} `json:"total"`
	Budget struct {
		LimitTokens     *int `json:"limitTokens"`
		UsedTokens      int  `json:"usedTokens"`
		RemainingTokens *int `json:"remainingTokens"`
	} `json:"budget"`
}

func getUsage(t *testing.T, c *client, userID, query string) usageJSON {
	t.Helper()
	r := c.do("GET", "/api/users/"+userID+"/usage"+query, nil)
	if r.Status != 200 {
		t.Fatalf("usage of %s%s: %d %s", userID, query, r.Status, r.Body)
	}
	var out struct{ Data usageJSON }
	r.decode(t, &out)
	return out.Data
}

// storedTokens sums the tokens stored on the assistant messages of chats.
func storedTokens(t *testing.T, c *client, chats ...string) (in, out int) {
	t.Helper()
	for _, id := range chats {
		for _, m := range getMessages(t, c, id) {
			if m.Role == "assistant" {
				in += m.InputTokens
				out += m.OutputTokens
			}
		}
	}
	return in, out
}

// TestUsage: after a known sequence of built-in model calls (a whole
// reply, a streamed reply, a streamed reply with a tool round: four model
// calls) the month's usage equals the sum of the tokens stored on the
// messages; N replies streamed in parallel all count; the report checks
// its month and its owner.
func TestUsage(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	month := time.Now().UTC().Format("2006-01")

	t.Run("totals", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, srv.API)
		userID := signUpChatUser(t, c, "usage.totals@example.com")
		u := getUsage(t, c, userID, "")
		if u.Month != month || len(u.Models) != 0 || u.Total.Requests != 0 || u.Budget.LimitTokens != nil || u.Budget.RemainingTokens != nil {
			t.Fatalf("usage before any call: %+v", u)
		}
		chat := newChat(t, c, map[string]any{})
		if r := c.do("POST", "/api/chats/"+chat.ID+"/messages", map[string]any{"content": "Hello there, count my tokens.", "modelId": "builtin", "userId": userID}); r.Status != 201 {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		if res := c.stream(chat.ID, map[string]any{"content": "Tell me about usage.", "modelId": "builtin", "userId": userID}); res.Status != 200 {
			t.Fatalf("stream: %d %s", res.Status, res.Body)
		}
		res := c.stream(chat.ID, map[string]any{"content": `run json_query with {"query": ".a", "input": {"a": 1}}`, "modelId": "builtin", "userId": userID})
		if res.Status != 200 {
			t.Fatalf("tool stream: %d %s", res.Status, res.Body)
		}
		in, out := storedTokens(t, c, chat.ID)
		u = getUsage(t, c, userID, "?month="+month)
		if len(u.Models) != 1 || u.Models[0].ModelID != "builtin" || u.Models[0].Requests != 4 ||
			u.Models[0].InputTokens != in || u.Models[0].OutputTokens != out || u.Models[0].CostUSD != 0 {
			t.Errorf("usage = %+v, want builtin: 4 requests, %d in, %d out, cost 0", u, in, out)
		}
		if u.Total.Requests != 4 || u.Total.InputTokens != in || u.Total.OutputTokens != out || u.Budget.UsedTokens != in+out || in == 0 || out == 0 {
			t.Errorf("total = %+v, budget %+v; want the stored %d in, %d out", u.Total, u.Budget, in, out)
		}
		if u := getUsage(t, c, userID, "?month=2020-01"); u.Month != "2020-01" || len(u.Models) != 0 || u.Total.InputTokens != 0 {
			t.Errorf("another month: %+v", u)
		}
		for _, q := range []string{"?month=2026-13", "?month=2026-1", "?month=last"} {
			expectError(t, "month "+q, c.do("GET", "/api/users/"+userID+"/usage"+q, nil), 400, "INVALID_MONTH")
		}
		other := newClient(t, srv.API)
		signUpChatUser(t, other, "usage.other@example.com")
		expectError(t, "another user's usage", other.do("GET", "/api/users/"+userID+"/usage", nil), 403, "FORBIDDEN")
	})

	t.Run("parallel replies", func(t *testing.T) {
		t.Parallel()
		const n = 8
		c := newClient(t, srv.API)
		userID := signUpChatUser(t, c, "usage.parallel@example.com")
		chats := make([]string, n)
		for i := range chats {
			chats[i] = newChat(t, c, map[string]any{}).ID
		}
		var wg sync.WaitGroup
		status := make([]int, n)
		for i, id := range chats {
			wg.Go(func() {
				status[i] = c.stream(id, map[string]any{"content": "Parallel reply number " + strconv.Itoa(i) + " with some words.", "modelId": "builtin", "userId": userID}).Status
			})
		}
		wg.Wait()
		for i, s := range status {
			if s != 200 {
				t.Fatalf("stream %d: %d", i, s)
			}
		}
		in, out := storedTokens(t, c, chats...)
		u := getUsage(t, c, userID, "")
		if u.Total.Requests != n || u.Total.InputTokens != in || u.Total.OutputTokens != out {
			t.Errorf("after %d parallel replies: total %+v, want %d requests, %d in, %d out", n, u.Total, n, in, out)
		}
	})
}

// TestBudget: with USER_MONTHLY_TOKEN_BUDGET=70, a reply whose first
// model call fits (43 words of prompt, its output cap lowered to the 27
// tokens that remain) runs its tool, then its second call, whose prompt
// carries the tool round and no longer fits what remains, is not made: an
// error event BUDGET_EXCEEDED, the reply saved failed with what it
// generated, its first call counted and the budget never passed. Then a
// stream and a whole message are refused with 429 BUDGET_EXCEEDED before
// anything is stored, and a workflow step that calls a model with a prompt
// larger than what remains fails BUDGET_EXCEEDED.
func TestBudget(t *testing.T) {
	t.Parallel()
	const budget = 70
	srv := startServer(t, fmt.Sprintf("USER_MONTHLY_TOKEN_BUDGET=%d", budget))
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "budget@example.com")
	chat := newChat(t, c, map[string]any{})

	res := c.stream(chat.ID, map[string]any{"content": `run json_query with {"query": ".a", "input": {"a": 1}}`, "modelId": "builtin", "userId": userID})
	if res.Status != 200 {
		t.Fatalf("stream: %d %s", res.Status, res.Body)
	}
	var types []string
	var errEvent streamEvent
	for _, e := range res.Events {
		types = append(types, e.Type)
		if e.Type == "error" {
			errEvent = e
		}
	}
	last := res.Events[len(res.Events)-1]
	if errEvent.Error != "BUDGET_EXCEEDED" || last.Type != "end" || last.Reason != "interrupted" || !strings.Contains(strings.Join(types, " "), "tool_call tool_result error") {
		t.Fatalf("events %v (error %+v, last %+v): want a tool round, then error BUDGET_EXCEEDED and end interrupted", types, errEvent, last)
	}
	msgs := getMessages(t, c, chat.ID)
	if len(msgs) != 2 || msgs[1].Status != "failed" || len(msgs[1].ToolCalls) != 1 || msgs[1].InputTokens == 0 {
		t.Fatalf("messages after the cut reply: %+v", msgs)
	}
	u := getUsage(t, c, userID, "")
	used := msgs[1].InputTokens + msgs[1].OutputTokens
	if u.Total.Requests != 1 || u.Budget.UsedTokens != used || used > budget ||
		u.Budget.LimitTokens == nil || *u.Budget.LimitTokens != budget || u.Budget.RemainingTokens == nil || *u.Budget.RemainingTokens != budget-used {
		t.Errorf("usage after the cut reply: %+v (the reply spent %d)", u, used)
	}

	r := c.stream(chat.ID, map[string]any{"content": "one more", "modelId": "builtin", "userId": userID}).response()
	expectError(t, "stream over budget", r, 429, "BUDGET_EXCEEDED")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 31*24*3600 {
		t.Errorf("Retry-After %q, want the seconds until next month", r.Header.Get("Retry-After"))
	}
	expectError(t, "message over budget", c.do("POST", "/api/chats/"+chat.ID+"/messages", map[string]any{"content": "one more", "modelId": "builtin", "userId": userID}), 429, "BUDGET_EXCEEDED")
	if n := len(getMessages(t, c, chat.ID)); n != 2 {
		t.Errorf("%d messages after the refusals, want 2 (nothing stored)", n)
	}

	// A workflow step that calls a model fails (the built-in proposal
	// rules call none, so the workflow can still be edited).
	w := createWorkflow(t, c, userID, "over budget")
	prompt := strings.TrimSpace(strings.Repeat("hello ", budget))
	w = applyProposal(t, c, w.ID, propose(t, c, w, `add a step using llm_generate with {"prompt": "`+prompt+`"}`).ID)
	wch := newChat(t, c, map[string]any{"workflowId": w.ID})
	r = c.do("POST", "/api/chats/"+wch.ID+"/workflow-runs", map[string]string{"workflowId": w.ID})
	var run struct{ Data runJSON }
	r.decode(t, &run)
	if r.Status != 201 || run.Data.Status != "failed" || len(run.Data.Steps) != 1 || !strings.Contains(run.Data.Steps[0].Error, "BUDGET_EXCEEDED") {
		t.Errorf("run over budget: %d %s", r.Status, r.Body)
	}
	if u := getUsage(t, c, userID, ""); u.Budget.UsedTokens != used || u.Total.Requests != 1 {
		t.Errorf("usage after the refused step: %+v, want unchanged", u)
	}
}
