// Package schema checks JSON values against JSON Schemas (draft 2020-12, or
// draft-07 when a schema's $schema says so) and says what is wrong field by
// field.
//
// github.com/google/jsonschema-go (the library the MCP SDK uses) parses and
// resolves the schemas and decides whether a value is valid; it stops at
// the first failure and reports it as text. This package adds what callers
// show to people: when a value is invalid, it walks the value and the
// schema side by side and lists every problem with its location in the
// value (Problem.Path) and a short message, so that an INVALID_PARAMS error
// can name each field. It also validates values some of whose parts are
// placeholders (ValidatePartial), which the library alone cannot.
//
// Compiling is deliberately lazy-friendly: nothing happens at package
// initialization, and Compile costs one JSON decoding plus the library's
// resolution, so callers compile on first use.
package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is a compiled JSON Schema. It is safe for concurrent use.
type Schema struct {
	root     *jsonschema.Schema
	resolved *jsonschema.Resolved
	draft7   bool
	// patterns are the compiled "pattern" and "patternProperties" regular
	// expressions, by subschema.
	patterns     map[*jsonschema.Schema]*regexp.Regexp
	patternProps map[*jsonschema.Schema][]patternProp
	// refs are the targets of the "$ref"s the walk can follow (pointers and
	// anchors inside this document); a ref missing here is left to the
	// library's verdict.
	refs map[*jsonschema.Schema]*jsonschema.Schema
	// nesting bounds the values validated, so that the library's
	// recursion stays far from the end of the stack and its work within
	// MaxWork.
	nesting Nesting
}

type patternProp struct {
	re     *regexp.Regexp
	schema *jsonschema.Schema
}

// ErrExternalRef is wrapped by Compile's error for a schema that refers to
// another document: schemas must be self-contained, and compiling one never
// reads a file or the network.
var ErrExternalRef = errors.New("external schema references are not allowed")

// Compile parses raw and prepares it for validation. It fails on invalid
// JSON, a schema that is neither an object nor a boolean, a "$schema" other
// than draft-07 and draft 2020-12, an unknown type name, a negative count
// (minLength, maxItems ...), a multipleOf that is not positive, a regular
// expression that does not compile, and a "$ref" to another document
// (ErrExternalRef) or to nothing, a reference cycle that never descends
// into the value (ErrRefCycle: {"$ref": "#"}), and a schema that applies
// more than MaxInPlace schemas to one value (ErrCostly).
func Compile(raw []byte) (*Schema, error) {
	if !json.Valid(raw) {
		return nil, errors.New("schema is not valid JSON")
	}
	root := new(jsonschema.Schema)
	if err := json.Unmarshal(raw, root); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// Its text names the library's internal types.
			return nil, fmt.Errorf("schema is not valid JSON Schema: unexpected %s at offset %d", te.Value, te.Offset)
		}
		return nil, fmt.Errorf("schema is not valid JSON Schema: %w", err)
	}
	if err := checkKeywords(root); err != nil {
		return nil, err
	}
	resolved, err := root.Resolve(&jsonschema.ResolveOptions{
		BaseURI: baseURI,
		Loader: func(u *url.URL) (*jsonschema.Schema, error) {
			return nil, fmt.Errorf("%w: %s", ErrExternalRef, u)
		},
	})
	if err != nil {
		return nil, err
	}
	nesting, err := CheckRefs(root)
	if err != nil {
		return nil, err
	}
	s := &Schema{
		root:         root,
		resolved:     resolved,
		draft7:       root.Schema == draft7 || root.Schema == draft7s,
		patterns:     map[*jsonschema.Schema]*regexp.Regexp{},
		patternProps: map[*jsonschema.Schema][]patternProp{},
		refs:         map[*jsonschema.Schema]*jsonschema.Schema{},
		nesting:      nesting,
	}
	// Resolve has compiled every regular expression once and keeps them to
	// itself; compiling them again here cannot fail.
	anchors := map[string]*jsonschema.Schema{}
	nestedID := false
	each(root, func(sub *jsonschema.Schema) {
		if sub.Pattern != "" {
			s.patterns[sub] = regexp.MustCompile(sub.Pattern)
		}
		for p, ps := range sub.PatternProperties {
			s.patternProps[sub] = append(s.patternProps[sub], patternProp{regexp.MustCompile(p), ps})
		}
		if sub.Anchor != "" {
			anchors[sub.Anchor] = sub
		}
		if sub != root && sub.ID != "" {
			nestedID = true
		}
	})
	// A nested $id starts a document of its own, against which its refs
	// resolve: the walk follows refs only in schemas without one.
	if !nestedID {
		each(root, func(sub *jsonschema.Schema) {
			if t := localRef(root, anchors, sub.Ref); t != nil {
				s.refs[sub] = t
			}
		})
	}
	return s, nil
}

// baseURI is the URI the schemas are resolved against: relative
// references resolve within the schema and nowhere else.
const baseURI = "mem:///schema.json"

