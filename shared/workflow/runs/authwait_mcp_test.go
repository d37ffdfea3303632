package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/mcpserver/remote"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/vault"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// grantTokens is a TokenSource with no grant until the test gives one.
type grantTokens struct {
	mu    sync.Mutex
	token string
}

func (g *grantTokens) Token(context.Context, mcpserver.Server) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.token == "" {
		return "", fmt.Errorf("no grant: %w", mcpserver.ErrNeedsAuthorization)
	}
	return g.token, nil
}

// remoteSteps runs a step's remote tool as the runner does: the user's
// server read from the store, called through mcpserver.Service.CallTool.
type remoteSteps struct {
	runs.ToolRunner
	svc  *mcpserver.Service
	user string
}

func (r remoteSteps) Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error) {
	name, tool, ok := mcpserver.ParseToolID(toolID)
	if !ok {
		return r.ToolRunner.Run(ctx, toolID, input)
	}
	list, err := r.svc.Servers(ctx, r.user)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if s.Name == name {
			return r.svc.CallTool(ctx, s, tool, input)
		}
	}
	return nil, fmt.Errorf("no server %s", name)
}

// TestAuthorizationWaitRemoteServer: a go-sdk MCP server answers 401 until
// the user authorized it. A run's step calling it waits; the refresh the
// OAuth callback makes (the grant now there) tells OnConnected, which
// continues the run through its wait item, and the step's call succeeds.
func TestAuthorizationWaitRemoteServer(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bearer", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "search", Description: "searches", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://`+r.Host+`/.well-known/oauth-protected-resource"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	db := storetest.New(t)
	f := &childFixture{runs: store.NewRuns(db.DB, db.Data()), jobs: store.NewJobs(db.DB, db.Data()),
		workflows: store.NewWorkflows(db.DB, db.Data()), lease: 2 * time.Second, user: uuid.NewString()}
	f.inproc = &runs.InProcess{}
	f.svc = runs.NewService(runs.Options{Store: f.runs, Jobs: f.jobs, Workflows: f.workflows, Invoker: f.inproc, Lease: f.lease, Ended: f.ended, AuthWaits: f.runs})
	tokens := &grantTokens{}
	rm := remote.New(true)
	mcps := mcpserver.NewService(mcpserver.Options{Store: store.NewMCPServers(db.DB, db.Data()), Vault: vault.New(vault.NewMemoryKeys(), nil),
		Remote: rm, Caller: rm, AllowPrivate: true, Tokens: tokens, OnConnected: f.svc.Authorized})
	f.inproc.Runner = runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Tools: remoteSteps{ToolRunner: newRegistry(t), svc: mcps, user: f.user},
		Lease: f.lease, Ended: f.ended, AuthWaits: f.runs})
	t.Cleanup(f.inproc.Wait)

	uctx := auth.ActingFor(context.Background(), f.user)
	s, err := mcps.Create(uctx, mcpserver.CreateRequest{Name: "bearer", URL: hs.URL, Auth: &mcpserver.AuthInput{Type: "oauth"}})
	if err != nil || s.Status != mcpserver.StatusNeedsAuthorization {
		t.Fatalf("created %+v, %v", s, err)
	}
	w := f.workflow(t, f.user, step("find", "mcp/bearer/search", map[string]any{"q": "x"}))
	run := f.start(t, w, nil)
	waiting := f.waitStatus(t, run.ID, workflow.RunWaiting)
	f.inproc.Wait()
	checkAuthWait(t, waiting, s.ID)

	tokens.mu.Lock()
	tokens.token = "good"
	tokens.mu.Unlock()
	if s, err = mcps.Refresh(uctx, s.ID); err != nil || s.Status != mcpserver.StatusConnected {
		t.Fatalf("refreshed %+v, %v", s, err)
	}
	got := f.waitStatus(t, run.ID, workflow.RunCompleted)
	f.inproc.Wait()
	if got.Steps[0].Output["text"] != "found" {
		t.Fatalf("step %+v", got.Steps[0])
	}
}

// revokingServer is a go-sdk MCP server whose tool record ({"n": ...})
// answers "done <n>" and counts the calls it ran, per n. While revoked it
// answers 401 to every request (the user's grant was revoked); the call
// of n == 0 revokes it, and answers only once a call refused since has
// reached the run's step (seen), so that it is still running when the
// forEach step learns that its server needs the authorization; the other
// calls answer once it has revoked the grant (gone).
type revokingServer struct {
	url     string
	mu      sync.Mutex
	calls   map[int]int
	revoked bool
	gone    chan struct{}
	seen    chan struct{}
	once    sync.Once
}

