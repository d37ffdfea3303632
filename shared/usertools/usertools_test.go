package usertools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/mcpserver/remote"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/toolpolicy"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
	"github.com/workflowchat/service/shared/usage"
	"github.com/workflowchat/service/shared/usertools"
	"github.com/workflowchat/service/shared/vault"
)

const (
	serviceKey = "usertools-test-service-key-0123456789"
	apiKey     = "remote-api-key-0123456789"
)

// filesServer is a real go-sdk MCP server behind an API key: read
// (read-only) answers "read <path>", write (no hints) answers "wrote", or
// fails with "disk full" (isError) when its path is /full.
func filesServer(t testing.TB) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	srv.AddTool(&mcp.Tool{Name: "read", Description: "reads a file", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Path string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "read " + in.Path}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "write", Description: "writes a file", InputSchema: schema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Path string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			if in.Path == "/full" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk full"}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != apiKey {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// env is the whole chain on real parts: the tool server's built-in tools,
// the embedded store, the vault, the remote client, the policies and the
// gate over a usertools.Catalog.
type env struct {
	builtin *toolclient.Catalog
	servers *mcpserver.Service
	catalog *usertools.Catalog
	gate    *toolgate.Gate
	remote  *httptest.Server
}

func newEnv(t testing.TB) *env {
	t.Helper()
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{Generator: toolserver.Models(models), DefaultModelID: model.BuiltinID})...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, serviceKey), httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(ts.Close)
	db := storetest.New(t)
	builtin := toolclient.NewCatalog(toolclient.NewClient(ts.URL, serviceKey, nil), time.Minute, nil)
	rm := remote.New(true)
	svc := mcpserver.NewService(mcpserver.Options{Store: store.NewMCPServers(db.DB, db.Data()), Vault: vault.New(vault.NewMemoryKeys(), nil),
		Remote: rm, Caller: rm, AllowPrivate: true})
	cat := usertools.New(usertools.Options{Builtin: builtin, Servers: svc, Caller: svc, TTL: -1})
	policies := toolpolicy.NewService(store.NewToolPolicies(db.DB, db.Users()), cat)
	gate := toolgate.New(toolgate.Options{Tools: cat, Policies: policies, Meter: usage.NewMeter(store.NewUsage(db.DB, db.Users()), 0, nil, nil)})
	return &env{builtin: builtin, servers: svc, catalog: cat, gate: gate, remote: filesServer(t)}
}

func (e *env) add(t testing.TB, userID, name string) mcpserver.Server {
	t.Helper()
	s, err := e.servers.Create(auth.ActingFor(context.Background(), userID), mcpserver.CreateRequest{Name: name, URL: e.remote.URL,
		Auth: &mcpserver.AuthInput{Type: "header", Name: "X-Api-Key", Value: apiKey}})
	if err != nil || s.Status != mcpserver.StatusConnected {
		t.Fatalf("create %s: %+v, %v", name, s, err)
	}
	return s
}

func ids[T any](list []T, id func(T) string) map[string]bool {
	out := map[string]bool{}
	for _, x := range list {
		out[id(x)] = true
	}
	return out
}

