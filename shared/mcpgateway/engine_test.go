package mcpgateway_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/mcpgateway"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// scriptedLog is a run engine whose run's log is written in full but
// whose first follow (the call's live one) sees only the first live
// events before its wait ends, as a follower on a loaded machine does;
// later follows see the whole log.
type scriptedLog struct {
	run     workflow.Run
	events  []workflow.RunEvent
	live    int
	mu      sync.Mutex
	follows int
}

func (s *scriptedLog) Start(context.Context, runs.StartRequest) (workflow.Run, error) {
	r := s.run
	r.Status = workflow.RunPending
	return r, nil
}

func (s *scriptedLog) Follow(ctx context.Context, _ string, _ int64, yield func(workflow.RunEvent) error) error {
	s.mu.Lock()
	s.follows++
	first := s.follows == 1
	s.mu.Unlock()
	evs := s.events
	if first {
		evs = evs[:s.live]
	}
	for _, ev := range evs {
		if err := yield(ev); err != nil {
			return err
		}
	}
	if first {
		<-ctx.Done() // the wait ends before the rest shows
		return ctx.Err()
	}
	return nil
}

func (s *scriptedLog) Run(context.Context, string) (workflow.Run, error) { return s.run, nil }

func (s *scriptedLog) Value(_ context.Context, _ string, v map[string]any) (map[string]any, error) {
	return v, nil
}

type oneTool struct{}

func (oneTool) ExposedTools(context.Context, string) ([]workflow.ToolEntry, error) { return nil, nil }
func (oneTool) ExposedTool(_ context.Context, userID, name string) (workflow.ToolEntry, error) {
	return workflow.ToolEntry{UserID: userID, ToolName: name, WorkflowID: "wf"}, nil
}

// TestCallTellsEveryEndedStepBeforeTheResult: whatever part of the log
// the call's live follow saw before its wait ended, a finished run's
// call tells one progress notification per ended step, in the log's
// order, all before it returns; a step ended twice (a resumed run) is
// told once; a run still going tells what was seen and no more.
func TestCallTellsEveryEndedStepBeforeTheResult(t *testing.T) {
	t.Parallel()
	ev := func(typ, step string) workflow.RunEvent {
		return workflow.RunEvent{Type: typ, RunID: "r1", StepID: step, ToolID: "json_query"}
	}
	steps := []workflow.RunStep{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	completed := []workflow.RunEvent{ev(workflow.EventRunStarted, ""),
		ev(workflow.EventStepStarted, "a"), ev(workflow.EventStepCompleted, "a"),
		ev(workflow.EventStepStarted, "b"), ev(workflow.EventStepCompleted, "b"),
		ev(workflow.EventStepStarted, "c"), ev(workflow.EventStepCompleted, "c"), ev(workflow.EventRunCompleted, "")}
	resumed := slices.Concat(completed[:3], []workflow.RunEvent{ev(workflow.EventStepCompleted, "a")}, completed[3:])
	failed := slices.Concat(completed[:4], []workflow.RunEvent{ev(workflow.EventStepFailed, "b"), ev(workflow.EventRunFailed, "")})
	all := []string{"step a (json_query) completed", "step b (json_query) completed", "step c (json_query) completed"}
	cases := []struct {
		name   string
		status string
		events []workflow.RunEvent
		live   int
		want   []string
	}{
		{"live follow saw nothing", workflow.RunCompleted, completed, 0, all},
		{"live follow saw one step", workflow.RunCompleted, completed, 3, all},
		{"live follow saw all but the run's end", workflow.RunCompleted, completed, 7, all},
		{"a step ended twice", workflow.RunCompleted, resumed, 2, all},
		{"failed run", workflow.RunFailed, failed, 1, []string{"step a (json_query) completed", "step b (json_query) failed"}},
		{"still running", workflow.RunRunning, completed, 3, all[:1]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := map[string]any{"result": "X"}
			run := workflow.Run{ID: "r1", WorkflowID: "wf", Status: c.status, Steps: slices.Clone(steps)}
			if c.status == workflow.RunCompleted {
				run.Steps[2].Output = out
			}
			log := &scriptedLog{run: run, events: c.events, live: c.live}
			e := &mcpgateway.Engine{Catalog: oneTool{}, Runs: log, Wait: 10 * time.Millisecond}
			var got []mcpgateway.Progress
			res, err := e.Call(context.Background(), "u1", "shout", json.RawMessage(`{}`), func(p mcpgateway.Progress) { got = append(got, p) })
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for i, p := range got {
				msgs = append(msgs, p.Message)
				if p.Step != i+1 || p.Total != 3 {
					t.Errorf("notification %d: step %d of %d", i, p.Step, p.Total)
				}
			}
			if !slices.Equal(msgs, c.want) {
				t.Errorf("progress = %q, want %q", msgs, c.want)
			}
			if c.status == workflow.RunCompleted && string(res.Output) != `{"result":"X"}` {
				t.Errorf("result = %+v", res)
			}
		})
	}
}
