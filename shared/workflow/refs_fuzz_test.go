package workflow

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// FuzzRefs complements FuzzResolve with the properties of reference
// extraction on arbitrary strings (and on the JSON value a string decodes
// to):
//   - Refs never panics and every reference it returns has a step id and
//     an output name matching IdentPattern, whose canonical form is itself
//     exactly one reference (IsExactTemplate and Refs both give it back);
//   - IsExactTemplate agrees with Refs: when it accepts s, Refs(s) is that
//     one reference and s starts with "{{" and ends with "}}"; when Refs
//     finds one reference spanning all of s, IsExactTemplate accepts s;
//   - Refs walks strings inside maps, slices, []string and
//     []map[string]any;
//   - Resolve agrees with Refs: with every reference defined it succeeds,
//     giving the value itself for an exact template and the string with
//     each reference replaced by the value's text otherwise; with a
//     referenced step missing it fails with a *RefError for a reference of s.
func FuzzRefs(f *testing.F) {
	for _, s := range []string{
		"", "{{a.b}}", "{{ a.b }}", "{{\ta.b\t}}", " {{a.b}}", "{{a.b}} ", "{{a.b}}{{c.d}}", "{{{{a.b}}}}",
		"{{a.b.c}}", "{{.name}}", "{{1a.b}}", "{{a_1.B_2}}", "{{a.b}", "{{ a . b }}", "{{a.b}}}",
		`["{{fetch.body}}",{"k":"x {{calc.result}} y"}]`, "{{" + string(make([]byte, 64)) + "}}",
		"{{a012345678901234567890123456789012345678901234567890123456789012.b}}",
		"{{a0123456789012345678901234567890123456789012345678901234567890123.b}}",
		"{{é.b}}", "{{a.b\n}}", "\xff{{a.b}}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		refs := Refs(s)
		for _, r := range refs {
			if !ValidIdent(r.StepID) || !ValidIdent(r.Output) {
				t.Fatalf("Refs(%q) returned %+v, which does not match IdentPattern", s, r)
			}
			if got, ok := IsExactTemplate(r.String()); !ok || got != r {
				t.Fatalf("IsExactTemplate(%q) = %+v, %v for a reference of %q", r.String(), got, ok, s)
			}
			if got := Refs(r.String()); len(got) != 1 || got[0] != r {
				t.Fatalf("Refs(%q) = %+v, want [%+v]", r.String(), got, r)
			}
		}

		exact, ok := IsExactTemplate(s)
		if ok {
			if len(refs) != 1 || refs[0] != exact {
				t.Fatalf("IsExactTemplate(%q) = %+v, but Refs = %+v", s, exact, refs)
			}
			if len(s) < 4 || s[:2] != "{{" || s[len(s)-2:] != "}}" {
				t.Fatalf("IsExactTemplate accepted %q, which is not wrapped in braces", s)
			}
		}
		if spans := templateRe().FindAllStringIndex(s, -1); len(spans) == 1 && spans[0][0] == 0 && spans[0][1] == len(s) && !ok {
			t.Fatalf("%q is one whole reference %+v, but IsExactTemplate rejects it", s, refs)
		}

		// The walker.
		want := slices.Concat(refs, refs, refs, refs)
		if got := Refs([]any{s, map[string]any{"k": s, "n": 1.0}, []string{s}, []map[string]any{{"x": s}}, nil, true}); !fuzzRefsEqual(got, want) {
			t.Fatalf("Refs over containers of %q = %+v, want %+v", s, got, want)
		}
		var v any
		if json.Unmarshal([]byte(s), &v) == nil {
			for _, r := range Refs(v) {
				if !ValidIdent(r.StepID) || !ValidIdent(r.Output) {
					t.Fatalf("Refs(%s) returned %+v, which does not match IdentPattern", s, r)
				}
			}
		}

		// Resolve with every reference defined.
		outputs := map[string]map[string]any{}
		for _, r := range refs {
			if outputs[r.StepID] == nil {
				outputs[r.StepID] = map[string]any{}
			}
			outputs[r.StepID][r.Output] = 7.0
		}
		got, err := Resolve(s, outputs)
		switch {
		case err != nil:
			t.Fatalf("Resolve(%q) with every reference defined: %v", s, err)
		case ok:
			if got != 7.0 {
				t.Fatalf("Resolve(%q) = %#v, want the value 7", s, got)
			}
		default:
			if w := templateRe().ReplaceAllLiteralString(s, "7"); got != w {
				t.Fatalf("Resolve(%q) = %#v, want %q", s, got, w)
			}
		}

		// Resolve with the first referenced step missing.
		if len(refs) > 0 {
			delete(outputs, refs[0].StepID)
			_, err := Resolve(s, outputs)
			var re *RefError
			if !errors.As(err, &re) || re.Reason != "step" || !slices.Contains(refs, re.Ref) {
				t.Fatalf("Resolve(%q) without step %q: %v, want a *RefError for one of %+v", s, refs[0].StepID, err, refs)
			}
		}
	})
}

func fuzzRefsEqual(a, b []Ref) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}
