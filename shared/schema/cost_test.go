package schema_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/schema"
)

// chain returns a schema whose property x applies $defs a0, each aK
// applying aK+1 fan times in place through keyword ("allOf", "anyOf",
// "oneOf"): 2^n schemas to one value for a fan of 2.
func chain(n, fan int, keyword string) string {
	var b strings.Builder
	b.WriteString(`{"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": {`)
	for i := range n {
		refs := make([]string, fan)
		for j := range refs {
			refs[j] = fmt.Sprintf(`{"$ref": "#/$defs/a%d"}`, i+1)
		}
		fmt.Fprintf(&b, `"a%d": {%q: [%s]}, `, i, keyword, strings.Join(refs, ", "))
	}
	fmt.Fprintf(&b, `"a%d": {}}}`, n)
	return b.String()
}

// defsChain is chain for a shape that applies aK+1 twice through
// something other than a list: each aK is shape with %[1]s the next.
func defsChain(n int, shape string) string {
	var b strings.Builder
	b.WriteString(`{"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": {`)
	for i := range n {
		fmt.Fprintf(&b, `"a%d": %s, `, i, fmt.Sprintf(shape, fmt.Sprintf(`"#/$defs/a%d"`, i+1)))
	}
	fmt.Fprintf(&b, `"a%d": {}}}`, n)
	return b.String()
}

// Each link of these chains applies the next link twice or more to the
// same value: validating one value took 2^n applications (n = 24: 15 s,
// 5 GB), so Compile refuses them by the cost of their worst schema.
func TestCompileRefusesCostlySchemas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, want string
	}{
		{"allOf chain", chain(14, 2, "allOf"), "#/$defs/a"},
		{"the reviewer's size", chain(30, 2, "allOf"), "#/$defs/a"},
		{"anyOf fan-out", chain(5, 8, "anyOf"), "#/$defs/a"},
		{"oneOf fan-out", chain(7, 4, "oneOf"), "#/$defs/a"},
		{"if then else", defsChain(14, `{"if": {"$ref": %[1]s}, "then": {"$ref": %[1]s}, "else": {"$ref": %[1]s}}`), "#/$defs/a"},
		{"not and allOf", defsChain(14, `{"not": {"$ref": %[1]s}, "allOf": [{"$ref": %[1]s}]}`), "#/$defs/a"},
		{"dependentSchemas", defsChain(14, `{"dependentSchemas": {"k": {"$ref": %[1]s}, "l": {"$ref": %[1]s}}}`), "#/$defs/a"},
		{"a $ref beside allOf", defsChain(14, `{"$ref": %[1]s, "allOf": [{"$ref": %[1]s}]}`), "#/$defs/a"},
		{"dynamic ref", defsChain(14, `{"allOf": [{"$dynamicRef": %[1]s}, {"$ref": %[1]s}]}`), "#/$defs/a"},
		{"one wide allOf", `{"$defs": {"e": {"allOf": [` + strings.Repeat(`{"$ref": "#/$defs/f"}, `, 200) + `{}]},` +
			`"f": {"anyOf": [` + strings.Repeat(`{}, `, 60) + `{}]}}, "$ref": "#/$defs/e"}`, "#/$defs/e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			s, err := schema.Compile([]byte(tt.raw))
			if err == nil {
				t.Fatalf("Compile accepted a schema of cost over %d (%v)", schema.MaxInPlace, s)
			}
			if !errors.Is(err, schema.ErrCostly) || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), "more than 10000 schemas") {
				t.Fatalf("err = %v, want ErrCostly naming %q", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Compile took %s", d)
			}
		})
	}
}

