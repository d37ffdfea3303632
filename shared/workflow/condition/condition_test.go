package condition_test

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/workflow/condition"
)

var testEnv = condition.Env{
	Input: map[string][]string{"mode": {"string"}, "limit": {"integer"}, "tags": {"array"}, "any": nil},
	Steps: map[string]map[string][]string{
		"fetch":  {"status": {"number"}, "body": {"string"}, "json": nil, "headers": {"object"}},
		"review": {"approved": {"boolean"}, "values": {"object"}},
		"each":   {"results": {"array"}},
	},
}

func TestCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		src  string
		env  condition.Env
		want string // substring of the error; "" means valid
	}{
		{"fetch.status > 3", testEnv, ""},
		{"fetch.status == 200 and review.approved", testEnv, ""},
		{`input.mode == "full" || len(each.results) > 0`, testEnv, ""},
		{"review.approved", testEnv, ""},
		{"not review.approved", testEnv, ""},
		{"fetch.json", testEnv, ""}, // any: only the run can tell
		{"fetch.json.items[0].ok", testEnv, ""},
		{`fetch["status"] >= 200 && fetch.status < 300`, testEnv, ""},
		{`fetch.body contains "ok" or fetch.body startsWith "x" or fetch.body matches "^a+$"`, testEnv, ""},
		{`lower(trim(fetch.body)) == "yes"`, testEnv, ""},
		{`input.any ?? false`, testEnv, ""},
		{`"a" in input.tags`, testEnv, ""},
		{`fetch.headers["content-type"] == "text/html"`, testEnv, ""},
		{`review.values.note != nil`, testEnv, ""},
		{`input.limit + 1 > 10`, testEnv, ""},
		{`fetch.body + "x" == "yx"`, testEnv, ""},
		{`fetch?.status > 1 ? true : false`, testEnv, ""},
		{"abs(input.limit) > max(1, 2)", testEnv, ""},

		{"", testEnv, "is empty"},
		{"   ", testEnv, "is empty"},
		{strings.Repeat("a", condition.MaxLen+1), testEnv, "longer than 1000 bytes"},
		{"fetch.status >", testEnv, "unexpected"},
		{"step9.result > 3", testEnv, "unknown name step9"},
		{"step9.result > 3", condition.Env{}, "this step has none before it"},
		{"fetch.nope > 3", testEnv, `step fetch has no output "nope"`},
		{"input.nope == 1", testEnv, `the inputSchema has no property "nope"`},
		{"input.x == 1", condition.Env{Steps: testEnv.Steps}, "the workflow has no inputSchema"},
		{"fetch.status + 1", testEnv, "expected bool"},
		{`fetch.body`, testEnv, "expected bool"},
		{`fetch.status > "x"`, testEnv, "mismatched types"},
		{"all(each.results, # > 1)", testEnv, "not available in conditions"},
		{"filter(input.tags, true) == []", testEnv, "not available"},
		{"let x = 1; x > 0", testEnv, "let is not available"},
		{"1..3 == [1, 2, 3]", testEnv, "ranges"},
		{`fetch.body matches input.mode`, testEnv, "literal pattern"},
		{`repeat("x", 9) == ""`, testEnv, "not available"},
		{`toJSON(fetch) != ""`, testEnv, "not available"},
		{`now() > now()`, testEnv, "not available"},
		{`input.tags | len() > 0`, testEnv, ""},
		{`input.tags | filter(true) | len() > 0`, testEnv, "not available"},
		{`fetch.json + 1 == 2`, testEnv, ""}, // any: only the run can tell
		{"fetch.status + 1", testEnv, "expected bool"},
		{`fetch.body + 1 == ""`, testEnv, "mismatched types"},
		{"item.x == 1", testEnv, "unknown name item"},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			t.Parallel()
			err := condition.Check(c.src, c.env)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v", c.src, err)
				}
				if _, err := condition.Compile(c.src); err != nil {
					t.Fatalf("Compile(%q) = %v after Check accepted it", c.src, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !condition.IsError(err) {
				t.Fatalf("Check(%q) = %v, want an *Error with %q", c.src, err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestEval(t *testing.T) {
	t.Parallel()
	input := map[string]any{"mode": "full", "limit": 5.0, "tags": []any{"a", "b"}}
	outputs := map[string]map[string]any{
		"fetch":  {"status": 200.0, "body": " Yes ", "json": map[string]any{"items": []any{map[string]any{"ok": true}}}},
		"review": {"approved": false, "values": map[string]any{}},
	}
	big := strings.Repeat("x", condition.MaxBuilt)
	cases := []struct {
		src     string
		outputs map[string]map[string]any
		want    bool
		errText string
	}{
		{"fetch.status > 3", outputs, true, ""},
		{"review.approved", outputs, false, ""},
		{`input.mode == "full" and "b" in input.tags`, outputs, true, ""},
		{`lower(trim(fetch.body)) == "yes"`, outputs, true, ""},
		{"fetch.json.items[0].ok", outputs, true, ""},
		{"input.limit + 1 == 6", outputs, true, ""},
		{`skipped.result == nil`, outputs, true, ""},           // a step that did not run reads as {}
		{`(skipped?.result ?? "d") == "d"`, outputs, true, ""}, // ?? and ?. work on it too
		{"skipped.result > 3", outputs, false, "evaluating"},
		{"fetch.json", outputs, false, "evaluating"},
		{"input.limit / 0 > 1", outputs, true, ""}, // float division: +Inf
		{`fetch.body + fetch.body != ""`, outputs, true, ""},
		{`fetch.big + "x" != ""`, map[string]map[string]any{"fetch": {"big": big}}, false, "exceed 65536 bytes"},
		{`lower(fetch.big) != ""`, map[string]map[string]any{"fetch": {"big": big + "x"}}, false, "longer than 65536 bytes"},
		{`fetch.status + fetch.body == ""`, outputs, false, "invalid operation"},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			t.Parallel()
			got, err := condition.Eval(c.src, input, c.outputs)
			if c.errText != "" {
				if err == nil || !strings.Contains(err.Error(), c.errText) || !condition.IsError(err) {
					t.Fatalf("Eval(%q) = %v, %v; want an *Error with %q", c.src, got, err, c.errText)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Eval(%q) = %v, %v; want %v", c.src, got, err, c.want)
			}
		})
	}
}

func TestReads(t *testing.T) {
	t.Parallel()
	c, err := condition.Compile(`fetch.status > 1 and input.mode == "x" or len(review.values) > 0 and lower("A") == "a"`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Reads(), []string{"fetch", "input", "review"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Reads = %v, want %v", got, want)
	}
	if _, err := condition.Compile("all([1], # > 0)"); err == nil {
		t.Error("Compile accepted a closure")
	}
}

// BenchmarkEvalLargeValue measures a condition over an 8 MiB output against
// a floor in the same run: the same work done directly in Go (a substring
// search and a count of the runes, which is what len of a string does),
// so the ratio shows what the language adds.
func BenchmarkEvalLargeValue(b *testing.B) {
	body := strings.Repeat("abc ", 2<<20) // 8 MiB
	outputs := map[string]map[string]any{"fetch": {"body": body}}
	c, err := condition.Compile(`fetch.body contains "zzz" or len(fetch.body) == 0`)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("floor", func(b *testing.B) {
		for b.Loop() {
			_ = strings.Contains(body, "zzz") || utf8.RuneCountInString(body) == 0
		}
	})
	b.Run("eval", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Eval(nil, outputs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
