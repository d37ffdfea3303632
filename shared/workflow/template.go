package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Template references in step inputs (docs/decisions.md, Workflows and
// runs, Workflow definitions).
//
// A reference is one of:
//   - {{<step_id>.<output_name>}}: an earlier step's output;
//   - {{input.<name>}}: a property of the run's input;
//   - {{item}} or {{item.<field>}}: the current element of a forEach
//     step (a field of it, when it is an object);
//
// where the names match IdentPattern ("input" and "item" are reserved:
// no step takes them). Spaces and tabs are allowed just inside the
// braces, so "{{ fetch.body }}" and "{{fetch.body}}" are the same
// reference. Anything else between double braces (text_template's own
// "{{.name}}", "{{ if .x }}", "{{end}}", "{{a.b.c}}", ...) is not a
// reference and passes through untouched.

// IdentPattern is the pattern of step ids and output names.
const IdentPattern = `^[A-Za-z][A-Za-z0-9_]{0,63}$`

const (
	identExpr = `[A-Za-z][A-Za-z0-9_]{0,63}`
	refExpr   = `\{\{[ \t]*(?:(` + identExpr + `)\.(` + identExpr + `)|(` + ItemRef + `))[ \t]*\}\}`
)

// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var (
	// Compiled on first use, not at a cold start.
	identRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(IdentPattern) })
	templateRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(refExpr) })
	exactRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^` + refExpr + `$`) })
)

// ValidIdent reports whether s is a valid step id or output name.
func ValidIdent(s string) bool { return identRe().MatchString(s) }

// Ref is a reference: to output Output of step StepID, or, when StepID is
// InputRef, to the input property Output, or, when StepID is ItemRef, to
// the current forEach element (Output empty) or its field Output.
type Ref struct {
	StepID string `json:"stepId"`
	Output string `json:"output"`
}

// IsInput reports whether r reads the run's input ({{input.name}}).
func (r Ref) IsInput() bool { return r.StepID == InputRef }

// IsItem reports whether r reads the current forEach element ({{item}},
// {{item.field}}).
func (r Ref) IsItem() bool { return r.StepID == ItemRef }

// IsStep reports whether r reads an earlier step's output.
func (r Ref) IsStep() bool { return !r.IsInput() && !r.IsItem() }

// String returns the canonical template form of r.
func (r Ref) String() string {
	if r.Output == "" {
		return "{{" + r.StepID + "}}"
	}
	return "{{" + r.StepID + "." + r.Output + "}}"
}

func refOf(s string, m []int) Ref {
	if m[6] >= 0 {
		return Ref{StepID: ItemRef}
	}
	return Ref{StepID: s[m[2]:m[3]], Output: s[m[4]:m[5]]}
}

// IsExactTemplate reports whether the whole of s is one reference (optional
// spaces/tabs inside the braces, nothing outside them) and returns it.
func IsExactTemplate(s string) (Ref, bool) {
	if !strings.HasPrefix(s, "{{") {
		return Ref{}, false
	}
	m := exactRe().FindStringSubmatchIndex(s)
	if m == nil {
		return Ref{}, false
	}
	return refOf(s, m), true
}

// stringRefs returns the references in s, in order of appearance.
func stringRefs(s string) []Ref {
	if !strings.Contains(s, "{{") {
		return nil
	}
	var refs []Ref
	for _, m := range templateRe().FindAllStringSubmatchIndex(s, -1) {
		refs = append(refs, refOf(s, m))
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

// Reasons of a RefError.
const (
	ReasonStep   = "step"   // no output of the step (not run, or skipped)
	ReasonOutput = "output" // the step has no such output
	ReasonInput  = "input"  // the run's input has no such property
	ReasonItem   = "item"   // no forEach element, or it has no such field
)

// RefError is the error of a reference the Scope cannot resolve; Reason
// says why (ReasonStep, ReasonOutput, ReasonInput, ReasonItem).
type RefError struct {
	Ref    Ref
	Reason string
}

func (e *RefError) Error() string {
	switch e.Reason {
	case ReasonStep:
		return fmt.Sprintf("template %s: no output of step %q", e.Ref, e.Ref.StepID)
	case ReasonInput:
		return fmt.Sprintf("template %s: the run's input has no %q", e.Ref, e.Ref.Output)
	case ReasonItem:
		if e.Ref.Output == "" {
			return fmt.Sprintf("template %s: not in a forEach step", e.Ref)
		}
		return fmt.Sprintf("template %s: the element is not an object with a field %q", e.Ref, e.Ref.Output)
	}
	return fmt.Sprintf("template %s: step %q has no output %q", e.Ref, e.Ref.StepID, e.Ref.Output)
}

// Scope is what templates resolve against during a run: the outputs of
// the steps that ran (Steps[stepID][outputName]; a skipped step has
// none), the run's input (validated, defaults applied: see package
// inputschema), and, in a call of a forEach step, the current element.
// Values are JSON values as encoding/json decodes them into any;
// json.RawMessage values are decoded where a reference looks into them.
type Scope struct {
	Steps map[string]map[string]any
	Input map[string]any
	// Item is the current forEach element when InLoop (nil is a valid
	// element: JSON null).
	Item   any
	InLoop bool
	// built, when set (ResolveInputsWithin), is how many more bytes of
	// text interpolation may build.
	built *int
}

// ErrTextTooLarge is the error of a resolution whose interpolated text
// passes the bound of ResolveInputsWithin.
var ErrTextTooLarge = errors.New("the text templates build is too large")

// WithItem returns s for one call of a forEach step, on element item.
func (s Scope) WithItem(item any) Scope {
	s.Item, s.InLoop = item, true
	return s
}

// Lookup returns the value r refers to, or a *RefError.
func (s Scope) Lookup(r Ref) (any, error) {
	switch {
	case r.IsItem():
		if !s.InLoop {
			return nil, &RefError{Ref: r, Reason: ReasonItem}
		}
		if r.Output == "" {
			return s.Item, nil
		}
		obj, ok := asObject(s.Item)
		if !ok {
			return nil, &RefError{Ref: r, Reason: ReasonItem}
		}
		val, ok := obj[r.Output]
		if !ok {
			return nil, &RefError{Ref: r, Reason: ReasonItem}
		}
		return val, nil
	case r.IsInput():
		val, ok := s.Input[r.Output]
		if !ok {
			return nil, &RefError{Ref: r, Reason: ReasonInput}
		}
		return val, nil
	}
	out, ok := s.Steps[r.StepID]
	if !ok {
		return nil, &RefError{Ref: r, Reason: ReasonStep}
	}
	val, ok := out[r.Output]
	if !ok {
		return nil, &RefError{Ref: r, Reason: ReasonOutput}
	}
	return val, nil
}

// asObject returns v as a JSON object: a map, or a json.RawMessage
// holding one.
func asObject(v any) (map[string]any, bool) {
	switch t := v.(type) {
	case map[string]any:
		return t, true
	case json.RawMessage:
		var m map[string]any
		if json.Unmarshal(t, &m) == nil && m != nil {
			return m, true
		}
	}
	return nil, false
}

// Items returns the array a forEach template names (Step.ForEach, exactly
// one reference). Errors: the template is not exactly one reference, the
// reference's *RefError, or a value that is not an array.
func (s Scope) Items(forEach string) ([]any, error) {
	r, ok := IsExactTemplate(forEach)
	if !ok {
		return nil, fmt.Errorf("forEach %q is not exactly one template", forEach)
	}
	v, err := s.Lookup(r)
	if err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case []any:
		return t, nil
	case json.RawMessage:
		var a []any
		if json.Unmarshal(t, &a) == nil && a != nil {
			return a, nil
		}
	}
	return nil, fmt.Errorf("forEach %s is %s, not an array", r, jsonKind(v))
}

// jsonKind names the JSON type of v.
func jsonKind(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int, int64, json.Number:
		return "a number"
	case map[string]any:
		return "an object"
	case json.RawMessage:
		var x any
		if json.Unmarshal(t, &x) == nil {
			return jsonKind(x)
		}
	}
	return fmt.Sprintf("%T", v)
}

// Resolve returns a copy of the JSON value v with its references replaced
// by the values they refer to in s:
//
//   - a string that is exactly one reference becomes that value, with its
//     JSON type (number, object, ...);
//   - references inside a longer string are interpolated as text: strings
//     as they are, other values as compact JSON (nil as "null");
//   - everything that is not a reference passes through untouched, and
//     strings without "{{" are returned unchanged;
//   - a reference the scope cannot resolve is a *RefError.
//
// Maps and slices are copied; v is not modified.
func (s Scope) Resolve(v any) (any, error) {
	switch t := v.(type) {
	case string:
		return s.resolveString(t)
	case map[string]any:
		if t == nil {
			return t, nil
		}
		out := make(map[string]any, len(t))
		for _, k := range sortedKeys(t) {
			r, err := s.Resolve(t[k])
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
			r, err := s.Resolve(e)
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

// ResolveInputs resolves a step's inputs (see Scope.Resolve); nil inputs
// are an empty object.
func (s Scope) ResolveInputs(inputs map[string]any) (map[string]any, error) {
	if inputs == nil {
		return map[string]any{}, nil
	}
	r, err := s.Resolve(inputs)
	if err != nil {
		return nil, err
	}
	return r.(map[string]any), nil
}

// ResolveInputsWithin resolves inputs as ResolveInputs does, with the text
// interpolation builds bounded to limit bytes in all: past it, an error
// wrapping ErrTextTooLarge. References that are a whole string are not
// copied and cost nothing here.
func (s Scope) ResolveInputsWithin(inputs map[string]any, limit int) (map[string]any, error) {
	left := limit
	s.built = &left
	return s.ResolveInputs(inputs)
}

// Resolve resolves v against the outputs of earlier steps only
// (Scope{Steps: outputs}.Resolve).
func Resolve(v any, outputs map[string]map[string]any) (any, error) {
	return Scope{Steps: outputs}.Resolve(v)
}

// ResolveInputs resolves a step's inputs against the outputs of earlier
// steps only (Scope{Steps: outputs}.ResolveInputs).
func ResolveInputs(inputs map[string]any, outputs map[string]map[string]any) (map[string]any, error) {
	return Scope{Steps: outputs}.ResolveInputs(inputs)
}

func (s Scope) resolveString(str string) (any, error) {
	if !strings.Contains(str, "{{") {
		return str, nil
	}
	if r, ok := IsExactTemplate(str); ok {
		v, err := s.Lookup(r)
		if raw, isRaw := v.(json.RawMessage); isRaw && err == nil {
			var x any
			if json.Unmarshal(raw, &x) == nil {
				return x, nil
			}
		}
		return v, err
	}
	idx := templateRe().FindAllStringSubmatchIndex(str, -1)
	if idx == nil {
		return str, nil
	}
	var b strings.Builder
	last := 0
	for _, m := range idx {
		b.WriteString(str[last:m[0]])
		val, err := s.Lookup(refOf(str, m))
		if err != nil {
			return nil, err
		}
		text := textOf(val)
		if s.built != nil {
			if *s.built -= len(text) + m[0] - last; *s.built < 0 {
				return nil, fmt.Errorf("%w: over %d bytes", ErrTextTooLarge, b.Len()+len(text))
			}
		}
		b.WriteString(text)
		last = m[1]
	}
	b.WriteString(str[last:])
	return b.String(), nil
}

// textOf is the text form of a value interpolated into a string.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if raw, ok := v.(json.RawMessage); ok {
		var x any
		if json.Unmarshal(raw, &x) == nil {
			return textOf(x)
		}
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

// ResolvedSize returns MinJSONSize of what ResolveInputs(inputs) returns,
// reading the values the references name without building the result: a
// caller may admit a resolution by its size before it holds the text
// interpolation builds. It counts no more than just past limit. A
// reference the scope cannot resolve counts nothing (ResolveInputs then
// fails). An interpolated value that is not a string counts its
// MinJSONSize, at most the length of the JSON text it becomes; a value
// held as raw JSON counts its length, at least its decoded MinJSONSize.
func (s Scope) ResolvedSize(inputs map[string]any, limit int) int {
	if inputs == nil {
		return len("{}")
	}
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch t := v.(type) {
		case string:
			if !strings.Contains(t, "{{") {
				n += len(t) + 2
				return
			}
			if r, ok := IsExactTemplate(t); ok {
				if val, err := s.Lookup(r); err == nil {
					n += MinJSONSize(val, limit-n+1)
				}
				return
			}
			idx := templateRe().FindAllStringSubmatchIndex(t, -1)
			n += 2
			last := 0
			for _, m := range idx {
				n += m[0] - last
				last = m[1]
				val, err := s.Lookup(refOf(t, m))
				if err != nil {
					continue
				}
				if str, ok := val.(string); ok {
					n += len(str)
				} else {
					n += MinJSONSize(val, limit-n+1)
				}
				if n > limit {
					return
				}
			}
			n += len(t) - last
		case map[string]any:
			if t == nil {
				n += len("null")
				return
			}
			n += 2 + max(len(t)-1, 0)
			for k, e := range t {
				n += len(k) + 3
				walk(e)
			}
		case []any:
			if t == nil {
				n += len("null")
				return
			}
			n += 2 + max(len(t)-1, 0)
			for _, e := range t {
				walk(e)
			}
		default:
			n += MinJSONSize(t, limit-n+1)
		}
	}
	walk(inputs)
	return n
}

// UsesItem reports whether inputs name {{item}} (or a field of it): a
// forEach step whose inputs do not resolves the same input for every
// element.
func UsesItem(inputs map[string]any) bool {
	for _, r := range Refs(inputs) {
		if r.IsItem() {
			return true
		}
	}
	return false
}
