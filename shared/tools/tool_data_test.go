package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/tools"
)

func TestHash(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	runToolCases(t, r, "hash", []toolCase{
		{name: "sha256", input: map[string]any{"text": "hello", "algorithm": "sha256"},
			want: map[string]any{"digest": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}},
		{name: "sha1", input: map[string]any{"text": "hello", "algorithm": "sha1"},
			want: map[string]any{"digest": "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"}},
		{name: "md5", input: map[string]any{"text": "hello", "algorithm": "md5"},
			want: map[string]any{"digest": "5d41402abc4b2a76b9719d911017c592"}},
		{name: "empty text", input: map[string]any{"text": "", "algorithm": "md5"},
			want: map[string]any{"digest": "d41d8cd98f00b204e9800998ecf8427e"}},
		{name: "utf-8 bytes", input: map[string]any{"text": "é", "algorithm": "sha1"},
			want: map[string]any{"digest": "bf15be717ac1b080b4f1c456692825891ff5073d"}},
		{name: "unknown algorithm", input: map[string]any{"text": "a", "algorithm": "sha512"},
			code: tools.CodeInvalidParams, msg: "algorithm", field: "algorithm"},
		{name: "missing algorithm", input: map[string]any{"text": "a"},
			code: tools.CodeInvalidParams, msg: "missing property 'algorithm'", field: "algorithm"},
		{name: "text not a string", input: map[string]any{"text": 1.0, "algorithm": "md5"},
			code: tools.CodeInvalidParams, msg: "want string", field: "text"},
	})
}

func TestJSONQuery(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	doc := map[string]any{"items": []any{
		map[string]any{"name": "a", "price": 3.0},
		map[string]any{"name": "b", "price": 1.0},
	}}
	runToolCases(t, r, "json_query", []toolCase{
		{name: "single scalar", input: map[string]any{"input": doc, "query": ".items[0].name"},
			want: map[string]any{"result": "a"}},
		{name: "single array stays one array", input: map[string]any{"input": doc, "query": "[.items[] | select(.price > 2) | .name]"},
			want: map[string]any{"result": []any{"a"}}},
		{name: "several results become an array", input: map[string]any{"input": doc, "query": ".items[].name"},
			want: map[string]any{"result": []any{"a", "b"}}},
		{name: "no result is an empty array", input: map[string]any{"input": doc, "query": "empty"},
			want: map[string]any{"result": []any{}}},
		{name: "null result", input: map[string]any{"input": doc, "query": ".missing"},
			want: map[string]any{"result": nil}},
		{name: "aggregate", input: map[string]any{"input": doc, "query": ".items | map(.price) | add"},
			want: map[string]any{"result": 4}},
		{name: "build object", input: map[string]any{"input": doc, "query": "{count: (.items | length)}"},
			want: map[string]any{"result": map[string]any{"count": 2}}},
		{name: "input omitted is null", input: map[string]any{"query": ". == null"},
			want: map[string]any{"result": true}},
		{name: "scalar input", input: map[string]any{"input": "abc", "query": "ascii_upcase"},
			want: map[string]any{"result": "ABC"}},
		{name: "json.Number input", input: map[string]any{"input": map[string]any{"n": json.Number("12")}, "query": ".n + 1"},
			want: map[string]any{"result": 13}},
		{name: "big integer", input: map[string]any{"query": "9999999999999999999999"},
			check: func(t *testing.T, out map[string]any) {
				if f, ok := out["result"].(float64); !ok || f != 1e22 {
					t.Fatalf("result = %#v, want float64 1e22", out["result"])
				}
			}},
		{name: "nan becomes null", input: map[string]any{"query": "[nan]"},
			want: map[string]any{"result": []any{nil}}},
		{name: "infinity becomes max float", input: map[string]any{"query": "infinite"},
			want: map[string]any{"result": math.MaxFloat64}},
		{name: "halt stops without error", input: map[string]any{"query": "1, halt, 2"},
			want: map[string]any{"result": 1}},
		{name: "environment is not readable", input: map[string]any{"query": "[$ENV, env]"},
			want: map[string]any{"result": []any{map[string]any{}, map[string]any{}}}},
		{name: "runtime error", input: map[string]any{"query": `error("boom")`},
			code: tools.CodeToolExecutionFailed, msg: "boom"},
		{name: "type error", input: map[string]any{"input": 1.0, "query": ".a"},
			code: tools.CodeToolExecutionFailed, msg: "expected an object but got: number (1)"},
		{name: "halt_error", input: map[string]any{"query": `"bye" | halt_error`},
			code: tools.CodeToolExecutionFailed, msg: "bye"},
		{name: "syntax error", input: map[string]any{"query": ".["},
			code: tools.CodeInvalidParams, msg: "invalid jq query", field: "query"},
		{name: "unknown function", input: map[string]any{"query": "frobnicate(1)"},
			code: tools.CodeInvalidParams, msg: "function not defined", field: "query"},
		{name: "no input stream", input: map[string]any{"query": "input"},
			code: tools.CodeInvalidParams, msg: "not allowed", field: "query"},
		{name: "no modules", input: map[string]any{"query": `import "x" as x; .`},
			code: tools.CodeInvalidParams, msg: "cannot load module", field: "query"},
		{name: "too many results", input: map[string]any{"query": "range(10001)"},
			code: tools.CodeToolExecutionFailed, msg: "more than 10000 results"},
		{name: "exactly the cap", input: map[string]any{"query": "range(10000)"},
			check: func(t *testing.T, out map[string]any) {
				if n := len(out["result"].([]any)); n != 10000 {
					t.Fatalf("got %d results", n)
				}
			}},
		{name: "missing query", input: map[string]any{"input": 1.0},
			code: tools.CodeInvalidParams, msg: "missing property 'query'", field: "query"},
	})
}

