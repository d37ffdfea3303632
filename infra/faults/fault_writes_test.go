package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/truora/minidyn/server"

	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/workflow"
)

// writePath is one write endpoint and the DynamoDB write that fails under
// it.
type writePath struct {
	name string
	// op and table select the failing write on the wire.
	op    string
	table func(config.Config) string
	// engine: also fail the whole table with minidyn's own emulation
	// (EmulateFailureForTable), which fails the path's reads first.
	engine bool
	setup  func(e *env) ids
	call   func(e *env, s ids) (*http.Response, []byte)
	// status is the answer without faults.
	status int
	// whole checks, after a persistent failure and with faults cleared,
	// that the data is as before the request (or that a retry completes
	// it).
	whole func(t *testing.T, e *env, s ids)
}

type ids map[string]string

func users(c config.Config) string    { return c.UsersTable }
func sessions(c config.Config) string { return c.SessionsTable }
func data(c config.Config) string     { return c.DataTable }

func writePaths() []writePath {
	chatOnly := func(e *env) ids { return ids{"chat": e.createChat()} }
	chatWithMessage := func(e *env) ids {
		id := e.createChat()
		e.postMessage(id)
		return ids{"chat": id}
	}
	proposed := func(e *env) ids {
		w := e.createWorkflow()
		return ids{"wf": w, "proposal": e.propose(w)}
	}
	deleteChat := func(e *env, s ids) (*http.Response, []byte) {
		return e.as(e.api, "DELETE", "/api/chats/"+s["chat"], "")
	}
	deleteChatWhole := func(t *testing.T, e *env, s ids) {
		// A retry completes the delete, and nothing of the chat is left.
		if resp, b := deleteChat(e, s); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("retried delete: %d %s", resp.StatusCode, b)
		}
		if left := e.partition("CHAT#" + s["chat"]); len(left) != 0 {
			t.Errorf("orphans after the retried delete: %v", left)
		}
		if total, n := e.chatTotal(); total != 0 || n != 0 {
			t.Errorf("chat total %d, listed %d; want 0, 0", total, n)
		}
	}
	deleteWF := func(e *env, s ids) (*http.Response, []byte) {
		return e.as(e.wf, "DELETE", "/api/workflows/"+s["wf"], "")
	}
	deleteWFWhole := func(t *testing.T, e *env, s ids) {
		if resp, b := deleteWF(e, s); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("retried delete: %d %s", resp.StatusCode, b)
		}
		if left := e.partition("WF#" + s["wf"]); len(left) != 0 {
			t.Errorf("orphans after the retried delete: %v", left)
		}
		if total := e.workflowTotal(); total != 0 {
			t.Errorf("workflow total %d, want 0", total)
		}
	}
	proposalPending := func(t *testing.T, e *env, s ids) {
		t.Helper()
		w := e.getWorkflow(s["wf"])
		if w.Version != 1 || len(w.Steps) != 0 {
			t.Errorf("workflow changed: version %d, steps %+v", w.Version, w.Steps)
		}
		msgs := e.wfMessages(s["wf"])
		if len(msgs) != 2 || msgs[1].Proposal == nil || msgs[1].Proposal.Status != workflow.ProposalPending {
			t.Errorf("proposal not pending: %+v", msgs)
		}
	}
	return []writePath{
		{
			name: "sign-up", op: "TransactWriteItems", table: users, engine: true, status: 200,
			call: func(e *env, _ ids) (*http.Response, []byte) {
				return e.call(e.api, "", "POST", "/api/auth/sign-up/email", `{"email":"new@example.com","password":"password-2","name":"New"}`)
			},
			whole: func(t *testing.T, e *env, _ ids) {
				resp, b := e.call(e.api, "", "POST", "/api/auth/sign-in/email", `{"email":"new@example.com","password":"password-2"}`)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("sign-in after the failed sign-up: %d %s, want 401 (no user)", resp.StatusCode, b)
				}
			},
		},
		{
			name: "sign-in session", op: "PutItem", table: sessions, engine: true, status: 200,
			call: func(e *env, _ ids) (*http.Response, []byte) {
				return e.call(e.api, "", "POST", "/api/auth/sign-in/email", `{"email":"owner@example.com","password":"password-1"}`)
			},
		},
		{
			name: "set model preference", op: "UpdateItem", table: users, engine: true, status: 200,
			call: func(e *env, _ ids) (*http.Response, []byte) {
				return e.as(e.api, "POST", "/api/users/"+e.userID+"/model-preference", `{"modelId":"builtin"}`)
			},
		},
		{
			name: "create chat", op: "TransactWriteItems", table: data, engine: true, status: 201,
			call: func(e *env, _ ids) (*http.Response, []byte) {
				return e.as(e.api, "POST", "/api/chats", `{"title":"x"}`)
			},
			whole: func(t *testing.T, e *env, _ ids) {
				if total, n := e.chatTotal(); total != 0 || n != 0 {
					t.Errorf("after a failed create: chat total %d, listed %d; want 0, 0", total, n)
				}
			},
		},
		{
			name: "rename chat", op: "UpdateItem", table: data, engine: true, status: 200, setup: chatOnly,
			call: func(e *env, s ids) (*http.Response, []byte) {
				return e.as(e.api, "PATCH", "/api/chats/"+s["chat"], `{"title":"renamed"}`)
			},
			whole: func(t *testing.T, e *env, s ids) {
				var c struct{ Title string }
				e.ok(e.api, "GET", "/api/chats/"+s["chat"], "", &c)
				if c.Title != "faults" {
					t.Errorf("title %q after a failed rename", c.Title)
				}
			},
		},
		{
			name: "post message", op: "TransactWriteItems", table: data, engine: true, status: 201, setup: chatOnly,
			call: func(e *env, s ids) (*http.Response, []byte) {
				return e.as(e.api, "POST", "/api/chats/"+s["chat"]+"/messages", `{"content":"hello"}`)
			},
			whole: func(t *testing.T, e *env, s ids) {
				if msgs := e.messages(s["chat"]); len(msgs) != 0 {
					t.Errorf("messages after a failed post: %+v", msgs)
				}
			},
		},
		{
			name: "stream user message", op: "TransactWriteItems", table: data, engine: true, status: 200, setup: chatOnly,
			call: func(e *env, s ids) (*http.Response, []byte) {
				return e.as(e.api, "POST", "/api/chats/"+s["chat"]+"/messages/stream", streamBody(e, "hello", ""))
			},
			whole: func(t *testing.T, e *env, s ids) {
				if msgs := e.messages(s["chat"]); len(msgs) != 0 {
					t.Errorf("messages after a failed stream start: %+v", msgs)
				}
			},
		},
		{name: "delete chat: mark", op: "UpdateItem", table: data, engine: true, status: 204, setup: chatWithMessage, call: deleteChat, whole: deleteChatWhole},
		{name: "delete chat: batch", op: "BatchWriteItem", table: data, status: 204, setup: chatWithMessage, call: deleteChat, whole: deleteChatWhole},
		{name: "delete chat: transaction", op: "TransactWriteItems", table: data, status: 204, setup: chatWithMessage, call: deleteChat, whole: deleteChatWhole},
		{
			name: "create workflow", op: "TransactWriteItems", table: data, engine: true, status: 201,
			call: func(e *env, _ ids) (*http.Response, []byte) {
				return e.as(e.wf, "POST", "/api/workflows", fmt.Sprintf(`{"userId":%q,"name":"W"}`, e.userID))
			},
			whole: func(t *testing.T, e *env, _ ids) {
				if total := e.workflowTotal(); total != 0 {
					t.Errorf("workflow total %d after a failed create", total)
				}
			},
		},
		{
			name: "workflow message with proposal", op: "TransactWriteItems", table: data, engine: true, status: 201,
			setup: func(e *env) ids { return ids{"wf": e.createWorkflow()} },
			call: func(e *env, s ids) (*http.Response, []byte) {
				return e.as(e.wf, "POST", "/api/workflows/"+s["wf"]+"/messages", addStepMessage)
			},
			whole: func(t *testing.T, e *env, s ids) {
				if msgs := e.wfMessages(s["wf"]); len(msgs) != 0 {
					t.Errorf("messages after a failed post: %+v", msgs)
				}
			},
		},
		{
			name: "apply proposal", op: "TransactWriteItems", table: data, engine: true, status: 200, setup: proposed,
			call: func(e *env, s ids) (*http.Response, []byte) {
				return e.as(e.wf, "POST", "/api/workflows/"+s["wf"]+"/messages/apply", fmt.Sprintf(`{"proposalId":%q}`, s["proposal"]))
			},
			whole: proposalPending,
		},
		{
			name: "reject proposal", op: "UpdateItem", table: data, engine: true, status: 200, setup: proposed,
			call: func(e *env, s ids) (*http.Response, []byte) {
				return e.as(e.wf, "POST", "/api/workflows/"+s["wf"]+"/messages/reject", fmt.Sprintf(`{"proposalId":%q}`, s["proposal"]))
			},
			whole: proposalPending,
		},
		{name: "delete workflow: batch", op: "BatchWriteItem", table: data, engine: true, status: 204, setup: proposed, call: deleteWF, whole: deleteWFWhole},
		{name: "delete workflow: transaction", op: "TransactWriteItems", table: data, status: 204, setup: proposed, call: deleteWF, whole: deleteWFWhole},
		{
			name: "start run", op: "TransactWriteItems", table: data, engine: true, status: 201,
			setup: func(e *env) ids { return ids{"chat": e.createChat(), "wf": e.workflowWithStep()} },
			call: func(e *env, s ids) (*http.Response, []byte) {
				return e.as(e.wf, "POST", "/api/chats/"+s["chat"]+"/workflow-runs", fmt.Sprintf(`{"workflowId":%q}`, s["wf"]))
			},
			whole: func(t *testing.T, e *env, s ids) {
				if runs := e.runs(s["chat"]); len(runs) != 0 {
					t.Errorf("runs after a failed start: %+v", runs)
				}
			},
		},
		{
			name: "cancel run", op: "TransactWriteItems", table: data, engine: true, status: 200,
			setup: func(e *env) ids {
				chatID, wfID := e.createChat(), e.workflowWithStep()
				run := workflow.Run{ID: uuid.NewString(), ChatID: chatID, WorkflowID: wfID, UserID: e.userID, Status: workflow.RunPending,
					StartedAt: time.Now().UTC(), Steps: []workflow.RunStep{{ID: "step_1", ToolID: "json_query", Status: workflow.StepPending}}}
				if err := store.NewRuns(e.stack.DB, e.cfg.DataTable).CreateRun(context.Background(), run, job.Lease{Until: time.Now().Add(time.Hour)}); err != nil {
					e.t.Fatal(err)
				}
				return ids{"chat": chatID, "run": run.ID}
			},
			call: func(e *env, s ids) (*http.Response, []byte) {
				return e.as(e.wf, "POST", "/api/chats/"+s["chat"]+"/workflow-runs/"+s["run"]+"/cancel", "")
			},
			whole: func(t *testing.T, e *env, s ids) {
				if runs := e.runs(s["chat"]); len(runs) != 1 || runs[0].Status != workflow.RunPending {
					t.Errorf("runs after a failed cancel: %+v", runs)
				}
			},
		},
	}
}

