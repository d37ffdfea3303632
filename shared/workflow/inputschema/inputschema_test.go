package inputschema_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/workflow/inputschema"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		schema string
		want   string // substring of the error; "" means valid
	}{
		{"minimal", `{"type": "object"}`, ""},
		{"properties", `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":["integer","null"],"default":3}},"required":["q"]}`, ""},
		{"attachment", `{"type":"object","properties":{"file":{"type":"string","format":"attachment"}}}`, ""},
		{"local reference", `{"type":"object","properties":{"o":{"$ref":"#/$defs/o"}},"$defs":{"o":{"type":"object"}}}`, ""},
		{"draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"not JSON", `{"type":`, "not valid JSON"},
		{"an array", `[{"type":"object"}]`, `"type": "object"`},
		{"a string", `"object"`, `"type": "object"`},
		{"no type", `{"properties":{}}`, `"type": "object" at the top`},
		{"not an object type", `{"type":"array"}`, `"type": "object" at the top`},
		{"several types", `{"type":["object","null"]}`, `"type": "object" at the top`},
		{"unknown type name", `{"type":"object","properties":{"a":{"type":"strin"}}}`, `"strin" is not a JSON type`},
		{"unknown nested type name", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"int"}}}}`, `"int" is not a JSON type`},
		{"bad keyword value", `{"type":"object","properties":{"a":{"minimum":"x"}}}`, "not a valid JSON Schema"},
		{"bad pattern", `{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`, "not a valid JSON Schema"},
		{"external reference", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "not a valid JSON Schema"},
		{"dangling reference", `{"type":"object","properties":{"a":{"$ref":"#/$defs/nope"}}}`, "not a valid JSON Schema"},
		{"default not valid", `{"type":"object","properties":{"n":{"type":"integer","default":"x"}}}`, "not a valid JSON Schema"},
		{"attachment not a string", `{"type":"object","properties":{"f":{"type":"integer","format":"attachment"}}}`, `property "f": format attachment needs "type": "string"`},
		{"too large", `{"type":"object","description":"` + strings.Repeat("x", inputschema.MaxBytes) + `"}`, "at most 65536 bytes"},
		// Validating against these would recurse until the stack overflows.
		{"self reference", `{"type":"object","$ref":"#"}`, "reference cycle that never descends into the value: # -> #"},
		{"self reference with a default", `{"type":"object","$ref":"#","default":{}}`, "reference cycle"},
		{"reference loop", `{"type":"object","$defs":{"x":{"$ref":"#/$defs/x"}},"properties":{"a":{"$ref":"#/$defs/x"}}}`,
			"reference cycle that never descends into the value: #/$defs/x -> #/$defs/x"},
		{"loop through anyOf", `{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#/properties/a"}]}}}`, "reference cycle"},
		{"recursive tree", `{"type":"object","$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"properties":{"root":{"$ref":"#/$defs/n"}}}`, ""},
		{"default nested too deep", `{"type":"object","properties":{"a":{"default":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}}}`,
			"default whose value nests more than"},
		// Validating against these would take exponential time: each link
		// of the chain applies the next twice to the same value.
		{"allOf chain", chain(14, 2, "allOf", ""), "too costly to validate: the schema at #/$defs/a"},
		{"allOf chain with a default", chain(14, 2, "allOf", `,"default":1`), "too costly to validate"},
		{"anyOf fan-out", chain(5, 8, "anyOf", ""), "too costly to validate"},
		{"if then else", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"}},"$defs":{` + ifChain(14) + `}}`, "too costly to validate"},
		{"costly defaults", `{"type":"object","properties":{` + costlyDefaults(200) + `},"$defs":{` + strings.TrimPrefix(chain(11, 2, "allOf", ""), `{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"}},"$defs":{`),
			"is too costly to validate: its defaults would take more than 1048576 schema applications"},
		// As people write them, within the bound.
		{"small fan-out", chain(8, 2, "allOf", `,"default":1`), ""},
		{"some defaults", `{"type":"object","properties":{` + costlyDefaults(20) + `},"$defs":{` + strings.TrimPrefix(chain(11, 2, "allOf", ""), `{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"}},"$defs":{`), ""},
		{"allOf and anyOf levels", `{"type":"object","$defs":{"named":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}},` +
			`"item":{"allOf":[{"$ref":"#/$defs/named"},{"anyOf":[{"required":["size"]},{"required":["tags"]}]}],"properties":{"tags":{"type":"array","items":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}}},` +
			`"properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"},"default":[{"name":"a","size":1}]},"mode":{"anyOf":[{"const":"fast"},{"const":"slow"}],"default":"fast"}}}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := inputschema.Check(json.RawMessage(c.schema))
			if c.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if len(s.JSON()) == 0 || strings.ContainsAny(string(s.JSON()), "\n ") && !strings.Contains(c.schema, "draft-07") {
					t.Errorf("JSON() = %s, want the compact schema", s.JSON())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check = %v, want an error with %q", err, c.want)
			}
		})
	}
}

// chain returns an input schema whose property x (with more, say a
// default) applies $defs a0, each aK applying aK+1 fan times in place
// through keyword: 2^n schemas to one value for a fan of 2.
func chain(n, fan int, keyword, more string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"` + more + `}},"$defs":{`)
	for i := range n {
		refs := make([]string, fan)
		for j := range refs {
			refs[j] = fmt.Sprintf(`{"$ref":"#/$defs/a%d"}`, i+1)
		}
		fmt.Fprintf(&b, `"a%d":{%q:[%s]},`, i, keyword, strings.Join(refs, ","))
	}
	fmt.Fprintf(&b, `"a%d":{}}}`, n)
	return b.String()
}

// ifChain returns $defs a0 to an, each aK applying aK+1 as if and then.
func ifChain(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"a%d":{"if":{"$ref":"#/$defs/a%d"},"then":{"$ref":"#/$defs/a%[2]d"}},`, i, i+1)
	}
	fmt.Fprintf(&b, `"a%d":{}`, n)
	return b.String()
}

// costlyDefaults returns n properties applying $defs a0, each with a
// default validated against it.
func costlyDefaults(n int) string {
	props := make([]string, n)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":{"$ref":"#/$defs/a0","default":1}`, i)
	}
	return strings.Join(props, ",")
}

