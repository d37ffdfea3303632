package tools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

func js(source string, input any) map[string]any {
	in := map[string]any{"language": "javascript", "source": source}
	if input != nil {
		in["input"] = input
	}
	return in
}

func TestCode(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tools.Config{})
	items := map[string]any{"items": []any{map[string]any{"name": "a", "price": 3.0}, map[string]any{"name": "b", "price": 1.0}}}
	runToolCases(t, r, "code", []toolCase{
		{name: "description example", input: js("return input.items.filter(i => i.price > 2).map(i => i.name);", items),
			want: map[string]any{"result": []any{"a"}}},
		{name: "arithmetic", input: js("return input.a + input.b;", map[string]any{"a": 2, "b": 3}), want: map[string]any{"result": 5}},
		{name: "no input is null", input: js("return input;", nil), want: map[string]any{"result": nil}},
		{name: "object result", input: js("const o = {n: 1, s: 'x', list: [1, null, true], skip: undefined}; return o;", nil),
			want: map[string]any{"result": map[string]any{"n": 1, "s": "x", "list": []any{1, nil, true}}}},
		{name: "date is its ISO text", input: js("return new Date(0);", nil), want: map[string]any{"result": "1970-01-01T00:00:00.000Z"}},
		{name: "string input", input: js("return input.toUpperCase();", "abc"), want: map[string]any{"result": "ABC"}},
		{name: "caught exception", input: js("try { null.x } catch (e) { return e.name }", nil), want: map[string]any{"result": "TypeError"}},
		{name: "no host objects", input: js("return [typeof require, typeof console, typeof process, typeof fetch, typeof setTimeout, typeof XMLHttpRequest];", nil),
			want: map[string]any{"result": []any{"undefined", "undefined", "undefined", "undefined", "undefined", "undefined"}}},

		{name: "throw", input: js("const x = 1;\n  throw new Error('boom');", nil),
			code: tools.CodeToolExecutionFailed, msg: "CODE_EXCEPTION: Error: boom at line 2, column 9"},
		{name: "throw a value", input: js("throw 42", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_EXCEPTION: 42 at line 1, column 1"},
		{name: "type error", input: js("let a;\nreturn a.b;", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_EXCEPTION: TypeError"},
		{name: "syntax error", input: js("return 1;\nlet = ;", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_EXCEPTION: SyntaxError at line 2"},
		{name: "runaway recursion", input: js("function f() { return f() + 1 }\nreturn f();", nil),
			code: tools.CodeToolExecutionFailed, msg: "CODE_EXCEPTION: RangeError"},
		{name: "returns a function", input: js("return function () {};", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_RESULT_INVALID: result is a function"},
		{name: "returns a nested function", input: js("return {a: [1, () => 2]};", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_RESULT_INVALID: result.a[1] is a function"},
		{name: "returns a cycle", input: js("const o = {}; o.self = o; return o;", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_RESULT_INVALID: result.self contains itself"},
		{name: "returns undefined", input: js("const x = 1;", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_RESULT_INVALID: the code returned undefined"},
		{name: "returns a symbol", input: js("return Symbol('s');", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_RESULT_INVALID: result is a symbol"},
		{name: "returns a BigInt", input: js("return {n: 10n};", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_RESULT_INVALID: result.n is a BigInt"},
		{name: "returns a Promise", input: js("return Promise.resolve(5);", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_RESULT_INVALID: result is a Promise"},
		{name: "returns an async function's Promise", input: js("const f = async () => 5; return {v: f()};", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_RESULT_INVALID: result.v is a Promise"},
		{name: "too deep", input: js("let a = 1; for (let i = 0; i < 200; i++) a = [a]; return a;", nil), code: tools.CodeToolExecutionFailed, msg: "nests deeper than 100"},
		{name: "getter that throws", input: js("return {get x() { throw new Error('no') }};", nil), code: tools.CodeToolExecutionFailed, msg: "CODE_EXCEPTION: Error: no"},
		{name: "output over the limit", input: js("return 'x'.repeat(1100000);", nil), code: tools.CodeToolResourceLimit, msg: "CODE_OUTPUT_TOO_LARGE"},
		{name: "many small elements over the limit", input: js("return new Array(2000).fill('x'.repeat(600));", nil), code: tools.CodeToolResourceLimit, msg: "CODE_OUTPUT_TOO_LARGE"},

		{name: "source at the limit", input: js("return 1;"+strings.Repeat(" ", tools.CodeMaxSource-len("return 1;")), nil), want: map[string]any{"result": 1}},
		{name: "source one over the limit", input: js("return 1;"+strings.Repeat(" ", tools.CodeMaxSource-len("return 1;")+1), nil), code: tools.CodeInvalidParams, field: "source"},
		{name: "1 MB source", input: js(strings.Repeat("x", 1<<20), nil), code: tools.CodeInvalidParams, field: "source"},
		{name: "other language", input: map[string]any{"language": "python", "source": "return 1"}, code: tools.CodeInvalidParams, field: "language"},
		{name: "no source", input: map[string]any{"language": "javascript"}, code: tools.CodeInvalidParams, field: "source"},
	})
}

// TestCodeLimits: in a worker, an endless loop stops at the CPU limit and
// a 1 GiB allocation at the worker's memory limit, each its own call's
// failure; the worker pool serves the next call.
func TestCodeLimits(t *testing.T) {
	t.Parallel()
	r := withTimeouts(t, 5*time.Minute).WithSandbox(testSandbox(t))
	tests := []struct {
		name, source, code, msg string
	}{
		{"endless loop", "while (true) {}", tools.CodeToolResourceLimit, "CODE_CPU_LIMIT: the code was stopped after 5s of CPU time"},
		{"endless loop in a catch", "for (;;) { try { throw 1 } catch (e) {} }", tools.CodeToolResourceLimit, "CODE_CPU_LIMIT"},
		// Either bound may end it first: its 5 s of CPU, or on a machine
		// loaded enough that 5 s of CPU take longer, its 15 s.
		{"catastrophic regular expression", "return /^(a+)+(?=b)/.test('a'.repeat(30));", "", ""},
		{"1 GiB string", "return 'x'.repeat(1 << 30).length;", tools.CodeToolResourceLimit, "exceeded its memory limit (128 MiB)"},
		{"growing list of strings", "const a = []; for (let i = 0; ; i++) a.push('x'.repeat(1 << 24) + i);", tools.CodeToolResourceLimit, "exceeded its memory limit (128 MiB)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Run(tools.WithCaller(t.Context(), "code "+tc.name), "code", js(tc.source, nil))
			if tc.code == "" {
				if errs.CodeOf(err) == tools.CodeToolTimeout {
					assertErr(t, err, tools.CodeToolTimeout, "the code did not finish within 15s", "")
				} else {
					assertErr(t, err, tools.CodeToolResourceLimit, "CODE_CPU_LIMIT", "")
				}
				return
			}
			assertErr(t, err, tc.code, tc.msg, "")
		})
	}
	out, err := r.Run(t.Context(), "code", js("return 6 * 7;", nil))
	if err != nil || jsonOf(t, out) != `{"result":42}` {
		t.Fatalf("after the limits: %v, %v", out, err)
	}
}
