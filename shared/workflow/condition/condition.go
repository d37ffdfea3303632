// Package condition is the language of a workflow step's `if`: an
// expression in the syntax of github.com/expr-lang/expr (the library
// math_evaluate uses) over the run's input and the earlier steps'
// outputs, e.g. `step1.result > 3`, `input.mode == "full" and
// len(fetch.rows) > 0`, `review.approved`. Check validates one when a
// definition is written; Compile and Eval run it before the step.
//
// The language is expr without loops, so that evaluating an expression
// costs at most a few passes over the values it reads and never more
// memory than they take (it runs in the run engine's own process):
//   - names: input (the run's input; input.<property>), and the ids of
//     earlier steps (<step>.<output>); members with . ?. or [...];
//   - literals (numbers, strings, booleans, nil, arrays, maps), the
//     operators of expr (arithmetic, comparison, and/or/not, in,
//     contains, startsWith, endsWith, matches with a literal pattern,
//     ?:, ??, slices [a:b], pipes to the functions below); "+" on
//     strings and arrays builds at most
//     MaxBuilt bytes;
//   - the functions len, abs, ceil, floor, round, int, float, min, max,
//     hasPrefix, hasSuffix, indexOf, lastIndexOf, first, last, get,
//     type, and lower, upper, trim (on strings of at most MaxBuilt
//     bytes);
//   - not: closures and the functions that take them (all, any, filter,
//     map, reduce, ...), # pointers, let, ";" sequences, ranges (a..b),
//     and every other function.
//
// The result must be a boolean: Check refuses an expression whose type
// is known and not bool, and Eval fails on a value that is not a bool.
// A step that did not run (skipped) reads as an empty object, so
// `step1.result` is nil for it; nil compared with < or > is an error.
// The current forEach element is not in scope: `if` decides whether the
// step runs at all.
package condition

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
	"github.com/expr-lang/expr/vm/runtime"
)

// Bounds of the language.
const (
	// MaxLen bounds an expression, in bytes.
	MaxLen = 1000
	// MaxBuilt bounds the strings and arrays an expression builds ("+",
	// lower, upper, trim), in bytes or elements.
	MaxBuilt = 64 << 10
	// maxNodes bounds the expression's syntax tree.
	maxNodes = 300
	// memoryBudget bounds the VM's own allocations.
	memoryBudget = 1 << 16
)

// InputName is the name the run's input has in an expression.
const InputName = "input"

// allowedFuncs are the functions an expression may call.
var allowedFuncs = map[string]bool{
	"len": true, "abs": true, "ceil": true, "floor": true, "round": true, "int": true, "float": true,
	"min": true, "max": true, "hasPrefix": true, "hasSuffix": true, "indexOf": true, "lastIndexOf": true,
	"first": true, "last": true, "get": true, "type": true,
	"lower": true, "upper": true, "trim": true, // bounded versions, below
}

// Env names what an expression may read, with JSON types where known
// (one or several of "string", "number", "integer", "boolean", "array",
// "object", "null"; none: any).
type Env struct {
	// Input holds the input schema's top-level properties; nil when the
	// workflow has no input schema (input is then an empty object, and
	// input.<name> is refused).
	Input map[string][]string
	// Steps holds the earlier steps' outputs, by step id.
	Steps map[string]map[string][]string
}

// Error is a problem of an expression, with a client-safe message.
type Error struct{ Message string }

func (e *Error) Error() string { return e.Message }

func failf(format string, args ...any) error { return &Error{Message: fmt.Sprintf(format, args...)} }

// Check validates src against env: its length, syntax and the language
// above; every name (input, an earlier step) and every member of them
// that can be known (an input property, a step's output); the types
// where known (`fetch.status > "x"` is refused when status is a number);
// and that the result is a boolean when its type is known. The error is
// an *Error saying what is wrong.
func Check(src string, env Env) error {
	tree, err := parse(src)
	if err != nil {
		return err
	}
	if err := checkNames(tree, env); err != nil {
		return err
	}
	typed := map[string]any{InputName: typedValue(env.Input)}
	for id, outs := range env.Steps {
		typed[id] = typedValue(outs)
	}
	if _, err := expr.Compile(src, options(typed, false)...); err != nil {
		return failf("%s", firstLine(err.Error()))
	}
	return nil
}

