package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/proposal"
)

// llmProvider stands in for a real provider: it proposes through a native
// propose_changes call when the message asks for it.
type llmProvider struct {
	mu   sync.Mutex
	last model.Request
}

func (p *llmProvider) Models() []model.Model {
	return []model.Model{{ID: "fake-llm", Name: "fake", Provider: "test"}}
}

func (p *llmProvider) Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	p.mu.Lock()
	p.last = req
	p.mu.Unlock()
	last := req.Messages[len(req.Messages)-1].Content
	var args string
	switch {
	case strings.Contains(last, "bad tool"):
		args = `{"changes":[{"type":"add_step","step":{"id":"x","toolId":"no_such_tool","inputs":{}}}]}`
	case strings.Contains(last, "propose"):
		args = `{"changes":[{"type":"update_workflow","name":"Named by the model"},{"type":"add_step","step":{"id":"now","toolId":"datetime_now","inputs":{}}}]}`
	default:
		return model.Result{}, emit(model.Chunk{Delta: "Just chatting."})
	}
	if err := emit(model.Chunk{Delta: "Here is my proposal."}); err != nil {
		return model.Result{}, err
	}
	return model.Result{ToolCalls: []model.ToolCall{{ID: "c1", Name: proposal.ProposeToolName, Args: json.RawMessage(args)}}}, nil
}

type runDeleter struct {
	mu  sync.Mutex
	ids []string
}

func (d *runDeleter) DeleteWorkflowRuns(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, id)
	return nil
}

type wfAPI struct {
	srv   *httptest.Server
	db    *storetest.DB
	llm   *llmProvider
	runs  *runDeleter
	users map[string]wfUser // "a", "b"
}

type wfUser struct{ id, cookie string }

