package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/itchyny/gojq"
)

// Limits of json_query.
const (
	maxJQResults = 10000
	jqTimeout    = 10 * time.Second
)

func jsonQueryTool() *Tool {
	return &Tool{
		ID:       "json_query",
		Name:     "JSON query (jq)",
		Category: CategoryData,
		Description: "Runs a jq program over a JSON value to select, filter, reshape or aggregate data. " +
			"Fields: input (any JSON value: object, array, string, number, boolean or null), " +
			"query (a jq program in standard jq syntax). " +
			"The output field result is the single value when the query yields exactly one value; " +
			"when it yields none or several, result is an array of them (wrap the query in [...] to always get an array). " +
			"No environment variables, files or network are available to the query; at most 10000 results, 10 seconds. " +
			`Example: {"input": {"items": [{"name": "a", "price": 3}, {"name": "b", "price": 1}]}, "query": "[.items[] | select(.price > 2) | .name]"} returns {"result": ["a"]}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "input": {
      "description": "The JSON value to query; any type. Example: {\"items\": [{\"name\": \"a\", \"price\": 3}]}.",
      "default": null
    },
    "query": {
      "type": "string", "minLength": 1, "maxLength": 10000,
      "description": "A jq program. Examples: \".items[0].name\" (one field), \"[.items[] | .name]\" (collect into an array), \".items | map(.price) | add\" (sum), \"{count: (.items | length)}\" (build an object).",
      "examples": [".items[0].name", "[.items[] | select(.price > 2) | .name]", ".items | length"]
    }
  },
  "required": ["query"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "result": {
      "description": "The query's output. Exactly one value yielded: that value, whatever its type (an array result stays one array). Zero or several values yielded: an array of them, in order (zero values gives []). Wrap the query in [...] for an array every time."
    }
  },
  "required": ["result"],
  "additionalProperties": false
}`),
		Annotations: computeOnly(),
		Isolated:    true,
		Timeout:     jqTimeout,
		Run:         runJSONQuery,
	}
}

// runJSONQuery runs input "query" over input "input". It fails with
// INVALID_PARAMS when the query does not parse or compile, and with an
// execution failure carrying jq's message on a runtime error (error("boom"),
// halt_error, a type error) or when the query yields more than
// maxJQResults values. A context deadline stops the query.
func runJSONQuery(ctx context.Context, in map[string]any) (map[string]any, error) {
	src, err := stringArg(in, "query", true, "")
	if err != nil {
		return nil, err
	}
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, invalidField("query", "invalid jq query: %v", err)
	}
	// No environment loader: $ENV and env are empty objects, so a query can
	// never read the service's environment (its secrets).
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, invalidField("query", "invalid jq query: %v", err)
	}

	results := []any{}
	iter := code.RunWithContext(ctx, in["input"])
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := v.(error); isErr {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break // plain "halt": stop without error
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			return nil, fmt.Errorf("jq: %v", err)
		}
		if len(results) == maxJQResults {
			return nil, fmt.Errorf("query yielded more than %d results; narrow it or use limit(n; ...)", maxJQResults)
		}
		results = append(results, jqValue(v))
	}
	if len(results) == 1 {
		return map[string]any{"result": results[0]}, nil
	}
	return map[string]any{"result": results}, nil
}
