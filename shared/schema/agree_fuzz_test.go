package schema_test

import (
	"encoding/json"
	"testing"

	"github.com/workflowchat/service/shared/schema"
	"github.com/workflowchat/service/shared/tools"
)

// agreeSchemas use only keywords the walk covers: for them, the walk
// finds a problem exactly when the library rejects the value.
var agreeSchemas = []string{
	`{"type": "object", "additionalProperties": false, "required": ["a"],
		"properties": {"a": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
			"n": {"type": "integer", "minimum": 1, "maximum": 10, "multipleOf": 2},
			"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
			"e": {"enum": ["red", "green", 3, null, {"k": [1]}]}, "c": {"const": "on"},
			"h": {"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"pattern": "^[a-z/-]+$"}, "maxProperties": 2, "minProperties": 1},
			"l": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3, "uniqueItems": true},
			"t": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false, "contains": {"const": true}, "maxContains": 1},
			"o": {"type": ["string", "null"]}}}`,
	`{"$defs": {"node": {"type": "object", "properties": {"v": {"oneOf": [{"type": "number"}, {"type": "integer"}, {"type": "string", "maxLength": 2}]},
		"next": {"$ref": "#/$defs/node"}}, "dependentRequired": {"v": ["w"]}, "dependentSchemas": {"w": {"properties": {"v": {"not": {"const": 1}}}}}}},
		"$ref": "#/$defs/node", "if": {"required": ["k"]}, "then": {"properties": {"k": {"type": "boolean"}}}, "else": {"maxProperties": 3},
		"patternProperties": {"^x-": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]}},
		"allOf": [{"properties": {"a": {"type": ["object", "array"]}}}]}`,
	`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"properties": {"t": {"type": "array", "items": [{"type": "string"}, {"type": "number"}], "additionalItems": {"type": "boolean"}},
			"r": {"$ref": "#/definitions/r", "maxLength": 1}},
		"dependencies": {"t": ["r"], "r": {"required": ["q"]}}, "definitions": {"r": {"type": "string"}}}`,
}

func agreeing(t testing.TB) []*schema.Schema {
	var out []*schema.Schema
	for _, raw := range agreeSchemas {
		out = append(out, compile(t, raw))
	}
	for _, tool := range tools.Builtin(tools.Config{}) {
		out = append(out, compile(t, string(tool.InputSchema)), compile(t, string(tool.OutputSchema)))
	}
	return out
}

// FuzzWalkAgrees holds the walk against the library: for every value and
// schema, the walk lists a problem if and only if the library rejects the
// value, so the field-level report never contradicts the verdict.
func FuzzWalkAgrees(f *testing.F) {
	for _, seed := range []string{
		`{"a": "abc", "n": 4, "x": 0.5, "e": 3, "c": "on", "h": {"a-b": "v"}, "l": [1, 2], "t": ["s", true], "o": null}`,
		`{"a": "ABCDE", "n": 2.5, "x": 1, "e": {"k": [1.0]}, "h": {}, "l": [1, 1], "t": [true, true, 1]}`,
		`{"v": 1.5, "next": {"v": 3, "w": 1, "next": {"v": "abc"}}, "x-a": [1, "2"], "k": 1, "a": 3}`,
		`{"v": 1, "w": 0, "x-b": "s", "k": true}`,
		`{"t": ["a", 1, true, 2], "r": "xy"}`,
		`{"t": [1], "r": 5, "q": 0}`,
		`{"query": ".a", "input": {"a": [1, 2]}}`,
		`{"url": "https://example.com", "method": "PATCH", "headers": {"a b": "c", "x": 1}, "timeoutMs": 0}`,
		`{"text": "a,b", "delimiter": ";;", "header": "yes"}`,
		`{"expression": "a+b", "variables": {"a": 1, "1b": "2"}}`,
		`{"template": "{{.x}}", "values": {"x": [1, {"y": null}]}}`,
		`[1, 2]`, `"s"`, `null`, `{}`,
	} {
		f.Add(seed)
	}
	var schemas []*schema.Schema
	f.Fuzz(func(t *testing.T, raw string) {
		if schemas == nil {
			schemas = agreeing(t)
		}
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		for i, s := range schemas {
			walk, err := schema.Walk(s, v), schema.Verdict(s, v)
			if (len(walk) == 0) != (err == nil) {
				t.Fatalf("schema %d on %s: walk %q, library %v", i, raw, summary(walk), err)
			}
			if err != nil && len(s.Validate(v)) == 0 {
				t.Fatalf("schema %d on %s: invalid without problems", i, raw)
			}
		}
	})
}
