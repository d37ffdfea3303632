package model

import (
	"regexp"
	"strings"
	"testing"
)

func TestWireNames(t *testing.T) {
	t.Parallel()
	provider := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	long := "mcp/" + strings.Repeat("s", 32) + "/" + strings.Repeat("T", 128)
	ids := []string{"json_query", "mcp/files/read", "mcp/files/read.v2", "mcp/files/read_v2", long, long[:len(long)-1] + "U"}
	seen := map[string]string{}
	for _, id := range ids {
		w := WireName(id)
		if !provider.MatchString(w) {
			t.Errorf("%s: wire name %q is not a provider's", id, w)
		}
		if other, dup := seen[w]; dup {
			t.Errorf("%s and %s share the wire name %q", id, other, w)
		}
		seen[w] = id
	}
	if WireName("json_query") != "json_query" {
		t.Error("a built-in tool's id is renamed")
	}
	req := Request{Tools: []ToolSpec{{Name: "mcp/files/read"}, {Name: "hash"}},
		Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "mcp/files/read"}}}}}
	wire, back := wireNames(req)
	if req.Tools[0].Name != "mcp/files/read" || req.Messages[0].ToolCalls[0].Name != "mcp/files/read" {
		t.Fatal("the request itself was changed")
	}
	w := wire.Tools[0].Name
	if w == "mcp/files/read" || wire.Messages[0].ToolCalls[0].Name != w || back[w] != "mcp/files/read" || wire.Tools[1].Name != "hash" {
		t.Fatalf("wire = %+v, back = %v", wire, back)
	}
}