func newRevokingServer(t *testing.T) *revokingServer {
	t.Helper()
	rs := &revokingServer{calls: map[int]int{}, gone: make(chan struct{}), seen: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "revoking", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "record", Description: "records", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ N int }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			rs.mu.Lock()
			rs.calls[args.N]++
			if args.N == 0 && !rs.revoked {
				rs.revoked = true
				close(rs.gone)
			}
			rs.mu.Unlock()
			wait := rs.gone
			if args.N == 0 {
				wait = rs.seen
			}
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("done %d", args.N)}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		revoked := rs.revoked
		rs.mu.Unlock()
		if revoked || r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://`+r.Host+`/.well-known/oauth-protected-resource"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	rs.url = hs.URL
	return rs
}

// counts returns a copy of the calls the server ran, per n.
func (rs *revokingServer) counts() map[int]int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return maps.Clone(rs.calls)
}

func (rs *revokingServer) authorize() {
	rs.mu.Lock()
	rs.revoked = false
	rs.mu.Unlock()
}

// seeingSteps is remoteSteps telling the server once a call's error
// says its server needs the authorization.
type seeingSteps struct {
	remoteSteps
	srv *revokingServer
}

func (s seeingSteps) Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error) {
	out, err := s.remoteSteps.Run(ctx, toolID, input)
	if errs.CodeOf(err) == mcpserver.CodeAuthorizationRequired {
		s.srv.once.Do(func() { close(s.srv.seen) })
	}
	return out, err
}

