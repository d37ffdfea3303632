package tools

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

func csvParseTool() *Tool {
	return &Tool{
		ID:       "csv_parse",
		Name:     "Parse CSV",
		Category: CategoryData,
		Description: "Parses CSV (comma-separated values, RFC 4180 quoting) text into rows. " +
			"Fields: text (the CSV document), delimiter (one character, default \",\"; use \";\" or \"\\t\" for semicolon- or tab-separated data), " +
			"header (default true: the first line names the columns and each row becomes an object keyed by them; false: each row is an array of strings). " +
			"All values are strings. Every row must have as many fields as the first. " +
			`Example: {"text": "name,age\nAda,36\nAlan,41"} returns {"rows": [{"name": "Ada", "age": "36"}, {"name": "Alan", "age": "41"}]}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The CSV text, lines separated by \\n or \\r\\n. Fields containing the delimiter, quotes or newlines are enclosed in double quotes, with quotes doubled (\"say \"\"hi\"\"\").", "examples": ["name,age\nAda,36\nAlan,41"]},
    "delimiter": {"type": "string", "minLength": 1, "maxLength": 1, "default": ",", "description": "The field separator: a single character other than a quote, \\r or \\n. Examples: \",\", \";\", \"\\t\", \"|\"."},
    "header": {"type": "boolean", "default": true, "description": "true: the first line holds column names and rows are objects keyed by them. false: every line is data and rows are arrays of strings."}
  },
  "required": ["text"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "rows": {
      "type": "array",
      "description": "The data rows in order (the header line is not a row). Objects from column name to value when header is true; arrays of values otherwise.",
      "items": {
        "anyOf": [
          {"type": "object", "additionalProperties": {"type": "string"}},
          {"type": "array", "items": {"type": "string"}}
        ]
      }
    }
  },
  "required": ["rows"],
  "additionalProperties": false
}`),
		Annotations: computeOnly(),
		Isolated:    true,
		Timeout:     10 * time.Second,
		Run:         runCSVParse,
	}
}

// runCSVParse parses input "text". It fails with INVALID_PARAMS for a
// delimiter that is not one allowed character, and with an execution
// failure for malformed CSV (naming the line), rows of differing length or
// duplicate column names.
func runCSVParse(ctx context.Context, in map[string]any) (map[string]any, error) {
	text, err := stringArg(in, "text", true, "")
	if err != nil {
		return nil, err
	}
	delim, err := stringArg(in, "delimiter", false, ",")
	if err != nil {
		return nil, err
	}
	header, err := boolArg(in, "header", true)
	if err != nil {
		return nil, err
	}
	comma, size := utf8.DecodeRuneInString(delim)
	if size == 0 || size != len(delim) || comma == utf8.RuneError || comma == '"' || comma == '\r' || comma == '\n' {
		return nil, invalidField("delimiter", "must be a single character other than a quote, \\r or \\n")
	}

	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(text, "\uFEFF")))
	r.Comma = comma
	r.ReuseRecord = false

	var columns []string
	rows := []any{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, csvError(err)
		}
		if header && columns == nil {
			seen := make(map[string]bool, len(rec))
			for _, name := range rec {
				if seen[name] {
					return nil, fmt.Errorf("duplicate column name %q in the header line; set header to false to read rows as arrays", name)
				}
				seen[name] = true
			}
			columns = rec
			continue
		}
		if header {
			obj := make(map[string]any, len(columns))
			for i, name := range columns {
				obj[name] = rec[i]
			}
			rows = append(rows, obj)
			continue
		}
		arr := make([]any, len(rec))
		for i, v := range rec {
			arr[i] = v
		}
		rows = append(rows, arr)
	}
	return map[string]any{"rows": rows}, nil
}

// csvError describes a CSV parse error with its line.
func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			return fmt.Errorf("invalid CSV: line %d has a different number of fields than the first line", pe.Line)
		}
		return fmt.Errorf("invalid CSV: line %d, column %d: %v", pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("invalid CSV: %v", err)
}