func newWFAPI(t *testing.T) *wfAPI {
	t.Helper()
	db := storetest.New(t)
	users := store.NewUsers(db.DB, db.Users(), db.Sessions())
	authn := auth.NewService(users, &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil)
	llm := &llmProvider{}
	models, err := model.NewRegistry(model.Builtin{}, llm)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{Generator: toolserver.Models(models), DefaultModelID: model.BuiltinID})...)
	if err != nil {
		t.Fatal(err)
	}
	const key = "workflow-test-key-0123456789"
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	t.Cleanup(ts.Close)
	runs := &runDeleter{}
	workflows := store.NewWorkflows(db.DB, db.Data())
	catalog := toolclient.NewCatalog(toolclient.NewClient(ts.URL, key, nil), time.Minute, nil)
	svc := workflow.NewService(workflow.Options{Store: workflows, Runs: runs, Definitions: proposal.Definitions{Catalog: catalog}})
	proposals := proposal.NewService(proposal.Options{Store: workflows, Models: models, Catalog: catalog})
	api := httpapi.NewRouter()
	for _, r := range []*httpapi.Router{auth.Routes(authn, nil), workflow.Routes(svc, authn), proposal.Routes(proposals, authn, workflow.Limits{})} {
		api.Mount(r, r.Patterns()...)
	}
	srv := httptest.NewServer(httpapi.Stack(api, httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	a := &wfAPI{srv: srv, db: db, llm: llm, runs: runs, users: map[string]wfUser{}}
	for _, name := range []string{"a", "b"} {
		resp := a.call(t, "", "POST", "/api/auth/sign-up/email", fmt.Sprintf(`{"email":"%s@example.com","password":"password-1x","name":"%s"}`, name, name))
		var body struct{ User struct{ ID string } }
		wfDecode(t, resp, 200, &body)
		u := wfUser{id: body.User.ID}
		for _, c := range resp.Cookies() {
			u.cookie = c.Name + "=" + c.Value
		}
		a.users[name] = u
	}
	return a
}

// call sends a request as user ("" = no session), with the headers given
// as name, value pairs.
func (a *wfAPI) call(t *testing.T, user, method, path, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Cookie", a.users[user].cookie)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// do sends a request as user and decodes data into out after checking the
// status.
func (a *wfAPI) do(t *testing.T, user, method, path, body string, status int, out any) {
	t.Helper()
	wfDecode(t, a.call(t, user, method, path, body), status, out)
}

type apiError struct {
	Error, Message, Code string
	Details              []struct{ Field, Message string }
}

// fail sends a request that must fail with status and code.
func (a *wfAPI) fail(t *testing.T, user, method, path, body string, status int, code string) apiError {
	t.Helper()
	var e apiError
	wfDecode(t, a.call(t, user, method, path, body), status, &e)
	if code != "" && e.Code != code {
		t.Errorf("%s %s: code = %q (%s), want %q", method, path, e.Code, e.Message, code)
	}
	return e
}

func wfDecode(t *testing.T, resp *http.Response, status int, out any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status = %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, b)
	}
	if out == nil || len(b) == 0 {
		return
	}
	if _, isErr := out.(*apiError); !isErr {
		var env struct{ Data json.RawMessage }
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		b = env.Data
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
}

func (a *wfAPI) create(t *testing.T, user, name string) workflow.Workflow {
	t.Helper()
	var w workflow.Workflow
	a.do(t, user, "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":%q,"description":"d"}`, a.users[user].id, name), 201, &w)
	return w
}

func (a *wfAPI) send(t *testing.T, user, wfID, content, modelID string) proposal.Exchange {
	t.Helper()
	var ex proposal.Exchange
	body, _ := json.Marshal(map[string]string{"content": content, "modelId": modelID})
	a.do(t, user, "POST", "/api/workflows/"+wfID+"/messages", string(body), 201, &ex)
	return ex
}

// propose posts content to the built-in model and returns the proposal it
// must yield.
func (a *wfAPI) propose(t *testing.T, wfID, content string) workflow.Proposal {
	t.Helper()
	ex := a.send(t, "a", wfID, content, model.BuiltinID)
	if ex.AssistantMessage.Proposal == nil || ex.AssistantMessage.Proposal.Status != workflow.ProposalPending {
		t.Fatalf("%q: no pending proposal: %+v", content, ex.AssistantMessage)
	}
	return *ex.AssistantMessage.Proposal
}

func (a *wfAPI) apply(t *testing.T, wfID, proposalID string) proposal.Applied {
	t.Helper()
	var out proposal.Applied
	a.do(t, "a", "POST", "/api/workflows/"+wfID+"/messages/apply", fmt.Sprintf(`{"proposalId":%q}`, proposalID), 200, &out)
	return out
}

func (a *wfAPI) get(t *testing.T, wfID string) workflow.Workflow {
	t.Helper()
	var w workflow.Workflow
	a.do(t, "a", "GET", "/api/workflows/"+wfID, "", 200, &w)
	return w
}

const missingID = "0b7c9a38-8f0c-4e43-9d7a-5bb1a3c5d0e1"

func TestWorkflowCRUDOverHTTP(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	uid := a.users["a"].id

	// Create: 201 with empty steps; body errors 400 before ownership 403.
	w := a.create(t, "a", "First")
	if w.ID == "" || w.UserID != uid || w.Name != "First" || w.Description != "d" || w.Steps == nil || len(w.Steps) != 0 || w.Version != 1 {
		t.Errorf("created = %+v", w)
	}
	raw := a.call(t, "a", "GET", "/api/workflows/"+w.ID, "")
	b, _ := io.ReadAll(raw.Body)
	raw.Body.Close()
	if !strings.Contains(string(b), `"steps":[]`) {
		t.Errorf("steps not an empty array: %s", b)
	}
	a.fail(t, "", "POST", "/api/workflows", `{"userId":"x","name":"n"}`, 401, "UNAUTHORIZED")
	a.fail(t, "a", "POST", "/api/workflows", `{"userId":`, 400, "INVALID_JSON")
	a.fail(t, "a", "POST", "/api/workflows", `{"name":"n"}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", "/api/workflows", `{"userId":"someone-else"}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":""}`, uid), 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":%q}`, uid, strings.Repeat("n", 256)), 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"n","description":%q}`, uid, strings.Repeat("d", 1001)), 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", "/api/workflows", `{"userId":"someone-else","name":"n"}`, 403, "FORBIDDEN")
	var maxed workflow.Workflow
	a.do(t, "a", "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":%q,"description":%q}`, uid, strings.Repeat("n", 255), strings.Repeat("d", 1000)), 201, &maxed)

	// Get.
	if got := a.get(t, w.ID); got.ID != w.ID || got.Name != "First" {
		t.Errorf("get = %+v", got)
	}
	a.fail(t, "a", "GET", "/api/workflows/not-a-uuid", "", 400, "INVALID_ID")
	a.fail(t, "a", "GET", "/api/workflows/"+missingID, "", 404, "WORKFLOW_NOT_FOUND")
	a.fail(t, "b", "GET", "/api/workflows/"+w.ID, "", 403, "FORBIDDEN")
	a.fail(t, "", "GET", "/api/workflows/"+w.ID, "", 401, "UNAUTHORIZED")

	// Patch.
	var patched workflow.Workflow
	a.do(t, "a", "PATCH", "/api/workflows/"+w.ID, `{"name":"Renamed"}`, 200, &patched)
	if patched.Name != "Renamed" || patched.Description != "d" || patched.Version != 2 || !patched.UpdatedAt.After(w.UpdatedAt) {
		t.Errorf("patched = %+v", patched)
	}
	a.do(t, "a", "PATCH", "/api/workflows/"+w.ID, `{"description":""}`, 200, &patched)
	if patched.Name != "Renamed" || patched.Description != "" || patched.Version != 3 {
		t.Errorf("patched = %+v", patched)
	}
	a.fail(t, "a", "PATCH", "/api/workflows/"+w.ID, `{}`, 400, "NO_FIELDS")
	a.fail(t, "a", "PATCH", "/api/workflows/"+w.ID, `{"name":""}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "PATCH", "/api/workflows/"+w.ID, `{"description":`+fmt.Sprintf("%q", strings.Repeat("d", 1001))+`}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "PATCH", "/api/workflows/bad", `{"name":"x"}`, 400, "INVALID_ID")
	a.fail(t, "a", "PATCH", "/api/workflows/"+missingID, `{"name":"x"}`, 404, "WORKFLOW_NOT_FOUND")
	a.fail(t, "b", "PATCH", "/api/workflows/"+w.ID, `{"name":"x"}`, 403, "FORBIDDEN")

	// List: newest first by updatedAt, total from the counter.
	third := a.create(t, "a", "Third")
	a.create(t, "b", "B's")
	var page struct {
		Workflows []workflow.Workflow
		Total     int
	}
	a.do(t, "a", "GET", "/api/users/"+uid+"/workflows", "", 200, &page)
	if page.Total != 3 || len(page.Workflows) != 3 || page.Workflows[0].ID != third.ID || page.Workflows[1].ID != w.ID || page.Workflows[2].ID != maxed.ID {
		t.Errorf("list = %+v", page)
	}
	a.do(t, "a", "GET", "/api/users/"+uid+"/workflows?limit=1&offset=1", "", 200, &page)
	if page.Total != 3 || len(page.Workflows) != 1 || page.Workflows[0].ID != w.ID {
		t.Errorf("page = %+v", page)
	}
	a.fail(t, "a", "GET", "/api/users/"+uid+"/workflows?limit=0", "", 400, "INVALID_PAGINATION")
	a.fail(t, "a", "GET", "/api/users/"+a.users["b"].id+"/workflows", "", 403, "FORBIDDEN")

	// Delete: runs first, then everything; 404 afterwards; counter down.
	a.send(t, "a", w.ID, "add a step using datetime_now", model.BuiltinID)
	a.fail(t, "b", "DELETE", "/api/workflows/"+w.ID, "", 403, "FORBIDDEN")
	a.fail(t, "a", "DELETE", "/api/workflows/bad", "", 400, "INVALID_ID")
	a.do(t, "a", "DELETE", "/api/workflows/"+w.ID, "", 204, nil)
	a.fail(t, "a", "GET", "/api/workflows/"+w.ID, "", 404, "WORKFLOW_NOT_FOUND")
	a.fail(t, "a", "DELETE", "/api/workflows/"+w.ID, "", 404, "WORKFLOW_NOT_FOUND")
	a.fail(t, "a", "GET", "/api/workflows/"+w.ID+"/messages", "", 404, "WORKFLOW_NOT_FOUND")
	if fmt.Sprint(a.runs.ids) != "["+w.ID+"]" {
		t.Errorf("runs deleted for %v", a.runs.ids)
	}
	var left []struct{ PK, SK string }
	if err := a.db.Table(a.db.Data()).Get("PK", "WF#"+w.ID).All(context.Background(), &left); err != nil || len(left) != 0 {
		t.Errorf("left behind: %v %v", left, err)
	}
	a.do(t, "a", "GET", "/api/users/"+uid+"/workflows", "", 200, &page)
	if page.Total != 2 || len(page.Workflows) != 2 {
		t.Errorf("after delete = %+v", page)
	}
}

