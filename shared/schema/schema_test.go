package schema_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/schema"
)

func compile(t testing.TB, raw string) *schema.Schema {
	t.Helper()
	s, err := schema.Compile([]byte(raw))
	if err != nil {
		t.Fatalf("Compile(%s): %v", raw, err)
	}
	return s
}

func decode(t testing.TB, raw string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("instance %s: %v", raw, err)
	}
	return v
}

// summary renders problems as "pointer: message" lines.
func summary(ps []schema.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Pointer()+": "+p.Message)
	}
	return out
}

func TestCompileRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, want string
	}{
		{"not JSON", `{"type":`, "not valid JSON"},
		{"array", `[1]`, "unexpected array"},
		{"nested array where a schema belongs", `{"properties": {"a": [1]}}`, "unexpected array"},
		{"string", `"object"`, "unexpected string"},
		{"unknown type", `{"type": "strin"}`, `unknown type "strin"`},
		{"unknown type in a list", `{"properties": {"a": {"type": ["string", "nul"]}}}`, `unknown type "nul"`},
		{"bad pattern", `{"pattern": "("}`, "pattern"},
		{"bad pattern property", `{"patternProperties": {"(": {}}}`, "patternProperties"},
		{"negative count", `{"properties": {"a": {"minLength": -1}}}`, "minLength is negative"},
		{"zero multipleOf", `{"multipleOf": 0}`, "multipleOf must be greater than 0"},
		{"draft 4", `{"$schema": "http://json-schema.org/draft-04/schema#"}`, "unsupported $schema"},
		{"file reference", `{"properties": {"x": {"$ref": "file:///etc/passwd"}}}`, "not allowed"},
		{"remote reference", `{"$ref": "https://example.com/s.json"}`, "not allowed"},
		{"dangling pointer", `{"$ref": "#/$defs/none"}`, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile([]byte(tt.raw))
			if err == nil {
				t.Fatalf("Compile accepted %s (%v)", tt.raw, s)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(tt.name, "reference") && !errors.Is(err, schema.ErrExternalRef) {
				t.Errorf("err = %v, want ErrExternalRef", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	const obj = `{"type": "object", "additionalProperties": false, "required": ["a"],
		"properties": {"a": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
			"n": {"type": "integer", "minimum": 1, "maximum": 10, "multipleOf": 2},
			"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
			"e": {"enum": ["red", "green", 3]}, "c": {"const": "on"},
			"h": {"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"pattern": "^[a-z/-]+$"}, "maxProperties": 2},
			"l": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3, "uniqueItems": true},
			"t": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false},
			"o": {"type": ["string", "null"]}}}`
	tests := []struct {
		name, schema, value string
		want                []string // nil: valid
	}{
		{"valid", obj, `{"a": "abc", "n": 4, "x": 0.5, "e": 3, "c": "on", "h": {"a-b": "v"}, "l": [1, 2], "t": ["s", true], "o": null}`, nil},
		{"missing and additional", obj, `{"b": 1, "z": 2}`, []string{
			"a: missing property 'a'", "b: additional properties 'b' not allowed", "z: additional properties 'z' not allowed"}},
		{"string keywords", obj, `{"a": "ABCDE"}`, []string{"a: 'ABCDE' does not match pattern '^[a-z]+$'", "a: maxLength: got 5, want 4"}},
		{"min length", obj, `{"a": "a"}`, []string{"a: minLength: got 1, want 2"}},
		{"wrong type", obj, `{"a": 5}`, []string{"a: got number, want string"}},
		{"integer", obj, `{"a": "ab", "n": 2.5}`, []string{"n: got number, want integer", "n: multipleOf: got 2.5, want a multiple of 2"}},
		{"number bounds", obj, `{"a": "ab", "n": 12, "x": 1}`, []string{"n: maximum: got 12, want 10", "x: exclusiveMaximum: got 1, want less than 1"}},
		{"number lower bounds", obj, `{"a": "ab", "n": 0, "x": 0}`, []string{"n: minimum: got 0, want 1", "x: exclusiveMinimum: got 0, want more than 0"}},
		{"enum and const", obj, `{"a": "ab", "e": "blue", "c": "off"}`, []string{"c: value must be 'on'", "e: value must be one of 'red', 'green', 3"}},
		{"nested map", obj, `{"a": "ab", "h": {"x": 1, "a/b": "v", "c": "d"}}`, []string{
			"h: maxProperties: got 3, want 2", "h/x: got number, want string"}},
		{"property name", obj, `{"a": "ab", "h": {"A B": "v"}}`, []string{"h/A B: 'A B' does not match pattern '^[a-z/-]+$'"}},
		{"escaped pointer", obj, `{"a": "ab", "h": {"a/b": 1}}`, []string{"h/a~1b: got number, want string"}},
		{"array keywords", obj, `{"a": "ab", "l": [1, "2", 1, 4]}`, []string{"l: items at 0 and 2 are equal", "l: maxItems: got 4, want 3", "l/1: got string, want integer"}},
		{"min items", obj, `{"a": "ab", "l": []}`, []string{"l: minItems: got 0, want 1"}},
		{"tuple", obj, `{"a": "ab", "t": [1, true, "more"]}`, []string{"t/0: got number, want string", "t/2: not allowed"}},
		{"type list", obj, `{"a": "ab", "o": 1}`, []string{"o: got number, want string or null"}},
		{"not an object", obj, `[1]`, []string{": got array, want object"}},
		{"refs", `{"$defs": {"name": {"type": "string", "maxLength": 3}, "node": {"type": "object", "properties": {"name": {"$ref": "#/$defs/name"}, "next": {"$ref": "#/$defs/node"}}}},
			"$ref": "#/$defs/node"}`, `{"name": "ok", "next": {"name": "long", "next": {"name": 1}}}`, []string{
			"next/name: maxLength: got 4, want 3", "next/next/name: got number, want string"}},
		{"anchor", `{"$defs": {"n": {"$anchor": "num", "type": "number"}}, "properties": {"a": {"$ref": "#num"}}}`, `{"a": "x"}`, []string{"a: got string, want number"}},
		{"anyOf lists every branch", `{"properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}`, `{"v": true}`, []string{
			"v: got boolean, want integer", "v: got boolean, want string"}},
		{"anyOf matched", `{"properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}`, `{"v": 3}`, nil},
		{"oneOf twice", `{"oneOf": [{"type": "number"}, {"type": "integer"}]}`, `3`, []string{": matches more than one of the 'oneOf' schemas (0 and 1)"}},
		{"oneOf none", `{"oneOf": [{"type": "number"}, {"type": "integer"}]}`, `"s"`, []string{": got string, want integer", ": got string, want number"}},
		{"allOf", `{"allOf": [{"type": "string"}, {"minLength": 3}]}`, `"ab"`, []string{": minLength: got 2, want 3"}},
		{"not", `{"not": {"type": "string"}}`, `"ab"`, []string{": must not match the 'not' schema"}},
		{"if then else", `{"if": {"properties": {"kind": {"const": "n"}}}, "then": {"properties": {"v": {"type": "number"}}}, "else": {"properties": {"v": {"type": "string"}}}}`,
			`{"kind": "n", "v": "x"}`, []string{"v: got string, want number"}},
		{"else branch", `{"if": {"properties": {"kind": {"const": "n"}}}, "then": {"properties": {"v": {"type": "number"}}}, "else": {"properties": {"v": {"type": "string"}}}}`,
			`{"kind": "s", "v": 1}`, []string{"v: got number, want string"}},
		{"contains", `{"contains": {"type": "string"}}`, `[1, 2]`, []string{": no item matches the 'contains' schema"}},
		{"min and max contains", `{"contains": {"type": "string"}, "minContains": 2, "maxContains": 2}`, `["a", 1]`, []string{": minContains: got 1, want 2"}},
		{"pattern properties", `{"patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": false}`, `{"x-a": 1, "b": "c"}`, []string{
			"b: additional properties 'b' not allowed", "x-a: got number, want string"}},
		{"dependent required", `{"dependentRequired": {"a": ["b"]}}`, `{"a": 1}`, []string{"b: missing property 'b', required when 'a' is present"}},
		{"dependent schemas", `{"dependentSchemas": {"a": {"required": ["c"]}}}`, `{"a": 1}`, []string{"c: missing property 'c'"}},
		{"false schema", `false`, `1`, []string{": not allowed"}},
		{"draft-07 tuple and dependencies", `{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"t": {"items": [{"type": "string"}], "additionalItems": false}},
			"dependencies": {"t": ["u"]}}`, `{"t": ["a", "b"]}`, []string{"t/1: not allowed", "u: missing property 'u', required when 't' is present"}},
		{"draft-07 ignores keywords beside $ref", `{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
			"properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}}}`, `{"a": "long"}`, nil},
		{"long values are cut in messages", `{"pattern": "^a"}`, `"` + strings.Repeat("b", 100) + `"`, []string{
			": '" + strings.Repeat("b", 64) + "...' does not match pattern '^a'"}},
		{"only the library sees it", `{"properties": {"a": {}}, "unevaluatedProperties": false}`, `{"a": 1, "b": 2}`, []string{
			`: does not match the schema at /unevaluatedProperties (not: validated against <anonymous schema>)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := compile(t, tt.schema)
			got := summary(s.Validate(decode(t, tt.value)))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("problems\n got  %q\n want %q", got, tt.want)
			}
		})
	}
}

func TestValidateValues(t *testing.T) {
	t.Parallel()
	s := compile(t, `{"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}, "l": {"type": "array"}}}`)
	tests := []struct {
		name string
		v    any
		want []string
	}{
		{"json.Number", map[string]any{"n": json.Number("7")}, []string{"n: maximum: got 7, want 5"}},
		{"json.Number in range", map[string]any{"n": json.Number("3"), "l": []any{json.Number("1.5")}}, nil},
		{"int", map[string]any{"n": 9}, []string{"n: maximum: got 9, want 5"}},
		{"not a JSON value", map[string]any{"l": []string{"a"}}, []string{": value is not a JSON value"}},
		{"NaN", map[string]any{"n": func() any { var z float64; return z / z }()}, []string{": value is not a JSON value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := summary(s.Validate(tt.v)); !slices.Equal(got, tt.want) {
				t.Fatalf("problems %q, want %q", got, tt.want)
			}
		})
	}
	in := map[string]any{"n": json.Number("3")}
	s.Validate(in)
	if _, ok := in["n"].(json.Number); !ok {
		t.Fatal("Validate changed its argument")
	}
}

// placeholders: a string "{{...}}" stands for any value, a string with
// "{{" inside it for an unknown string.
func placeholders(_ []string, v any) schema.Mode {
	s, ok := v.(string)
	switch {
	case !ok:
		return schema.Known
	case strings.HasPrefix(s, "{{") && strings.HasSuffix(s, "}}"):
		return schema.Unknown
	case strings.Contains(s, "{{"):
		return schema.TypeOnly
	}
	return schema.Known
}

func TestValidatePartial(t *testing.T) {
	t.Parallel()
	const obj = `{"type": "object", "additionalProperties": false, "required": ["a", "b"],
		"properties": {"a": {"type": "string", "enum": ["x", "y"]}, "b": {"type": "integer"}, "m": {"type": "object", "additionalProperties": {"type": "number"}},
			"s": {"$ref": "#/$defs/s"}, "pair": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "not": {"const": ["p", "q"]}}},
		"$defs": {"s": {"type": "string", "maxLength": 3}}}`
	tests := []struct {
		name, value string
		want        []string
	}{
		{"placeholders stand for anything", `{"a": "{{s.out}}", "b": "{{s.n}}", "m": "{{s.m}}"}`, nil},
		{"an interpolated string is a string", `{"a": "v {{s.out}}", "b": 1}`, nil},
		{"but not a number", `{"a": "x", "b": "n {{s.n}}"}`, []string{"b: got string, want integer"}},
		{"nor through a $ref's length", `{"a": "x", "b": 1, "s": "long {{s.t}}"}`, nil},
		{"known values around placeholders are checked", `{"a": "z", "b": "{{s.n}}", "m": {"k": "{{s.k}}", "j": "no"}, "c": 1}`, []string{
			"a: value must be one of 'x', 'y'", "c: additional properties 'c' not allowed", "m/j: got string, want number"}},
		{"required holds", `{"a": "{{s.a}}"}`, []string{"b: missing property 'b'"}},
		{"whole-value checks skip a container with a placeholder", `{"a": "x", "b": 1, "pair": ["p", "{{s.q}}"]}`, nil},
		{"and hold without one", `{"a": "x", "b": 1, "pair": ["p", "q"]}`, []string{"pair: must not match the 'not' schema"}},
		{"no placeholder at all is Validate", `{"a": "x"}`, []string{"b: missing property 'b'"}},
	}
	s := compile(t, obj)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := summary(s.ValidatePartial(decode(t, tt.value), placeholders))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("problems\n got  %q\n want %q", got, tt.want)
			}
		})
	}
}

func TestProblemPath(t *testing.T) {
	t.Parallel()
	s := compile(t, `{"properties": {"a": {"items": {"required": ["k"]}}}}`)
	ps := s.Validate(decode(t, `{"a": [{"k": 1}, {}]}`))
	if len(ps) != 1 || !slices.Equal(ps[0].Path, []string{"a", "1", "k"}) || ps[0].Keyword != "required" {
		t.Fatalf("problems %+v, want one required problem at a/1/k", ps)
	}
}
