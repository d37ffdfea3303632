package workflow

import (
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
