package workflow

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzResolve checks that Resolve (with step outputs only, and with a
// Scope that also has an input and a forEach element) never panics, that
// strings without "{{" come back unchanged, and that the input is not
// modified.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "plain", "{{fetch.body}}", "x {{calc.result}} y", "{{.name}}", "{{ a.b }}", "{{{{fetch.body}}}}", `{"a":["{{fetch.obj}}",1]}`,
		"{{item}}", "{{item.n}} of {{input.q}}", `{"x":"{{input.list}}","y":["{{item.n}}"]}`, "{{item.missing}}"} {
		f.Add(s)
	}
	scope := Scope{Steps: testOutputs, Input: map[string]any{"q": "query", "list": []any{1.0, "two"}}}.WithItem(map[string]any{"n": 3.0})
	f.Fuzz(func(t *testing.T, s string) {
		check := func(in any) {
			for _, resolve := range []func(any) (any, error){
				func(v any) (any, error) { return Resolve(v, testOutputs) },
				scope.Resolve,
			} {
				out, err := resolve(in)
				if err != nil {
					continue
				}
				if str, ok := in.(string); ok && !strings.Contains(str, "{{") {
					if out != str {
						t.Fatalf("Resolve(%q) = %#v, want unchanged", str, out)
					}
				}
			}
		}
		check(s)
		Refs(s)
		IsExactTemplate(s)
		var v any
		if json.Unmarshal([]byte(s), &v) == nil {
			before, _ := json.Marshal(v)
			check(v)
			Refs(v)
			after, _ := json.Marshal(v)
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("Resolve modified its input")
			}
		}
	})
}
