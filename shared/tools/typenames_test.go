package tools_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

// goLeak matches what a user must not read in a tool's error: a Go type
// name, or the name of a helper the tools use internally.
var goLeak = regexp.MustCompile(`map\[string\]|\[\]interface|interface \{\}|\bfloat64\b|\bbool\b|slice/array|__wfc|executing "template"|template: template`)

// TestErrorsNameJSONTypes: the type errors of math_evaluate (expr) and
// text_template (text/template) name JSON's types, the ones the caller
// knows, and no error names an internal helper; the user's own text in a
// message (a variable named int, the quoted expression) is kept as
// written. In process and in a worker.
func TestErrorsNameJSONTypes(t *testing.T) {
	t.Parallel()
	// Long timeouts: the step cap's million steps take seconds under the
	// race detector on a loaded machine.
	plain := withTimeouts(t, 2*time.Minute)
	tests := []struct {
		tool  string
		input map[string]any
		code  string
		want  []string // substrings of the message
	}{
		{"math_evaluate", map[string]any{"expression": "x > 0 ? {} : 1", "variables": map[string]any{"x": 1}},
			tools.CodeToolExecutionFailed, []string{"the expression's value is an object, not a number", "x > 0 ? {} : 1"}},
		{"math_evaluate", map[string]any{"expression": `x > 0 ? "s" : 1`, "variables": map[string]any{"x": 1}},
			tools.CodeToolExecutionFailed, []string{"the expression's value is a string, not a number"}},
		{"math_evaluate", map[string]any{"expression": "{a: 1}"},
			tools.CodeInvalidParams, []string{"expected number, but got object"}},
		{"math_evaluate", map[string]any{"expression": "[1, 2]"},
			tools.CodeInvalidParams, []string{"expected number, but got array"}},
		{"math_evaluate", map[string]any{"expression": "abs({})"},
			tools.CodeInvalidParams, []string{"invalid argument for abs (type object)"}},
		{"math_evaluate", map[string]any{"expression": "sqrt([1])"},
			tools.CodeInvalidParams, []string{"cannot use array as argument (type number) to call sqrt"}},
		{"math_evaluate", map[string]any{"expression": "int + true", "variables": map[string]any{"int": 1}},
			tools.CodeInvalidParams, []string{"mismatched types number and boolean", "int + true"}},
		{"math_evaluate", map[string]any{"expression": "int + 1"},
			tools.CodeInvalidParams, []string{"unknown name int"}},
		{"math_evaluate", map[string]any{"expression": "x.y", "variables": map[string]any{"x": 1}},
			tools.CodeInvalidParams, []string{"type number has no field y"}},
		{"text_template", map[string]any{"template": `{{join .s ","}}`, "values": map[string]any{"s": "abc"}},
			tools.CodeToolExecutionFailed, []string{"line 1, column 7, at {{.s}}: wrong type for value; expected array; got string"}},
		{"text_template", map[string]any{"template": "{{len .n}}", "values": map[string]any{"n": 1.5}},
			tools.CodeToolExecutionFailed, []string{"at {{len .n}}: error calling len: len of type number"}},
		{"text_template", map[string]any{"template": "{{upper .b}}", "values": map[string]any{"b": true}},
			tools.CodeToolExecutionFailed, []string{"expected string; got boolean"}},
		{"text_template", map[string]any{"template": `{{index .l "a"}}`, "values": map[string]any{"l": []any{1}}},
			tools.CodeToolExecutionFailed, []string{"cannot index array with type string"}},
		{"text_template", map[string]any{"template": "{{eq .l 1}}", "values": map[string]any{"l": []any{1}}},
			tools.CodeToolExecutionFailed, []string{"incompatible types for comparison: array and number"}},
		{"text_template", map[string]any{"template": "{{.s.x}}", "values": map[string]any{"s": "abc"}},
			tools.CodeToolExecutionFailed, []string{"can't evaluate field x: the value is not an object"}},
		{"text_template", map[string]any{"template": "{{.float64}}", "values": map[string]any{}},
			tools.CodeToolExecutionFailed, []string{`at {{.float64}}: map has no entry for key "float64"`}},
		{"text_template", map[string]any{"template": `{{range 2000}}{{range 1000}}{{end}}{{end}}`},
			tools.CodeToolExecutionFailed, []string{"the template runs more than 1000000 loop iterations and template calls"}},
		{"text_template", map[string]any{"template": "{{frob}}"},
			tools.CodeInvalidParams, []string{`line 1: function "frob" not defined`}},
	}
	for _, v := range []struct {
		name string
		r    *tools.Registry
	}{{"in process", plain}, {"isolated", plain.WithSandbox(testSandbox(t))}} {
		for _, tc := range tests {
			_, err := v.r.Run(t.Context(), tc.tool, tc.input)
			if errs.CodeOf(err) != tc.code {
				t.Errorf("%s: %s %v: %v, want %s", v.name, tc.tool, tc.input, err, tc.code)
				continue
			}
			msg := errs.MessageOf(err, "")
			for _, d := range errDetails(err) {
				msg += " | " + d.Message
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: %s %v: message %q, want it to contain %q", v.name, tc.tool, tc.input, msg, w)
				}
			}
			// The user's own key "float64" is theirs to read.
			own := strings.NewReplacer(".float64", "", `"float64"`, "")
			if leak := goLeak.FindString(own.Replace(msg)); leak != "" {
				t.Errorf("%s: %s %v: message %q names %q", v.name, tc.tool, tc.input, msg, leak)
			}
		}
	}
}