// Schemas as people write them, a few levels of allOf and anyOf, trees and
// lists through properties and items, and small fan-outs, compile and
// validate values as before.
func TestCompileAcceptsRealisticCosts(t *testing.T) {
	t.Parallel()
	items := strings.TrimSuffix(strings.Repeat(`{"name": "n", "tags": ["a", "b"], "size": 3}, `, 5000), ", ")
	tests := []struct {
		name, raw, good, bad string
	}{
		{"small fan-out", chain(8, 2, "allOf"), `{"x": 1}`, ""},
		{"a wider one", chain(3, 6, "anyOf"), `{"x": {"y": 2}}`, ""},
		{"allOf and anyOf levels", `{"$defs": {
			"named": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}}},
			"sized": {"allOf": [{"$ref": "#/$defs/named"}, {"properties": {"size": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}]},
			"item": {"allOf": [{"$ref": "#/$defs/sized"}, {"$ref": "#/$defs/named"}],
				"anyOf": [{"required": ["size"]}, {"required": ["tags"]}],
				"properties": {"tags": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}}},
			"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}}}`,
			`{"items": [` + items + `]}`, `{"items": [{"name": ""}]}`},
		{"tree through properties and items", `{"$defs": {"n": {"type": "object", "required": ["v"],
			"properties": {"v": {"anyOf": [{"type": "string"}, {"type": "number"}]}, "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
			"$ref": "#/$defs/n"}`,
			`{"v": 1, "kids": [{"v": "a", "kids": [{"v": 2}, {"v": 3, "kids": []}]}, {"v": 4}]}`, `{"v": 1, "kids": [{"kids": []}]}`},
		{"if then else", `{"type": "object", "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["a"]}, "else": {"required": ["b"]}}`,
			`{"kind": "a", "a": 1}`, `{"kind": "a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := compile(t, tt.raw)
			if ps := s.Validate(decode(t, tt.good)); ps != nil {
				t.Errorf("%.60s: %v", tt.good, summary(ps))
			}
			if tt.bad != "" && len(s.Validate(decode(t, tt.bad))) == 0 {
				t.Errorf("%s: no problem", tt.bad)
			}
		})
	}
}

// An accepted schema may still apply thousands of schemas to each value:
// a value is refused when validating it would take more than MaxWork
// applications, counted per level of the value before it is validated,
// and so is a value deep under a schema that branches at each level.
func TestValidateBoundsWork(t *testing.T) {
	t.Parallel()
	// a0 applies about 8,000 schemas to each item.
	costly := `{"type": "object", "properties": {"x": {"type": "array", "items": {"$ref": "#/$defs/a0"}}}, "$defs": {` +
		strings.TrimPrefix(chain(11, 2, "allOf"), `{"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": {`)
	branching := `{"$defs": {"a": {"allOf": [{"items": {"$ref": "#/$defs/a"}}, {"items": {"$ref": "#/$defs/a"}}]}}, "$ref": "#/$defs/a"}`
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, raw, value string
		refused          bool
	}{
		{"a few items", costly, `{"x": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}`, false},
		{"many items", costly, `{"x": [` + strings.TrimSuffix(strings.Repeat("1, ", 200), ", ") + `]}`, true},
		{"shallow under a branching schema", branching, nested(8), false},
		{"deep under a branching schema", branching, nested(40), true},
		{"a large value against a cheap schema", `{"type": "array", "items": {"type": "integer"}}`,
			`[` + strings.TrimSuffix(strings.Repeat("1, ", 200_000), ", ") + `]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := compile(t, tt.raw)
			v := decode(t, tt.value)
			for name, ps := range map[string][]schema.Problem{"Validate": s.Validate(v), "ValidatePartial": s.ValidatePartial(v, placeholders)} {
				switch {
				case tt.refused && (len(ps) != 1 || !strings.Contains(ps[0].Message, "too large to validate against this schema")):
					t.Errorf("%s: %v, want one problem about the work", name, summary(ps))
				case !tt.refused && ps != nil:
					t.Errorf("%s: %v", name, summary(ps))
				}
			}
		})
	}
}

// BenchmarkWorstAccepted validates, against a schema of nearly
// MaxInPlace applications per item, a value of nearly MaxWork in all,
// valid and then invalid (which walks the value again for problems).
func BenchmarkWorstAccepted(b *testing.B) {
	costly := `{"type": "object", "properties": {"x": {"type": "array", "items": {"$ref": "#/$defs/a0"}}}, "$defs": {` +
		strings.TrimPrefix(chain(11, 2, "allOf"), `{"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": {`)
	s := compile(b, strings.Replace(costly, `"a11": {}`, `"a11": {"type": "integer"}`, 1))
	n := schema.MaxWork / (1 << 13)
	for _, tt := range []struct{ name, item string }{{"valid", "1"}, {"invalid", `"x"`}} {
		v := decode(b, `{"x": [`+strings.TrimSuffix(strings.Repeat(tt.item+", ", n), ", ")+`]}`)
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				ps := s.Validate(v)
				if (ps != nil) != (tt.name == "invalid") || ps != nil && strings.Contains(ps[0].Message, "too large") {
					b.Fatalf("%d items: %v", n, summary(ps))
				}
			}
		})
	}
}
