package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"

	"github.com/workflowchat/service/shared/errs"
)

// CodeID is the id of the code tool: a JavaScript function body run on
// its input.
const CodeID = "code"

// Limits of the code tool (docs/limits.md).
const (
	// CodeMaxSource bounds a source, in characters (the schema's
	// maxLength): room for a long hand-written transformation, far below
	// the size of a step's inputs.
	CodeMaxSource = 100_000
	// CodeCPULimit is the CPU time one run may use; the worker's own
	// kernel limit (SandboxCPULimit) is the backstop.
	CodeCPULimit = 5 * time.Second
	// CodeMaxOutput bounds the returned value's JSON, in bytes.
	CodeMaxOutput = 1 << 20
	// CodeMaxDepth bounds the nesting of the returned value.
	CodeMaxDepth = 100
	// codeMaxCallStack bounds the JavaScript call stack, so that runaway
	// recursion is a RangeError the code reports rather than a worker
	// that runs out of memory.
	codeMaxCallStack = 10_000
	// codeTimeout is the tool's wall-clock bound: the CPU limit with room
	// for a loaded machine.
	codeTimeout = 15 * time.Second
	// codeCheckEvery is how often the watchdog reads the CPU time.
	codeCheckEvery = 10 * time.Millisecond
)

// Codes at the start of the code tool's failure messages, so that a
// step's error (its message) says which failure it is.
const (
	// CodeException: the source did not parse, or threw.
	CodeException = "CODE_EXCEPTION"
	// CodeBadResult: the returned value is not JSON (undefined, a
	// function, a symbol, a BigInt, a cycle, too deep).
	CodeBadResult = "CODE_RESULT_INVALID"
	// CodeCPU: the run used its CPU time.
	CodeCPU = "CODE_CPU_LIMIT"
	// CodeOutput: the returned value's JSON is over CodeMaxOutput.
	CodeOutput = "CODE_OUTPUT_TOO_LARGE"
)

func codeTool() *Tool {
	return &Tool{
		ID:       CodeID,
		Name:     "Run JavaScript",
		Category: CategoryData,
		Description: "Runs a JavaScript function body (ECMAScript 5.1 with most of ES6) on its input and returns what the body returns. " +
			"Fields: language (\"javascript\"), source (the body of a function whose parameter is input; end it with return), " +
			"input (any JSON value, e.g. an earlier step's output). " +
			"The output field result is the returned value, which must be JSON: undefined, functions, symbols, BigInts and cycles are errors. " +
			"Only the language's own objects exist (Math, JSON, Date, RegExp, ...): no network, no files, no timers, no console. " +
			"At most 5 seconds of CPU time, 128 MiB of memory and 1 MiB of result; a thrown exception fails the call with its line and column. " +
			`Example: {"language": "javascript", "source": "return input.items.filter(i => i.price > 2).map(i => i.name);", "input": {"items": [{"name": "a", "price": 3}, {"name": "b", "price": 1}]}} returns {"result": ["a"]}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "language": {"type": "string", "enum": ["javascript"], "description": "The language of source: javascript."},
    "source": {
      "type": "string", "minLength": 1, "maxLength": 100000,
      "description": "The body of a function of input; return gives the result. Example: \"return input.a + input.b;\"",
      "examples": ["return input.a + input.b;", "return input.items.map(i => i.name);"]
    },
    "input": {"description": "The value the body sees as input; any JSON value.", "default": null}
  },
  "required": ["language", "source"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "result": {"description": "The value the source returned (any JSON value)."}
  },
  "required": ["result"],
  "additionalProperties": false
}`),
		// It computes from its input only: Date and Math.random are the
		// only things that differ between runs, and they change nothing.
		Annotations: computeOnly(),
		Isolated:    true,
		Timeout:     codeTimeout,
		Run:         runCode,
	}
}

// codePrefix wraps a source as a function of input; it takes one line, so
// a position in the wrapped text is one line below the source's.
const (
	codePrefix = "(function (input) {\n"
	codeSuffix = "\n})"
)