// TestCatalog: a user's remote tools are listed, detailed, offered and
// run for that user only; the gate's default policy follows readOnlyHint.
func TestCatalog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := e.add(t, "u1", "files")
	u1 := auth.ActingFor(context.Background(), "u1")
	u2 := auth.ActingFor(context.Background(), "u2")

	list, err := e.catalog.List(u1, false)
	if err != nil {
		t.Fatal(err)
	}
	got := ids(list, func(s toolclient.ToolSummary) string { return s.ID + ":" + s.Category })
	if !got["mcp/files/read:mcp"] || !got["mcp/files/write:mcp"] || !got["json_query:data"] {
		t.Fatalf("u1's list = %v", got)
	}
	list2, _ := e.catalog.List(u2, false)
	if n := len(list2); n != len(list)-2 {
		t.Fatalf("u2 sees %d tools, u1 %d: another user's tools are visible", n, len(list))
	}
	specs, err := e.catalog.Specs(u1)
	if err != nil || !ids(specs, func(s model.ToolSpec) string { return s.Name })["mcp/files/read"] {
		t.Fatalf("specs = %v, %v", specs, err)
	}
	if d, err := e.catalog.Get(u1, "mcp/files/read"); err != nil || d.Category != "mcp" || !d.Annotations.ReadOnlyHint {
		t.Fatalf("Get = %+v, %v", d, err)
	}
	if _, err := e.catalog.Get(u2, "mcp/files/read"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("u2's Get = %v; want NotFound", err)
	}

	// In a chat, read-only runs and the other asks; a workflow step runs.
	out, err := e.gate.Run(u1, toolgate.Call{Origin: toolgate.Chat, UserID: "u1", ToolID: "mcp/files/read", Input: map[string]any{"path": "a.txt"}})
	if err != nil || out.Kind != toolgate.Run || out.ToolError != nil || out.Output["text"] != "read a.txt" {
		t.Fatalf("chat read = %+v, %v", out, err)
	}
	if out, err := e.gate.Run(u1, toolgate.Call{Origin: toolgate.Chat, UserID: "u1", ToolID: "mcp/files/write"}); err != nil || out.Kind != toolgate.Ask {
		t.Fatalf("chat write = %+v, %v; want Ask", out, err)
	}
	if res, err := e.gate.Steps().Run(u1, "mcp/files/write", map[string]any{"path": "b"}); err != nil || res["text"] != "wrote" {
		t.Fatalf("step write = %v, %v", res, err)
	}
	// Another user names u1's tool: not found, nothing called.
	if _, err := e.gate.Steps().Run(u2, "mcp/files/read", nil); errs.CodeOf(err) != toolclient.CodeToolNotFound {
		t.Fatalf("u2's step = %v; want TOOL_NOT_FOUND", err)
	}

	// Disabled: not offered, and a call fails with its code.
	off := false
	if _, err := e.servers.Update(u1, srv.ID, mcpserver.UpdateRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	specs, _ = e.catalog.Specs(u1)
	if ids(specs, func(s model.ToolSpec) string { return s.Name })["mcp/files/read"] {
		t.Fatal("a disabled server's tool is offered")
	}
	if _, err := e.gate.Steps().Run(u1, "mcp/files/read", nil); errs.CodeOf(err) != mcpserver.CodeServerDisabled {
		t.Fatalf("disabled step = %v", err)
	}
}

// TestRemoteFailuresLeadWithTheirCodes: a remote call's failure keeps its
// kind and code, and its message starts with the code, so that a step's
// error and a model's tool result (which carry a tool error's message
// alone) tell a tool's own failure from a server that is disabled or
// cannot be reached.
func TestRemoteFailuresLeadWithTheirCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.add(t, "u1", "down")
	files := e.add(t, "u1", "files")
	off := e.add(t, "u1", "off")
	u1 := auth.ActingFor(context.Background(), "u1")
	disabled := false
	if _, err := e.servers.Update(u1, off.ID, mcpserver.UpdateRequest{Enabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	// down's tools were listed when it was made; its server is gone since.
	e.remote.Close()
	e.remote = filesServer(t)
	if _, err := e.servers.Update(u1, files.ID, mcpserver.UpdateRequest{URL: &e.remote.URL}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool, path string
		kind       errs.Kind
		code, text string
	}{
		{"mcp/files/write", "/full", errs.Invalid, mcpserver.CodeToolFailed, "disk full"},
		{"mcp/off/read", "a", errs.Forbidden, mcpserver.CodeServerDisabled, "disabled"},
		{"mcp/down/read", "a", errs.Unavailable, mcpserver.CodeUnreachable, ""},
	} {
		_, err := e.gate.Steps().Run(u1, c.tool, map[string]any{"path": c.path})
		msg := errs.MessageOf(err, "")
		if !errs.Is(err, c.kind) || errs.CodeOf(err) != c.code || !strings.HasPrefix(msg, c.code+": ") || !strings.Contains(msg, c.text) ||
			strings.HasPrefix(msg, c.code+": "+c.code) {
			t.Errorf("step %s: %v (message %q); want %v %s, the message led by its code once", c.tool, err, msg, c.kind, c.code)
		}
		out, err := e.gate.Run(u1, toolgate.Call{Origin: toolgate.Workflow, UserID: "u1", ToolID: c.tool, Input: map[string]any{"path": c.path}})
		if err != nil || !strings.HasPrefix(errs.MessageOf(out.ToolError, ""), c.code+": ") {
			t.Errorf("gate %s: %+v, %v; want a tool error led by %s", c.tool, out, err, c.code)
		}
	}
}

// TestConcurrentCalls: 16 calls at once through the gate all end with
// the tool's result.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.add(t, "u1", "files")
	ctx := auth.ActingFor(context.Background(), "u1")
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			path := fmt.Sprintf("f%d", i)
			res, err := e.gate.Steps().Run(ctx, "mcp/files/read", map[string]any{"path": path})
			if err == nil && res["text"] != "read "+path {
				err = fmt.Errorf("result %v", res)
			}
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestOfferedBound: at most MaxOffered remote tools are offered, and a
// message's toolIds narrow them.
func TestOfferedBound(t *testing.T) {
	t.Parallel()
	var servers []mcpserver.Server
	for s := range 20 {
		srv := mcpserver.Server{Name: fmt.Sprintf("s%d", s), Enabled: true, Status: mcpserver.StatusConnected}
		for i := range 10 {
			srv.Tools = append(srv.Tools, mcpserver.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: json.RawMessage(`{"type":"object"}`)})
		}
		servers = append(servers, srv)
	}
	if n := len(usertools.Offered(servers, nil)); n != usertools.MaxOffered {
		t.Fatalf("offered %d; want %d", n, usertools.MaxOffered)
	}
	got := usertools.Offered(servers, map[string]bool{"mcp/s19/t9": true, "json_query": true})
	if len(got) != 1 || got[0].Name != "mcp/s19/t9" {
		t.Fatalf("narrowed = %v", got)
	}
	if strings.Contains(got[0].Name, " ") {
		t.Fatal("bad name")
	}
}