func TestJSONQueryTimeout(t *testing.T) {
	t.Parallel()
	tool := findTool(t, tools.Builtin(tools.Config{}), "json_query")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tool.Run(ctx, map[string]any{"query": "last(range(1e12))"})
	// The query would run for hours: a minute tells a stop at the
	// deadline from none, whatever the machine's speed.
	if err == nil || time.Since(start) > time.Minute {
		t.Fatalf("endless query: err %v after %v, want a context error at the deadline", err, time.Since(start))
	}
	// Through the registry the same deadline is TOOL_TIMEOUT.
	slow := *tool
	slow.Timeout = 50 * time.Millisecond
	r, err := tools.NewRegistry(&slow)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(t.Context(), "json_query", map[string]any{"query": "last(range(1e12))"})
	assertErr(t, err, tools.CodeToolTimeout, "did not finish within 50ms", "")
}

func TestJSONQueryDoesNotLeakEnvironment(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("WFC_TEST_SECRET", "s3cr3t")
	r := newRegistry(t, tools.Config{})
	out, err := r.Run(t.Context(), "json_query", map[string]any{"query": "$ENV.WFC_TEST_SECRET, env.WFC_TEST_SECRET"})
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, out); strings.Contains(got, "s3cr3t") || got != `{"result":[null,null]}` {
		t.Fatalf("output %s, want the environment hidden", got)
	}
}

func findTool(t testing.TB, ts []*tools.Tool, id string) *tools.Tool {
	t.Helper()
	for _, tool := range ts {
		if tool.ID == id {
			return tool
		}
	}
	t.Fatalf("no tool %s", id)
	return nil
}

