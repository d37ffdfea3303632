package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// valueBound is a step output's bound: 8 MiB of JSON.
const valueBound = 8 << 20

// jqString is a json_query step whose output, {"result": "aaa..."}, is n
// bytes of JSON.
func jqString(n int) string {
	return fmt.Sprintf(`{"input": {}, "query": "\"a\" * %d"}`, n-len(`{"result":""}`))
}

// TestRunValuesBounded: through the dev server and its tool server, a
// step's output at 8 MiB of JSON completes and the next step reads it
// whole; one over, and a forEach whose results pass 8 MiB (3 MB per
// element), fail the step TOOL_VALUE_TOO_LARGE with no output.
func TestRunValuesBounded(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "run-values@example.com")
	chatID := newChat(t, c, map[string]string{"title": "values"}).ID
	for _, tc := range []struct {
		name, steps string
		ok          bool
	}{
		{"output at the bound", `{"id": "big", "toolId": "json_query", "inputs": ` + jqString(valueBound) + `},
			{"id": "check", "toolId": "json_query", "if": "len(big.result) == ` + fmt.Sprint(valueBound-len(`{"result":""}`)) + `", "inputs": {"input": 1, "query": "."}}`, true},
		{"output one byte over", `{"id": "big", "toolId": "json_query", "inputs": ` + jqString(valueBound+1) + `},
			{"id": "check", "toolId": "json_query", "inputs": {"input": 1, "query": "."}}`, false},
		{"forEach results over", `{"id": "ns", "toolId": "json_query", "inputs": {"input": {}, "query": "[range(20)]"}},
			{"id": "big", "toolId": "json_query", "forEach": "{{ns.result}}", "concurrency": 2, "inputs": ` + jqString(3_000_000) + `},
			{"id": "check", "toolId": "json_query", "inputs": {"input": 1, "query": "."}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wfID := defineWorkflow(t, c, userID, tc.name, `{"steps": [`+tc.steps+`]}`)
			status, run := startRun(t, c, chatID, wfID, nil)
			if status != 201 && status != 202 {
				t.Fatalf("start: %d", status)
			}
			for deadline := time.Now().Add(3 * time.Minute); run.Status == "pending" || run.Status == "running"; time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("run still %s after 3 minutes", run.Status)
				}
				run = runOf(t, c, wfID, run.ID)
			}
			big := run.Steps[run.step(t, "big")]
			check := run.Steps[run.step(t, "check")]
			if tc.ok {
				if run.Status != "completed" || check.Status != "completed" || big.OutputURL == "" {
					t.Fatalf("run %s %q, check %s, outputUrl %q: the output at the bound should be kept and read whole", run.Status, run.Error, check.Status, big.OutputURL)
				}
				return
			}
			if run.Status != "failed" || big.Status != "failed" || !strings.HasPrefix(big.Error, "TOOL_VALUE_TOO_LARGE: ") || check.Status != "skipped" {
				t.Fatalf("run %s %q, step %s %q, next %s: want the step failed TOOL_VALUE_TOO_LARGE", run.Status, run.Error, big.Status, big.Error, check.Status)
			}
			if big.Output != nil || big.OutputURL != "" {
				t.Errorf("the refused step has an output: %.200v %q", big.Output, big.OutputURL)
			}
		})
	}
}
