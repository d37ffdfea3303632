package tools_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

func TestHTMLExtract(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	page := `<!doctype html><html><head><title> The Page </title><meta name="description" content="About things"></head>
<body><h1>Title</h1><p class="intro">Hello <b>world</b></p>
<ul><li><a href="/a">A</a></li><li><a href="/b" class="ext">B</a></li><li><a>no link</a></li></ul></body></html>`
	runToolCases(t, r, "html_extract", []toolCase{
		{name: "text of elements", input: map[string]any{"html": page, "selector": "li a"},
			want: map[string]any{"matches": []any{"A", "B", "no link"}}},
		{name: "attribute, elements without it skipped", input: map[string]any{"html": page, "selector": "li a", "attribute": "href"},
			want: map[string]any{"matches": []any{"/a", "/b"}}},
		{name: "nested text, trimmed", input: map[string]any{"html": page, "selector": "p.intro"},
			want: map[string]any{"matches": []any{"Hello world"}}},
		{name: "head elements", input: map[string]any{"html": page, "selector": "title, meta[name=description]"},
			want: map[string]any{"matches": []any{"The Page", ""}}},
		{name: "meta content", input: map[string]any{"html": page, "selector": "meta[name=description]", "attribute": "content"},
			want: map[string]any{"matches": []any{"About things"}}},
		{name: "pseudo class", input: map[string]any{"html": page, "selector": "ul > li:nth-child(2)"},
			want: map[string]any{"matches": []any{"B"}}},
		{name: "fragment", input: map[string]any{"html": "<span>x</span><span>y</span>", "selector": "span"},
			want: map[string]any{"matches": []any{"x", "y"}}},
		{name: "no match", input: map[string]any{"html": page, "selector": "table"},
			want: map[string]any{"matches": []any{}}},
		{name: "invalid selector", input: map[string]any{"html": page, "selector": "li[["},
			code: tools.CodeInvalidParams, msg: "invalid CSS selector", field: "selector"},
		{name: "too many matches", input: map[string]any{"html": strings.Repeat("<i>x</i>", 10001), "selector": "i"},
			code: tools.CodeToolExecutionFailed, msg: "10001 elements match"},
		{name: "text cap", input: map[string]any{"html": strings.Repeat("<div>", 300) + strings.Repeat("x", 10000), "selector": "div"},
			code: tools.CodeToolExecutionFailed, msg: "exceeds 1048576 bytes"},
		{name: "missing selector", input: map[string]any{"html": page},
			code: tools.CodeInvalidParams, msg: "missing property 'selector'", field: "selector"},
	})
}

func TestLLMGenerate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		gen        *fakeGenerator
		nilGen     bool
		defModel   string
		input      map[string]any
		wantText   string
		wantCall   genCall
		code, msg  string
		field      string
		notInMsg   string
		noCallMade bool
	}{
		{name: "prompt, system and model reach the generator", gen: &fakeGenerator{reply: "ok"}, defModel: "builtin",
			input:    map[string]any{"prompt": "Summarize: x", "system": "Be brief.", "modelId": "gpt-x"},
			wantText: "ok <Summarize: x>", wantCall: genCall{model: "gpt-x", system: "Be brief.", prompt: "Summarize: x"}},
		{name: "default model", gen: &fakeGenerator{reply: "ok"}, defModel: "builtin",
			input:    map[string]any{"prompt": "hi"},
			wantText: "ok <hi>", wantCall: genCall{model: "builtin", system: "", prompt: "hi"}},
		{name: "no default model passes empty id", gen: &fakeGenerator{reply: "ok"},
			input:    map[string]any{"prompt": "hi"},
			wantText: "ok <hi>", wantCall: genCall{model: "", prompt: "hi"}},
		{name: "nil generator", nilGen: true, input: map[string]any{"prompt": "hi"},
			code: tools.CodeToolExecutionFailed, msg: "no language model is configured", noCallMade: true},
		{name: "generator error hides raw text", gen: &fakeGenerator{err: errors.New("401 from provider: key sk-secret invalid")}, defModel: "m1",
			input: map[string]any{"prompt": "hi"},
			code:  tools.CodeToolExecutionFailed, msg: "model m1 failed to generate text", notInMsg: "sk-secret"},
		{name: "generator errs message is kept", gen: &fakeGenerator{err: errs.E("models", errs.Unavailable, "", "provider overloaded").WithCause(errors.New("sk-secret"))},
			input: map[string]any{"prompt": "hi", "modelId": "m2"},
			code:  tools.CodeToolExecutionFailed, msg: "model m2 failed: provider overloaded", notInMsg: "sk-secret"},
		{name: "unknown model", gen: &fakeGenerator{err: errs.NotFoundf("models", "MODEL_NOT_FOUND", "no model zz")},
			input: map[string]any{"prompt": "hi", "modelId": "zz"},
			code:  tools.CodeInvalidParams, msg: `unknown model "zz"`, field: "modelId"},
		{name: "rejected request", gen: &fakeGenerator{err: errs.Invalidf("models", "", "prompt too long")},
			input: map[string]any{"prompt": "hi", "modelId": "m3"},
			code:  tools.CodeInvalidParams, msg: "model m3 rejected the request: prompt too long"},
		{name: "empty prompt", gen: &fakeGenerator{}, input: map[string]any{"prompt": ""},
			code: tools.CodeInvalidParams, msg: "minLength", field: "prompt", noCallMade: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tools.Config{DefaultModelID: tt.defModel}
			if !tt.nilGen {
				cfg.Generator = tt.gen
			}
			r := newRegistry(t, cfg)
			out, err := r.Run(t.Context(), "llm_generate", tt.input)
			if tt.code != "" {
				assertErr(t, err, tt.code, tt.msg, tt.field)
				var e *errs.Error
				if errors.As(err, &e) && tt.notInMsg != "" && strings.Contains(e.Message, tt.notInMsg) {
					t.Errorf("message %q leaks %q", e.Message, tt.notInMsg)
				}
				if tt.noCallMade && tt.gen != nil && len(tt.gen.calls) != 0 {
					t.Errorf("generator called %d times, want 0", len(tt.gen.calls))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := r.ValidateOutput("llm_generate", out); err != nil {
				t.Fatal(err)
			}
			if out["text"] != tt.wantText {
				t.Errorf("text = %q, want %q", out["text"], tt.wantText)
			}
			if got := tt.gen.lastCall(t); got != tt.wantCall {
				t.Errorf("generator got %+v, want %+v", got, tt.wantCall)
			}
		})
	}
}

