package workflow

import (
	"context"
	"fmt"
	"strings"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/runworkflow"
)

// Reader reads a workflow by id (NotFound when there is none): the
// workflow Store.
type Reader interface {
	Workflow(ctx context.Context, id string) (Workflow, error)
}

// MaxChildReads bounds the workflows CheckChildren reads for one save:
// past it the walk stops, and the run's depth bound (runworkflow.MaxDepth)
// still stops what it did not see.
const MaxChildReads = 64

// CheckChildren checks the run_workflow steps of w, about to be saved,
// whose workflowId is literal (a templated one is checked when the step
// runs): the workflow must be another of w's user's (not w itself, not
// unknown, not another user's), and w must not be reachable from it
// through the literal run_workflow steps of the workflows it runs, as
// they are now (a cycle). Each problem names the step's workflowId,
// under steps[<index>].inputs.workflowId. It fails only when a workflow
// cannot be read (the store's error).
func CheckChildren(ctx context.Context, read Reader, w Workflow) ([]errs.FieldError, error) {
	var probs errs.FieldErrors
	reads := 0
	names := map[string]string{w.ID: "this workflow"}
	cache := map[string]*Workflow{}
	get := func(id string) (*Workflow, error) {
		if c, ok := cache[id]; ok {
			return c, nil
		}
		if reads >= MaxChildReads {
			return nil, nil
		}
		reads++
		c, err := read.Workflow(ctx, id)
		if errs.Is(err, errs.NotFound) {
			cache[id] = nil
			return nil, nil
		}
		if err != nil {
			return nil, errs.Wrap("workflow.CheckChildren", err)
		}
		if c.UserID != w.UserID {
			cache[id] = nil
			return nil, nil
		}
		cache[id] = &c
		names[id] = fmt.Sprintf("%q", c.Name)
		return &c, nil
	}
	for i, s := range w.Steps {
		id, ok := runworkflow.Literal(s.Inputs)
		if s.ToolID != RunWorkflowToolID || !ok {
			continue
		}
		at := fmt.Sprintf("steps[%d].inputs.%s", i, runworkflow.FieldWorkflowID)
		if id == w.ID {
			probs.Add(at, "is this workflow: a workflow cannot run itself (%s)", runworkflow.CodeWorkflowCycle)
			continue
		}
		c, err := get(id)
		if err != nil {
			return nil, err
		}
		if c == nil {
			if _, known := cache[id]; known { // else past MaxChildReads: not read
				probs.Add(at, "%s is not one of your workflows (%s)", id, runworkflow.CodeWorkflowNotFound)
			}
			continue
		}
		if path, err := cyclePath(get, id, w.ID); err != nil {
			return nil, err
		} else if path != nil {
			parts := []string{"this workflow"}
			for _, p := range path {
				parts = append(parts, names[p])
			}
			probs.Add(at, "makes a cycle: %s (%s)", strings.Join(parts, " runs "), runworkflow.CodeWorkflowCycle)
		}
	}
	return probs, nil
}

// cyclePath returns the path of workflow ids from from to target through
// the literal run_workflow steps of the workflows get reads (from
// first, target last), nil when there is none within what get reads.
func cyclePath(get func(string) (*Workflow, error), from, target string) ([]string, error) {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		c, err := get(id)
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		for _, s := range c.Steps {
			next, ok := runworkflow.Literal(s.Inputs)
			if s.ToolID != RunWorkflowToolID || !ok {
				continue
			}
			if next == target {
				path := []string{target}
				for at := id; at != ""; at = prev[at] {
					path = append([]string{at}, path...)
				}
				return path, nil
			}
			if _, seen := prev[next]; !seen {
				prev[next] = id
				queue = append(queue, next)
			}
		}
	}
	return nil, nil
}
