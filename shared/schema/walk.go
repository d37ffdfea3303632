package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// maxDepth bounds the walk's recursion (schemas that refer to themselves
// without descending into the value).
const maxDepth = 512

// walker lists the problems of a value against a schema, keyword by
// keyword. It covers the draft 2020-12 and draft-07 assertion and
// applicator keywords except unevaluatedProperties, unevaluatedItems,
// $dynamicRef and references into nested documents, which only the
// library's verdict enforces.
type walker struct {
	s     *Schema
	mode  func(path []string, v any) Mode // nil: every value is Known
	out   []Problem
	depth int
}

func (w *walker) add(path []string, keyword, msg string) {
	w.out = append(w.out, Problem{Path: slices.Clone(path), Keyword: keyword, Message: msg})
}

// try walks v against sch on its own and returns the problems, for the
// keywords that only ask whether a subschema matches (anyOf, not ...).
func (w *walker) try(sch *jsonschema.Schema, v any, path []string) []Problem {
	sub := walker{s: w.s, mode: w.mode, depth: w.depth}
	sub.node(sch, v, path)
	return sub.out
}

// partialUnder reports whether v (at path) or anything under it is a
// placeholder.
func (w *walker) partialUnder(v any, path []string) bool {
	if w.mode == nil {
		return false
	}
	if w.mode(path, v) != Known {
		return true
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if w.partialUnder(e, append(slices.Clip(path), k)) {
				return true
			}
		}
	case []any:
		for i, e := range x {
			if w.partialUnder(e, append(slices.Clip(path), strconv.Itoa(i))) {
				return true
			}
		}
	}
	return false
}

// node walks v, at path, against sch.
func (w *walker) node(sch *jsonschema.Schema, v any, path []string) {
	if sch == nil || w.depth >= maxDepth {
		return
	}
	w.depth++
	defer func() { w.depth-- }()
	mode := Known
	if w.mode != nil {
		mode = w.mode(path, v)
	}
	switch mode {
	case Unknown:
		return
	case TypeOnly:
		w.types(sch, v, path)
		return
	}
	if isFalse(sch) {
		w.add(path, "false", "not allowed")
		return
	}
	if sch.Ref != "" {
		if t, ok := w.s.refs[sch]; ok {
			w.node(t, v, path)
		}
		if w.s.draft7 {
			return // draft-07 ignores the keywords beside a $ref
		}
	}
	partial := w.partialUnder(v, path)
	w.typeOf(sch, v, path)
	if !partial {
		if sch.Const != nil && !jsonschema.Equal(v, *sch.Const) {
			w.add(path, "const", "value must be "+render(*sch.Const))
		}
		if sch.Enum != nil && !slices.ContainsFunc(sch.Enum, func(e any) bool { return jsonschema.Equal(v, e) }) {
			vals := make([]string, len(sch.Enum))
			for i, e := range sch.Enum {
				vals[i] = render(e)
			}
			w.add(path, "enum", "value must be one of "+strings.Join(vals, ", "))
		}
	}
	switch x := v.(type) {
	case string:
		w.str(sch, x, path)
	case []any:
		w.array(sch, x, path)
	case map[string]any:
		w.object(sch, x, path)
	default:
		if n, ok := number(v); ok {
			w.num(sch, n, path)
		}
	}
	w.logic(sch, v, path, partial)
}

// types checks only the "type" of a value whose content is not known, in
// sch and in what sch requires as a whole ($ref, allOf).
func (w *walker) types(sch *jsonschema.Schema, v any, path []string) {
	if sch == nil || w.depth >= maxDepth {
		return
	}
	w.depth++
	defer func() { w.depth-- }()
	if isFalse(sch) {
		w.add(path, "false", "not allowed")
		return
	}
	if t, ok := w.s.refs[sch]; ok {
		w.types(t, v, path)
		if w.s.draft7 {
			return
		}
	}
	w.typeOf(sch, v, path)
	for _, b := range sch.AllOf {
		w.types(b, v, path)
	}
}

func (w *walker) typeOf(sch *jsonschema.Schema, v any, path []string) {
	want := sch.Types
	if sch.Type != "" {
		want = []string{sch.Type}
	}
	if len(want) == 0 || slices.ContainsFunc(want, func(t string) bool { return hasType(v, t) }) {
		return
	}
	w.add(path, "type", fmt.Sprintf("got %s, want %s", TypeOf(v), strings.Join(want, " or ")))
}

