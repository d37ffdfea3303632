package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

type toolItem struct {
	ID           string                     `json:"id"`
	Name         string                     `json:"name"`
	Description  string                     `json:"description"`
	Category     string                     `json:"category"`
	InputSchema  map[string]json.RawMessage `json:"inputSchema"`
	OutputSchema map[string]json.RawMessage `json:"outputSchema"`
}

type toolListBody struct {
	Data struct {
		Tools []toolItem `json:"tools"`
		Total *int       `json:"total"`
	} `json:"data"`
}

// TestToolsJourney browses the tool catalog through the REST API as a
// signed-in user, then talks to the tool server on its own port with the
// service key, as the functions and MCP clients do.
func TestToolsJourney(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := newClient(t, srv.API)
	anon := newClient(t, srv.API)

	expectError(t, "anonymous list", anon.do("GET", "/api/tools", nil), 401, "UNAUTHORIZED")
	expectError(t, "anonymous search", anon.do("GET", "/api/tools/search?q=json", nil), 401, "UNAUTHORIZED")
	expectError(t, "anonymous get", anon.do("GET", "/api/tools/json_query", nil), 401, "UNAUTHORIZED")

	if r := c.do("POST", "/api/auth/sign-up/email", map[string]string{"email": "toolsmith@example.com", "password": "toolsmith-1", "name": "Toolsmith"}); r.Status != 200 {
		t.Fatalf("sign-up: %d %s", r.Status, r.Body)
	}

	for _, path := range []string{"/api/tools", "/api/tools?refresh=true", "/api/tools?refresh=1", "/api/tools?refresh=false"} {
		r := c.do("GET", path, nil)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
		var list toolListBody
		r.decode(t, &list)
		if want := len(tools.Builtin(tools.Config{})); len(list.Data.Tools) != want {
			t.Errorf("%s: %d tools, want the %d built-in ones", path, len(list.Data.Tools), want)
		}
		found := false
		for _, tl := range list.Data.Tools {
			if tl.ID == "json_query" {
				found = tl.Category == "data" && tl.InputSchema["properties"] != nil && strings.Contains(string(tl.InputSchema["properties"]), `"query"`)
			}
			if tl.OutputSchema != nil {
				t.Errorf("%s: %s lists outputSchema", path, tl.ID)
			}
		}
		if !found {
			t.Errorf("%s: json_query with its input schema not listed: %s", path, r.Body)
		}
	}

	r := c.do("GET", "/api/tools/search?q=json", nil)
	var found toolListBody
	r.decode(t, &found)
	if r.Status != 200 || len(found.Data.Tools) == 0 || found.Data.Tools[0].ID != "json_query" || found.Data.Total == nil || *found.Data.Total != len(found.Data.Tools) {
		t.Errorf("search json: %d %s, want json_query first and total = len(tools)", r.Status, r.Body)
	}

	r = c.do("GET", "/api/tools/json_query", nil)
	var one struct{ Data toolItem }
	r.decode(t, &one)
	if r.Status != 200 || one.Data.ID != "json_query" || !strings.Contains(string(one.Data.OutputSchema["properties"]), `"result"`) {
		t.Errorf("get json_query: %d %s", r.Status, r.Body)
	}

	expectError(t, "unknown tool", c.do("GET", "/api/tools/no_such_tool", nil), 404, "TOOL_NOT_FOUND")
	expectError(t, "malformed tool id", c.do("GET", "/api/tools/No-Such-Tool", nil), 404, "TOOL_NOT_FOUND")
	for _, path := range []string{"/api/tools/search", "/api/tools/search?q=%20"} {
		e := expectError(t, "search "+path, c.do("GET", path, nil), 400, "VALIDATION_FAILED")
		if len(e.Details) == 0 || e.Details[0].Field != "q" {
			t.Errorf("search %s: details %+v, want field q", path, e.Details)
		}
	}
	e := expectError(t, "bad refresh", c.do("GET", "/api/tools?refresh=yes", nil), 400, "VALIDATION_FAILED")
	if len(e.Details) == 0 || e.Details[0].Field != "refresh" {
		t.Errorf("bad refresh: details %+v, want field refresh", e.Details)
	}

	// The tool server, over real HTTP on its own port. It is not part of the
	// REST API's OpenAPI document, so these requests skip the contract check.
	if !strings.HasSuffix(srv.MCP, "/mcp") || srv.Key == "" {
		t.Fatalf("tool server banner: %q key %q", srv.MCP, srv.Key)
	}
	post := func(key, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.MCP, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set(toolserver.ServiceKeyHeader, key)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", srv.MCP, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, body := post(srv.Key, `{"method":"listTools","params":{}}`)
	var listed struct {
		Data toolserver.ToolsResult `json:"data"`
	}
	if err := json.Unmarshal(body, &listed); status != 200 || err != nil || len(listed.Data.Tools) != 15 { // the 11 of before, code, agent, run_workflow and knowledge_search
		t.Errorf("listTools: %d %s", status, body)
	}
	status, body = post(srv.Key, `{"method":"runTool","params":{"toolId":"json_query","input":{"input":{"a":[1,2,3]},"query":".a | add"}}}`)
	var ran struct {
		Data toolserver.RunResult `json:"data"`
	}
	if err := json.Unmarshal(body, &ran); status != 200 || err != nil || ran.Data.Result["result"] != float64(6) {
		t.Errorf("runTool json_query: %d %s", status, body)
	}
	for name, key := range map[string]string{"wrong key": "not-the-service-key", "no key": ""} {
		status, body = post(key, `{"method":"listTools","params":{}}`)
		var e errorBody
		if err := json.Unmarshal(body, &e); status != 401 || err != nil || e.Code != "UNAUTHORIZED" || e.Error != "Unauthorized" {
			t.Errorf("%s: %d %s, want 401 UNAUTHORIZED", name, status, body)
		}
	}

	// The same through the client the functions use.
	tc := toolclient.NewClient(strings.TrimSuffix(srv.MCP, "/mcp"), srv.Key, nil)
	res, err := tc.RunTool(context.Background(), "hash", map[string]any{"text": "abc", "algorithm": "md5"})
	if err != nil || res.Result["digest"] != "900150983cd24fb0d6963f7d28e17f72" {
		t.Errorf("client RunTool(hash): %+v, %v", res, err)
	}
	_, err = toolclient.NewClient(strings.TrimSuffix(srv.MCP, "/mcp"), "not-the-service-key", nil).ListTools(context.Background())
	if errs.KindOf(err) != errs.Internal || !strings.Contains(err.Error(), "rejected the service key") {
		t.Errorf("client with a wrong key: %v, want an Internal error about the key", err)
	}
}
