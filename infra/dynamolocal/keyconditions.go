package dynamolocal

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// keyOps are the ComparisonOperators DynamoDB accepts in KeyConditions, with
// their argument count and expression form.
var keyOps = map[string]struct {
	args   int
	format func(name string, v []string) string
}{
	"EQ":          {1, func(n string, v []string) string { return n + " = " + v[0] }},
	"LE":          {1, func(n string, v []string) string { return n + " <= " + v[0] }},
	"LT":          {1, func(n string, v []string) string { return n + " < " + v[0] }},
	"GE":          {1, func(n string, v []string) string { return n + " >= " + v[0] }},
	"GT":          {1, func(n string, v []string) string { return n + " > " + v[0] }},
	"BEGINS_WITH": {1, func(n string, v []string) string { return "begins_with(" + n + ", " + v[0] + ")" }},
	"BETWEEN":     {2, func(n string, v []string) string { return n + " BETWEEN " + v[0] + " AND " + v[1] }},
}

// rewriteKeyConditions rewrites a Query request body that uses the legacy
// KeyConditions parameter (which guregu/dynamo sends and minidyn ignores) into
// the equivalent KeyConditionExpression. Generated placeholders (#kcN, :kcN)
// skip any name already in ExpressionAttributeNames/Values, which are merged.
// A body without KeyConditions is returned unchanged. It fails with a
// ValidationException for bodies AWS would reject: both KeyConditions and
// KeyConditionExpression, more than two conditions, an operator not allowed
// on keys, or a wrong number of values; malformed JSON is a
// SerializationException.
func rewriteKeyConditions(body []byte) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := decodeRequest(body, &req); err != nil {
		return nil, err
	}
	if _, ok := req["KeyConditions"]; !ok {
		return body, nil
	}
	if _, both := req["KeyConditionExpression"]; both {
		return nil, validation("Can not use both expression and non-expression parameters in the same request: " +
			"Non-expression parameters: {KeyConditions} Expression parameters: {KeyConditionExpression}")
	}
	var conds map[string]struct {
		ComparisonOperator string
		AttributeValueList []json.RawMessage
	}
	names := map[string]string{}
	values := map[string]json.RawMessage{}
	for field, dst := range map[string]any{"KeyConditions": &conds, "ExpressionAttributeNames": &names, "ExpressionAttributeValues": &values} {
		if v, ok := req[field]; ok && string(v) != "null" {
			if err := decodeRequest(v, dst); err != nil {
				return nil, err
			}
		}
	}
	if len(conds) == 0 || len(conds) > 2 {
		return nil, validation("Conditions can be of length 1 or 2 only")
	}
	var parts []string
	for _, attr := range slices.Sorted(maps.Keys(conds)) {
		c := conds[attr]
		op, ok := keyOps[c.ComparisonOperator]
		if !ok {
			return nil, validation("Attempted conditional constraint is not an indexable operation: %s on %s", c.ComparisonOperator, attr)
		}
		if len(c.AttributeValueList) != op.args {
			return nil, validation("One or more parameter values were invalid: Invalid number of argument(s) for the %s ComparisonOperator", c.ComparisonOperator)
		}
		name := placeholder("#kc", names)
		names[name] = attr
		vals := make([]string, len(c.AttributeValueList))
		for i, v := range c.AttributeValueList {
			vals[i] = placeholder(":kc", values)
			values[vals[i]] = v
		}
		parts = append(parts, op.format(name, vals))
	}
	delete(req, "KeyConditions")
	req["KeyConditionExpression"] = mustJSON(strings.Join(parts, " AND "))
	req["ExpressionAttributeNames"] = mustJSON(names)
	req["ExpressionAttributeValues"] = mustJSON(values)
	out, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode rewritten query: %w", err)
	}
	return out, nil
}

// placeholder returns prefix+N for the smallest N not already used.
func placeholder[V any](prefix string, used map[string]V) string {
	for i := 0; ; i++ {
		if p := prefix + strconv.Itoa(i); !hasKey(used, p) {
			return p
		}
	}
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