func (w *walker) num(sch *jsonschema.Schema, n float64, path []string) {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if m := sch.MultipleOf; m != nil {
		q := new(big.Rat).SetFloat64(n)
		if d := new(big.Rat).SetFloat64(*m); d != nil && d.Sign() != 0 && !q.Quo(q, d).IsInt() {
			w.add(path, "multipleOf", fmt.Sprintf("multipleOf: got %s, want a multiple of %s", f(n), f(*m)))
		}
	}
	if m := sch.Minimum; m != nil && n < *m {
		w.add(path, "minimum", fmt.Sprintf("minimum: got %s, want %s", f(n), f(*m)))
	}
	if m := sch.Maximum; m != nil && n > *m {
		w.add(path, "maximum", fmt.Sprintf("maximum: got %s, want %s", f(n), f(*m)))
	}
	if m := sch.ExclusiveMinimum; m != nil && n <= *m {
		w.add(path, "exclusiveMinimum", fmt.Sprintf("exclusiveMinimum: got %s, want more than %s", f(n), f(*m)))
	}
	if m := sch.ExclusiveMaximum; m != nil && n >= *m {
		w.add(path, "exclusiveMaximum", fmt.Sprintf("exclusiveMaximum: got %s, want less than %s", f(n), f(*m)))
	}
}

func (w *walker) str(sch *jsonschema.Schema, s string, path []string) {
	n := utf8.RuneCountInString(s)
	if m := sch.MinLength; m != nil && n < *m {
		w.add(path, "minLength", fmt.Sprintf("minLength: got %d, want %d", n, *m))
	}
	if m := sch.MaxLength; m != nil && n > *m {
		w.add(path, "maxLength", fmt.Sprintf("maxLength: got %d, want %d", n, *m))
	}
	if re := w.s.patterns[sch]; re != nil && !re.MatchString(s) {
		w.add(path, "pattern", fmt.Sprintf("'%s' does not match pattern '%s'", clip(s, 64), sch.Pattern))
	}
}

func (w *walker) array(sch *jsonschema.Schema, a []any, path []string) {
	at := func(i int) []string { return append(slices.Clip(path), strconv.Itoa(i)) }
	first, rest := sch.PrefixItems, sch.Items
	if w.s.draft7 {
		first, rest = sch.ItemsArray, sch.Items
		if sch.ItemsArray != nil {
			rest = sch.AdditionalItems
		}
	}
	for i, e := range a {
		if i < len(first) {
			w.node(first[i], e, at(i))
		} else if rest != nil {
			w.node(rest, e, at(i))
		}
	}
	if m := sch.MinItems; m != nil && len(a) < *m {
		w.add(path, "minItems", fmt.Sprintf("minItems: got %d, want %d", len(a), *m))
	}
	if m := sch.MaxItems; m != nil && len(a) > *m {
		w.add(path, "maxItems", fmt.Sprintf("maxItems: got %d, want %d", len(a), *m))
	}
	if sch.UniqueItems {
	unique:
		for i := range a {
			for j := i + 1; j < len(a); j++ {
				if jsonschema.Equal(a[i], a[j]) {
					w.add(path, "uniqueItems", fmt.Sprintf("items at %d and %d are equal", i, j))
					break unique
				}
			}
		}
	}
	if sch.Contains != nil {
		n := 0
		for i, e := range a {
			if len(w.try(sch.Contains, e, at(i))) == 0 {
				n++
			}
		}
		switch {
		case sch.MinContains == nil && n == 0:
			w.add(path, "contains", "no item matches the 'contains' schema")
		case sch.MinContains != nil && n < *sch.MinContains:
			w.add(path, "minContains", fmt.Sprintf("minContains: got %d, want %d", n, *sch.MinContains))
		}
		if sch.MaxContains != nil && n > *sch.MaxContains {
			w.add(path, "maxContains", fmt.Sprintf("maxContains: got %d, want %d", n, *sch.MaxContains))
		}
	}
}