const (
	draft7    = "http://json-schema.org/draft-07/schema#"
	draft7s   = "https://json-schema.org/draft-07/schema#"
	draft2020 = "https://json-schema.org/draft/2020-12/schema"
)

var typeNames = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// checkKeywords checks what the library leaves unchecked and a meta-schema
// would reject: the draft, type names, counts and multipleOf.
func checkKeywords(root *jsonschema.Schema) error {
	switch root.Schema {
	case "", draft7, draft7s, draft2020:
	default:
		return fmt.Errorf("unsupported $schema %q (want draft-07 or draft 2020-12)", root.Schema)
	}
	var errs []error
	each(root, func(s *jsonschema.Schema) {
		for _, t := range append(slices.Clip(s.Types), s.Type) {
			if t != "" && !slices.Contains(typeNames, t) {
				errs = append(errs, fmt.Errorf("unknown type %q", t))
			}
		}
		for name, n := range map[string]*int{"minLength": s.MinLength, "maxLength": s.MaxLength, "minItems": s.MinItems,
			"maxItems": s.MaxItems, "minProperties": s.MinProperties, "maxProperties": s.MaxProperties,
			"minContains": s.MinContains, "maxContains": s.MaxContains} {
			if n != nil && *n < 0 {
				errs = append(errs, fmt.Errorf("%s is negative", name))
			}
		}
		if s.MultipleOf != nil && *s.MultipleOf <= 0 {
			errs = append(errs, errors.New("multipleOf must be greater than 0"))
		}
	})
	return errors.Join(errs...)
}

// each calls f on s and every subschema under it.
func each(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	if s == nil {
		return
	}
	f(s)
	for _, m := range []map[string]*jsonschema.Schema{s.Defs, s.Definitions, s.Properties, s.PatternProperties,
		s.DependentSchemas, s.DependencySchemas} {
		for _, c := range m {
			each(c, f)
		}
	}
	for _, l := range [][]*jsonschema.Schema{s.PrefixItems, s.ItemsArray, s.AllOf, s.AnyOf, s.OneOf} {
		for _, c := range l {
			each(c, f)
		}
	}
	for _, c := range []*jsonschema.Schema{s.Items, s.AdditionalItems, s.Contains, s.UnevaluatedItems,
		s.AdditionalProperties, s.PropertyNames, s.UnevaluatedProperties, s.Not, s.If, s.Then, s.Else, s.ContentSchema} {
		each(c, f)
	}
}

// localRef returns the schema ref names inside root ("#", "#/json/pointer"
// or "#anchor"), or nil for any other reference or a pointer to nothing.
func localRef(root *jsonschema.Schema, anchors map[string]*jsonschema.Schema, ref string) *jsonschema.Schema {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil
	}
	if frag == "" {
		return root
	}
	if !strings.HasPrefix(frag, "/") {
		return anchors[frag]
	}
	s := root
	toks := strings.Split(frag[1:], "/")
	for i := 0; i < len(toks) && s != nil; i++ {
		tok := strings.NewReplacer("~1", "/", "~0", "~").Replace(toks[i])
		next := func() (string, bool) {
			if i+1 >= len(toks) {
				return "", false
			}
			i++
			return strings.NewReplacer("~1", "/", "~0", "~").Replace(toks[i]), true
		}
		index := func(l []*jsonschema.Schema) *jsonschema.Schema {
			k, ok := next()
			n, err := strconv.Atoi(k)
			if !ok || err != nil || n < 0 || n >= len(l) {
				return nil
			}
			return l[n]
		}
		key := func(m map[string]*jsonschema.Schema) *jsonschema.Schema {
			k, ok := next()
			if !ok {
				return nil
			}
			return m[k]
		}
		switch tok {
		case "$defs":
			s = key(s.Defs)
		case "definitions":
			s = key(s.Definitions)
		case "properties":
			s = key(s.Properties)
		case "patternProperties":
			s = key(s.PatternProperties)
		case "dependentSchemas":
			s = key(s.DependentSchemas)
		case "prefixItems":
			s = index(s.PrefixItems)
		case "allOf":
			s = index(s.AllOf)
		case "anyOf":
			s = index(s.AnyOf)
		case "oneOf":
			s = index(s.OneOf)
		case "items":
			if s.ItemsArray != nil {
				s = index(s.ItemsArray)
			} else {
				s = s.Items
			}
		case "additionalItems":
			s = s.AdditionalItems
		case "additionalProperties":
			s = s.AdditionalProperties
		case "propertyNames":
			s = s.PropertyNames
		case "contains":
			s = s.Contains
		case "not":
			s = s.Not
		case "if":
			s = s.If
		case "then":
			s = s.Then
		case "else":
			s = s.Else
		default:
			return nil
		}
	}
	return s
}