// runCode runs input "source" with input "input" in a fresh JavaScript
// runtime, under a watchdog that interrupts it once this process has
// spent CodeCPULimit of CPU time since the start or ctx ends. It fails
// with a message starting CODE_EXCEPTION (a syntax error or an uncaught
// exception, with its line and column), CODE_CPU_LIMIT,
// CODE_RESULT_INVALID or CODE_OUTPUT_TOO_LARGE; or with ctx's error.
// Its memory is bounded only by the worker process it runs in.
func runCode(ctx context.Context, in map[string]any) (map[string]any, error) {
	source, err := stringArg(in, "source", true, "")
	if err != nil {
		return nil, err
	}
	if n := len([]rune(source)); n > CodeMaxSource {
		return nil, invalidField("source", "the source has %d characters, more than the %d allowed", n, CodeMaxSource)
	}
	boundRegexps()
	ast, err := parser.ParseFile(nil, "code", codePrefix+source+codeSuffix, 0, parser.WithDisableSourceMaps)
	if err != nil {
		return nil, syntaxError(err)
	}
	prg, err := goja.CompileAST(ast, true)
	if err != nil {
		return nil, codeFailure(CodeException, "%s", strings.TrimPrefix(err.Error(), "SyntaxError: "))
	}

	vm := goja.New()
	vm.SetMaxCallStackSize(codeMaxCallStack)
	started := time.Now()
	stop := watch(ctx, vm)
	defer stop()

	fn, err := vm.RunProgram(prg)
	if err != nil {
		return nil, runError(ctx, err)
	}
	call, ok := goja.AssertFunction(fn)
	if !ok {
		return nil, codeFailure(CodeException, "the source is not a function body")
	}
	arg, err := jsValue(vm, in["input"])
	if err != nil {
		return nil, err
	}
	ret, err := call(goja.Undefined(), arg)
	if err != nil {
		return nil, runError(ctx, err)
	}
	if ctx.Err() != nil || time.Since(started) >= codeTimeout {
		// A regular expression match may have run out of its time, which
		// the engine reports as no match: what the code did next is not
		// to be trusted.
		return nil, &errs.Error{Kind: errs.Timeout, Code: CodeToolTimeout,
			Message: fmt.Sprintf("the code did not finish within %s", codeTimeout), Err: ctx.Err()}
	}
	res, err := exportResult(ctx, vm, ret)
	if err != nil {
		return nil, err
	}
	return map[string]any{"result": res}, nil
}

// boundRegexps bounds every regular expression match of the engine to
// the tool's timeout. A match runs in Go, where an interrupt is not seen
// until it returns, and goja's engine for the patterns RE2 cannot run
// (regexp2, with lookaround or backreferences) backtracks: a catastrophic
// pattern never returned. In a worker the pool kills it at the deadline;
// in process (tests) the bound ends it. The engine reports a match that
// timed out as no match, so runCode fails a run that lasted the tool's
// timeout (TOOL_TIMEOUT) whatever it returned. The bound is wall time:
// the CPU limit cannot reach inside a match. Set once, before the first
// runtime, as the engine reads it when it compiles a pattern.
var boundRegexps = sync.OnceFunc(func() { regexp2.DefaultMatchTimeout = codeTimeout })

// codeInterrupt is the value a watchdog interrupts a runtime with.
type codeInterrupt struct{ reason string }

// watch interrupts vm once the process has spent CodeCPULimit of CPU time
// from now, or ctx ends; stop ends the watch.
func watch(ctx context.Context, vm *goja.Runtime) (stop func()) {
	start := cpuTime()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(codeCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				vm.Interrupt(codeInterrupt{"deadline"})
				return
			case <-t.C:
				if cpuTime()-start >= CodeCPULimit {
					vm.Interrupt(codeInterrupt{"cpu"})
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// cpuLimit is the failure of a run stopped at CodeCPULimit.
func cpuLimit() error {
	return &errs.Error{Kind: errs.Internal, Code: CodeToolResourceLimit,
		Message: fmt.Sprintf("%s: the code was stopped after %s of CPU time", CodeCPU, CodeCPULimit)}
}

// codeFailure is a failure of the code, its message starting with code.
func codeFailure(code, format string, args ...any) error {
	return &errs.Error{Kind: errs.Internal, Code: CodeToolExecutionFailed, Message: code + ": " + fmt.Sprintf(format, args...)}
}

// syntaxError reports the first parse error at its place in the source.
func syntaxError(err error) error {
	var list parser.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		p := list[0].Position
		return codeFailure(CodeException, "SyntaxError at line %d, column %d: %s", max(p.Line-1, 1), p.Column, list[0].Message)
	}
	return codeFailure(CodeException, "SyntaxError: %v", err)
}

// runError maps an error of running the code: an interrupt (the CPU limit,
// or ctx's end), a stack overflow, or an exception, with the line and
// column where it was thrown.
func runError(ctx context.Context, err error) error {
	var intr *goja.InterruptedError
	if errors.As(err, &intr) {
		if r, ok := intr.Value().(codeInterrupt); ok && r.reason == "cpu" {
			return cpuLimit()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	var overflow *goja.StackOverflowError
	if errors.As(err, &overflow) {
		return codeFailure(CodeException, "RangeError: the call stack exceeded %d frames%s", codeMaxCallStack, where(overflow.Stack()))
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return codeFailure(CodeException, "%s%s", exceptionText(ex), where(ex.Stack()))
	}
	return codeFailure(CodeException, "%v", err)
}

// exceptionText is a thrown value as text, bounded.
func exceptionText(ex *goja.Exception) (s string) {
	defer func() {
		if recover() != nil {
			s = "an exception that cannot be shown"
		}
	}()
	if v := ex.Value(); v != nil {
		s = v.String()
	}
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return s
}

// where is " at line L, column C" of the innermost frame of the source.
func where(stack []goja.StackFrame) string {
	for _, f := range stack {
		if f.SrcName() != "code" {
			continue
		}
		p := f.Position()
		if p.Line > 1 {
			return fmt.Sprintf(" at line %d, column %d", p.Line-1, p.Column)
		}
	}
	return ""
}

// jsValue is the input as the code sees it: JSON's values, through
// JSON.parse, so that objects and arrays are plain JavaScript ones.
func jsValue(vm *goja.Runtime, v any) (goja.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, invalidField("input", "the input is not JSON")
	}
	parse, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	out, err := parse(goja.Undefined(), vm.ToValue(string(b)))
	if err != nil {
		return nil, codeFailure(CodeException, "the input cannot be read: %v", err)
	}
	return out, nil
}

// exportResult checks that v is JSON (see checkJSON), then returns it as
// Go values through JSON.stringify (which applies toJSON, so that a Date
// is its ISO text), bounded to CodeMaxOutput.
func exportResult(ctx context.Context, vm *goja.Runtime, v goja.Value) (_ any, err error) {
	// A getter or a proxy the check reads runs code, which may throw or
	// be interrupted: goja panics with that out of a read made from Go.
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(error)
			if !ok {
				e = fmt.Errorf("%v", p)
			}
			err = runError(ctx, e)
		}
	}()
	if goja.IsUndefined(v) {
		return nil, codeFailure(CodeBadResult, "the code returned undefined; end it with return and a JSON value")
	}
	var size int
	if err := checkJSON(vm, v, map[*goja.Object]bool{}, "result", 0, &size); err != nil {
		return nil, err
	}
	stringify, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	s, err := stringify(goja.Undefined(), v)
	if err != nil {
		return nil, runError(ctx, err)
	}
	if goja.IsUndefined(s) {
		return nil, codeFailure(CodeBadResult, "the returned value has no JSON form")
	}
	text := s.String()
	if len(text) > CodeMaxOutput {
		return nil, &errs.Error{Kind: errs.Internal, Code: CodeToolResourceLimit,
			Message: fmt.Sprintf("%s: the returned value's JSON has %d bytes, more than the %d allowed", CodeOutput, len(text), CodeMaxOutput)}
	}
	var out any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, codeFailure(CodeBadResult, "the returned value has no JSON form")
	}
	return out, nil
}