func (w *walker) object(sch *jsonschema.Schema, o map[string]any, path []string) {
	at := func(k string) []string { return append(slices.Clip(path), k) }
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	evaluated := map[string]bool{}
	for _, k := range keys {
		if ps, ok := sch.Properties[k]; ok {
			w.node(ps, o[k], at(k))
			evaluated[k] = true
		}
		for _, pp := range w.s.patternProps[sch] {
			if pp.re.MatchString(k) {
				w.node(pp.schema, o[k], at(k))
				evaluated[k] = true
			}
		}
		if ap := sch.AdditionalProperties; ap != nil && !evaluated[k] {
			if isFalse(ap) {
				w.add(at(k), "additionalProperties", fmt.Sprintf("additional properties '%s' not allowed", k))
			} else {
				w.node(ap, o[k], at(k))
			}
		}
		if sch.PropertyNames != nil {
			// A name is known even where its value is a placeholder.
			names := walker{s: w.s, depth: w.depth}
			names.node(sch.PropertyNames, k, at(k))
			w.out = append(w.out, names.out...)
		}
	}
	if m := sch.MinProperties; m != nil && len(o) < *m {
		w.add(path, "minProperties", fmt.Sprintf("minProperties: got %d, want %d", len(o), *m))
	}
	if m := sch.MaxProperties; m != nil && len(o) > *m {
		w.add(path, "maxProperties", fmt.Sprintf("maxProperties: got %d, want %d", len(o), *m))
	}
	for _, r := range sch.Required {
		if _, ok := o[r]; !ok {
			w.add(at(r), "required", fmt.Sprintf("missing property '%s'", r))
		}
	}
	deps, depSchemas := sch.DependentRequired, sch.DependentSchemas
	if w.s.draft7 {
		deps, depSchemas = sch.DependencyStrings, sch.DependencySchemas
	}
	for _, k := range keys {
		for _, r := range deps[k] {
			if _, ok := o[r]; !ok {
				w.add(at(r), "dependentRequired", fmt.Sprintf("missing property '%s', required when '%s' is present", r, k))
			}
		}
		if ds, ok := depSchemas[k]; ok {
			w.node(ds, o, path)
		}
	}
}

// logic walks the combinators. With a placeholder under v (partial), the
// checks that a placeholder could turn either way are skipped.
func (w *walker) logic(sch *jsonschema.Schema, v any, path []string, partial bool) {
	for _, b := range sch.AllOf {
		w.node(b, v, path)
	}
	if sch.AnyOf != nil {
		var all []Problem
		matched := false
		for _, b := range sch.AnyOf {
			p := w.try(b, v, path)
			if len(p) == 0 {
				matched = true
				break
			}
			all = append(all, p...)
		}
		if !matched {
			w.out = append(w.out, all...)
		}
	}
	if sch.OneOf != nil {
		var all []Problem
		var ok []int
		for i, b := range sch.OneOf {
			if p := w.try(b, v, path); len(p) == 0 {
				ok = append(ok, i)
			} else {
				all = append(all, p...)
			}
		}
		switch {
		case len(ok) == 0:
			w.out = append(w.out, all...)
		case len(ok) > 1 && !partial:
			w.add(path, "oneOf", fmt.Sprintf("matches more than one of the 'oneOf' schemas (%d and %d)", ok[0], ok[1]))
		}
	}
	if partial {
		return
	}
	if sch.Not != nil && len(w.try(sch.Not, v, path)) == 0 {
		w.add(path, "not", "must not match the 'not' schema")
	}
	if sch.If != nil {
		if len(w.try(sch.If, v, path)) == 0 {
			w.node(sch.Then, v, path)
		} else {
			w.node(sch.Else, v, path)
		}
	}
}

// isFalse reports whether sch is the schema false (the library reads
// false as {"not": {}}).
func isFalse(sch *jsonschema.Schema) bool {
	if sch.Not == nil || !reflect.ValueOf(*sch.Not).IsZero() {
		return false
	}
	c := *sch
	c.Not = nil
	return reflect.ValueOf(c).IsZero()
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	}
	return 0, false
}

// TypeOf names the JSON type of a decoded value (null, boolean, string,
// array, object, number: Go's integer and float kinds and json.Number),
// and "value" for anything else, never a Go type name: the names reach
// users in error messages.
func TypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return "number"
	}
	return "value"
}

func hasType(v any, t string) bool {
	if t == "integer" {
		n, ok := number(v)
		return ok && n == math.Trunc(n)
	}
	return TypeOf(v) == t
}

// render shows a schema value in a message: a string in single quotes,
// anything else as compact JSON, cut short.
func render(v any) string {
	if s, ok := v.(string); ok {
		return "'" + clip(s, 64) + "'"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return clip(string(b), 64)
}
