package runs_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// The elements of a forEach whose inputs do not name the item all read
// one resolved input (one copy of the large value they name, not one an
// element); elements whose inputs name it each get their own.
func TestForEachElementsShareAnInputThatDoesNotNameTheItem(t *testing.T) {
	t.Parallel()
	_, rs, jobs, _, chatID, userID := benchDurable(t)
	var mu sync.Mutex
	seen := map[string]map[uintptr]bool{} // step -> the input maps its calls read
	var kept []map[string]any             // held, so that no address is reused
	see := &tools.Tool{
		ID: "see", Name: "See", Description: "Notes the input it reads.", Category: "util",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"x":{},"i":{},"step":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout:      time.Minute,
		Run: func(_ context.Context, in map[string]any) (map[string]any, error) {
			mu.Lock()
			defer mu.Unlock()
			step := in["step"].(string)
			if seen[step] == nil {
				seen[step] = map[uintptr]bool{}
			}
			seen[step][reflect.ValueOf(in).Pointer()] = true
			kept = append(kept, in)
			return map[string]any{"n": len(in)}, nil
		},
	}
	reg, err := tools.NewRegistry(append(tools.Builtin(tools.Config{}), sizedTool(), see)...)
	if err != nil {
		t.Fatal(err)
	}
	blobs := newCountingBlobs()
	rs = rs.WithBlobs(blobs)
	runner := runs.NewRunner(runs.RunnerOptions{Store: rs, Jobs: jobs, Tools: reg, Values: blobs, Lease: time.Hour, CancelCheck: time.Hour})
	w := workflow.Workflow{ID: uuid.NewString(), UserID: userID, Name: "share", Version: 1, Steps: []workflow.Step{
		sized("big", 1<<20, ""),
		{ID: "same", ToolID: "see", ForEach: "{{input.ns}}", Concurrency: one(4), Inputs: map[string]any{"x": "{{big.text}}", "step": "same"}},
		{ID: "own", ToolID: "see", ForEach: "{{input.ns}}", Concurrency: one(4), Inputs: map[string]any{"x": "{{big.text}}", "i": "{{item}}", "step": "own"}},
	}}
	ns := make([]any, 12)
	for i := range ns {
		ns[i] = float64(i)
	}
	f := &callsFixture{runs: rs, chatID: chatID, userID: userID}
	got := f.completed(t, f.execWith(t, runner, w, map[string]any{"ns": ns}))
	if len(seen["same"]) != 1 {
		t.Errorf("the %d elements of same read %d input maps, want 1 shared", len(ns), len(seen["same"]))
	}
	if len(seen["own"]) != len(ns) {
		t.Errorf("the %d elements of own read %d input maps, want one each", len(ns), len(seen["own"]))
	}
	if s := got.Steps[1].Output; !strings.Contains(mustJSON(t, s), `"results"`) {
		t.Errorf("same's output %v", s)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