// Condition is a compiled expression, ready to evaluate during runs.
type Condition struct {
	src     string
	program *vm.Program
	reads   []string
}

// Compile compiles src for Eval, without types (every name and member is
// any: the types were checked when the definition was written). Errors:
// *Error for a length, syntax or language problem.
func Compile(src string) (*Condition, error) {
	tree, err := parse(src)
	if err != nil {
		return nil, err
	}
	reads := roots(tree)
	env := map[string]any{}
	for _, name := range reads {
		env[name] = map[string]any{}
	}
	program, err := expr.Compile(src, options(env, true)...)
	if err != nil {
		return nil, failf("%s", firstLine(err.Error()))
	}
	return &Condition{src: src, program: program, reads: reads}, nil
}

// Reads returns the names the expression reads: InputName and step ids,
// sorted.
func (c *Condition) Reads() []string { return slices.Clone(c.reads) }

// String returns the expression.
func (c *Condition) String() string { return c.src }

// Eval evaluates the condition on the run's input and the outputs of the
// steps that ran (a step absent from outputs, e.g. skipped, reads as an
// empty object). Errors: *Error when evaluation fails (nil < 3, a
// division by zero, a string built past MaxBuilt) or the value is not a
// boolean.
func (c *Condition) Eval(input map[string]any, outputs map[string]map[string]any) (bool, error) {
	env := make(map[string]any, len(c.reads))
	for _, name := range c.reads {
		var v map[string]any
		if name == InputName {
			v = input
		} else {
			v = outputs[name]
		}
		if v == nil {
			v = map[string]any{}
		}
		env[name] = v
	}
	machine := vm.VM{MemoryBudget: memoryBudget}
	out, err := machine.Run(c.program, env)
	if err != nil {
		return false, failf("evaluating %q: %s", c.src, firstLine(err.Error()))
	}
	b, ok := out.(bool)
	if !ok {
		return false, failf("%q is %v (%T), not a boolean", c.src, out, out)
	}
	return b, nil
}

// Eval compiles and evaluates src (see Compile and Condition.Eval).
func Eval(src string, input map[string]any, outputs map[string]map[string]any) (bool, error) {
	c, err := Compile(src)
	if err != nil {
		return false, err
	}
	return c.Eval(input, outputs)
}

// parse parses src and checks it against the language.
func parse(src string) (*parser.Tree, error) {
	switch {
	case strings.TrimSpace(src) == "":
		return nil, failf("is empty")
	case len(src) > MaxLen:
		return nil, failf("is longer than %d bytes", MaxLen)
	case !utf8.ValidString(src):
		return nil, failf("is not valid UTF-8")
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, failf("%s", firstLine(err.Error()))
	}
	l := &language{}
	ast.Walk(&tree.Node, l)
	if l.err != nil {
		return nil, l.err
	}
	if l.nodes > maxNodes {
		return nil, failf("is too complex (more than %d parts)", maxNodes)
	}
	return tree, nil
}

// language is the visitor that refuses what the language leaves out.
type language struct {
	nodes int
	err   error
}

func (l *language) Visit(node *ast.Node) {
	l.nodes++
	if l.err != nil {
		return
	}
	switch n := (*node).(type) {
	case *ast.NilNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.StringNode, *ast.ConstantNode,
		*ast.IdentifierNode, *ast.MemberNode, *ast.ChainNode, *ast.UnaryNode, *ast.ConditionalNode,
		*ast.ArrayNode, *ast.MapNode, *ast.PairNode, *ast.SliceNode:
	case *ast.BinaryNode:
		switch n.Operator {
		case "..":
			l.err = failf("ranges (a..b) are not available in conditions")
		case "matches":
			if _, ok := n.Right.(*ast.StringNode); !ok {
				l.err = failf("matches takes a literal pattern (a string in quotes)")
			}
		}
	case *ast.BuiltinNode:
		if !allowedFuncs[n.Name] {
			l.err = failf("function %s is not available in conditions (available: %s)", n.Name, funcList())
		}
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok || !allowedFuncs[id.Value] {
			l.err = failf("only the functions %s can be called in conditions", funcList())
		}
	case *ast.PredicateNode, *ast.PointerNode:
		l.err = failf("closures and # are not available in conditions (no all, any, filter, map, ...)")
	case *ast.VariableDeclaratorNode:
		l.err = failf("let is not available in conditions")
	case *ast.SequenceNode:
		l.err = failf("sequences (;) are not available in conditions")
	default:
		l.err = failf("%T is not available in conditions", n)
	}
}

