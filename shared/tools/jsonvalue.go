package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// plainJSON reports whether v consists only of the types encoding/json
// produces when decoding into any (nil, bool, string, float64, json.Number,
// []any, map[string]any), plus int, with finite numbers.
func plainJSON(v any) bool {
	switch v := v.(type) {
	case nil, bool, string, int, json.Number:
		return true
	case float64:
		return !math.IsNaN(v) && !math.IsInf(v, 0)
	case []any:
		for _, e := range v {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range v {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// normalizeInput returns in as plain JSON (see plainJSON), converting other
// Go values ([]string, structs, int64 ...) through a JSON round trip. A nil
// map becomes an empty one. It fails when in cannot be encoded as JSON.
func normalizeInput(in map[string]any) (map[string]any, error) {
	if in == nil {
		return map[string]any{}, nil
	}
	if plainJSON(in) {
		return in, nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("input is not representable as JSON: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("input is not representable as JSON: %w", err)
	}
	return out, nil
}

// jqValue converts a value produced by gojq into plain JSON: big integers
// become int when they fit and float64 otherwise, NaN becomes null and
// infinities the largest finite float64 (as jq prints them). A value that
// needs no change is returned as is, without copying.
func jqValue(v any) any {
	if !needsJQFix(v) {
		return v
	}
	return fixJQ(v)
}

// needsJQFix reports whether v holds a big integer or a non-finite float.
func needsJQFix(v any) bool {
	switch v := v.(type) {
	case *big.Int:
		return true
	case float64:
		return math.IsNaN(v) || math.IsInf(v, 0)
	case []any:
		for _, e := range v {
			if needsJQFix(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range v {
			if needsJQFix(e) {
				return true
			}
		}
	}
	return false
}

// fixJQ rebuilds v with the conversions jqValue describes.
func fixJQ(v any) any {
	switch v := v.(type) {
	case *big.Int:
		if v.IsInt64() && v.Int64() >= math.MinInt && v.Int64() <= math.MaxInt {
			return int(v.Int64())
		}
		f, _ := new(big.Float).SetInt(v).Float64()
		return fixJQ(f) // may have overflowed to an infinity
	case float64:
		switch {
		case math.IsNaN(v):
			return nil
		case math.IsInf(v, 1):
			return math.MaxFloat64
		case math.IsInf(v, -1):
			return -math.MaxFloat64
		}
		return v
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = fixJQ(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = fixJQ(e)
		}
		return out
	default:
		return v
	}
}

// toFloat converts a JSON number (float64, int kinds, json.Number) to
// float64. It reports false for anything else.
func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case int32:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint64:
		return float64(v), true
	case uint32:
		return float64(v), true
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	default:
		return 0, false
	}
}

// stringArg returns the string input field key. A missing field yields def
// when not required; a missing required field or a non-string value is an
// INVALID_PARAMS error.
func stringArg(in map[string]any, key string, required bool, def string) (string, error) {
	v, ok := in[key]
	if !ok || v == nil {
		if required {
			return "", invalidField(key, "missing property '%s'", key)
		}
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalidField(key, "must be a string")
	}
	return s, nil
}

// boolArg returns the boolean input field key, or def when it is missing.
// A non-boolean value is an INVALID_PARAMS error.
func boolArg(in map[string]any, key string, def bool) (bool, error) {
	v, ok := in[key]
	if !ok || v == nil {
		return def, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, invalidField(key, "must be a boolean")
	}
	return b, nil
}

// objectArg returns the object input field key, or nil when it is missing.
// A non-object value is an INVALID_PARAMS error.
func objectArg(in map[string]any, key string) (map[string]any, error) {
	v, ok := in[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalidField(key, "must be an object")
	}
	return m, nil
}
