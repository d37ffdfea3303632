package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

var jsonQuery = model.ToolSpec{Name: "json_query", Description: "jq", InputSchema: json.RawMessage(`{"type":"object"}`)}

func generate(t *testing.T, req model.Request) (string, []string, model.Result) {
	t.Helper()
	reg, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var chunks []string
	res, err := reg.Generate(context.Background(), req, func(c model.Chunk) error {
		chunks = append(chunks, c.Delta)
		text.WriteString(c.Delta)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return text.String(), chunks, res
}

func TestBuiltin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		req      model.Request
		wantText string
		wantCall string // "name args"
	}{
		{"plain reply", model.Request{ModelID: "builtin", Messages: []model.Message{{Role: "user", Content: "hello there"}}}, `You said: "hello there"`, ""},
		{"tool call", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery},
			Messages: []model.Message{{Role: "user", Content: `please run json_query with {"query": ".a", "input": {"a": 1}} now`}}},
			"Running json_query.", `json_query {"query":".a","input":{"a":1}}`},
		{"tool not offered", model.Request{ModelID: "builtin",
			Messages: []model.Message{{Role: "user", Content: `run json_query with {"query": ".a"}`}}}, "You said", ""},
		{"tool named without json", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery},
			Messages: []model.Message{{Role: "user", Content: `what does json_query do?`}}}, "for example: run json_query", ""},
		{"reports tool result", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery}, Messages: []model.Message{
			{Role: "user", Content: `run json_query with {"query": ".a", "input": {"a": 1}}`},
			{Role: "assistant", Content: "Running json_query.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "json_query", Args: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c1", Content: `{"result":1}`},
		}}, `The json_query tool returned: {"result":1}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text, chunks, res := generate(t, tt.req)
			if !strings.Contains(text, tt.wantText) {
				t.Errorf("text = %q, want it to contain %q", text, tt.wantText)
			}
			if strings.Join(chunks, "") != text || (len(strings.Fields(text)) > 4 && len(chunks) < 2) {
				t.Errorf("chunks %q do not stream the text", chunks)
			}
			var call string
			if len(res.ToolCalls) == 1 {
				call = res.ToolCalls[0].Name + " " + string(res.ToolCalls[0].Args)
			}
			if call != tt.wantCall {
				t.Errorf("tool call = %q, want %q", call, tt.wantCall)
			}
			if res.Usage.InputTokens == 0 || res.Usage.OutputTokens != len(strings.Fields(text)) {
				t.Errorf("usage = %+v", res.Usage)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	if ms := reg.List(); len(ms) != 1 || ms[0] != (model.Model{ID: "builtin", Name: "Built-in offline assistant", Provider: "builtin", Input: model.Input{Images: true, Documents: true}}) {
		t.Errorf("List = %+v", ms)
	}
	_, err = reg.Lookup("nope")
	if errs.KindOf(err) != errs.Invalid || errs.CodeOf(err) != "INVALID_MODEL" {
		t.Errorf("Lookup(nope) = %v", err)
	}
	if _, err := reg.Generate(context.Background(), model.Request{ModelID: "nope"}, func(model.Chunk) error { return nil }); errs.CodeOf(err) != "INVALID_MODEL" {
		t.Errorf("Generate(nope) = %v", err)
	}
	if _, err := model.NewRegistry(model.Builtin{}, model.Builtin{}); err == nil {
		t.Error("duplicate model ids accepted")
	}
	text, err := reg.GenerateText(context.Background(), "builtin", "", "ping")
	if err != nil || !strings.Contains(text, `"ping"`) {
		t.Errorf("GenerateText = %q, %v", text, err)
	}
	stop := errors.New("stop")
	if _, err := reg.Generate(context.Background(), model.Request{ModelID: "builtin", Messages: []model.Message{{Role: "user", Content: "a b c d e f g h"}}},
		func(model.Chunk) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("emit error not returned: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := reg.Generate(ctx, model.Request{ModelID: "builtin"}, func(model.Chunk) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

func TestChunkWords(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "one", "a b c d e f g h i", "trailing space ", "  leading"} {
		if got := strings.Join(model.ChunkWords(s, 3), ""); got != s {
			t.Errorf("ChunkWords(%q) joins to %q", s, got)
		}
	}
}

// TestBuiltinCountsSlowly: "count to N slowly" streams "1 " to "N " one per
// chunk, 1 <= N <= MaxCount; other N get the ordinary reply.
func TestBuiltinCountsSlowly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prompt string
		want   []string
	}{
		{"count to 3 slowly", []string{"1 ", "2 ", "3 "}},
		{"Count to 1 slowly.", []string{"1 "}},
		{"count to 0 slowly", nil},
		{"count to 201 slowly", nil},
		{"please count to 3 slowly", nil},
	} {
		var got []string
		res, err := model.Builtin{}.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: tc.prompt}}},
			func(c model.Chunk) error { got = append(got, c.Delta); return nil })
		if err != nil {
			t.Fatalf("%q: %v", tc.prompt, err)
		}
		if tc.want == nil {
			if len(got) > 0 && strings.HasPrefix(got[0], "1 ") {
				t.Errorf("%q counted: %q", tc.prompt, got)
			}
			continue
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || res.Usage.OutputTokens != len(tc.want) {
			t.Errorf("%q: %q (%d tokens), want %q", tc.prompt, got, res.Usage.OutputTokens, tc.want)
		}
	}
}