func TestWorkflowChatProposalsOverHTTP(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "Chat")
	base := "/api/workflows/" + w.ID

	// Body and identifier errors first, then 404, then 403.
	a.fail(t, "a", "POST", base+"/messages", `{"modelId":"builtin"}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", base+"/messages", `{"content":"hi"}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", base+"/messages", fmt.Sprintf(`{"content":%q,"modelId":"builtin"}`, strings.Repeat("x", 32001)), 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", base+"/messages", `{"content":"hi","modelId":"nope"}`, 400, "INVALID_MODEL")
	a.fail(t, "a", "POST", "/api/workflows/bad/messages", `{"content":"hi","modelId":"builtin"}`, 400, "INVALID_ID")
	a.fail(t, "a", "POST", "/api/workflows/"+missingID+"/messages", `{"content":"hi","modelId":"builtin"}`, 404, "WORKFLOW_NOT_FOUND")
	a.fail(t, "b", "POST", base+"/messages", `{"content":"hi","modelId":"builtin"}`, 403, "FORBIDDEN")
	a.fail(t, "", "POST", base+"/messages", `{"content":"hi","modelId":"builtin"}`, 401, "UNAUTHORIZED")
	a.fail(t, "a", "GET", "/api/workflows/bad/messages", "", 400, "INVALID_ID")
	a.fail(t, "b", "GET", base+"/messages", "", 403, "FORBIDDEN")

	// Anything else: a reply with no proposal.
	help := a.send(t, "a", w.ID, "hello there", model.BuiltinID)
	if help.AssistantMessage.Proposal != nil || !strings.Contains(help.AssistantMessage.Content, "add a step using") ||
		help.UserMessage.Content != "hello there" || help.UserMessage.Role != "user" || help.AssistantMessage.Role != "assistant" ||
		help.UserMessage.WorkflowID != w.ID {
		t.Errorf("help = %+v", help)
	}
	// An invalid proposal is not stored; the reply says what was wrong.
	bad := a.send(t, "a", w.ID, `add a step using hash with {"text": 5}`, model.BuiltinID)
	if bad.AssistantMessage.Proposal != nil || !strings.Contains(bad.AssistantMessage.Content, "could not propose") {
		t.Errorf("invalid proposal reply = %+v", bad.AssistantMessage)
	}
	unknown := a.send(t, "a", w.ID, `add a step using frobnicate`, model.BuiltinID)
	if unknown.AssistantMessage.Proposal != nil || !strings.Contains(unknown.AssistantMessage.Content, `unknown tool "frobnicate"`) {
		t.Errorf("unknown tool reply = %+v", unknown.AssistantMessage)
	}

	// A valid proposal, applied.
	p1 := a.propose(t, w.ID, `add a step using json_query with {"input": {"a": 1}, "query": ".a"}`)
	if len(p1.Changes) != 1 || p1.Changes[0].Step.ID != "step1" || p1.BaseVersion != 1 {
		t.Errorf("proposal = %+v", p1)
	}
	a.fail(t, "a", "POST", base+"/messages/apply", `{"proposalId":"nope"}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", base+"/messages/apply", `{}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", base+"/messages/apply", `{"proposalId":"`+missingID+`"}`, 404, "PROPOSAL_NOT_FOUND")
	a.fail(t, "a", "POST", "/api/workflows/"+missingID+"/messages/apply", `{"proposalId":"`+p1.ID+`"}`, 404, "WORKFLOW_NOT_FOUND")
	a.fail(t, "a", "POST", "/api/workflows/bad/messages/apply", `{"proposalId":"`+p1.ID+`"}`, 400, "INVALID_ID")
	a.fail(t, "a", "POST", "/api/workflows/bad/messages/reject", `{"proposalId":"`+p1.ID+`"}`, 400, "INVALID_ID")
	a.fail(t, "a", "POST", base+"/messages/reject", `{"proposalId":42}`, 400, "VALIDATION_FAILED")
	a.fail(t, "a", "POST", base+"/messages/reject", `{"proposalId":"`+missingID+`"}`, 404, "PROPOSAL_NOT_FOUND")
	a.fail(t, "a", "POST", "/api/workflows/"+missingID+"/messages/reject", `{"proposalId":"`+p1.ID+`"}`, 404, "WORKFLOW_NOT_FOUND")
	a.fail(t, "", "POST", base+"/messages/apply", `{"proposalId":"`+p1.ID+`"}`, 401, "UNAUTHORIZED")
	a.fail(t, "b", "POST", base+"/messages/apply", `{"proposalId":"`+p1.ID+`"}`, 403, "FORBIDDEN")
	a.fail(t, "b", "POST", base+"/messages/reject", `{"proposalId":"`+p1.ID+`"}`, 403, "FORBIDDEN")
	applied := a.apply(t, w.ID, p1.ID)
	if applied.Proposal.ID != p1.ID || applied.Proposal.Status != "applied" || applied.Proposal.AppliedAt == nil {
		t.Errorf("applied = %+v", applied.Proposal)
	}
	got := a.get(t, w.ID)
	if len(got.Steps) != 1 || got.Steps[0].ID != "step1" || got.Steps[0].ToolID != "json_query" || fmt.Sprint(got.Steps[0].Outputs) != "[result]" ||
		got.Version != 2 || !got.UpdatedAt.After(w.UpdatedAt) || got.Steps[0].Inputs["query"] != ".a" {
		t.Errorf("workflow after apply = %+v", got)
	}
	if applied.Workflow.Version != got.Version || len(applied.Workflow.Steps) != 1 {
		t.Errorf("apply response workflow = %+v", applied.Workflow)
	}
	a.fail(t, "a", "POST", base+"/messages/apply", `{"proposalId":"`+p1.ID+`"}`, 400, "PROPOSAL_NOT_PENDING")
	a.fail(t, "a", "POST", base+"/messages/reject", `{"proposalId":"`+p1.ID+`"}`, 400, "PROPOSAL_NOT_PENDING")

	// Reject.
	p2 := a.propose(t, w.ID, "remove step step1")
	var rej proposal.Rejected
	a.do(t, "a", "POST", base+"/messages/reject", `{"proposalId":"`+p2.ID+`"}`, 200, &rej)
	if rej.Proposal.ID != p2.ID || rej.Proposal.Status != "rejected" || rej.Proposal.RejectedAt == nil {
		t.Errorf("rejected = %+v", rej)
	}
	a.fail(t, "a", "POST", base+"/messages/reject", `{"proposalId":"`+p2.ID+`"}`, 400, "PROPOSAL_NOT_PENDING")
	a.fail(t, "a", "POST", base+"/messages/apply", `{"proposalId":"`+p2.ID+`"}`, 400, "PROPOSAL_NOT_PENDING")
	if len(a.get(t, w.ID).Steps) != 1 {
		t.Error("a rejected proposal changed the workflow")
	}

	// The conversation, in order, with each proposal's current status.
	var list struct{ Messages []workflow.Message }
	a.do(t, "a", "GET", base+"/messages", "", 200, &list)
	var roles, statuses []string
	for _, m := range list.Messages {
		roles = append(roles, m.Role[:1])
		if m.Proposal != nil {
			if m.Role != "assistant" {
				t.Errorf("proposal on a %s message", m.Role)
			}
			statuses = append(statuses, m.Proposal.Status)
		}
	}
	if strings.Join(roles, "") != "uauauauaua" || fmt.Sprint(statuses) != "[applied rejected]" {
		t.Errorf("roles %v statuses %v", roles, statuses)
	}
}