// checkJSON refuses a value JSON cannot carry faithfully: a function, a
// symbol, a BigInt or a Promise anywhere, a value that contains itself, nesting
// deeper than CodeMaxDepth. It also refuses, without building it, a value
// whose strings and keys alone pass CodeMaxOutput. path names the place
// for the message.
func checkJSON(vm *goja.Runtime, v goja.Value, open map[*goja.Object]bool, path string, depth int, size *int) error {
	if depth > CodeMaxDepth {
		return codeFailure(CodeBadResult, "%s nests deeper than %d levels", path, CodeMaxDepth)
	}
	*size++ // the value's separator, at least
	if *size > CodeMaxOutput {
		return &errs.Error{Kind: errs.Internal, Code: CodeToolResourceLimit,
			Message: fmt.Sprintf("%s: the returned value is larger than the %d bytes allowed", CodeOutput, CodeMaxOutput)}
	}
	if _, sym := v.(*goja.Symbol); sym {
		return codeFailure(CodeBadResult, "%s is a symbol, which JSON cannot carry", path)
	}
	switch e := v.Export().(type) {
	case string:
		*size += len(e)
		return nil
	case *big.Int:
		return codeFailure(CodeBadResult, "%s is a BigInt, which JSON cannot carry", path)
	case float64:
		if math.IsInf(e, 0) || math.IsNaN(e) {
			return nil // JSON.stringify makes it null, as JSON allows
		}
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return nil
	}
	if _, fn := goja.AssertFunction(obj); fn {
		return codeFailure(CodeBadResult, "%s is a function, which JSON cannot carry", path)
	}
	if _, promise := obj.Export().(*goja.Promise); promise {
		// JSON.stringify would make it {}: the code wanted its value.
		return codeFailure(CodeBadResult, "%s is a Promise; the code runs to its end at once (no await, no asynchronous results): return the value itself", path)
	}
	if open[obj] {
		return codeFailure(CodeBadResult, "%s contains itself (a cycle), which JSON cannot carry", path)
	}
	if obj.Get("toJSON") != nil && !goja.IsUndefined(obj.Get("toJSON")) {
		return nil // a Date, or an object that says its own JSON form
	}
	open[obj] = true
	defer delete(open, obj)
	if obj.ClassName() == "Array" {
		n := obj.Get("length").ToInteger()
		if n > CodeMaxOutput {
			return &errs.Error{Kind: errs.Internal, Code: CodeToolResourceLimit,
				Message: fmt.Sprintf("%s: %s has %d elements, more than the %d bytes allowed can hold", CodeOutput, path, n, CodeMaxOutput)}
		}
		for i := int64(0); i < n; i++ {
			if err := checkJSON(vm, obj.Get(strconv.FormatInt(i, 10)), open, fmt.Sprintf("%s[%d]", path, i), depth+1, size); err != nil {
				return err
			}
		}
		return nil
	}
	for _, k := range obj.Keys() {
		*size += len(k) + 3 // the key, quoted, and its colon
		x := obj.Get(k)
		if x == nil || goja.IsUndefined(x) {
			continue // JSON leaves the property out
		}
		if err := checkJSON(vm, x, open, path+"."+k, depth+1, size); err != nil {
			return err
		}
	}
	return nil
}