// TestFaultWritePaths fails, under every write endpoint, the DynamoDB write
// it makes: persistently with throttling, exceeded throughput and internal
// errors (the SDK tries MaxAttempts times, then the client gets a 503
// STORAGE_UNAVAILABLE with Retry-After: 1, and the data is as before),
// once (the retryer hides it: the client gets the normal answer), and the
// whole table through the engine's own emulation.
func TestFaultWritePaths(t *testing.T) {
	t.Parallel()
	kinds := []struct {
		name   string
		fault  fault
		times  int
		engine bool
	}{
		{name: "throttled", fault: throttled, times: -1},
		{name: "throughput exceeded", fault: throughput, times: -1},
		{name: "internal error", fault: internal, times: -1},
		{name: "throttled once", fault: throttled, times: 1},
		{name: "internal error once", fault: internal, times: 1},
		{name: "engine table failure", engine: true},
	}
	for _, p := range writePaths() {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			for _, k := range kinds {
				if k.engine && !p.engine {
					continue
				}
				t.Run(k.name, func(t *testing.T) {
					t.Parallel()
					e := newEnv(t, envOptions{})
					var s ids
					if p.setup != nil {
						s = p.setup(e)
					}
					table := p.table(e.cfg)
					if k.engine {
						e.withBackend(func(b *server.Server) {
							b.EmulateFailureForTable(table, server.FailureConditionInternalServerError)
						})
					} else {
						e.proxy.add(rule{op: p.op, table: table, times: k.times, fault: k.fault})
					}
					m, ops := e.proxy.mark(), e.counter.Count()
					resp, body := p.call(e, s)
					// Work the request started in the background (a run's
					// runner) must finish its calls before the wire and the
					// counter are compared.
					e.quiesce()
					e.proxy.clear()
					e.withBackend(func(b *server.Server) { b.EmulateFailureForTable(table, server.FailureConditionNone) })

					if k.times == 1 {
						// Transient: hidden by the retryer.
						if resp.StatusCode != p.status {
							t.Fatalf("got %d %s, want %d after one retried failure", resp.StatusCode, body, p.status)
						}
						calls := e.proxy.since(m)
						injected := 0
						for _, c := range calls {
							if c.injected {
								injected++
							}
						}
						if retries := int64(len(calls)) - (e.counter.Count() - ops); injected != 1 || retries != 1 {
							t.Errorf("%d injected failures, %d retries; want 1, 1", injected, retries)
						}
						return
					}
					expectUnavailable(t, resp, body)
					failedOps := 1
					if k.engine {
						failedOps = -1
					}
					e.expectRetries(t, m, ops, failedOps)
					if p.whole != nil {
						p.whole(t, e, s)
					}
				})
			}
		})
	}
}
