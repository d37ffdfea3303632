package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

func TestBuiltinCatalog(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	want := []struct {
		id, category string
		outputs      []string
		annotations  tools.Annotations
	}{
		{"agent", "ai", []string{"text", "toolCalls", "turns"}, tools.Annotations{OpenWorld: true}},
		{"ask_human", "util", []string{"approved", "respondedAt", "timedOut", "values"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"code", "data", []string{"result"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"csv_parse", "data", []string{"rows"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"datetime_now", "time", []string{"iso", "unix"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"hash", "util", []string{"digest"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"html_extract", "web", []string{"matches"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"http_request", "web", []string{"body", "headers", "json", "status"}, tools.Annotations{Destructive: true, OpenWorld: true}},
		{"json_query", "data", []string{"result"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"knowledge_search", "data", []string{"results"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"llm_generate", "ai", []string{"text"}, tools.Annotations{ReadOnly: true}},
		{"math_evaluate", "math", []string{"value"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"regex_extract", "text", []string{"groups", "matches"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
		{"run_workflow", "util", nil, tools.Annotations{Idempotent: true, OpenWorld: true}},
		{"text_template", "text", []string{"text"}, tools.Annotations{ReadOnly: true, Idempotent: true}},
	}
	list := r.List()
	if len(list) != len(want) {
		t.Fatalf("List() has %d tools, want %d", len(list), len(want))
	}
	for i, w := range want {
		tool := list[i]
		if tool.ID != w.id {
			t.Fatalf("List()[%d] = %s, want %s (ordered by id)", i, tool.ID, w.id)
		}
		if tool.Category != w.category {
			t.Errorf("%s: category %s, want %s", w.id, tool.Category, w.category)
		}
		if got := tool.Outputs(); !slices.Equal(got, w.outputs) {
			t.Errorf("%s: Outputs() = %v, want %v", w.id, got, w.outputs)
		}
		if tool.Annotations != w.annotations {
			t.Errorf("%s: annotations %+v, want %+v", w.id, tool.Annotations, w.annotations)
		}
		if !strings.Contains(tool.Description, "Example") || tool.Name == "" {
			t.Errorf("%s: description without example or empty name", w.id)
		}
		if tool.Timeout <= 0 {
			t.Errorf("%s: timeout %v, want a positive per-tool timeout", w.id, tool.Timeout)
		}
		for _, sch := range []struct {
			name string
			raw  json.RawMessage
		}{{"input", tool.InputSchema}, {"output", tool.OutputSchema}} {
			var s struct {
				Type       string                    `json:"type"`
				Properties map[string]map[string]any `json:"properties"`
			}
			if err := json.Unmarshal(sch.raw, &s); err != nil {
				t.Fatalf("%s %s schema: %v", w.id, sch.name, err)
			}
			// run_workflow's output is the child's last step's: no fixed properties.
			open := w.id == tools.RunWorkflowID && sch.name == "output"
			if s.Type != "object" || (len(s.Properties) == 0 && !open) {
				t.Errorf("%s %s schema: type %q with %d properties", w.id, sch.name, s.Type, len(s.Properties))
			}
			for name, p := range s.Properties {
				if d, _ := p["description"].(string); len(d) < 10 {
					t.Errorf("%s %s schema: property %s has no useful description", w.id, sch.name, name)
				}
			}
		}
	}
	// Optional inputs with an obvious default declare it.
	defaults := map[string][]string{
		"http_request":  {"method"},
		"csv_parse":     {"delimiter", "header"},
		"datetime_now":  {"timezone", "format"},
		"text_template": {"values"},
	}
	for id, fields := range defaults {
		tool, _ := r.Get(id)
		var s struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		json.Unmarshal(tool.InputSchema, &s)
		for _, f := range fields {
			if _, ok := s.Properties[f]["default"]; !ok {
				t.Errorf("%s.%s has no default", id, f)
			}
		}
	}
}

// okTool returns a valid tool definition for registry tests.
func okTool(id string) *tools.Tool {
	return &tools.Tool{
		ID:           id,
		Name:         "Tool " + id,
		Description:  "Does " + id + " things.",
		Category:     tools.CategoryUtil,
		InputSchema:  json.RawMessage(`{"type": "object", "properties": {"x": {"type": "string"}}}`),
		OutputSchema: json.RawMessage(`{"type": "object", "properties": {"y": {"type": "string"}, "a": {}}}`),
		Run: func(context.Context, map[string]any) (map[string]any, error) {
			return map[string]any{"y": "ok"}, nil
		},
	}
}

func TestNewRegistryRejects(t *testing.T) {
	t.Parallel()
	with := func(id string, f func(*tools.Tool)) *tools.Tool {
		tool := okTool(id)
		f(tool)
		return tool
	}
	tests := []struct {
		name  string
		tools []*tools.Tool
		want  string
	}{
		{"nil tool", []*tools.Tool{nil}, "is nil"},
		{"empty id", []*tools.Tool{okTool("")}, "id must match"},
		{"upper-case id", []*tools.Tool{okTool("Hash")}, "id must match"},
		{"id starting with digit", []*tools.Tool{okTool("1tool")}, "id must match"},
		{"id with dash", []*tools.Tool{okTool("my-tool")}, "id must match"},
		{"id too long", []*tools.Tool{okTool("a" + strings.Repeat("b", 64))}, "id must match"},
		{"duplicate id", []*tools.Tool{okTool("dup"), okTool("dup")}, "duplicate id"},
		{"unknown category", []*tools.Tool{with("c", func(t *tools.Tool) { t.Category = "files" })}, "unknown category"},
		{"empty name", []*tools.Tool{with("n", func(t *tools.Tool) { t.Name = " " })}, "name is empty"},
		{"empty description", []*tools.Tool{with("d", func(t *tools.Tool) { t.Description = "" })}, "description is empty"},
		{"nil run", []*tools.Tool{with("r", func(t *tools.Tool) { t.Run = nil })}, "run function is nil"},
		{"negative timeout", []*tools.Tool{with("to", func(t *tools.Tool) { t.Timeout = -time.Second })}, "timeout is negative"},
		{"input not JSON", []*tools.Tool{with("j", func(t *tools.Tool) { t.InputSchema = json.RawMessage(`{"type":`) })}, "input schema: schema is not valid JSON"},
		{"input missing", []*tools.Tool{with("m", func(t *tools.Tool) { t.InputSchema = nil })}, "input schema: schema is empty"},
		{"input array type", []*tools.Tool{with("a", func(t *tools.Tool) { t.InputSchema = json.RawMessage(`{"type": "array"}`) })}, `input schema: schema must have "type": "object"`},
		{"input without type", []*tools.Tool{with("nt", func(t *tools.Tool) { t.InputSchema = json.RawMessage(`{"properties": {}}`) })}, `input schema: schema must have "type": "object"`},
		{"input boolean schema", []*tools.Tool{with("b", func(t *tools.Tool) { t.InputSchema = json.RawMessage(`true`) })}, "input schema: schema is not a JSON object"},
		{"output array type", []*tools.Tool{with("o", func(t *tools.Tool) { t.OutputSchema = json.RawMessage(`{"type": "string"}`) })}, `output schema: schema must have "type": "object"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := tools.NewRegistry(tt.tools...)
			if err == nil {
				t.Fatalf("NewRegistry accepted %s (registry %v)", tt.name, r)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestSchemasCompileOnFirstUse: NewRegistry accepts a schema that is an
// object of type "object" without compiling it; CompileSchemas, and the
// tool's first use, find that it does not compile or refers to another
// document.
func TestSchemasCompileOnFirstUse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, input, want string
	}{
		{"unknown type", `{"type": "object", "properties": {"x": {"type": "strin"}}}`, `unknown type "strin"`},
		{"bad regex", `{"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}}`, "pattern"},
		{"file ref refused", `{"type": "object", "properties": {"x": {"$ref": "file:///etc/passwd"}}}`, "not allowed"},
		{"remote ref refused", `{"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}}`, "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := okTool("bad")
			tool.InputSchema = json.RawMessage(tt.input)
			r, err := tools.NewRegistry(okTool("fine"), tool)
			if err != nil {
				t.Fatalf("NewRegistry: %v", err)
			}
			if err := r.Validate("fine", map[string]any{"x": "a"}); err != nil {
				t.Fatalf("the other tool: %v", err)
			}
			err = r.CompileSchemas()
			if err == nil || !strings.Contains(err.Error(), `tool "bad": input schema`) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CompileSchemas = %v, want it to name the tool, its input schema and %q", err, tt.want)
			}
			_, runErr := r.Run(t.Context(), "bad", map[string]any{"x": "a"})
			for _, err := range []error{r.Validate("bad", map[string]any{"x": "a"}), runErr} {
				var e *errs.Error
				if !errors.As(err, &e) || e.Kind != errs.Internal || !strings.Contains(e.Message, "tool bad has a schema that does not compile") {
					t.Fatalf("use of the tool = %v, want an Internal error naming it", err)
				}
			}
		})
	}
}

// TestShippedSchemasCompile: every built-in and test tool's schemas compile.
func TestShippedSchemasCompile(t *testing.T) {
	t.Parallel()
	r, err := tools.NewRegistry(append(tools.Builtin(tools.Config{}), tools.TestTools()...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CompileSchemas(); err != nil {
		t.Fatal(err)
	}
}

func TestNewRegistryReportsAllProblems(t *testing.T) {
	t.Parallel()
	bad1, bad2 := okTool("BAD"), okTool("x")
	bad2.Category = "nope"
	_, err := tools.NewRegistry(okTool("fine"), bad1, bad2)
	if err == nil || !strings.Contains(err.Error(), `"BAD"`) || !strings.Contains(err.Error(), "unknown category") {
		t.Fatalf("err = %v, want both problems named", err)
	}
}

func TestNewRegistryIsImmutable(t *testing.T) {
	t.Parallel()
	orig := okTool("orig")
	r, err := tools.NewRegistry(orig)
	if err != nil {
		t.Fatal(err)
	}
	orig.Name = "changed"
	orig.InputSchema[0] = 'X'
	got, err := r.Get("orig")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Tool orig" || got.InputSchema[0] != '{' {
		t.Fatalf("registry changed with its input: name %q schema %q", got.Name, got.InputSchema)
	}
	list := r.List()
	list[0] = nil
	if r.List()[0] == nil {
		t.Fatal("List returned the registry's own slice")
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	tool, err := r.Get("hash")
	if err != nil || tool.ID != "hash" {
		t.Fatalf("Get(hash) = %v, %v", tool, err)
	}
	for _, id := range []string{"nope", "", "HASH"} {
		_, err := r.Get(id)
		assertErr(t, err, tools.CodeToolNotFound, "not found", "")
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	custom, err := tools.NewRegistry(
		descTool("alpha", "Alpha", "Builds a widget from parts."),
		descTool("widget_maker", "Maker", "Makes things."),
		descTool("zeta", "Zeta", "Paints a WIDGET blue."),
		descTool("gadget", "Widget gadget", "Unrelated text."),
		descTool("other", "Other", "Nothing to see."),
	)
	if err != nil {
		t.Fatal(err)
	}
	builtin := newRegistry(t, tools.Config{})
	tests := []struct {
		name  string
		r     *tools.Registry
		query string
		want  []string
	}{
		{"name and id above description, ties by id", custom, "widget", []string{"gadget", "widget_maker", "alpha", "zeta"}},
		{"case-insensitive", custom, "WiDgEt", []string{"gadget", "widget_maker", "alpha", "zeta"}},
		{"description only", custom, "paints", []string{"zeta"}},
		{"all words must match", custom, "widget blue", []string{"zeta"}},
		{"words across id and description", custom, "maker things", []string{"widget_maker"}},
		{"no match", custom, "spaceship", nil},
		{"empty query", custom, "", nil},
		{"blank query", custom, "   ", nil},
		{"builtin by id", builtin, "json", []string{"json_query", "agent", "ask_human", "code", "http_request", "knowledge_search", "text_template"}},
		{"builtin by name", builtin, "csv", []string{"csv_parse", "knowledge_search"}},
		{"builtin multi-word", builtin, "regular expression", []string{"regex_extract"}},
		{"builtin description", builtin, "digest", []string{"hash"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, tool := range tt.r.Search(tt.query) {
				got = append(got, tool.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Search(%q) = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
}

func descTool(id, name, desc string) *tools.Tool {
	tool := okTool(id)
	tool.Name, tool.Description = name, desc
	return tool
}

func TestValidate(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	type detail = errs.FieldError
	tests := []struct {
		name  string
		id    string
		input map[string]any
		want  []detail // exact details; nil means valid
	}{
		{"valid", "json_query", map[string]any{"query": ".a", "input": map[string]any{"a": 1.0}}, nil},
		{"nil input treated as empty", "datetime_now", nil, nil},
		{"go values normalized", "text_template", map[string]any{"template": "{{index .xs 1}}", "values": map[string]any{"xs": []string{"a", "b"}}}, nil},
		{"missing required", "json_query", map[string]any{"input": 1.0}, []detail{{Field: "query", Message: "missing property 'query'"}}},
		{"two missing", "regex_extract", map[string]any{}, []detail{
			{Field: "pattern", Message: "missing property 'pattern'"},
			{Field: "text", Message: "missing property 'text'"},
		}},
		{"wrong type", "json_query", map[string]any{"query": 5.0}, []detail{{Field: "query", Message: "got number, want string"}}},
		{"unknown property", "hash", map[string]any{"text": "a", "algorithm": "sha256", "salt": "x"}, []detail{{Field: "salt", Message: "additional properties 'salt' not allowed"}}},
		{"enum", "hash", map[string]any{"text": "a", "algorithm": "crc32"}, []detail{{Field: "algorithm", Message: "value must be one of 'sha256', 'sha1', 'md5'"}}},
		{"nested header value", "http_request", map[string]any{"url": "https://example.com", "headers": map[string]any{"x-a": 1.0}}, []detail{{Field: "headers/x-a", Message: "got number, want string"}}},
		{"header name with slash is escaped", "http_request", map[string]any{"url": "https://example.com", "headers": map[string]any{"a/b": "v"}}, []detail{{Field: "headers/a~1b", Message: "'a/b' does not match pattern '^[!#$%&'*+.^_`|~0-9A-Za-z-]+$'"}}},
		{"url scheme", "http_request", map[string]any{"url": "ftp://example.com"}, []detail{{Field: "url", Message: "'ftp://example.com' does not match pattern '^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]'"}}},
		{"delimiter length", "csv_parse", map[string]any{"text": "a", "delimiter": ";;"}, []detail{{Field: "delimiter", Message: "maxLength: got 2, want 1"}}},
		{"variable not a number", "math_evaluate", map[string]any{"expression": "a", "variables": map[string]any{"a": "1"}}, []detail{{Field: "variables/a", Message: "got string, want number"}}},
		{"min length", "llm_generate", map[string]any{"prompt": ""}, []detail{{Field: "prompt", Message: "minLength: got 0, want 1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := r.Validate(tt.id, tt.input)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v (%v)", err, errDetails(err))
				}
				return
			}
			assertErr(t, err, tools.CodeInvalidParams, "invalid input for tool "+tt.id, "")
			if got := errDetails(err); !slices.Equal(got, tt.want) {
				t.Fatalf("details\n got  %q\n want %q", got, tt.want)
			}
			// Run validates the same way before running anything.
			_, runErr := r.Run(t.Context(), tt.id, tt.input)
			if got := errDetails(runErr); !slices.Equal(got, tt.want) {
				t.Fatalf("Run details %q, want %q", got, tt.want)
			}
		})
	}
	assertErr(t, r.Validate("nope", nil), tools.CodeToolNotFound, `"nope"`, "")
}

func TestValidateOutput(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	if err := r.ValidateOutput("hash", map[string]any{"digest": "abc123"}); err != nil {
		t.Fatalf("valid output refused: %v", err)
	}
	err := r.ValidateOutput("hash", map[string]any{"digest": "ABC", "extra": 1})
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != "INVALID_TOOL_OUTPUT" || len(e.Details) != 2 {
		t.Fatalf("err = %v (%v), want INVALID_TOOL_OUTPUT with 2 details", err, errDetails(err))
	}
	assertErr(t, r.ValidateOutput("nope", nil), tools.CodeToolNotFound, "", "")
}

// funcTool is a registry test tool running f with the given timeout.
func funcTool(id string, timeout time.Duration, f func(ctx context.Context, in map[string]any) (map[string]any, error)) *tools.Tool {
	tool := okTool(id)
	tool.Timeout = timeout
	tool.Run = f
	return tool
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	// ignores_ctx runs until the test ends: a Run that returns did not
	// wait for it.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r, err := tools.NewRegistry(
		funcTool("waits", 50*time.Millisecond, func(ctx context.Context, _ map[string]any) (map[string]any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}),
		funcTool("ignores_ctx", 50*time.Millisecond, func(ctx context.Context, _ map[string]any) (map[string]any, error) {
			<-release
			return map[string]any{"y": "late"}, nil
		}),
		funcTool("fails", 0, func(context.Context, map[string]any) (map[string]any, error) {
			return nil, errors.New("upstream said no")
		}),
		funcTool("fails_errs", 0, func(context.Context, map[string]any) (map[string]any, error) {
			return nil, errs.E("x", errs.Unavailable, "", "service busy").WithCause(errors.New("secret detail"))
		}),
		funcTool("invalid", 0, func(context.Context, map[string]any) (map[string]any, error) {
			return nil, &errs.Error{Kind: errs.Invalid, Message: "x: bad", Details: []errs.FieldError{{Field: "x", Message: "bad"}}}
		}),
		funcTool("panics", 0, func(context.Context, map[string]any) (map[string]any, error) {
			panic("boom with secret")
		}),
		funcTool("nil_output", 0, func(context.Context, map[string]any) (map[string]any, error) {
			return nil, nil
		}),
		funcTool("echo", 0, func(_ context.Context, in map[string]any) (map[string]any, error) {
			return map[string]any{"y": in["x"]}, nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id       string
		input    map[string]any
		code     string
		msg      string
		field    string
		notInMsg string
	}{
		{id: "missing", code: tools.CodeToolNotFound, msg: `tool "missing" not found`},
		{id: "echo", input: map[string]any{"x": 1.0}, code: tools.CodeInvalidParams, msg: "x: got number, want string", field: "x"},
		{id: "waits", code: tools.CodeToolTimeout, msg: "did not finish within 50ms"},
		{id: "ignores_ctx", code: tools.CodeToolTimeout, msg: "did not finish within 50ms"},
		{id: "fails", code: tools.CodeToolExecutionFailed, msg: "upstream said no"},
		{id: "fails_errs", code: tools.CodeToolExecutionFailed, msg: "service busy", notInMsg: "secret"},
		{id: "invalid", code: tools.CodeInvalidParams, msg: "x: bad", field: "x"},
		{id: "panics", code: tools.CodeToolExecutionFailed, msg: "tool panics failed unexpectedly", notInMsg: "secret"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			_, err := r.Run(t.Context(), tt.id, tt.input)
			assertErr(t, err, tt.code, tt.msg, tt.field)
			var e *errs.Error
			errors.As(err, &e)
			if tt.notInMsg != "" && strings.Contains(e.Message, tt.notInMsg) {
				t.Errorf("client message %q leaks %q", e.Message, tt.notInMsg)
			}
		})
	}

	t.Run("nil output becomes empty object", func(t *testing.T) {
		t.Parallel()
		out, err := r.Run(t.Context(), "nil_output", nil)
		if err != nil || out == nil || len(out) != 0 {
			t.Fatalf("Run = %v, %v; want empty map", out, err)
		}
	})
	t.Run("success", func(t *testing.T) {
		t.Parallel()
		out, err := r.Run(t.Context(), "echo", map[string]any{"x": "hi"})
		if err != nil || out["y"] != "hi" {
			t.Fatalf("Run = %v, %v", out, err)
		}
	})
	t.Run("caller cancellation", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(10*time.Millisecond, cancel)
		_, err := r.Run(ctx, "waits", nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled wrapped", err)
		}
		if errs.CodeOf(err) == tools.CodeToolTimeout {
			t.Fatalf("cancellation reported as %s", errs.CodeOf(err))
		}
	})
	t.Run("caller already canceled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := r.Run(ctx, "echo", map[string]any{"x": "hi"})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled wrapped", err)
		}
	})
	t.Run("caller deadline", func(t *testing.T) {
		t.Parallel()
		long, err := tools.NewRegistry(funcTool("waits", time.Minute, func(ctx context.Context, _ map[string]any) (map[string]any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err = long.Run(ctx, "waits", nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded wrapped", err)
		}
		assertErr(t, err, tools.CodeToolTimeout, "caller's deadline", "")
	})
}

func TestDefaultTimeout(t *testing.T) {
	t.Parallel()
	var got time.Duration
	tool := funcTool("deadline", 0, func(ctx context.Context, _ map[string]any) (map[string]any, error) {
		d, _ := ctx.Deadline()
		got = time.Until(d)
		return nil, nil
	})
	r, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context(), "deadline", nil); err != nil {
		t.Fatal(err)
	}
	if got <= tools.DefaultTimeout-time.Second || got > tools.DefaultTimeout {
		t.Fatalf("deadline in %v, want about %v", got, tools.DefaultTimeout)
	}
}

func TestOutputs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		schema string
		want   []string
	}{
		{`{"type": "object", "properties": {"b": {}, "a": {}, "c": {}}}`, []string{"a", "b", "c"}},
		{`{"type": "object"}`, nil},
		{`not json`, nil},
	}
	for _, tt := range tests {
		tool := &tools.Tool{OutputSchema: json.RawMessage(tt.schema)}
		if got := tool.Outputs(); !slices.Equal(got, tt.want) {
			t.Errorf("Outputs(%s) = %v, want %v", tt.schema, got, tt.want)
		}
	}
}

func TestRegistryConcurrentUse(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	errc := make(chan error, 40)
	for i := range 40 {
		go func() {
			out, err := r.Run(context.Background(), "hash", map[string]any{"text": fmt.Sprint(i), "algorithm": "md5"})
			if err == nil && len(out["digest"].(string)) != 32 {
				err = fmt.Errorf("bad digest %v", out)
			}
			if err == nil {
				_ = r.Search("json")
				_ = r.List()
			}
			errc <- err
		}()
	}
	for range 40 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