func TestWorkflowRebaseAndConflict(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "Rebase")
	a.apply(t, w.ID, a.propose(t, w.ID, "add a step using datetime_now").ID)

	// Three proposals against version 2.
	pHash := a.propose(t, w.ID, `add a step using hash with {"text": "{{step1.iso}}", "algorithm": "md5"}`)
	pRemove := a.propose(t, w.ID, "remove step step1")
	pRename := a.propose(t, w.ID, "rename workflow to Renamed")
	for _, p := range []workflow.Proposal{pHash, pRemove, pRename} {
		if p.BaseVersion != 2 {
			t.Fatalf("base version = %d", p.BaseVersion)
		}
	}
	a.apply(t, w.ID, pRename.ID)
	// The workflow moved on (version 3) but the hash step still fits: it lands.
	out := a.apply(t, w.ID, pHash.ID)
	if out.Workflow.Version != 4 || out.Workflow.Name != "Renamed" || len(out.Workflow.Steps) != 2 || out.Workflow.Steps[1].ID != "step2" {
		t.Errorf("rebased = %+v", out.Workflow)
	}
	// Removing step1 would now break step2's reference: 409, nothing written.
	e := a.fail(t, "a", "POST", "/api/workflows/"+w.ID+"/messages/apply", `{"proposalId":"`+pRemove.ID+`"}`, 409, "PROPOSAL_CONFLICT")
	if !strings.Contains(e.Message, "step1") || len(e.Details) == 0 {
		t.Errorf("conflict = %+v", e)
	}
	if got := a.get(t, w.ID); got.Version != 4 || len(got.Steps) != 2 {
		t.Errorf("conflict wrote: %+v", got)
	}
	var list struct{ Messages []workflow.Message }
	a.do(t, "a", "GET", "/api/workflows/"+w.ID+"/messages", "", 200, &list)
	for _, m := range list.Messages {
		if m.Proposal != nil && m.Proposal.ID == pRemove.ID && m.Proposal.Status != "pending" {
			t.Errorf("conflicting proposal status = %s", m.Proposal.Status)
		}
	}
}

