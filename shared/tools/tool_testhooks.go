package tools

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// TestTools returns two tools for tests of durable workflow runs, never
// offered in production: the tool server adds them only when
// TOOLS_TEST_HOOKS is set (the end-to-end tests' dev servers).
// test_count counts its executions per key input (in this process), waits
// ms milliseconds, fails its first failTimes executions of a key, and
// answers {n, ranAt}: the key's count and when it ran, so a test can tell
// whether a step ran again. With peek it only reports the count.
// test_count_idempotent is the same tool declared idempotent (a resumed
// run re-runs a step of it caught running).
func TestTools() []*Tool {
	var mu sync.Mutex
	counts := map[string]int{}
	run := func(ctx context.Context, in map[string]any) (map[string]any, error) {
		key, _ := in["key"].(string)
		mu.Lock()
		if peek, _ := in["peek"].(bool); peek {
			n := counts[key]
			mu.Unlock()
			return map[string]any{"n": n, "ranAt": time.Now().UTC().Format(time.RFC3339Nano)}, nil
		}
		counts[key]++
		n := counts[key]
		mu.Unlock()
		ranAt := time.Now().UTC().Format(time.RFC3339Nano)
		if ms := intInput(in["ms"]); ms > 0 {
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if n <= intInput(in["failTimes"]) {
			return nil, errors.New("test_count fails on purpose")
		}
		return map[string]any{"n": n, "ranAt": ranAt}, nil
	}
	in := json.RawMessage(`{"type":"object","additionalProperties":false,"required":["key"],"properties":{` +
		`"key":{"type":"string","minLength":1,"maxLength":200},"ms":{"type":"integer","minimum":0,"maximum":25000},` +
		`"failTimes":{"type":"integer","minimum":0,"maximum":100},"peek":{"type":"boolean"}}}`)
	out := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"ranAt":{"type":"string"}}}`)
	return []*Tool{
		{ID: "test_count", Name: "Test count", Description: "Test hook: counts its executions per key; waits ms; fails the first failTimes runs.",
			Category: CategoryUtil, InputSchema: in, OutputSchema: out, Annotations: Annotations{}, Run: run},
		{ID: "test_count_idempotent", Name: "Test count (idempotent)", Description: "Test hook: test_count declared idempotent.",
			Category: CategoryUtil, InputSchema: in, OutputSchema: out, Annotations: Annotations{Idempotent: true}, Run: run},
	}
}

func intInput(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	case int:
		return n
	case int64:
		return int(n)
	}
	return 0
}
