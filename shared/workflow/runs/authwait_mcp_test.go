package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/auth"
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