func funcList() string { return strings.Join(slices.Sorted(maps.Keys(allowedFuncs)), ", ") }

// roots returns the names an expression reads (identifiers that are not
// called), sorted.
func roots(tree *parser.Tree) []string {
	seen := map[string]bool{}
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		switch t := n.(type) {
		case *ast.IdentifierNode:
			seen[t.Value] = true
		case *ast.CallNode:
			for _, a := range t.Arguments {
				walk(a)
			}
			return
		}
		forChildren(n, walk)
	}
	walk(tree.Node)
	return slices.Sorted(maps.Keys(seen))
}

// forChildren calls f on each child of n.
func forChildren(n ast.Node, f func(ast.Node)) {
	switch t := n.(type) {
	case *ast.UnaryNode:
		f(t.Node)
	case *ast.BinaryNode:
		f(t.Left)
		f(t.Right)
	case *ast.ChainNode:
		f(t.Node)
	case *ast.MemberNode:
		f(t.Node)
		f(t.Property)
	case *ast.SliceNode:
		f(t.Node)
		if t.From != nil {
			f(t.From)
		}
		if t.To != nil {
			f(t.To)
		}
	case *ast.CallNode:
		f(t.Callee)
		for _, a := range t.Arguments {
			f(a)
		}
	case *ast.BuiltinNode:
		for _, a := range t.Arguments {
			f(a)
		}
	case *ast.ConditionalNode:
		f(t.Cond)
		f(t.Exp1)
		f(t.Exp2)
	case *ast.ArrayNode:
		for _, e := range t.Nodes {
			f(e)
		}
	case *ast.MapNode:
		for _, p := range t.Pairs {
			f(p)
		}
	case *ast.PairNode:
		f(t.Key)
		f(t.Value)
	}
}

// checkNames checks every name the expression reads, and the members of
// names whose members are known.
func checkNames(tree *parser.Tree, env Env) error {
	var err error
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		if err != nil {
			return
		}
		switch t := n.(type) {
		case *ast.IdentifierNode:
			err = checkRoot(t.Value, env)
			return
		case *ast.CallNode:
			for _, a := range t.Arguments {
				walk(a)
			}
			return
		case *ast.MemberNode:
			if root, ok := t.Node.(*ast.IdentifierNode); ok {
				if prop, ok := t.Property.(*ast.StringNode); ok {
					if err = checkRoot(root.Value, env); err == nil {
						err = checkMember(root.Value, prop.Value, env)
					}
					return
				}
			}
		}
		forChildren(n, walk)
	}
	walk(tree.Node)
	return err
}

func checkRoot(name string, env Env) error {
	if name == InputName {
		return nil
	}
	if _, ok := env.Steps[name]; ok {
		return nil
	}
	earlier := slices.Sorted(maps.Keys(env.Steps))
	if len(earlier) == 0 {
		return failf("unknown name %s: a condition reads input and earlier steps, and this step has none before it", name)
	}
	return failf("unknown name %s: a condition reads input and the earlier steps (%s)", name, strings.Join(earlier, ", "))
}

func checkMember(root, member string, env Env) error {
	if root == InputName {
		if env.Input == nil {
			return failf("input.%s: the workflow has no inputSchema", member)
		}
		if _, ok := env.Input[member]; !ok {
			return failf("input.%s: the inputSchema has no property %q (properties: %s)", member, member, strings.Join(slices.Sorted(maps.Keys(env.Input)), ", "))
		}
		return nil
	}
	outs := env.Steps[root]
	if _, ok := outs[member]; !ok {
		return failf("%s.%s: step %s has no output %q (outputs: %s)", root, member, root, member, strings.Join(slices.Sorted(maps.Keys(outs)), ", "))
	}
	return nil
}

