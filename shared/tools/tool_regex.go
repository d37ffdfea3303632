package tools

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// maxRegexMatches caps the matches regex_extract returns.
const maxRegexMatches = 10000

func regexExtractTool() *Tool {
	return &Tool{
		ID:       "regex_extract",
		Name:     "Extract with regular expression",
		Category: CategoryText,
		Description: "Finds every match of a regular expression in a text and returns the matched substrings and their capture groups. " +
			"Fields: text (the text to search), pattern (RE2 syntax as in Go: no backreferences or lookaround; (?i) makes it case-insensitive, (?s) lets . match newlines, (?P<name>...) or (?<name>...) names a group). " +
			"Outputs: matches (each whole match, in order) and groups (one entry per match: an array of the capture groups 1..n when the pattern has no named groups, " +
			"otherwise an object from group name to value, unnamed groups keyed by their number; a group that did not take part is null). At most 10000 matches. " +
			`Example: {"text": "a=1, b=22", "pattern": "(?P<key>\\w+)=(?P<value>\\d+)"} returns {"matches": ["a=1", "b=22"], "groups": [{"key": "a", "value": "1"}, {"key": "b", "value": "22"}]}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The text to search.", "examples": ["Order 123 shipped, order 456 pending"]},
    "pattern": {"type": "string", "minLength": 1, "maxLength": 10000, "description": "An RE2 regular expression. Examples: \"\\\\d+\" (numbers), \"(?i)order (\\\\d+)\" (case-insensitive with a group), \"(?P<user>[\\\\w.]+)@(?P<domain>[\\\\w.]+)\" (named groups).", "examples": ["order (\\d+)"]}
  },
  "required": ["text", "pattern"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "matches": {"type": "array", "items": {"type": "string"}, "description": "Every non-overlapping match, left to right."},
    "groups": {
      "type": "array",
      "description": "Capture groups per match, aligned with matches. Without named groups: an array of groups 1..n. With named groups: an object keyed by group name (unnamed groups by their number). null for a group that did not participate in the match. Empty arrays when the pattern has no groups.",
      "items": {
        "anyOf": [
          {"type": "array", "items": {"type": ["string", "null"]}},
          {"type": "object", "additionalProperties": {"type": ["string", "null"]}}
        ]
      }
    }
  },
  "required": ["matches", "groups"],
  "additionalProperties": false
}`),
		Annotations: computeOnly(),
		Isolated:    true,
		Timeout:     10 * time.Second,
		Run:         runRegexExtract,
	}
}

// runRegexExtract matches input "pattern" against input "text". It fails
// with INVALID_PARAMS when the pattern does not compile, and with an
// execution failure when there are more than maxRegexMatches matches.
func runRegexExtract(_ context.Context, in map[string]any) (map[string]any, error) {
	text, err := stringArg(in, "text", true, "")
	if err != nil {
		return nil, err
	}
	pattern, err := stringArg(in, "pattern", true, "")
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, invalidField("pattern", "invalid regular expression: %v", err)
	}
	locs := re.FindAllStringSubmatchIndex(text, maxRegexMatches+1)
	if len(locs) > maxRegexMatches {
		return nil, fmt.Errorf("more than %d matches; make the pattern more specific", maxRegexMatches)
	}

	names := re.SubexpNames()
	named := false
	for _, n := range names[1:] {
		named = named || n != ""
	}
	matches := make([]any, len(locs))
	groups := make([]any, len(locs))
	for i, loc := range locs {
		matches[i] = text[loc[0]:loc[1]]
		if named {
			g := make(map[string]any, len(names)-1)
			for j := 1; j < len(names); j++ {
				key := names[j]
				if key == "" {
					key = strconv.Itoa(j)
				}
				g[key] = groupValue(text, loc, j)
			}
			groups[i] = g
			continue
		}
		g := make([]any, len(names)-1)
		for j := 1; j < len(names); j++ {
			g[j-1] = groupValue(text, loc, j)
		}
		groups[i] = g
	}
	return map[string]any{"matches": matches, "groups": groups}, nil
}

// groupValue returns capture group j of a match located by loc, or nil
// when the group did not participate.
func groupValue(text string, loc []int, j int) any {
	start, end := loc[2*j], loc[2*j+1]
	if start < 0 {
		return nil
	}
	return text[start:end]
}
