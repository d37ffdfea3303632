package toolclient_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// TestToolCatalog loads every tool with its outputs through the process's
// tool catalog and serves the last copy when the tool server goes away.
func TestToolCatalog(t *testing.T) {
	t.Parallel()
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	const key = "catalog-test-key-0123456789"
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	c := toolclient.NewCatalog(toolclient.NewClient(ts.URL, key, nil), 0, nil)
	ctx := context.Background()
	list, err := c.Details(ctx)
	if err != nil || len(list) != len(reg.List()) {
		t.Fatalf("tools = %d, %v", len(list), err)
	}
	i := slices.IndexFunc(list, func(ti toolclient.ToolDetail) bool { return ti.ID == "http_request" })
	if i < 0 || !slices.Contains(list[i].Outputs, "status") || len(list[i].InputSchema) == 0 || len(list[i].OutputSchema) == 0 {
		t.Errorf("http_request = %+v", list[i])
	}
	ts.Close()
	again, err := c.Details(ctx)
	if err != nil || len(again) != len(list) {
		t.Errorf("stale copy not served: %d, %v", len(again), err)
	}
	empty := toolclient.NewCatalog(toolclient.NewClient(ts.URL, key, nil), 0, nil)
	if _, err := empty.Details(ctx); err == nil {
		t.Error("no error without a tool server or a copy")
	}
}