// options are the compile options of Check (bounded false) and Compile
// (bounded true).
func options(env map[string]any, bounded bool) []expr.Option {
	opts := []expr.Option{
		expr.Env(env),
		expr.AsBool(),
		expr.MaxNodes(maxNodes * 2),
		expr.DisableAllBuiltins(),
		expr.EnableBuiltin("len"), expr.EnableBuiltin("abs"), expr.EnableBuiltin("ceil"), expr.EnableBuiltin("floor"),
		expr.EnableBuiltin("round"), expr.EnableBuiltin("int"), expr.EnableBuiltin("float"), expr.EnableBuiltin("min"),
		expr.EnableBuiltin("max"), expr.EnableBuiltin("hasPrefix"), expr.EnableBuiltin("hasSuffix"),
		expr.EnableBuiltin("indexOf"), expr.EnableBuiltin("lastIndexOf"), expr.EnableBuiltin("first"),
		expr.EnableBuiltin("last"), expr.EnableBuiltin("get"), expr.EnableBuiltin("type"),
		expr.Function("lower", boundedString(strings.ToLower), new(func(string) string)),
		expr.Function("upper", boundedString(strings.ToUpper), new(func(string) string)),
		expr.Function("trim", boundedString(strings.TrimSpace), new(func(string) string)),
	}
	if bounded {
		// At run time "+" bounds what it builds; when checking, the
		// native operator's types are what matter.
		opts = append(opts, expr.Function(addFunc, add), expr.Patch(boundedAdd{}))
	}
	return opts
}

// addFunc is the function every "+" becomes (boundedAdd).
const addFunc = "__add"

// boundedAdd turns a + b into __add(a, b), which bounds what it builds.
type boundedAdd struct{}

func (boundedAdd) Visit(node *ast.Node) {
	if n, ok := (*node).(*ast.BinaryNode); ok && n.Operator == "+" {
		ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: addFunc}, Arguments: []ast.Node{n.Left, n.Right}})
	}
}

// add is "+": numbers add, strings and arrays concatenate up to MaxBuilt
// bytes or elements.
func add(args ...any) (result any, err error) {
	a, b := args[0], args[1]
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			if len(x)+len(y) > MaxBuilt {
				return nil, fmt.Errorf("a string built by + would exceed %d bytes", MaxBuilt)
			}
			return x + y, nil
		}
	}
	if x, ok := a.([]any); ok {
		if y, ok := b.([]any); ok {
			if len(x)+len(y) > MaxBuilt {
				return nil, fmt.Errorf("an array built by + would exceed %d elements", MaxBuilt)
			}
			return slices.Concat(x, y), nil
		}
	}
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, fmt.Errorf("invalid operation: %v + %v", describe(a), describe(b))
		}
	}()
	return runtime.Add(a, b), nil
}

func describe(v any) string {
	if v == nil {
		return "nil"
	}
	return reflect.TypeOf(v).String()
}

// boundedString adapts a string function to expr, refusing strings over
// MaxBuilt bytes.
func boundedString(f func(string) string) func(...any) (any, error) {
	return func(args ...any) (any, error) {
		s, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("%s is not a string", describe(args[0]))
		}
		if len(s) > MaxBuilt {
			return nil, fmt.Errorf("the string is longer than %d bytes", MaxBuilt)
		}
		return f(s), nil
	}
}

var anyType = reflect.TypeFor[any]()

// typedValue returns a zero struct value whose fields (tagged with the
// names of fields) have the Go types of their JSON types, for Check's
// type checking; nil fields gives an empty object.
func typedValue(fields map[string][]string) any {
	if fields == nil {
		return map[string]any{}
	}
	names := slices.Sorted(maps.Keys(fields))
	sf := make([]reflect.StructField, 0, len(names))
	for i, name := range names {
		sf = append(sf, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: goType(fields[name]), Tag: reflect.StructTag(fmt.Sprintf(`expr:%q`, name))})
	}
	return reflect.New(reflect.StructOf(sf)).Elem().Interface()
}

func goType(types []string) reflect.Type {
	if len(types) != 1 {
		return anyType
	}
	switch types[0] {
	case "string":
		return reflect.TypeFor[string]()
	case "number", "integer":
		return reflect.TypeFor[float64]()
	case "boolean":
		return reflect.TypeFor[bool]()
	case "array":
		return reflect.TypeFor[[]any]()
	case "object":
		return reflect.TypeFor[map[string]any]()
	}
	return anyType
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// IsError reports whether err is a problem of an expression (an *Error).
func IsError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