// TestAuthorizationWaitForEach: a forEach step over 6 elements, 3 at
// once, calls a go-sdk MCP server whose grant its first call revokes. The
// step waits for the authorization (reason, server, URL, deadline, the
// elements done so far); the call running when it learnt so finishes and
// is recorded. Then: the authorization continues the step with the
// other elements only and the run completes with every element's output,
// each call run once; or the sweeper calls again before the deadline
// (still refused: it waits again, its deadline kept) and fails the step
// AUTHORIZATION_TIMEOUT past it; or a cancel ends the wait and the
// authorization after it calls nothing.
func TestAuthorizationWaitForEach(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"authorized", "timeout", "cancelled"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			rsrv := newRevokingServer(t)
			db := storetest.New(t)
			f := &childFixture{runs: store.NewRuns(db.DB, db.Data()), jobs: store.NewJobs(db.DB, db.Data()),
				workflows: store.NewWorkflows(db.DB, db.Data()), lease: 2 * time.Second, user: uuid.NewString()}
			f.inproc = &runs.InProcess{}
			f.svc = runs.NewService(runs.Options{Store: f.runs, Jobs: f.jobs, Workflows: f.workflows, Invoker: f.inproc, Lease: f.lease, Ended: f.ended, AuthWaits: f.runs})
			rm := remote.New(true)
			mcps := mcpserver.NewService(mcpserver.Options{Store: store.NewMCPServers(db.DB, db.Data()), Vault: vault.New(vault.NewMemoryKeys(), nil),
				Remote: rm, Caller: rm, AllowPrivate: true, Tokens: &grantTokens{token: "good"}, OnConnected: f.svc.Authorized})
			f.inproc.Runner = runs.NewRunner(runs.RunnerOptions{Store: f.runs, Jobs: f.jobs, Lease: f.lease, Ended: f.ended, AuthWaits: f.runs,
				Tools: seeingSteps{remoteSteps: remoteSteps{ToolRunner: newRegistry(t), svc: mcps, user: f.user}, srv: rsrv}})
			t.Cleanup(f.inproc.Wait)

			uctx := auth.ActingFor(context.Background(), f.user)
			s, err := mcps.Create(uctx, mcpserver.CreateRequest{Name: "revoking", URL: rsrv.url, Auth: &mcpserver.AuthInput{Type: "oauth"}})
			if err != nil || s.Status != mcpserver.StatusConnected {
				t.Fatalf("created %+v, %v", s, err)
			}
			const n = 6
			each := step("each", "mcp/revoking/record", map[string]any{"n": "{{item}}"})
			each.ForEach, each.Concurrency = "{{input.ns}}", one(3)
			w := f.workflow(t, f.user, each)
			run := f.start(t, w, map[string]any{"ns": []any{0, 1, 2, 3, 4, 5}})
			f.waitStatus(t, run.ID, workflow.RunWaiting)
			f.inproc.Wait()
			waiting, err := f.svc.Get(f.ctx(), runs.Scope{WorkflowID: w.ID}, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			checkAuthWait(t, waiting, s.ID)
			ran := rsrv.counts()
			if ran[0] != 1 || len(ran) >= n || waiting.Steps[0].ElementsDone == nil || *waiting.Steps[0].ElementsDone != len(ran) {
				t.Fatalf("calls run %v, elements done %v", ran, waiting.Steps[0].ElementsDone)
			}
			for j, k := range ran {
				if k != 1 {
					t.Fatalf("element %d ran %d times (calls %v)", j, k, ran)
				}
			}
			deadline := *waiting.Steps[0].ExpiresAt
			sweep := func(now time.Time) {
				t.Helper()
				s := runs.ResumeExpired(runs.ResumeOptions{Store: f.runs, Invoker: f.inproc, Lease: f.lease, Now: func() time.Time { return now }, Ended: f.ended})
				if err := s(context.Background(), job.Expired{Ref: job.Ref{Kind: workflow.RunKind, Collection: run.ID, ID: run.ID}}); err != nil {
					t.Fatal(err)
				}
				f.inproc.Wait()
			}

			switch c {
			case "authorized":
				rsrv.authorize()
				if s, err = mcps.Refresh(uctx, s.ID); err != nil || s.Status != mcpserver.StatusConnected {
					t.Fatalf("refreshed %+v, %v", s, err)
				}
				got := f.waitStatus(t, run.ID, workflow.RunCompleted)
				f.inproc.Wait()
				full, err := f.svc.Value(context.Background(), run.ID, got.Steps[0].Output)
				if err != nil {
					t.Fatal(err)
				}
				results, _ := full[workflow.ForEachOutput].([]any)
				if len(results) != n {
					t.Fatalf("results %v", full)
				}
				for j, r := range results {
					if m, _ := r.(map[string]any); m["text"] != fmt.Sprintf("done %d", j) {
						t.Fatalf("element %d: %v", j, r)
					}
				}
				if got := rsrv.counts(); !maps.Equal(got, map[int]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1}) {
					t.Fatalf("calls run %v", got)
				}
			case "timeout":
				sweep(time.Now().Add(runs.AuthCheck + time.Minute))
				again, err := f.runs.Run(context.Background(), run.ID)
				if err != nil {
					t.Fatal(err)
				}
				checkAuthWait(t, again, s.ID)
				if !again.Steps[0].ExpiresAt.Equal(deadline) || !maps.Equal(rsrv.counts(), ran) {
					t.Fatalf("deadline %v then %v, calls %v then %v", deadline, again.Steps[0].ExpiresAt, ran, rsrv.counts())
				}
				sweep(deadline.Add(time.Second))
				got := f.waitStatus(t, run.ID, workflow.RunFailed)
				if !strings.HasPrefix(got.Steps[0].Error, runs.CodeAuthorizationTimeout) || !maps.Equal(rsrv.counts(), ran) {
					t.Fatalf("%s %+v, calls %v", got.Status, got.Steps[0], rsrv.counts())
				}
			case "cancelled":
				if _, err := f.svc.Cancel(f.ctx(), runs.Scope{WorkflowID: w.ID}, run.ID); err != nil {
					t.Fatal(err)
				}
				rsrv.authorize()
				if _, err := mcps.Refresh(uctx, s.ID); err != nil {
					t.Fatal(err)
				}
				f.inproc.Wait()
				got, err := f.runs.Run(context.Background(), run.ID)
				if err != nil || got.Status != workflow.RunCancelled || !maps.Equal(rsrv.counts(), ran) {
					t.Fatalf("%s, calls %v then %v, %v", got.Status, ran, rsrv.counts(), err)
				}
				if waits, err := f.runs.AuthWaits(context.Background(), f.user, s.ID); err != nil || len(waits) != 0 {
					t.Fatalf("wait items left %+v, %v", waits, err)
				}
			}
		})
	}
}