func TestCSVParse(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	runToolCases(t, r, "csv_parse", []toolCase{
		{name: "header rows", input: map[string]any{"text": "name,age\nAda,36\nAlan,41\n"},
			want: map[string]any{"rows": []any{
				map[string]any{"name": "Ada", "age": "36"},
				map[string]any{"name": "Alan", "age": "41"},
			}}},
		{name: "no header", input: map[string]any{"text": "a,b\r\nc,d", "header": false},
			want: map[string]any{"rows": []any{[]any{"a", "b"}, []any{"c", "d"}}}},
		{name: "semicolon delimiter", input: map[string]any{"text": "x;y\n1;2", "delimiter": ";"},
			want: map[string]any{"rows": []any{map[string]any{"x": "1", "y": "2"}}}},
		{name: "tab delimiter", input: map[string]any{"text": "x\ty\n1\t2", "delimiter": "\t", "header": false},
			want: map[string]any{"rows": []any{[]any{"x", "y"}, []any{"1", "2"}}}},
		{name: "non-ascii delimiter", input: map[string]any{"text": "x§y\n1§2", "delimiter": "§"},
			want: map[string]any{"rows": []any{map[string]any{"x": "1", "y": "2"}}}},
		{name: "quoted fields", input: map[string]any{"text": "q,n\n\"say \"\"hi\"\", ok\",\"multi\nline\""},
			want: map[string]any{"rows": []any{map[string]any{"q": `say "hi", ok`, "n": "multi\nline"}}}},
		{name: "byte order mark stripped", input: map[string]any{"text": "\uFEFFid\n7"},
			want: map[string]any{"rows": []any{map[string]any{"id": "7"}}}},
		{name: "header only", input: map[string]any{"text": "a,b\n"},
			want: map[string]any{"rows": []any{}}},
		{name: "empty text", input: map[string]any{"text": ""},
			want: map[string]any{"rows": []any{}}},
		{name: "ragged row", input: map[string]any{"text": "a,b\n1,2\n3"},
			code: tools.CodeToolExecutionFailed, msg: "line 3 has a different number of fields"},
		{name: "bare quote", input: map[string]any{"text": "a\nx\"y"},
			code: tools.CodeToolExecutionFailed, msg: "invalid CSV: line 2"},
		{name: "duplicate column", input: map[string]any{"text": "a,a\n1,2"},
			code: tools.CodeToolExecutionFailed, msg: `duplicate column name "a"`},
		{name: "quote delimiter", input: map[string]any{"text": "a", "delimiter": `"`},
			code: tools.CodeInvalidParams, msg: "single character", field: "delimiter"},
		{name: "newline delimiter", input: map[string]any{"text": "a", "delimiter": "\n"},
			code: tools.CodeInvalidParams, msg: "single character", field: "delimiter"},
		{name: "empty delimiter", input: map[string]any{"text": "a", "delimiter": ""},
			code: tools.CodeInvalidParams, msg: "minLength", field: "delimiter"},
		{name: "header not boolean", input: map[string]any{"text": "a", "header": "yes"},
			code: tools.CodeInvalidParams, msg: "want boolean", field: "header"},
	})
}

