package tools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
)

func mathEvaluateTool() *Tool {
	return &Tool{
		ID:       "math_evaluate",
		Name:     "Evaluate math expression",
		Category: CategoryMath,
		Description: "Evaluates an arithmetic expression and returns its numeric value. Use it instead of doing arithmetic yourself. " +
			"Fields: expression (operators + - * / % and ** or ^ for powers, parentheses, comparisons with a ternary cond ? a : b; " +
			"functions abs, ceil, floor, round, min, max, sqrt, cbrt, pow, exp, log (natural), log2, log10, sin, cos, tan, asin, acos, atan, atan2, hypot, trunc; constants pi and e), " +
			"variables (an object of named numbers the expression can use). All arithmetic is in 64-bit floating point; the result must be a finite number. " +
			`Example: {"expression": "round(price * (1 + rate) * 100) / 100", "variables": {"price": 19.99, "rate": 0.2}} returns {"value": 23.99}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "expression": {"type": "string", "minLength": 1, "maxLength": 10000, "description": "The expression, e.g. \"(a + b) / 2\", \"sqrt(x ** 2 + y ** 2)\", \"max(a, b) * 1.1\".", "examples": ["(a + b) / 2"]},
    "variables": {
      "type": "object", "default": {},
      "description": "Named numbers for the expression, e.g. {\"a\": 3, \"b\": 5}. Names are letters, digits and underscores, not starting with a digit; they override the constants pi and e.",
      "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
      "additionalProperties": {"type": "number"}
    }
  },
  "required": ["expression"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "value": {"type": "number", "description": "The value of the expression."}
  },
  "required": ["value"],
  "additionalProperties": false
}`),
		Annotations: computeOnly(),
		Isolated:    true,
		Timeout:     5 * time.Second,
		Run:         runMathEvaluate,
	}
}

// runMathEvaluate evaluates input "expression" with input "variables". It
// fails with INVALID_PARAMS when a variable is not a number or the
// expression does not compile (bad syntax, an unknown name or function, a
// result that is not a number), and with an execution failure when
// evaluation fails or the result is not finite (division by zero).
func runMathEvaluate(_ context.Context, in map[string]any) (map[string]any, error) {
	src, err := stringArg(in, "expression", true, "")
	if err != nil {
		return nil, err
	}
	vars, err := objectArg(in, "variables")
	if err != nil {
		return nil, err
	}
	env := map[string]any{"pi": math.Pi, "e": math.E}
	for name, v := range vars {
		f, ok := toFloat(v)
		if !ok {
			return nil, invalidField("variables/"+name, "must be a number")
		}
		env[name] = f
	}

	opts := []expr.Option{
		expr.Env(env),
		expr.AsFloat64(),
		expr.DisableAllBuiltins(),
		expr.Patch(floatLiterals{}), // float arithmetic everywhere: no silent integer overflow
		expr.Function("mod", float2(math.Mod), new(func(float64, float64) float64)),
		expr.Operator("%", "mod"),
	}
	for _, name := range []string{"abs", "ceil", "floor", "round", "min", "max"} {
		opts = append(opts, expr.EnableBuiltin(name))
	}
	for name, f := range map[string]func(float64) float64{
		"sqrt": math.Sqrt, "cbrt": math.Cbrt, "exp": math.Exp, "log": math.Log, "log2": math.Log2, "log10": math.Log10,
		"sin": math.Sin, "cos": math.Cos, "tan": math.Tan, "asin": math.Asin, "acos": math.Acos, "atan": math.Atan,
		"trunc": math.Trunc,
	} {
		opts = append(opts, expr.Function(name, float1(f), new(func(float64) float64)))
	}
	for name, f := range map[string]func(float64, float64) float64{"pow": math.Pow, "atan2": math.Atan2, "hypot": math.Hypot} {
		opts = append(opts, expr.Function(name, float2(f), new(func(float64, float64) float64)))
	}

	program, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, invalidField("expression", "%s", exprMessage(err))
	}
	out, err := expr.Run(program, env)
	if err != nil {
		return nil, errors.New("evaluation failed: " + exprMessage(err))
	}
	value, ok := toFloat(out)
	if !ok {
		return nil, fmt.Errorf("the expression's value is %s, not a number", withArticle(jsonTypeOfValue(out)))
	}
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return nil, errors.New("the result is not a finite number (division by zero, or a function outside its domain such as sqrt(-1) or log(0))")
	}
	return map[string]any{"value": value}, nil
}

// floatLiterals is an expr AST patch that turns integer literals into
// floats, so that all arithmetic is done in float64.
type floatLiterals struct{}

// Visit implements ast.Visitor.
func (floatLiterals) Visit(node *ast.Node) {
	if n, ok := (*node).(*ast.IntegerNode); ok {
		ast.Patch(node, &ast.FloatNode{Value: float64(n.Value)})
	}
}

// float1 adapts a one-argument math function to expr's function type; the
// typed signature given with it lets expr check and convert the argument.
func float1(f func(float64) float64) func(...any) (any, error) {
	return func(args ...any) (any, error) {
		x, ok := toFloat(args[0])
		if !ok {
			return nil, fmt.Errorf("the argument is %s, not a number", withArticle(jsonTypeOfValue(args[0])))
		}
		return f(x), nil
	}
}

// float2 adapts a two-argument math function to expr's function type.
func float2(f func(float64, float64) float64) func(...any) (any, error) {
	return func(args ...any) (any, error) {
		x, ok1 := toFloat(args[0])
		y, ok2 := toFloat(args[1])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("the arguments are %s and %s, not two numbers", withArticle(jsonTypeOfValue(args[0])), withArticle(jsonTypeOfValue(args[1])))
		}
		return f(x, y), nil
	}
}
