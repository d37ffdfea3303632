package workflow

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzResolve checks that Resolve never panics, that strings without "{{"
// come back unchanged, and that a successful result holds no reference to a
// known step.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "plain", "{{fetch.body}}", "x {{calc.result}} y", "{{.name}}", "{{ a.b }}", "{{{{fetch.body}}}}", `{"a":["{{fetch.obj}}",1]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(in any) {
			out, err := Resolve(in, testOutputs)
			if err != nil {
				return
			}
			if str, ok := in.(string); ok && !strings.Contains(str, "{{") {
				if out != str {
					t.Fatalf("Resolve(%q) = %#v, want unchanged", str, out)
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