// TestLLMGenerateMetered: llm_generate is declared metered, sends the
// output cap its context carries to the model and reports what the call
// spent, under the model it used, to the context's usage report (also when
// the model failed after spending); without a report it reports nowhere.
func TestLLMGenerateMetered(t *testing.T) {
	t.Parallel()
	gen := &fakeGenerator{reply: "ok"}
	tool := findTool(t, tools.Builtin(tools.Config{Generator: gen, DefaultModelID: "m0"}), "llm_generate")
	if !tool.Metered {
		t.Fatal("llm_generate is not declared metered")
	}
	r, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	ctx, report := tools.WithUsageReport(tools.WithMaxOutput(t.Context(), 9))
	if _, err := r.Run(ctx, "llm_generate", map[string]any{"prompt": "four"}); err != nil {
		t.Fatal(err)
	}
	if got := gen.lastCall(t); got.maxTokens != 9 {
		t.Errorf("generator got cap %d, want 9", got.maxTokens)
	}
	if u, ok := report.Usage(); !ok || u != (tools.ModelUsage{ModelID: "m0", InputTokens: 4, OutputTokens: 2}) {
		t.Errorf("usage = %+v, %v", u, ok)
	}
	failing := &fakeGenerator{err: errors.New("boom")}
	r, err = tools.NewRegistry(findTool(t, tools.Builtin(tools.Config{Generator: failing}), "llm_generate"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, report = tools.WithUsageReport(t.Context())
	if _, err := r.Run(ctx, "llm_generate", map[string]any{"prompt": "x", "modelId": "m1"}); err == nil {
		t.Fatal("want the model's failure")
	}
	if u, ok := report.Usage(); !ok || u != (tools.ModelUsage{ModelID: "m1", InputTokens: 1}) {
		t.Errorf("usage of a failed call = %+v, %v", u, ok)
	}
	if got := failing.lastCall(t); got.maxTokens != 0 {
		t.Errorf("cap without one in the context = %d", got.maxTokens)
	}
}

func TestLLMGenerateTimeout(t *testing.T) {
	t.Parallel()
	gen := &fakeGenerator{block: true}
	tool := findTool(t, tools.Builtin(tools.Config{Generator: gen}), "llm_generate")
	tool.Timeout = 30 * time.Millisecond
	r, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(t.Context(), "llm_generate", map[string]any{"prompt": "hi"})
	assertErr(t, err, tools.CodeToolTimeout, "did not finish within 30ms", "")
}

// Builtin returns fresh tools each call: changing one set leaves another
// untouched.
func TestBuiltinReturnsFreshTools(t *testing.T) {
	t.Parallel()
	a, b := tools.Builtin(tools.Config{}), tools.Builtin(tools.Config{})
	a[0].Name = "changed"
	if b[0].Name == "changed" {
		t.Fatal("Builtin shares Tool values between calls")
	}
	if len(a) != 15 { // 13, run_workflow and knowledge_search
		t.Fatalf("Builtin returned %d tools, want 15", len(a))
	}
	ids := map[string]bool{}
	for _, tool := range a {
		ids[tool.ID] = true
	}
	if len(ids) != len(a) {
		t.Fatalf("duplicate ids in %v", ids)
	}
}
