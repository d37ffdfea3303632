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

var (
	jsonQuery = model.ToolSpec{Name: "json_query", Description: "jq", InputSchema: json.RawMessage(`{"type":"object"}`)}
	hashSpec  = model.ToolSpec{Name: "hash", Description: "digest", InputSchema: json.RawMessage(`{"type":"object"}`)}
)

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
		{"remote tool by its whole id", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery, {Name: "mcp/files/read.v2-x"}},
			Messages: []model.Message{{Role: "user", Content: `now call mcp/files/read.v2-x with {"path": "a"}.`}}},
			"Running mcp/files/read.v2-x.", `mcp/files/read.v2-x {"path":"a"}`},
		{"tool not offered", model.Request{ModelID: "builtin",
			Messages: []model.Message{{Role: "user", Content: `run json_query with {"query": ".a"}`}}}, "You said", ""},
		{"tool named without json", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery},
			Messages: []model.Message{{Role: "user", Content: `what does json_query do?`}}}, "for example: run json_query", ""},
		{"reports tool result", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery}, Messages: []model.Message{
			{Role: "user", Content: `run json_query with {"query": ".a", "input": {"a": 1}}`},
			{Role: "assistant", Content: "Running json_query.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "json_query", Args: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c1", Content: `{"result":1}`},
		}}, `The json_query tool returned: {"result":1}`, ""},
		{"second call after the first's result", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery, hashSpec}, Messages: []model.Message{
			{Role: "user", Content: `run json_query with {"query": ".a"} then hash with {"text": "x"} and json_query with {"query": ".b"}`},
			{Role: "assistant", Content: "Running json_query.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "json_query", Args: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c1", Content: `{"result":1}`},
		}}, "Running hash.", `hash {"text":"x"}`},
		{"third call", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery, hashSpec}, Messages: []model.Message{
			{Role: "user", Content: `run json_query with {"query": ".a"} then hash with {"text": "x"} and json_query with {"query": ".b"}`},
			{Role: "assistant", Content: "Running json_query.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "json_query", Args: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c1", Content: `{"result":1}`},
			{Role: "assistant", Content: "Running hash.", ToolCalls: []model.ToolCall{{ID: "c2", Name: "hash", Args: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c2", Content: `{"digest":"d"}`},
		}}, "Running json_query.", `json_query {"query":".b"}`},
		{"report once the calls asked for are made", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery, hashSpec}, Messages: []model.Message{
			{Role: "user", Content: `run json_query with {"query": ".a"} then hash with {"text": "x"}`},
			{Role: "assistant", Content: "Running json_query.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "json_query", Args: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c1", Content: `{"result":1}`},
			{Role: "assistant", Content: "Running hash.", ToolCalls: []model.ToolCall{{ID: "c2", Name: "hash", Args: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c2", Content: `{"digest":"d"}`},
		}}, `The hash tool returned: {"digest":"d"}`, ""},
		{"a second call of a tool not offered is not made", model.Request{ModelID: "builtin", Tools: []model.ToolSpec{jsonQuery}, Messages: []model.Message{
			{Role: "user", Content: `run json_query with {"query": ".a"} then hash with {"text": "x"}`},
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
	text, used, err := reg.GenerateText(context.Background(), "builtin", "", "ping", 0)
	if err != nil || !strings.Contains(text, `"ping"`) || used.InputTokens != 1 || used.OutputTokens != len(strings.Fields(text)) {
		t.Errorf("GenerateText = %q, %+v, %v", text, used, err)
	}
	text, used, err = reg.GenerateText(context.Background(), "builtin", "be brief", "ping", 3)
	if err != nil || text != `You said: "ping".` || used != (model.Usage{InputTokens: 3, OutputTokens: 3}) {
		t.Errorf("GenerateText capped at 3 = %q, %+v, %v", text, used, err)
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

// TestBuiltinMaxTokens: with MaxTokens the built-in model stops after that
// many words, in every kind of reply, and reports the words it emitted;
// its input count is CountInput's whatever the cap.
func TestBuiltinMaxTokens(t *testing.T) {
	t.Parallel()
	tools := []model.ToolSpec{{Name: "json_query"}}
	tests := []struct {
		name     string
		msgs     []model.Message
		max      int
		want     string
		wantCall bool
	}{
		{"plain reply", []model.Message{{Role: "user", Content: "hello there"}}, 5, `You said: "hello there". I`, false},
		{"cap above the reply", []model.Message{{Role: "user", Content: "hi"}}, 1000, "", false},
		{"count slowly", []model.Message{{Role: "user", Content: "count to 5 slowly"}}, 2, "1 2 ", false},
		{"tool call kept", []model.Message{{Role: "user", Content: `run json_query with {"query": "."}`}}, 1, "Running", true},
		{"tool report", []model.Message{
			{Role: "user", Content: "x"},
			{Role: "assistant", ToolCalls: []model.ToolCall{{ID: "c", Name: "json_query"}}},
			{Role: "tool", ToolCallID: "c", Content: "one two three four five six"},
		}, 5, "The json_query tool returned: one", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := model.Request{ModelID: "builtin", System: "sys tem", Messages: tt.msgs, Tools: tools, MaxTokens: tt.max}
			var b strings.Builder
			res, err := model.Builtin{}.Generate(context.Background(), req, func(c model.Chunk) error { b.WriteString(c.Delta); return nil })
			if err != nil {
				t.Fatal(err)
			}
			got := b.String()
			if tt.want != "" && got != tt.want {
				t.Errorf("reply %q, want %q", got, tt.want)
			}
			if n := len(strings.Fields(got)); n > tt.max || res.Usage.OutputTokens != n {
				t.Errorf("%d words (usage %d), cap %d", n, res.Usage.OutputTokens, tt.max)
			}
			if res.Usage.InputTokens != (model.Builtin{}).CountInput(req) {
				t.Errorf("input %d, CountInput %d", res.Usage.InputTokens, model.Builtin{}.CountInput(req))
			}
			if (len(res.ToolCalls) > 0) != tt.wantCall {
				t.Errorf("tool calls %v", res.ToolCalls)
			}
		})
	}
}

// TestEstimateInput: the registry counts the built-in model's input
// exactly (its own count); other models get EstimateTokens, which counts
// the tools too and never fewer than the words.
func TestEstimateInput(t *testing.T) {
	t.Parallel()
	reg, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []model.Message{{Role: "user", Content: "one two three"}, {Role: "assistant", Content: "four", ToolCalls: []model.ToolCall{{ID: "c", Name: "t", Args: []byte(`{"a":1}`)}}}}
	req := model.Request{ModelID: "builtin", System: "five six", Messages: msgs, Tools: []model.ToolSpec{{Name: "t", Description: "a tool", InputSchema: []byte(`{"type":"object"}`)}}}
	if got := reg.EstimateInput(req); got != 7 {
		t.Errorf("builtin estimate %d, want 7 (6 words and 1 tool call)", got)
	}
	other := req
	other.ModelID = "elsewhere"
	est := reg.EstimateInput(other)
	if est != model.EstimateTokens(other) {
		t.Errorf("other model: %d, want EstimateTokens %d", est, model.EstimateTokens(other))
	}
	// Bytes: 8 + 13 + 4 + (1+1+7) + (1+6+17) = 58 -> 20, plus 4 x (2 messages + 1 tool).
	if est != 32 {
		t.Errorf("EstimateTokens = %d, want 32", est)
	}
	words := strings.Repeat("a ", 1000)
	if got := model.EstimateTokens(model.Request{Messages: []model.Message{{Role: "user", Content: words}}}); got != 1000 {
		t.Errorf("EstimateTokens of 1000 one-letter words = %d, want the words", got)
	}
}

// TestEstimateTokensCountsAttachments: a text attachment counts as text,
// an image sent as bytes as ImageTokens, a PDF as ImageTokens plus its
// bytes over DocumentBytesPerToken; a file sent as a note, nothing more.
func TestEstimateTokensCountsAttachments(t *testing.T) {
	t.Parallel()
	base := model.Request{Messages: []model.Message{{Role: "user", Content: "look"}}}
	with := func(a ...model.Attachment) model.Request {
		r := base
		r.Messages = []model.Message{{Role: "user", Content: "look", Attachments: a}}
		return r
	}
	b := model.EstimateTokens(base)
	text := model.EstimateTokens(with(model.Attachment{Name: "a.txt", ContentType: "text/plain", Text: strings.Repeat("abc ", 300)}))
	img := model.EstimateTokens(with(model.Attachment{Name: "a.png", ContentType: "image/png", Data: make([]byte, 5000)}))
	pdf := model.EstimateTokens(with(model.Attachment{Name: "a.pdf", ContentType: "application/pdf", Data: make([]byte, 64000)}))
	note := model.EstimateTokens(with(model.Attachment{Name: "a.png", ContentType: "image/png"}))
	if text < b+300 || img != b+model.ImageTokens || pdf != b+model.ImageTokens+1000 || note != b {
		t.Errorf("base %d: text %d, image %d, pdf %d, note %d", b, text, img, pdf, note)
	}
}

// TestBuiltinQuotesLongPromptsWhole: the reply quotes a long prompt cut at
// a character boundary, so a multi-byte character at the cut is dropped
// whole, never quoted as a broken byte.
func TestBuiltinQuotesLongPromptsWhole(t *testing.T) {
	t.Parallel()
	prompt := strings.Repeat("a", 199) + "é and then more text"
	text, _, _ := generate(t, model.Request{ModelID: "builtin", Messages: []model.Message{{Role: "user", Content: prompt}}})
	if want := `You said: "` + strings.Repeat("a", 199) + `…"`; !strings.Contains(text, want) || strings.Contains(text, `\x`) {
		t.Errorf("text = %q, want it to quote %q", text, want)
	}
}
