package schema_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/schema"
)

// Each of these schemas applies itself to the same value again without
// descending into a property or an item: the library's validator would
// recurse until the stack overflows, which kills the process.
func TestCompileRejectsRefCycles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, want string
	}{
		{"self", `{"type": "object", "$ref": "#"}`, "# -> #"},
		{"defs loop", `{"$defs": {"x": {"$ref": "#/$defs/x"}}, "properties": {"a": {"$ref": "#/$defs/x"}}}`,
			"#/$defs/x -> #/$defs/x"},
		{"mutual", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`,
			"#/$defs/a -> #/$defs/b -> #/$defs/a"},
		{"through allOf", `{"$defs": {"a": {"allOf": [{"type": "object"}, {"$ref": "#/$defs/a"}]}}}`,
			"#/$defs/a -> #/$defs/a/allOf/1 -> #/$defs/a"},
		{"through anyOf", `{"anyOf": [{"type": "string"}, {"$ref": "#"}]}`, "# -> #/anyOf/1 -> #"},
		{"through oneOf", `{"properties": {"p": {"oneOf": [{"$ref": "#/properties/p"}]}}}`, "#/properties/p"},
		{"through not", `{"not": {"$ref": "#"}}`, "# -> #/not -> #"},
		{"through if", `{"if": {"$ref": "#"}}`, "# -> #/if -> #"},
		{"through then", `{"if": true, "then": {"$ref": "#"}}`, "# -> #/then -> #"},
		{"through dependentSchemas", `{"dependentSchemas": {"k": {"$ref": "#"}}}`, "# -> #/dependentSchemas/k -> #"},
		{"draft-07 dependencies", `{"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"k": {"$ref": "#"}}}`,
			"# -> #/dependencies/k -> #"},
		{"anchor", `{"$defs": {"a": {"$anchor": "a", "allOf": [{"$ref": "#a"}]}}}`, "#/$defs/a"},
		{"nested id", `{"$defs": {"d": {"$id": "https://example.com/d", "$defs": {"x": {"$ref": "#/$defs/x"}}}}}`,
			"#/$defs/d/$defs/x -> #/$defs/d/$defs/x"},
		{"nested id by its URI", `{"$defs": {"d": {"$id": "https://example.com/d", "allOf": [{"$ref": "https://example.com/d"}]}}}`,
			"#/$defs/d -> #/$defs/d/allOf/0 -> #/$defs/d"},
		{"dynamic ref", `{"$dynamicAnchor": "n", "anyOf": [{"$dynamicRef": "#n"}]}`, "# -> #/anyOf/0 -> #"},
		{"escaped pointer", `{"$defs": {"a/b": {"$ref": "#/$defs/a~1b"}}}`, "#/$defs/a~1b -> #/$defs/a~1b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile([]byte(tt.raw))
			if err == nil {
				t.Fatalf("Compile accepted %s (%v)", tt.raw, s)
			}
			if !errors.Is(err, schema.ErrRefCycle) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrRefCycle naming %q", err, tt.want)
			}
		})
	}
}

// Recursion that descends into the value ends with the value: such schemas
// stay valid, and validate values nested as deep as they allow.
func TestCompileAcceptsDescendingRecursion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw string
		deep      func(n int) string // a valid value nested n levels deep
		bad       string
		badAt     string
	}{
		{"tree", `{"$defs": {"n": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}}, "$ref": "#/$defs/n"}`,
			func(n int) string {
				return strings.Repeat(`{"kids": [`, n/2) + "{}" + strings.Repeat("]}", n/2)
			}, `{"kids": [{"kids": [1]}]}`, "kids/0/kids/0"},
		{"list through anyOf", `{"anyOf": [{"type": "null"}, {"type": "object", "properties": {"next": {"$ref": "#"}}}]}`,
			func(n int) string { return strings.Repeat(`{"next": `, n) + "null" + strings.Repeat("}", n) }, `{"next": {"next": 1}}`, ""},
		{"property names", `{"propertyNames": {"$ref": "#"}, "maxProperties": 2}`,
			func(int) string { return `{"a": 1}` }, `{"a": 1, "b": 2, "c": 3}`, ""},
		{"dynamic ref into items", `{"$dynamicAnchor": "n", "type": "array", "items": {"$dynamicRef": "#n"}}`,
			func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }, `[[1]]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := compile(t, tt.raw)
			if ps := s.Validate(decode(t, tt.deep(200))); ps != nil {
				t.Errorf("deep value: %v", summary(ps))
			}
			ps := s.Validate(decode(t, tt.bad))
			if len(ps) == 0 {
				t.Fatalf("%s: no problem", tt.bad)
			}
			if tt.badAt != "" && ps[0].Pointer() != tt.badAt {
				t.Errorf("%s: %v, want a problem at %s", tt.bad, summary(ps), tt.badAt)
			}
		})
	}
}

// A value nested deeper than a schema's validation can follow is a
// problem, not a stack overflow, both by Validate and by ValidatePartial.
func TestValidateBoundsNesting(t *testing.T) {
	t.Parallel()
	tree := compile(t, `{"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}`)
	deep := decode(t, strings.Repeat("[", 5000)+strings.Repeat("]", 5000))
	for name, ps := range map[string][]schema.Problem{
		"Validate":        tree.Validate(deep),
		"ValidatePartial": tree.ValidatePartial(deep, placeholders),
	} {
		if len(ps) != 1 || !strings.Contains(ps[0].Message, "levels of arrays and objects deep") {
			t.Errorf("%s: %v, want one problem about nesting", name, summary(ps))
		}
	}
	// A long chain of references applied in place leaves less room for
	// nesting: 2000 schemas per level would take 2000 frames per level.
	var b strings.Builder
	b.WriteString(`{"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/c0"}}`)
	const chain = 2000
	for i := range chain {
		next := "#/$defs/c" + itoa(i+1)
		if i == chain-1 {
			next = "#/$defs/n"
		}
		b.WriteString(`, "c` + itoa(i) + `": {"$ref": "` + next + `"}`)
	}
	b.WriteString(`}, "$ref": "#/$defs/n"}`)
	long := compile(t, b.String())
	if ps := long.Validate(decode(t, "[[[]]]")); ps != nil {
		t.Errorf("shallow value: %v", summary(ps))
	}
	if ps := long.Validate(decode(t, strings.Repeat("[", 100)+strings.Repeat("]", 100))); len(ps) != 1 || !strings.Contains(ps[0].Message, "deep") {
		t.Errorf("value 100 deep under a chain of %d: %v, want one problem about nesting", chain, summary(ps))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
