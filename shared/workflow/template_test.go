package workflow

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var testOutputs = map[string]map[string]any{
	"fetch": {"body": "hello", "status": float64(200), "obj": map[string]any{"a": []any{float64(1), "x"}}, "nil": nil},
	"calc":  {"result": float64(42.5), "ok": true},
}

func TestIsExactTemplate(t *testing.T) {
	cases := []struct {
		in   string
		ok   bool
		want Ref
	}{
		{"{{fetch.body}}", true, Ref{"fetch", "body"}},
		{"{{ fetch.body }}", true, Ref{"fetch", "body"}},
		{"{{\tfetch.body\t}}", true, Ref{"fetch", "body"}},
		{"{{a_1.B_2}}", true, Ref{"a_1", "B_2"}},
		{" {{fetch.body}}", false, Ref{}},
		{"{{fetch.body}} ", false, Ref{}},
		{"{{.name}}", false, Ref{}},
		{"{{fetch.body.x}}", false, Ref{}},
		{"{{1a.b}}", false, Ref{}},
		{"{{_a.b}}", false, Ref{}},
		{"{{a.b}}{{c.d}}", false, Ref{}},
		{"{{ a. b }}", false, Ref{}},
		{"{{\na.b}}", false, Ref{}},
		{"{{" + strings.Repeat("a", 64) + ".b}}", true, Ref{strings.Repeat("a", 64), "b"}},
		{"{{" + strings.Repeat("a", 65) + ".b}}", false, Ref{}},
		{"", false, Ref{}},
		{"{{input.query}}", true, Ref{"input", "query"}},
		{"{{item}}", true, Ref{"item", ""}},
		{"{{ item }}", true, Ref{"item", ""}},
		{"{{item.name}}", true, Ref{"item", "name"}},
		{"{{items}}", false, Ref{}},
		{"{{input}}", false, Ref{}},
		{"{{end}}", false, Ref{}},
		{"{{item.a.b}}", false, Ref{}},
	}
	for _, c := range cases {
		got, ok := IsExactTemplate(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("IsExactTemplate(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestRefs(t *testing.T) {
	v := map[string]any{
		"b":        []any{"x {{s2.o2}} y", float64(1), map[string]any{"{{k.k}}": "{{ s3.o3 }}"}},
		"a":        "{{s1.o1}}",
		"text":     "Hello {{.name}} {{ if .x }}",
		"n":        nil,
		"multiple": "{{s4.o4}}{{s5.o5}}",
	}
	got := Refs(v)
	want := []Ref{{"s1", "o1"}, {"s2", "o2"}, {"s3", "o3"}, {"s4", "o4"}, {"s5", "o5"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Refs = %v, want %v", got, want)
	}
	if Refs("plain") != nil || Refs(float64(3)) != nil || Refs(nil) != nil {
		t.Fatal("Refs of values without references must be nil")
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want any
	}{
		{"exact string", "{{fetch.body}}", "hello"},
		{"exact number keeps type", "{{calc.result}}", float64(42.5)},
		{"exact with spaces", "{{ calc.result }}", float64(42.5)},
		{"exact bool", "{{calc.ok}}", true},
		{"exact object", "{{fetch.obj}}", map[string]any{"a": []any{float64(1), "x"}}},
		{"exact null", "{{fetch.nil}}", nil},
		{"interpolated string", "say {{fetch.body}}!", "say hello!"},
		{"interpolated number", "x={{calc.result}}", "x=42.5"},
		{"interpolated object", "o={{fetch.obj}}", `o={"a":[1,"x"]}`},
		{"interpolated null", "n={{fetch.nil}}", "n=null"},
		{"two refs", "{{fetch.body}}{{fetch.status}}", "hello200"},
		{"text_template passes", "Hi {{.name}} {{ range .items }}{{.}}{{end}}", "Hi {{.name}} {{ range .items }}{{.}}{{end}}"},
		{"mixed", "{{.name}} and {{fetch.body}}", "{{.name}} and hello"},
		{"non-ref braces", "{{a.b.c}} {{", "{{a.b.c}} {{"},
		{"plain", "no templates", "no templates"},
		{"number", float64(7), float64(7)},
		{"nil", nil, nil},
		{"nested", map[string]any{"vars": map[string]any{"x": "{{calc.result}}"}, "list": []any{"{{fetch.status}}", "a {{calc.ok}}"}},
			map[string]any{"vars": map[string]any{"x": float64(42.5)}, "list": []any{float64(200), "a true"}}},
		{"keys untouched", map[string]any{"{{fetch.body}}": "v"}, map[string]any{"{{fetch.body}}": "v"}},
	}
	for _, c := range cases {
		got, err := Resolve(c.in, testOutputs)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Resolve(%#v) = %#v, want %#v", c.name, c.in, got, c.want)
		}
	}
}

func TestResolveDoesNotModifyInput(t *testing.T) {
	in := map[string]any{"x": "{{calc.result}}", "l": []any{"{{fetch.body}}"}}
	if _, err := Resolve(in, testOutputs); err != nil {
		t.Fatal(err)
	}
	if in["x"] != "{{calc.result}}" || in["l"].([]any)[0] != "{{fetch.body}}" {
		t.Fatalf("input modified: %v", in)
	}
}

func TestResolveMissing(t *testing.T) {
	for _, in := range []any{"{{nope.body}}", "x {{fetch.nope}}", map[string]any{"a": []any{"{{calc.missing}}"}}} {
		_, err := Resolve(in, testOutputs)
		var re *RefError
		if !errors.As(err, &re) {
			t.Errorf("Resolve(%v) error = %v, want *RefError", in, err)
		}
	}
	_, err := Resolve("{{nope.x}}", nil)
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("error = %v", err)
	}
}

func TestResolveInputs(t *testing.T) {
	got, err := ResolveInputs(nil, nil)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("ResolveInputs(nil) = %v, %v", got, err)
	}
	got, err = ResolveInputs(map[string]any{"a": "{{calc.ok}}"}, testOutputs)
	if err != nil || got["a"] != true {
		t.Fatalf("ResolveInputs = %v, %v", got, err)
	}
}

// TestScopeResolve: {{input.name}} and {{item}}/{{item.field}} follow the
// typed rules of step references: exact keeps the JSON type, inside text
// they are interpolated, and what the scope lacks is a *RefError naming
// the reason.
func TestScopeResolve(t *testing.T) {
	t.Parallel()
	scope := Scope{Steps: testOutputs, Input: map[string]any{"q": "rust", "n": 3.0, "tags": []any{"a", "b"}, "nil": nil}}
	loop := scope.WithItem(map[string]any{"name": "Ada", "age": 36.0})
	raw := scope.WithItem(json.RawMessage(`{"name":"Raw"}`))
	cases := []struct {
		name   string
		scope  Scope
		in     any
		want   any
		reason string // a *RefError's reason; "" means success
	}{
		{"input exact keeps type", scope, "{{input.n}}", 3.0, ""},
		{"input exact array", scope, "{{ input.tags }}", []any{"a", "b"}, ""},
		{"input exact null", scope, "{{input.nil}}", nil, ""},
		{"input interpolated", scope, "search {{input.q}} x{{input.n}} {{input.tags}}", `search rust x3 ["a","b"]`, ""},
		{"input missing", scope, "{{input.nope}}", nil, ReasonInput},
		{"item exact object", loop, "{{item}}", map[string]any{"name": "Ada", "age": 36.0}, ""},
		{"item field keeps type", loop, "{{item.age}}", 36.0, ""},
		{"item interpolated", loop, "Hi {{item.name}} ({{item}})", `Hi Ada ({"age":36,"name":"Ada"})`, ""},
		{"item from raw JSON", raw, "{{item.name}}", "Raw", ""},
		{"item with step and input", loop, map[string]any{"a": []any{"{{item.name}}", "{{fetch.status}}", "{{input.q}}"}},
			map[string]any{"a": []any{"Ada", 200.0, "rust"}}, ""},
		{"item outside a loop", scope, "{{item}}", nil, ReasonItem},
		{"item field missing", loop, "{{item.nope}}", nil, ReasonItem},
		{"item field of a scalar", scope.WithItem(5.0), "{{item.x}}", nil, ReasonItem},
		{"null item", scope.WithItem(nil), "{{item}}", nil, ""},
		{"step missing", scope, "{{ghost.x}}", nil, ReasonStep},
		{"output missing", scope, "x {{fetch.nope}}", nil, ReasonOutput},
		{"text_template untouched", loop, "{{.item}} {{ if .x }}{{end}}", "{{.item}} {{ if .x }}{{end}}", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.scope.Resolve(c.in)
			if c.reason != "" {
				var re *RefError
				if !errors.As(err, &re) || re.Reason != c.reason || re.Error() == "" {
					t.Fatalf("Resolve(%v) = %v, %v; want a *RefError (%s)", c.in, got, err, c.reason)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Resolve(%v) = %#v, %v; want %#v", c.in, got, err, c.want)
			}
		})
	}
}

func TestScopeItems(t *testing.T) {
	t.Parallel()
	scope := Scope{Steps: map[string]map[string]any{"csv": {"rows": []any{1.0, 2.0}, "n": 2.0, "raw": json.RawMessage(`[3]`)}},
		Input: map[string]any{"list": []any{"x"}}}
	cases := []struct {
		forEach string
		want    []any
		errText string
	}{
		{"{{csv.rows}}", []any{1.0, 2.0}, ""},
		{"{{ input.list }}", []any{"x"}, ""},
		{"{{csv.raw}}", []any{3.0}, ""},
		{"{{csv.n}}", nil, "a number, not an array"},
		{"{{csv.none}}", nil, "has no output"},
		{"rows: {{csv.rows}}", nil, "not exactly one template"},
		{"{{item}}", nil, "not in a forEach step"},
	}
	for _, c := range cases {
		got, err := scope.Items(c.forEach)
		if c.errText != "" {
			if err == nil || !strings.Contains(err.Error(), c.errText) {
				t.Errorf("Items(%q) = %v, %v; want an error with %q", c.forEach, got, err, c.errText)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Items(%q) = %v, %v; want %v", c.forEach, got, err, c.want)
		}
	}
}

func TestDefinitionSizeAndStepDefaults(t *testing.T) {
	t.Parallel()
	w := Workflow{Name: "n", Steps: []Step{{ID: "a", ToolID: "hash", Inputs: map[string]any{"text": "<&>"}, Outputs: []string{"digest"}}}}
	want := `{"name":"n","description":"","steps":[{"id":"a","toolId":"hash","inputs":{"text":"\u003c\u0026\u003e"},"outputs":["digest"]}],"exposeAsTool":false}`
	if got := DefinitionSize(w); got != len(want) {
		t.Errorf("DefinitionSize = %d, want %d (%s)", got, len(want), want)
	}
	w.InputSchema, w.ToolName, w.ExposeAsTool = json.RawMessage(`{"type": "object"}`), "t", true
	if got := DefinitionSize(w); got != len(want)+len(`,"inputSchema":{"type":"object"}`)+len(`,"toolName":"t"`)+len(`true`)-len(`false`) {
		t.Errorf("DefinitionSize with schema and tool name = %d", got)
	}
	if got := (Step{}).Parallelism(); got != DefaultConcurrency {
		t.Errorf("Parallelism() unset = %d", got)
	}
	for _, c := range []struct{ concurrency, want int }{{1, 1}, {16, 16}, {99, MaxConcurrency}, {0, 1}} {
		if got := (Step{Concurrency: &c.concurrency}).Parallelism(); got != c.want {
			t.Errorf("Parallelism(%d) = %d, want %d", c.concurrency, got, c.want)
		}
	}
	if !ReservedStepID("input") || !ReservedStepID("item") || ReservedStepID("items") {
		t.Error("ReservedStepID")
	}
	e := Workflow{ID: "w", ToolName: "t", Steps: []Step{{ID: "a", ToolID: "x"}, {ID: "b", ToolID: "y", ForEach: "{{a.rows}}"}}}.Entry()
	if e.WorkflowID != "w" || e.LastStepID != "b" || e.LastToolID != "y" || !e.LastForEach {
		t.Errorf("Entry = %+v", e)
	}
}