func TestTextTemplate(t *testing.T) {
	t.Parallel()
	// The loop and recursion caps take about 10 s under the race detector
	// on a busy machine: a timeout well above that, so that the cases see
	// the caps, not the tool's own 10 s timeout.
	var ts []*tools.Tool
	for _, tool := range tools.Builtin(tools.Config{}) {
		if tool.ID == "text_template" {
			tool.Timeout = 2 * time.Minute
		}
		ts = append(ts, tool)
	}
	r, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	runToolCases(t, r, "text_template", []toolCase{
		{name: "fields and len", input: map[string]any{"template": "Hello {{.name}}, you have {{len .tasks}} tasks.", "values": map[string]any{"name": "Ada", "tasks": []any{"a", "b"}}},
			want: map[string]any{"text": "Hello Ada, you have 2 tasks."}},
		{name: "range and if", input: map[string]any{"template": "{{range $i, $t := .items}}{{if $i}}, {{end}}{{$t.n}}{{end}}", "values": map[string]any{"items": []any{map[string]any{"n": "x"}, map[string]any{"n": "y"}}}},
			want: map[string]any{"text": "x, y"}},
		{name: "extra functions", input: map[string]any{"template": `{{upper .a}} {{lower .b}} [{{trim .c}}] {{join .l "+"}} {{json .o}}`, "values": map[string]any{"a": "x", "b": "Y", "c": "  z ", "l": []any{"p", 1.0}, "o": map[string]any{"k": true}}},
			want: map[string]any{"text": `X y [z] p+1 {"k":true}`}},
		{name: "printf", input: map[string]any{"template": `{{printf "%.2f" .p}}`, "values": map[string]any{"p": 3.14159}},
			want: map[string]any{"text": "3.14"}},
		{name: "no values", input: map[string]any{"template": "static"},
			want: map[string]any{"text": "static"}},
		{name: "define and template", input: map[string]any{"template": `{{define "x"}}[{{.}}]{{end}}{{template "x" .v}}`, "values": map[string]any{"v": "in"}},
			want: map[string]any{"text": "[in]"}},
		{name: "own delimiters pass values untouched", input: map[string]any{"template": "{{.a}}", "values": map[string]any{"a": "{{.b}}"}},
			want: map[string]any{"text": "{{.b}}"}},
		{name: "missing key", input: map[string]any{"template": "{{.nope}}", "values": map[string]any{"a": 1.0}},
			code: tools.CodeToolExecutionFailed, msg: `map has no entry for key "nope"`},
		{name: "parse error", input: map[string]any{"template": "{{.a"},
			code: tools.CodeInvalidParams, msg: "template", field: "template"},
		{name: "unknown function", input: map[string]any{"template": "{{frob .a}}"},
			code: tools.CodeInvalidParams, msg: `function "frob" not defined`, field: "template"},
		{name: "output cap", input: map[string]any{"template": `{{range 300}}{{printf "%5000s" "x"}}{{end}}`},
			code: tools.CodeToolExecutionFailed, msg: "exceeds 1048576 bytes"},
		{name: "loop cap", input: map[string]any{"template": `{{range 2000}}{{range 1000}}{{end}}{{end}}`},
			code: tools.CodeToolExecutionFailed, msg: "more than 1000000 loop iterations"},
		{name: "recursion cap", input: map[string]any{"template": `{{define "r"}}{{template "r" .}}{{template "r" .}}{{end}}{{template "r" .}}`},
			code: tools.CodeToolExecutionFailed, msg: "exceeded maximum template depth",
			// text/template's depth cap needs more stack than a worker may have.
			isoCode: tools.CodeToolResourceLimit, isoMsg: "exceeded its memory limit"},
		{name: "values not an object", input: map[string]any{"template": "x", "values": []any{1.0}},
			code: tools.CodeInvalidParams, msg: "want object", field: "values"},
	})
}

func TestTextTemplateStopsAtDeadline(t *testing.T) {
	t.Parallel()
	tool := findTool(t, tools.Builtin(tools.Config{}), "text_template")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	// Few loop iterations (far under the step cap), each slow: it formats a
	// 1 MB string and prints only its length.
	_, err := tool.Run(ctx, map[string]any{"template": `{{range 100000}}{{printf "%999999s" "x" | len}}{{end}}`})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	// The whole template takes minutes: 30 s tells a stop at the
	// deadline from a run to the end, whatever the machine's speed.
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("stopped after %v, want at the deadline", d)
	}
}

