package local_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/guregu/dynamo/v2"
)

// TestCorruptItemIsNeverReadAsEmpty plants a workflow item whose stored
// steps do not decode, as a bad migration or a manual edit could leave
// it. Reading it, and applying a proposal to it, fail with 500
// INTERNAL_ERROR instead of reading the workflow as having no steps, and
// the apply writes nothing over the stored steps. (Before, the steps read
// as empty and the apply replaced them: a data-loss path.)
func TestCorruptItemIsNeverReadAsEmpty(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	do := func(method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, f.request(method, path, body))
		return rec
	}
	rec := do("POST", "/api/workflows", `{"userId":"`+f.userID+`","name":"precious"}`)
	var wf struct{ Data struct{ ID string } }
	if err := json.Unmarshal(rec.Body.Bytes(), &wf); err != nil || rec.Code != 201 {
		t.Fatalf("create workflow: %d %s", rec.Code, rec.Body)
	}
	rec = do("POST", "/api/workflows/"+wf.Data.ID+"/messages", `{"content":"rename workflow to renamed","modelId":"builtin"}`)
	var msg struct {
		Data struct {
			AssistantMessage struct{ Proposal struct{ ID string } } `json:"assistantMessage"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil || msg.Data.AssistantMessage.Proposal.ID == "" {
		t.Fatalf("propose: %d %s", rec.Code, rec.Body)
	}

	const corrupt = `[{"id":"step1","toolId":"hash","inputs":{"text":"kept"}` // cut short
	table := f.stack.DB.Table("data")
	ctx := context.Background()
	if err := table.Update("PK", "WF#"+wf.Data.ID).Range("SK", "WF").Set("steps", corrupt).Run(ctx); err != nil {
		t.Fatal(err)
	}
	expect500 := func(what string, rec *httptest.ResponseRecorder) {
		t.Helper()
		var body struct{ Code, Message string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != 500 || body.Code != "INTERNAL_ERROR" || strings.Contains(body.Message, "steps") {
			t.Errorf("%s: %d %s, want 500 INTERNAL_ERROR without internals", what, rec.Code, rec.Body)
		}
	}
	expect500("get", do("GET", "/api/workflows/"+wf.Data.ID, ""))
	expect500("list", do("GET", "/api/users/"+f.userID+"/workflows", ""))
	expect500("apply", do("POST", "/api/workflows/"+wf.Data.ID+"/messages/apply", `{"proposalId":"`+msg.Data.AssistantMessage.Proposal.ID+`"}`))

	var item struct {
		Steps   string `dynamo:"steps"`
		Version int    `dynamo:"version"`
	}
	if err := table.Get("PK", "WF#"+wf.Data.ID).Range("SK", dynamo.Equal, "WF").One(ctx, &item); err != nil {
		t.Fatal(err)
	}
	if item.Steps != corrupt || item.Version != 1 {
		t.Errorf("stored steps after the refused apply: %q (version %d), want them untouched", item.Steps, item.Version)
	}
}