// TestWorkflowConcurrentApplies applies proposals made against the same
// version from concurrent requests: each lands or gets 409, and nothing
// is lost.
func TestWorkflowConcurrentApplies(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "Concurrent")
	var ps []workflow.Proposal
	for range 4 {
		ps = append(ps, a.propose(t, w.ID, "add a step using datetime_now"))
	}
	ps = append(ps, a.propose(t, w.ID, "rename workflow to Both"))
	codes := make([]int, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := a.call(t, "a", "POST", "/api/workflows/"+w.ID+"/messages/apply", `{"proposalId":"`+p.ID+`"}`)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	got := a.get(t, w.ID)
	applied := 0
	for i, c := range codes {
		switch c {
		case 200:
			applied++
			if ps[i].Changes[0].Type == workflow.ChangeAddStep {
				id := ps[i].Changes[0].Step.ID
				if !containsStep(got, id) {
					t.Errorf("applied step %s lost: %+v", id, got.Steps)
				}
			} else if got.Name != "Both" {
				t.Errorf("applied rename lost: %q", got.Name)
			}
		case 409:
		default:
			t.Errorf("apply %d: status %d", i, c)
		}
	}
	if applied == 0 || got.Version != 1+applied || len(got.Steps) != applied-boolInt(got.Name == "Both") {
		t.Errorf("codes %v: workflow version %d steps %d name %q", codes, got.Version, len(got.Steps), got.Name)
	}
	t.Logf("codes %v", codes)
}