func TestRegexExtract(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	runToolCases(t, r, "regex_extract", []toolCase{
		{name: "no groups", input: map[string]any{"text": "a1 b22 c333", "pattern": `\d+`},
			want: map[string]any{"matches": []any{"1", "22", "333"}, "groups": []any{[]any{}, []any{}, []any{}}}},
		{name: "numbered groups", input: map[string]any{"text": "Order 123 shipped, order 456 pending", "pattern": `(?i)order (\d+) (\w+)`},
			want: map[string]any{
				"matches": []any{"Order 123 shipped", "order 456 pending"},
				"groups":  []any{[]any{"123", "shipped"}, []any{"456", "pending"}},
			}},
		{name: "named groups as objects", input: map[string]any{"text": "a=1, b=22", "pattern": `(?P<key>\w+)=(?<value>\d+)`},
			want: map[string]any{
				"matches": []any{"a=1", "b=22"},
				"groups":  []any{map[string]any{"key": "a", "value": "1"}, map[string]any{"key": "b", "value": "22"}},
			}},
		{name: "mixed named and unnamed", input: map[string]any{"text": "x:5", "pattern": `(?P<k>\w):(\d)`},
			want: map[string]any{"matches": []any{"x:5"}, "groups": []any{map[string]any{"k": "x", "2": "5"}}}},
		{name: "non-participating group is null", input: map[string]any{"text": "ab a", "pattern": `a(b)?`},
			want: map[string]any{"matches": []any{"ab", "a"}, "groups": []any{[]any{"b"}, []any{nil}}}},
		{name: "no match", input: map[string]any{"text": "abc", "pattern": `\d`},
			want: map[string]any{"matches": []any{}, "groups": []any{}}},
		{name: "unicode", input: map[string]any{"text": "naïve café", "pattern": `\p{L}+`},
			want: map[string]any{"matches": []any{"naïve", "café"}, "groups": []any{[]any{}, []any{}}}},
		{name: "invalid pattern", input: map[string]any{"text": "a", "pattern": `(`},
			code: tools.CodeInvalidParams, msg: "invalid regular expression", field: "pattern"},
		{name: "backreference unsupported", input: map[string]any{"text": "aa", "pattern": `(a)\1`},
			code: tools.CodeInvalidParams, msg: "invalid escape sequence", field: "pattern"},
		{name: "too many matches", input: map[string]any{"text": strings.Repeat("a", 10001), "pattern": "a"},
			code: tools.CodeToolExecutionFailed, msg: "more than 10000 matches"},
		{name: "empty pattern", input: map[string]any{"text": "a", "pattern": ""},
			code: tools.CodeInvalidParams, msg: "minLength", field: "pattern"},
	})
}

func TestMathEvaluate(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	runToolCases(t, r, "math_evaluate", []toolCase{
		{name: "arithmetic", input: map[string]any{"expression": "(1 + 2) * 3 - 4 / 8"},
			want: map[string]any{"value": 8.5}},
		{name: "variables", input: map[string]any{"expression": "round(price * (1 + rate) * 100) / 100", "variables": map[string]any{"price": 19.99, "rate": 0.2}},
			want: map[string]any{"value": 23.99}},
		{name: "json.Number variable", input: map[string]any{"expression": "n * 2", "variables": map[string]any{"n": json.Number("21")}},
			want: map[string]any{"value": 42}},
		{name: "powers", input: map[string]any{"expression": "2 ** 10 + 2 ^ 3"},
			want: map[string]any{"value": 1032}},
		{name: "modulo on floats", input: map[string]any{"expression": "7.5 % 2 + 7 % 3"},
			want: map[string]any{"value": 2.5}},
		{name: "functions", input: map[string]any{"expression": "sqrt(16) + abs(-2) + max(1, 5, 3) + min(4, 2) + floor(2.7) + ceil(2.1) + pow(2, 3) + hypot(3, 4) + log10(1000)"},
			want: map[string]any{"value": 4 + 2 + 5 + 2 + 2 + 3 + 8 + 5 + 3}},
		{name: "constants", input: map[string]any{"expression": "round(pi * 1000) + round(e * 1000)"},
			want: map[string]any{"value": 3142 + 2718}},
		{name: "variable overrides constant", input: map[string]any{"expression": "e", "variables": map[string]any{"e": 5.0}},
			want: map[string]any{"value": 5}},
		{name: "ternary", input: map[string]any{"expression": "a > b ? a : b", "variables": map[string]any{"a": 2.0, "b": 9.0}},
			want: map[string]any{"value": 9}},
		{name: "no integer overflow", input: map[string]any{"expression": "9223372036854775807 * 2"},
			want: map[string]any{"value": 1.8446744073709552e19}},
		{name: "division by zero", input: map[string]any{"expression": "1 / 0"},
			code: tools.CodeToolExecutionFailed, msg: "not a finite number"},
		{name: "modulo by zero", input: map[string]any{"expression": "a % 0", "variables": map[string]any{"a": 3.0}},
			code: tools.CodeToolExecutionFailed, msg: "not a finite number"},
		{name: "domain error", input: map[string]any{"expression": "sqrt(-1)"},
			code: tools.CodeToolExecutionFailed, msg: "not a finite number"},
		{name: "boolean result", input: map[string]any{"expression": "1 > 2"},
			code: tools.CodeInvalidParams, msg: "expected number, but got boolean", field: "expression"},
		{name: "string result", input: map[string]any{"expression": "'abc'"},
			code: tools.CodeInvalidParams, msg: "but got string", field: "expression"},
		{name: "unknown variable", input: map[string]any{"expression": "x + 1"},
			code: tools.CodeInvalidParams, msg: "unknown name x", field: "expression"},
		{name: "non-math builtin disabled", input: map[string]any{"expression": "len('abc')"},
			code: tools.CodeInvalidParams, msg: "unknown name len", field: "expression"},
		{name: "time builtin disabled", input: map[string]any{"expression": "now().Unix()"},
			code: tools.CodeInvalidParams, msg: "unknown name now", field: "expression"},
		{name: "syntax error", input: map[string]any{"expression": "1 +"},
			code: tools.CodeInvalidParams, msg: "unexpected token", field: "expression"},
		{name: "range refused", input: map[string]any{"expression": "max(1..100000000)"},
			code: tools.CodeInvalidParams, msg: "expression", field: "expression"},
		{name: "variable not a number", input: map[string]any{"expression": "a", "variables": map[string]any{"a": true}},
			code: tools.CodeInvalidParams, msg: "want number", field: "variables/a"},
		{name: "bad variable name", input: map[string]any{"expression": "1", "variables": map[string]any{"1a": 1.0}},
			code: tools.CodeInvalidParams, msg: "does not match pattern", field: "variables/1a"},
	})
}

