package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOneUserCannotSlowAnother: user A keeps 8 CPU-bound jq evaluations
// going (`def f: f; f`, each until jq's own time limit), in 8 chats, within
// the rate limit; meanwhile user B's chat messages that run a small
// json_query answer, every one of them, while A's evaluations are still
// running (before, with one queue for all users, B's query took 10 s,
// the length of A's evaluations). The sandbox admits at most 2 of A's at
// once (SANDBOX_PER_USER) and B's query takes the next free worker. B's
// latencies are logged; the assertion is the order, not a time.
func TestOneUserCannotSlowAnother(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "RATE_LIMIT_MESSAGES=0")
	a, b := newClient(t, srv.API), newClient(t, srv.API)
	signUpChatUser(t, a, "flood@example.com")
	signUpChatUser(t, b, "quiet@example.com")

	var running, done atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		ch := newChat(t, a, map[string]any{"title": fmt.Sprintf("flood %d", i)})
		wg.Go(func() {
			running.Add(1)
			ex := sendMessage(t, a, ch.ID, map[string]any{"modelId": "builtin",
				"content": `run json_query with {"input": 1, "query": "def f: f; f"}`})
			done.Add(1)
			if calls := ex.Response.ToolCalls; len(calls) != 1 || !strings.Contains(string(calls[0].Result), "error") {
				t.Errorf("the flood's tool call %+v, want an error (jq's time limit)", calls)
			}
		})
	}
	for running.Load() < 8 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // A's evaluations hold their workers

	quiet := newChat(t, b, map[string]any{"title": "quiet"})
	var took []time.Duration
	for i := range 5 {
		t0 := time.Now()
		ex := sendMessage(t, b, quiet.ID, map[string]any{"modelId": "builtin",
			"content": `run json_query with {"input": {"a": 1}, "query": ".a"}`})
		took = append(took, time.Since(t0))
		if calls := ex.Response.ToolCalls; len(calls) != 1 || string(calls[0].Result) != `{"result":1}` {
			t.Fatalf("B's tool call %+v, want {\"result\":1}", calls)
		}
		// B's first query is answered before any of A's evaluations ends
		// (each runs to jq's 10 s limit; in one queue for all users it
		// would wait for several); the rest while A's flood (four rounds
		// of two) is still going, however slow the machine.
		if n := done.Load(); i == 0 && n != 0 || n == 8 {
			t.Errorf("%d of A's 8 evaluations ended before B's message %d was answered: B waited for them", n, i+1)
		}
	}
	wg.Wait()
	slices.Sort(took)
	t.Logf("B's whole chat message beside A's flood: p50 %s, max %s", took[len(took)/2], took[len(took)-1])
}
