package local_test

import (
	"fmt"
	"net/url"
	"testing"
)

// TestRunListCallBudget holds the two run lists to their DynamoDB calls,
// whatever the page's size: the session, the owner's check (the chat's
// owner, the workflow), one Query of the list entries and one
// BatchGetItem of their runs (up to 25 a call). Every page answers the
// runs whole, with their steps' outputs, in the list's order.
func TestRunListCallBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	wfID := f.benchWorkflow(t)
	var started []string
	for i := range 3 {
		var run struct{ ID, Status string }
		data(t, f.serve(t, "POST", "/api/chats/"+f.chatID+"/workflow-runs", fmt.Sprintf(`{"workflowId":%q,"input":{"n":%d}}`, wfID, i)), 201, &run)
		if run.Status != "completed" {
			t.Fatalf("run %d: %+v", i, run)
		}
		started = append(started, run.ID)
	}
	f.stack.Runner.Wait()
	for _, tc := range []struct {
		name, path string
		want       []string // the runs' ids, page after page
	}{
		{"a chat's runs", "/api/chats/" + f.chatID + "/workflow-runs", started},
		{"a workflow's runs", "/api/workflows/" + wfID + "/runs", []string{started[2], started[1], started[0]}},
	} {
		for _, limit := range []int{2, 100} {
			var got []string
			cursor := ""
			for page := 0; ; page++ {
				path := fmt.Sprintf("%s?limit=%d", tc.path, limit)
				if cursor != "" {
					path += "&cursor=" + url.QueryEscape(cursor)
				}
				f.counter.Reset()
				rec := f.serve(t, "GET", path, "")
				var body struct {
					WorkflowRuns []struct {
						ID, Status string
						Steps      []struct{ Output map[string]any }
					}
					NextCursor string
				}
				data(t, rec, 200, &body)
				if n := f.counter.Count(); n != 4 {
					t.Errorf("%s, limit %d, page %d: %d DynamoDB calls, want 4 (session, owner, Query, BatchGetItem)", tc.name, limit, page, n)
				}
				for _, r := range body.WorkflowRuns {
					if r.Status != "completed" || len(r.Steps) != 1 || r.Steps[0].Output == nil {
						t.Errorf("%s: listed run %+v, want it whole", tc.name, r)
					}
					got = append(got, r.ID)
				}
				cursor = body.NextCursor
				if cursor == "" || page > 5 {
					break
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s, limit %d: runs %v, want %v", tc.name, limit, got, tc.want)
			}
		}
	}
}