func TestSchemaProperties(t *testing.T) {
	t.Parallel()
	s, err := inputschema.Check(json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"n":{"type":["integer","null"]},"any":{},"f":{"type":"string","format":"attachment"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"q": {"string"}, "n": {"integer", "null"}, "any": nil, "f": {"string"}}
	if got := s.Properties(); !reflect.DeepEqual(got, want) {
		t.Errorf("Properties = %v, want %v", got, want)
	}
	if got := s.Attachments(); !reflect.DeepEqual(got, []string{"f"}) {
		t.Errorf("Attachments = %v", got)
	}
}

func TestValidateInput(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{
	  "type": "object",
	  "properties": {
	    "query": {"type": "string", "minLength": 1},
	    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
	    "tags": {"type": "array", "items": {"type": "string"}},
	    "owner": {"$ref": "#/$defs/person"},
	    "file": {"type": "string", "format": "attachment"}
	  },
	  "$defs": {"person": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
	  "required": ["query"],
	  "additionalProperties": false
	}`)
	cases := []struct {
		name    string
		schema  json.RawMessage
		input   map[string]any
		want    map[string]any
		details map[string]string // field -> substring of its message
	}{
		{"valid, default applied", schema, map[string]any{"query": "go"}, map[string]any{"query": "go", "limit": 10.0}, nil},
		{"valid, all given", schema, map[string]any{"query": "go", "limit": 5, "tags": []string{"a"}, "owner": map[string]any{"name": "Ada"}, "file": "a1b2"},
			map[string]any{"query": "go", "limit": 5.0, "tags": []any{"a"}, "owner": map[string]any{"name": "Ada"}, "file": "a1b2"}, nil},
		{"missing required", schema, map[string]any{}, nil, map[string]string{"input.query": "is required"}},
		{"wrong type", schema, map[string]any{"query": 3.0}, nil, map[string]string{"input.query": "type"}},
		{"out of range and unknown", schema, map[string]any{"query": "go", "limit": 1000.0, "extra": true},
			nil, map[string]string{"input.limit": "maximum", "input.extra": "not an input of this workflow"}},
		{"not an integer", schema, map[string]any{"query": "go", "limit": 1.5}, nil, map[string]string{"input.limit": "integer"}},
		{"nested through a reference", schema, map[string]any{"query": "go", "owner": map[string]any{}}, nil, map[string]string{"input.owner": "name"}},
		{"array items", schema, map[string]any{"query": "go", "tags": []any{1.0}}, nil, map[string]string{"input.tags": "string"}},
		{"no schema, no input", nil, nil, map[string]any{}, nil},
		{"no schema, empty input", json.RawMessage(`null`), map[string]any{}, map[string]any{}, nil},
		{"no schema, some input", nil, map[string]any{"a": 1.0}, map[string]any{"a": 1.0}, nil},
		{"root-level keyword", json.RawMessage(`{"type":"object","minProperties":2}`), map[string]any{"a": 1.0}, nil, map[string]string{"input": "minProperties"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := inputschema.ValidateInput(c.schema, c.input)
			if c.details == nil {
				if err != nil || !reflect.DeepEqual(got, c.want) {
					t.Fatalf("ValidateInput = %#v, %v; want %#v", got, err, c.want)
				}
				return
			}
			e, ok := err.(*errs.Error)
			if !ok || e.Kind != errs.Invalid || e.Code != inputschema.CodeInvalidInput {
				t.Fatalf("ValidateInput error = %v, want Invalid INVALID_INPUT", err)
			}
			if len(e.Details) != len(c.details) {
				t.Errorf("details %+v, want %d", e.Details, len(c.details))
			}
			for _, d := range e.Details {
				if want, ok := c.details[d.Field]; !ok || !strings.Contains(d.Message, want) {
					t.Errorf("detail %s: %q, want one of %v", d.Field, d.Message, c.details)
				}
				if strings.Contains(d.Message, "validating") {
					t.Errorf("detail %s keeps the validator's prefix: %q", d.Field, d.Message)
				}
			}
		})
	}
	// A schema stored before cycles were refused fails the run's start
	// with an error instead of overflowing the stack.
	if _, err := inputschema.ValidateInput(json.RawMessage(`{"type":"object","$ref":"#"}`), map[string]any{}); errs.CodeOf(err) != "INVALID_INPUT_SCHEMA" {
		t.Errorf("ValidateInput with a stored cyclic schema = %v, want INVALID_INPUT_SCHEMA", err)
	}
	var deep any = map[string]any{}
	for range 600 {
		deep = []any{deep}
	}
	if _, err := inputschema.ValidateInput(json.RawMessage(`{"type":"object"}`), map[string]any{"a": deep}); errs.CodeOf(err) != inputschema.CodeInvalidInput ||
		!strings.Contains(err.Error(), "levels of arrays and objects deep") {
		t.Errorf("ValidateInput with an input nested 600 deep = %v, want INVALID_INPUT about nesting", err)
	}
	// So does a schema stored before costly ones were refused, instead of
	// taking exponential time; and an input that would take too much
	// work against an accepted schema is refused before it is validated.
	if _, err := inputschema.ValidateInput(json.RawMessage(chain(30, 2, "allOf", "")), map[string]any{"x": 1}); errs.CodeOf(err) != "INVALID_INPUT_SCHEMA" ||
		!strings.Contains(err.Error(), "too costly to validate") {
		t.Errorf("ValidateInput with a stored costly schema = %v, want INVALID_INPUT_SCHEMA", err)
	}
	items := json.RawMessage(strings.Replace(chain(11, 2, "allOf", ""), `"x":{"$ref":"#/$defs/a0"}`, `"x":{"type":"array","items":{"$ref":"#/$defs/a0"}}`, 1))
	if _, err := inputschema.ValidateInput(items, map[string]any{"x": make([]any, 10)}); err != nil {
		t.Errorf("ValidateInput with 10 items of about 8,000 applications each: %v", err)
	}
	if _, err := inputschema.ValidateInput(items, map[string]any{"x": make([]any, 200)}); errs.CodeOf(err) != inputschema.CodeInvalidInput ||
		!strings.Contains(err.Error(), "too large to validate against this schema") {
		t.Errorf("ValidateInput with 200 items of about 8,000 applications each = %v, want INVALID_INPUT about the work", err)
	}
	if _, err := inputschema.ValidateInput(json.RawMessage(`{"type":"array"}`), nil); errs.CodeOf(err) != "INVALID_INPUT_SCHEMA" {
		t.Errorf("a stored schema that does not check: %v", err)
	}
}

// TestValidateField: an ask_human answer's values are validated against
// the step's schema, problems named under the request's field.
func TestValidateField(t *testing.T) {
	t.Parallel()
	s, err := inputschema.Check(json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"}},"required":["note"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.ValidateField("values", map[string]any{"note": "ok"}); err != nil || got["note"] != "ok" {
		t.Fatalf("valid values: %v, %v", got, err)
	}
	_, err = s.ValidateField("values", map[string]any{"note": 1.0})
	e, ok := err.(*errs.Error)
	if !ok || e.Code != inputschema.CodeInvalidInput || len(e.Details) != 1 || e.Details[0].Field != "values.note" || !strings.HasPrefix(e.Message, "values does not match") {
		t.Fatalf("bad values: %v", err)
	}
}

// TestValidateInputMessagesAreBounded: a failed anyOf, which the
// validator explains branch by branch, answers a message of a bounded
// size, whatever the number of branches.
func TestValidateInputMessagesAreBounded(t *testing.T) {
	t.Parallel()
	branches := make([]string, 300)
	for i := range branches {
		branches[i] = fmt.Sprintf(`{"type":"object","required":["key_number_%d_that_is_missing"]}`, i)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"x":{"anyOf":[` + strings.Join(branches, ",") + `]}}}`)
	_, err := inputschema.ValidateInput(schema, map[string]any{"x": map[string]any{}})
	var e *errs.Error
	if !errors.As(err, &e) || len(e.Details) == 0 {
		t.Fatalf("err %v, want field errors", err)
	}
	for _, d := range e.Details {
		if len(d.Message) > 1100 {
			t.Errorf("%s: a message of %d bytes", d.Field, len(d.Message))
		}
	}
}
