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
//     an output name matching IdentPattern (or is {{item}}: ItemRef with
//     no output), whose canonical form is itself exactly one reference
//     (IsExactTemplate and Refs both give it back);
//   - IsExactTemplate agrees with Refs: when it accepts s, Refs(s) is that
//     one reference and s starts with "{{" and ends with "}}"; when Refs
//     finds one reference spanning all of s, IsExactTemplate accepts s;
//   - Refs walks strings inside maps, slices, []string and
//     []map[string]any;
//   - Resolve agrees with Refs: with every reference defined (step
//     outputs, input properties, the forEach element and its fields) it
//     succeeds, giving the value itself for an exact template and the
//     string with each reference replaced by the value's text otherwise;
//     with the first reference's source missing (its step's outputs, the
//     input property, the element) it fails with a *RefError of the
//     matching reason for a reference of s.
func FuzzRefs(f *testing.F) {
	for _, s := range []string{
		"", "{{a.b}}", "{{ a.b }}", "{{\ta.b\t}}", " {{a.b}}", "{{a.b}} ", "{{a.b}}{{c.d}}", "{{{{a.b}}}}",
		"{{a.b.c}}", "{{.name}}", "{{1a.b}}", "{{a_1.B_2}}", "{{a.b}", "{{ a . b }}", "{{a.b}}}",
		`["{{fetch.body}}",{"k":"x {{calc.result}} y"}]`, "{{" + string(make([]byte, 64)) + "}}",
		"{{a012345678901234567890123456789012345678901234567890123456789012.b}}",
		"{{a0123456789012345678901234567890123456789012345678901234567890123.b}}",
		"{{é.b}}", "{{a.b\n}}", "\xff{{a.b}}",
		"{{item}}", "{{ item }}", "{{item.x}}", "x {{item}} {{input.q}} {{a.b}}", "{{items}}", "{{item.}}", "{{input.x}}",
		"{{input}}", "{{end}}", "{{item.a.b}}", `["{{item}}",{"k":"{{item.n}} and {{input.m}}"}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		refs := Refs(s)
		for _, r := range refs {
			if !fuzzValidRef(r) {
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
				if !fuzzValidRef(r) {
					t.Fatalf("Refs(%s) returned %+v, which does not match IdentPattern", s, r)
				}
			}
		}

		// Resolve with every reference defined.
		scope := Scope{Steps: map[string]map[string]any{}, Input: map[string]any{}}
		fields := map[string]any{}
		for _, r := range refs {
			switch {
			case r.IsItem():
				scope.InLoop = true
				if r.Output != "" {
					fields[r.Output] = 7.0
				}
			case r.IsInput():
				scope.Input[r.Output] = 7.0
			default:
				if scope.Steps[r.StepID] == nil {
					scope.Steps[r.StepID] = map[string]any{}
				}
				scope.Steps[r.StepID][r.Output] = 7.0
			}
		}
		scope.Item = any(7.0)
		if len(fields) > 0 {
			scope.Item = fields
		}
		valueOf := func(r Ref) any {
			if r.IsItem() && r.Output == "" {
				return scope.Item
			}
			return 7.0
		}
		got, err := scope.Resolve(s)
		switch {
		case err != nil:
			t.Fatalf("Resolve(%q) with every reference defined: %v", s, err)
		case ok:
			if !reflect.DeepEqual(got, valueOf(exact)) {
				t.Fatalf("Resolve(%q) = %#v, want %#v", s, got, valueOf(exact))
			}
		default:
			w := templateRe().ReplaceAllStringFunc(s, func(m string) string { return textOf(valueOf(Refs(m)[0])) })
			if got != w {
				t.Fatalf("Resolve(%q) = %#v, want %q", s, got, w)
			}
		}

		// Resolve with the first reference's source missing.
		if len(refs) > 0 {
			first, reason := refs[0], ReasonStep
			switch {
			case first.IsItem():
				scope.InLoop, reason = false, ReasonItem
			case first.IsInput():
				delete(scope.Input, first.Output)
				reason = ReasonInput
			default:
				delete(scope.Steps, first.StepID)
			}
			_, err := scope.Resolve(s)
			var re *RefError
			if !errors.As(err, &re) || re.Reason != reason || !slices.Contains(refs, re.Ref) || re.Error() == "" {
				t.Fatalf("Resolve(%q) without the source of %s: %v, want a *RefError (%s) for one of %+v", s, first, err, reason, refs)
			}
		}
	})
}

// fuzzValidRef reports whether r is a well-formed reference.
func fuzzValidRef(r Ref) bool {
	if r.IsItem() && r.Output == "" {
		return true
	}
	return ValidIdent(r.StepID) && ValidIdent(r.Output)
}

func fuzzRefsEqual(a, b []Ref) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}
