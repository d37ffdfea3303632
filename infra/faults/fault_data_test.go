package faults_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/truora/minidyn/server"
)

// unprocessed makes BatchWriteItem on the Data table leave its first
// sub-request unprocessed, for the first n batch calls (n < 0: always).
func (e *env) unprocessed(n int64) {
	var calls atomic.Int64
	e.withBackend(func(b *server.Server) {
		b.EmulateUnprocessedItems(e.cfg.DataTable, func(i int, _ map[string]*server.AttributeValue) bool {
			if i != 0 {
				return false
			}
			return n < 0 || calls.Add(1) <= n
		})
	})
}

func (e *env) clearUnprocessed() { e.withBackend(func(b *server.Server) { b.ClearUnprocessedItems() }) }

// TestFaultDeleteUnprocessedItems deletes a chat and a workflow whose
// collections the engine leaves partly unprocessed. A few times: the
// client library re-sends the unprocessed items and the delete completes.
// Always: the delete gives up in bounded time with a 503 and Retry-After,
// leaving the chat or workflow in place, and the retry after recovery
// deletes everything: no orphan in the partition, the counter back to 0.
func TestFaultDeleteUnprocessedItems(t *testing.T) {
	t.Parallel()
	type target struct {
		name   string
		setup  func(e *env) (path, pk string)
		total  func(e *env) int
		exists func(e *env, path string) int
	}
	targets := []target{
		{
			name: "chat",
			setup: func(e *env) (string, string) {
				id := e.createChat()
				e.postMessage(id)
				e.postMessage(id)
				return "/api/chats/" + id, "CHAT#" + id
			},
			total: func(e *env) int { n, _ := e.chatTotal(); return n },
			exists: func(e *env, path string) int {
				resp, _ := e.as(e.api, "GET", path, "")
				return resp.StatusCode
			},
		},
		{
			name: "workflow",
			setup: func(e *env) (string, string) {
				id := e.createWorkflow()
				e.propose(id)
				e.propose(id)
				return "/api/workflows/" + id, "WF#" + id
			},
			total: func(e *env) int { return e.workflowTotal() },
			exists: func(e *env, path string) int {
				resp, _ := e.as(e.wf, "GET", path, "")
				return resp.StatusCode
			},
		},
	}
	for _, tg := range targets {
		srv := func(e *env) *httptest.Server {
			if tg.name == "chat" {
				return e.api
			}
			return e.wf
		}
		t.Run(tg.name+": transient", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			path, pk := tg.setup(e)
			e.unprocessed(2)
			resp, body := e.as(srv(e), "DELETE", path, "")
			e.clearUnprocessed()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("delete: %d %s", resp.StatusCode, body)
			}
			if left := e.partition(pk); len(left) != 0 {
				t.Errorf("orphans: %v", left)
			}
			if n := tg.total(e); n != 0 {
				t.Errorf("total %d after the delete", n)
			}
		})
		t.Run(tg.name+": persistent", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			path, pk := tg.setup(e)
			e.unprocessed(-1)
			start := time.Now()
			resp, body := e.as(srv(e), "DELETE", path, "")
			took := time.Since(start)
			e.clearUnprocessed()
			expectUnavailable(t, resp, body)
			if took > patience/2 { // the retries of one request take seconds; this is retrying for good
				t.Errorf("the delete gave up after %s", took)
			}
			if st := tg.exists(e, path); st != http.StatusOK {
				t.Errorf("after the failed delete: GET %d, want 200 (left in place for a retry)", st)
			}
			if resp, body := e.as(srv(e), "DELETE", path, ""); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("retried delete: %d %s", resp.StatusCode, body)
			}
			if left := e.partition(pk); len(left) != 0 {
				t.Errorf("orphans after the retried delete: %v", left)
			}
			if n := tg.total(e); n != 0 {
				t.Errorf("total %d after the retried delete", n)
			}
		})
	}
}