func containsStep(w workflow.Workflow, id string) bool {
	for _, s := range w.Steps {
		if s.ID == id {
			return true
		}
	}
	return false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWorkflowNativeProposal: a real provider proposes through a native
// propose_changes call, offered with the workflow and the catalog.
func TestWorkflowNativeProposal(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "LLM")
	chat := a.send(t, "a", w.ID, "just talk", "fake-llm")
	if chat.AssistantMessage.Proposal != nil || chat.AssistantMessage.Content != "Just chatting." {
		t.Errorf("chat = %+v", chat.AssistantMessage)
	}
	ex := a.send(t, "a", w.ID, "please propose something", "fake-llm")
	p := ex.AssistantMessage.Proposal
	if p == nil || len(p.Changes) != 2 || ex.AssistantMessage.Content != "Here is my proposal." {
		t.Fatalf("reply = %+v", ex.AssistantMessage)
	}
	a.llm.mu.Lock()
	req := a.llm.last
	a.llm.mu.Unlock()
	if len(req.Tools) != 1 || req.Tools[0].Name != proposal.ProposeToolName || !json.Valid(req.Tools[0].InputSchema) ||
		!strings.Contains(req.System, "json_query") || !strings.Contains(req.System, `"LLM"`) || len(req.Messages) != 3 {
		t.Errorf("request = %+v", req)
	}
	out := a.apply(t, w.ID, p.ID)
	if out.Workflow.Name != "Named by the model" || len(out.Workflow.Steps) != 1 || fmt.Sprint(out.Workflow.Steps[0].Outputs) != "[iso unix]" {
		t.Errorf("applied = %+v", out.Workflow)
	}
	badEx := a.send(t, "a", w.ID, "use a bad tool", "fake-llm")
	if badEx.AssistantMessage.Proposal != nil || !strings.Contains(badEx.AssistantMessage.Content, "no_such_tool") {
		t.Errorf("bad = %+v", badEx.AssistantMessage)
	}
}

