package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Template references in step inputs (docs/decisions.md, Workflows and
// runs).
//
// A reference is {{<step_id>.<output_name>}} where both names match
// IdentPattern. Spaces and tabs are allowed just inside the braces, so
// "{{ fetch.body }}" and "{{fetch.body}}" are the same reference. Anything
// else between double braces (text_template's own "{{.name}}", "{{ if .x }}",
// "{{a.b.c}}", ...) is not a reference and passes through untouched.

// IdentPattern is the pattern of step ids and output names.
const IdentPattern = `^[A-Za-z][A-Za-z0-9_]{0,63}$`

const identExpr = `[A-Za-z][A-Za-z0-9_]{0,63}`

// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var (
	identRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(IdentPattern) })
	templateRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\{\{[ \t]*(` + identExpr + `)\.(` + identExpr + `)[ \t]*\}\}`)
	})
	exactRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\{\{[ \t]*(` + identExpr + `)\.(` + identExpr + `)[ \t]*\}\}$`)
	})
)

// ValidIdent reports whether s is a valid step id or output name.
func ValidIdent(s string) bool { return identRe().MatchString(s) }

// Ref is a reference to output Output of step StepID.
type Ref struct {
	StepID string `json:"stepId"`
	Output string `json:"output"`
}

// String returns the canonical template form of r.
func (r Ref) String() string { return "{{" + r.StepID + "." + r.Output + "}}" }

// IsExactTemplate reports whether the whole of s is one reference (optional
// spaces/tabs inside the braces, nothing outside them) and returns it.
func IsExactTemplate(s string) (Ref, bool) {
	if !strings.HasPrefix(s, "{{") {
		return Ref{}, false
	}
	m := exactRe().FindStringSubmatch(s)
	if m == nil {
		return Ref{}, false
	}
	return Ref{StepID: m[1], Output: m[2]}, true
}

// stringRefs returns the references in s, in order of appearance.
func stringRefs(s string) []Ref {
	if !strings.Contains(s, "{{") {
		return nil
	}
	var refs []Ref
	for _, m := range templateRe().FindAllStringSubmatch(s, -1) {
		refs = append(refs, Ref{StepID: m[1], Output: m[2]})
	}
	return refs
}

// Refs returns every reference in a JSON value: in strings, and recursively
// in map values (not keys) and slice elements, in order of appearance (map
// values in key order). Duplicates are kept.
func Refs(v any) []Ref {
	var refs []Ref
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			refs = append(refs, stringRefs(t)...)
		case map[string]any:
			for _, k := range sortedKeys(t) {
				walk(t[k])
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		case []string:
			for _, e := range t {
				walk(e)
			}
		case []map[string]any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return refs
}

// RefError is the error of a reference to a step or output that is not in
// the outputs given to Resolve.
type RefError struct {
	Ref    Ref
	Reason string // "step" or "output"
}

func (e *RefError) Error() string {
	if e.Reason == "step" {
		return fmt.Sprintf("template %s: no output of step %q", e.Ref, e.Ref.StepID)
	}
	return fmt.Sprintf("template %s: step %q has no output %q", e.Ref, e.Ref.StepID, e.Ref.Output)
}

func lookup(r Ref, outputs map[string]map[string]any) (any, error) {
	out, ok := outputs[r.StepID]
	if !ok {
		return nil, &RefError{Ref: r, Reason: "step"}
	}
	val, ok := out[r.Output]
	if !ok {
		return nil, &RefError{Ref: r, Reason: "output"}
	}
	return val, nil
}

// Resolve returns a copy of the JSON value v with its references replaced
// by the outputs of earlier steps (outputs[stepID][outputName]):
//
//   - a string that is exactly one reference becomes that output's value,
//     with its JSON type (number, object, ...);
//   - references inside a longer string are interpolated as text: strings
//     as they are, other values as compact JSON (nil as "null");
//   - everything that is not a reference passes through untouched, and
//     strings without "{{" are returned unchanged;
//   - a reference to a step or output missing from outputs is a *RefError.
//
// Maps and slices are copied; v is not modified.
func Resolve(v any, outputs map[string]map[string]any) (any, error) {
	switch t := v.(type) {
	case string:
		return resolveString(t, outputs)
	case map[string]any:
		if t == nil {
			return t, nil
		}
		out := make(map[string]any, len(t))
		for _, k := range sortedKeys(t) {
			r, err := Resolve(t[k], outputs)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		if t == nil {
			return t, nil
		}
		out := make([]any, len(t))
		for i, e := range t {
			r, err := Resolve(e, outputs)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

// ResolveInputs resolves a step's inputs (see Resolve).
func ResolveInputs(inputs map[string]any, outputs map[string]map[string]any) (map[string]any, error) {
	if inputs == nil {
		return map[string]any{}, nil
	}
	r, err := Resolve(inputs, outputs)
	if err != nil {
		return nil, err
	}
	return r.(map[string]any), nil
}

func resolveString(s string, outputs map[string]map[string]any) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	if r, ok := IsExactTemplate(s); ok {
		return lookup(r, outputs)
	}
	idx := templateRe().FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s, nil
	}
	var b strings.Builder
	last := 0
	for _, m := range idx {
		b.WriteString(s[last:m[0]])
		r := Ref{StepID: s[m[2]:m[3]], Output: s[m[4]:m[5]]}
		val, err := lookup(r, outputs)
		if err != nil {
			return nil, err
		}
		b.WriteString(textOf(val))
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

// textOf is the text form of a value interpolated into a string.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