func TestDatetimeNow(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{}) // clock fixed at 2024-05-01T12:30:00Z
	unix := fixedNow.Unix()
	runToolCases(t, r, "datetime_now", []toolCase{
		{name: "defaults", input: map[string]any{},
			want: map[string]any{"iso": "2024-05-01T12:30:00Z", "unix": unix}},
		{name: "zone", input: map[string]any{"timezone": "Europe/Paris"},
			want: map[string]any{"iso": "2024-05-01T14:30:00+02:00", "unix": unix}},
		{name: "zone and layout", input: map[string]any{"timezone": "America/New_York", "format": "2006-01-02 15:04 MST"},
			want: map[string]any{"iso": "2024-05-01 08:30 EDT", "unix": unix}},
		{name: "named layout", input: map[string]any{"timezone": "Asia/Tokyo", "format": "RFC1123"},
			want: map[string]any{"iso": "Wed, 01 May 2024 21:30:00 JST", "unix": unix}},
		{name: "date only", input: map[string]any{"format": "DateOnly"},
			want: map[string]any{"iso": "2024-05-01", "unix": unix}},
		{name: "unknown zone", input: map[string]any{"timezone": "Mars/Olympus"},
			code: tools.CodeInvalidParams, msg: `unknown time zone "Mars/Olympus"`, field: "timezone"},
		{name: "server local zone refused", input: map[string]any{"timezone": "Local"},
			code: tools.CodeInvalidParams, msg: "unknown time zone", field: "timezone"},
		{name: "path traversal", input: map[string]any{"timezone": "../../etc/passwd"},
			code: tools.CodeInvalidParams, msg: "unknown time zone", field: "timezone"},
		{name: "format not a string", input: map[string]any{"format": 3.0},
			code: tools.CodeInvalidParams, msg: "want string", field: "format"},
	})
}

func TestDatetimeNowUsesRealClockByDefault(t *testing.T) {
	t.Parallel()
	r, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Unix()
	out, err := r.Run(t.Context(), "datetime_now", nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := out["unix"].(int64); !ok || u < before || u > time.Now().Unix() {
		t.Fatalf("unix = %#v, want now (%d)", out["unix"], before)
	}
}