// TestWorkflowCallBudget holds the endpoints to their DynamoDB budget: after
// the session lookup, a read is one call, and apply and PATCH are one read
// and one transaction.
func TestWorkflowCallBudget(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "Budget")
	p := a.propose(t, w.ID, "add a step using datetime_now")
	measure := func(name string, want int64, fn func()) {
		t.Helper()
		a.db.Counter.Reset()
		fn()
		if n := a.db.Counter.Count() - 1; n != want { // minus the session lookup
			t.Errorf("%s: %d calls after the session lookup, want %d", name, n, want)
		}
	}
	measure("get messages", 1, func() { a.do(t, "a", "GET", "/api/workflows/"+w.ID+"/messages", "", 200, nil) })
	measure("get workflow", 1, func() { a.get(t, w.ID) })
	measure("list", 1, func() { a.do(t, "a", "GET", "/api/users/"+a.users["a"].id+"/workflows", "", 200, nil) })
	measure("apply", 2, func() { a.apply(t, w.ID, p.ID) })
	measure("post message", 2, func() { a.send(t, "a", w.ID, "rename workflow to B", model.BuiltinID) })
	measure("patch", 2, func() { a.do(t, "a", "PATCH", "/api/workflows/"+w.ID, `{"name":"C"}`, 200, nil) })
}