// TestSpecsWithOnly: a chat message's toolIds narrow the remote tools
// offered to those named (an empty list offers none, an unknown id
// nothing); the built-in tools are offered as always.
func TestSpecsWithOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.add(t, "u1", "files")
	u1 := auth.ActingFor(context.Background(), "u1")
	all, err := e.catalog.Specs(u1)
	if err != nil {
		t.Fatal(err)
	}
	names := func(ctx context.Context) map[string]bool {
		t.Helper()
		specs, err := e.catalog.Specs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ids(specs, func(s model.ToolSpec) string { return s.Name })
	}
	got := names(usertools.WithOnly(u1, []string{"mcp/files/read", "mcp/files/nope"}))
	if !got["mcp/files/read"] || got["mcp/files/write"] || !got["json_query"] || len(got) != len(all)-1 {
		t.Fatalf("narrowed to read: %v (all %d)", got, len(all))
	}
	got = names(usertools.WithOnly(u1, []string{}))
	if got["mcp/files/read"] || got["mcp/files/write"] || !got["json_query"] || len(got) != len(all)-2 {
		t.Fatalf("narrowed to none: %v", got)
	}
	if got := names(usertools.WithOnly(u1, nil)); !got["mcp/files/read"] || !got["mcp/files/write"] {
		t.Fatalf("nil narrows: %v", got)
	}
}

// storedServers is a store holding lists written before listings dropped
// unusable tools.
type storedServers []mcpserver.Server

func (s storedServers) Servers(context.Context, string) ([]mcpserver.Server, error) { return s, nil }

// TestStoredUnusableToolsNotOffered: a tool list stored before listings
// dropped a duplicate name or an input schema that is not an object
// schema is read without them: offered to the model, they would make the
// provider refuse every chat message. Whether a schema compiles is the
// listing's check (the catalog links no JSON Schema library, as the
// functions that only list tools do not): a stored one that does not
// compile is offered, and a step naming it is refused when saved.
func TestStoredUnusableToolsNotOffered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tool := func(name, schema string) mcpserver.Tool {
		return mcpserver.Tool{Name: name, Description: name + " " + schema, InputSchema: json.RawMessage(schema)}
	}
	stored := storedServers{{Name: "dup", Enabled: true, Status: mcpserver.StatusConnected, Tools: []mcpserver.Tool{
		tool("echo", `{"type":"object"}`), tool("echo", `{"type":"object","properties":{}}`),
		tool("numeric_type", `{"type":5}`), tool("string_schema", `{"type":"string"}`),
		tool("bad_pattern", `{"pattern":"(?<=x)["}`), tool("self", `{"type":"object","$ref":"#"}`),
		tool("fine", `{"type":"object","properties":{"q":{"type":"string"}}}`),
	}}}
	cat := usertools.New(usertools.Options{Builtin: e.builtin, Servers: stored, TTL: time.Minute})
	specs, err := cat.Specs(auth.ActingFor(context.Background(), "u1"))
	if err != nil {
		t.Fatal(err)
	}
	var remote []string
	for _, s := range specs {
		if usertools.IsRemote(s.Name) {
			remote = append(remote, s.Name+" "+s.Description)
		}
	}
	if got, want := strings.Join(remote, ", "), `mcp/dup/echo echo {"type":"object"}, mcp/dup/bad_pattern bad_pattern {"pattern":"(?<=x)["}, `+
		`mcp/dup/self self {"type":"object","$ref":"#"}, mcp/dup/fine fine {"type":"object","properties":{"q":{"type":"string"}}}`; got != want {
		t.Fatalf("offered %s\nwant %s", got, want)
	}
	if len(stored[0].Tools) != 7 {
		t.Fatalf("the stored list was changed: %d tools", len(stored[0].Tools))
	}
}