// Problem is one way a value fails a schema.
type Problem struct {
	// Path is the location of the failing value: object keys and array
	// indexes (as decimal strings) from the top. A missing or disallowed
	// property is located at the property itself.
	Path []string
	// Keyword is the schema keyword that failed ("type", "required",
	// "additionalProperties", "pattern" ...), "false" for a false schema,
	// or "" when only the library's verdict explains the failure.
	Keyword string
	// Message says what is wrong, in English, without the location.
	Message string
}

// Pointer returns p's path as a JSON pointer without the leading slash
// ("headers/x-token", "a~1b" for the key "a/b"); "" is the whole value.
func (p Problem) Pointer() string {
	r := strings.NewReplacer("~", "~0", "/", "~1")
	esc := make([]string, len(p.Path))
	for i, t := range p.Path {
		esc[i] = r.Replace(t)
	}
	return strings.Join(esc, "/")
}

// Validate checks v, a JSON value as encoding/json decodes it into an any
// (nil, bool, float64, json.Number, int, string, []any, map[string]any),
// and returns its problems, sorted by location then message, or nil when v
// is valid. A value of another Go type is a problem of its own, and so is
// one that nests too deeply for s or would take more than MaxWork schema
// applications to validate (see Nesting).
func (s *Schema) Validate(v any) []Problem {
	v, ok := plain(v)
	if !ok {
		return []Problem{{Message: "value is not a JSON value"}}
	}
	if err := s.nesting.Check(v); err != nil {
		return []Problem{{Message: err.Error()}}
	}
	err := s.resolved.Validate(v)
	if err == nil {
		return nil
	}
	w := walker{s: s}
	w.node(s.root, v, nil)
	if len(w.out) == 0 {
		// The failure lies in what the walk does not follow
		// (unevaluatedProperties, a dynamic or cross-document reference):
		// the library's own words, without its schema locations.
		w.out = []Problem{{Message: libraryMessage(err)}}
	}
	return sorted(w.out)
}

// Mode says how much of a value ValidatePartial may check.
type Mode int

const (
	// Known values are checked fully.
	Known Mode = iota
	// TypeOnly values are checked only against "type": a string whose
	// content is not known yet is still a string.
	TypeOnly
	// Unknown values stand for any value; nothing at or under them is
	// checked.
	Unknown
)

// ValidatePartial is Validate for a value some of whose parts are
// placeholders: mode tells, for each value the walk reaches, how much of
// it is known. Where a placeholder lies under an object or array, the
// checks that need the whole of it (enum, const, not, if, oneOf's "more
// than one") are skipped there, so that a placeholder never causes a
// problem; the others hold. Without placeholders it is Validate.
func (s *Schema) ValidatePartial(v any, mode func(path []string, v any) Mode) []Problem {
	v, ok := plain(v)
	if !ok {
		return []Problem{{Message: "value is not a JSON value"}}
	}
	if err := s.nesting.Check(v); err != nil {
		return []Problem{{Message: err.Error()}}
	}
	w := walker{s: s, mode: mode}
	if !w.partialUnder(v, nil) {
		return s.Validate(v)
	}
	w.node(s.root, v, nil)
	return sorted(w.out)
}

func sorted(ps []Problem) []Problem {
	slices.SortFunc(ps, func(a, b Problem) int {
		if c := slices.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.CompactFunc(ps, func(a, b Problem) bool {
		return a.Message == b.Message && slices.Equal(a.Path, b.Path)
	})
}

// libraryMessage turns the library's error ("validating root: validating
// /unevaluatedProperties: <message>") into a message that names the
// failing schema location, cut to a length fit for a response.
func libraryMessage(err error) string {
	msg, at := err.Error(), ""
	for {
		rest, ok := strings.CutPrefix(msg, "validating ")
		if !ok {
			break
		}
		loc, inner, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		at, msg = loc, inner
	}
	if at != "" && at != "root" {
		msg = "does not match the schema at " + at + " (" + msg + ")"
	}
	return clip(msg, 200)
}

// clip cuts s to at most n runes, marking the cut with "...".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "..."
}

// plain returns v with every json.Number replaced by its float64 (the
// library types a json.Number as a string), copying only when there is
// one, and reports whether v is a JSON value.
func plain(v any) (any, bool) {
	ok, numbers := scan(v)
	if !ok || !numbers {
		return v, ok
	}
	return convert(v), true
}

// scan reports whether v is a JSON value and whether it holds a
// json.Number.
func scan(v any) (ok, numbers bool) {
	switch x := v.(type) {
	case nil, bool, string, int, int64, int32:
		return true, false
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0), false
	case json.Number:
		_, err := x.Float64()
		return err == nil, true
	case []any:
		for _, e := range x {
			ok, n := scan(e)
			if !ok {
				return false, false
			}
			numbers = numbers || n
		}
		return true, numbers
	case map[string]any:
		for _, e := range x {
			ok, n := scan(e)
			if !ok {
				return false, false
			}
			numbers = numbers || n
		}
		return true, numbers
	}
	return false, false
}

// convert copies v with its json.Numbers as float64.
func convert(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = convert(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = convert(e)
		}
		return out
	}
	return v
}