// TestWorkflowMessagesPageBack fills a workflow chat past what one answer
// holds (5 MiB of JSON) and reads it back whole: the newest messages with
// omitted, then, with before set to the first message answered, the older
// ones, until nothing is omitted.
func TestWorkflowMessagesPageBack(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "Long chat")
	ws := store.NewWorkflows(a.db.DB, a.db.Data())
	// 24 messages of 300 KB (an item holds at most 400 KB): 7.2 MB, about
	// 17 to an answer.
	start := time.Now().UTC().Truncate(time.Millisecond)
	var want []string
	for i := range 24 {
		m := workflow.Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: "user",
			Content: fmt.Sprintf("%02d", i) + strings.Repeat("x", 300_000), CreatedAt: start.Add(time.Duration(i) * time.Second)}
		if err := ws.AddMessages(t.Context(), w.ID, nil, m); err != nil {
			t.Fatal(err)
		}
		want = append(want, m.ID)
	}
	type list struct {
		Messages []workflow.Message
		Omitted  int
	}
	var got []string
	path := "/api/workflows/" + w.ID + "/messages"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("still omitted after %d pages", pages)
		}
		var l list
		a.do(t, "a", "GET", path, "", 200, &l)
		if len(l.Messages) == 0 {
			t.Fatalf("page %d: no messages, omitted %d", pages, l.Omitted)
		}
		ids := []string{}
		for _, m := range l.Messages {
			ids = append(ids, m.ID)
		}
		got = append(ids, got...)
		if l.Omitted != len(want)-len(got) {
			t.Fatalf("page %d: omitted = %d, want %d", pages, l.Omitted, len(want)-len(got))
		}
		if l.Omitted == 0 {
			if pages == 0 {
				t.Fatal("the whole chat fit one answer: the test no longer crosses the bound")
			}
			break
		}
		path = "/api/workflows/" + w.ID + "/messages?before=" + l.Messages[0].ID
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("paged back %v, want %v", got, want)
	}

	var l list
	a.do(t, "a", "GET", "/api/workflows/"+w.ID+"/messages?before="+want[0], "", 200, &l)
	if len(l.Messages) != 0 || l.Omitted != 0 {
		t.Errorf("before the first message: %d messages, omitted %d", len(l.Messages), l.Omitted)
	}
	for _, tc := range []struct {
		user, query string
		status      int
		code        string
	}{
		{"a", "?before=not-a-uuid", 400, "VALIDATION_FAILED"},
		{"a", "?before=", 400, "VALIDATION_FAILED"},
		{"a", "?before=" + missingID, 404, "MESSAGE_NOT_FOUND"},
		{"b", "?before=" + missingID, 403, "FORBIDDEN"},
		{"b", "?before=" + want[3], 403, "FORBIDDEN"},
	} {
		a.fail(t, tc.user, "GET", "/api/workflows/"+w.ID+"/messages"+tc.query, "", tc.status, tc.code)
	}
}

// TestWorkflowChatFull: a message to a workflow chat without room for it
// is 409 CHAT_FULL before the model is called, with nothing stored.
func TestWorkflowChatFull(t *testing.T) {
	t.Parallel()
	a := newWFAPI(t)
	w := a.create(t, "a", "Full chat")
	ws := store.NewWorkflows(a.db.DB, a.db.Data())
	start := time.Now().UTC().Add(-time.Hour)
	for i, held := 0, 0; held < workflow.MaxChatBytes-100; i++ {
		m := workflow.Message{ID: uuid.NewString(), WorkflowID: w.ID, Role: "user", CreatedAt: start.Add(time.Duration(i) * time.Millisecond)}
		m.Content = strings.Repeat("x", min(300_000, workflow.MaxChatBytes-100-held-workflow.MessageWeight(m)))
		if err := ws.AddMessages(t.Context(), w.ID, nil, m); err != nil {
			t.Fatal(err)
		}
		held += workflow.MessageWeight(m)
	}
	count := func() int {
		_, msgs, err := ws.Conversation(t.Context(), w.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}
	before := count()
	e := a.fail(t, "a", "POST", "/api/workflows/"+w.ID+"/messages", `{"content":"propose something","modelId":"fake-llm"}`, 409, workflow.CodeChatFull)
	if !strings.Contains(e.Message, "8 MiB") {
		t.Errorf("message %q does not say the bound", e.Message)
	}
	a.llm.mu.Lock()
	called := a.llm.last.Messages != nil
	a.llm.mu.Unlock()
	if called {
		t.Error("the model was called for a message the chat had no room for")
	}
	if n := count(); n != before {
		t.Errorf("the refused message left %d messages", n-before)
	}
	// Another user's send is still 403, whatever the chat holds.
	a.fail(t, "b", "POST", "/api/workflows/"+w.ID+"/messages", `{"content":"hi","modelId":"builtin"}`, 403, "FORBIDDEN")
}
