package dynamolocal

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/truora/minidyn/interpreter"
	"github.com/truora/minidyn/interpreter/language"
	"github.com/truora/minidyn/types"
)

// The layer evaluates expressions with minidyn's interpreter, as minidyn
// does (interpreter.Language's Match, Update and Project), but parses
// each expression once: the parsed forms are kept in a bounded cache
// (exprs), keyed by the kind of parse and the expression's text, and
// shared by every request that sends the same expression. minidyn's
// evaluation only reads the syntax tree (its values live in the
// evaluation's environment), so one tree serves concurrent readers; the
// answers and error messages are minidyn's, word for word.

// exprKind is how an expression is parsed.
type exprKind uint8

const (
	exprCondition  exprKind = iota // ConditionExpression, FilterExpression, KeyConditionExpression
	exprUpdate                     // UpdateExpression
	exprProjection                 // ProjectionExpression
)

// parsedExpr is one parsed expression, never changed once cached.
type parsedExpr struct {
	errs        []string                        // the parser's errors
	unsupported bool                            // exprUpdate: the parser found an action minidyn does not support
	cond        *language.ConditionalExpression // exprCondition
	update      *language.UpdateStatement       // exprUpdate
	proj        []language.Expression           // exprProjection
	// removes are the top-level attributes an update REMOVEs, as
	// written (placeholders unresolved; see topLevelRemoves).
	removes []string
	// names are the #name placeholders the expression uses, each once,
	// in the order they first appear (as
	// language.UndeclaredExpressionAttributeNames reads them).
	names []string
	cost  int // estimated bytes held, for the cache's bound
}

// exprCost estimates the bytes a parsed expression of n characters
// holds: its text, tokens and syntax tree (measured at about 40 bytes of
// heap per character for typical expressions, TestExprCacheCostEstimate),
// with a margin.
func exprCost(n int) int { return 512 + 64*n }

func parseExpr(kind exprKind, text string) *parsedExpr {
	pe := &parsedExpr{cost: exprCost(len(text))}
	switch kind {
	case exprCondition:
		p := language.NewParser(language.NewLexer(text))
		pe.cond = p.ParseConditionalExpression()
		pe.errs = p.Errors()
	case exprUpdate:
		p := language.NewUpdateParser(language.NewLexer(text))
		pe.update = p.ParseUpdateExpression()
		pe.errs = p.Errors()
		pe.unsupported = p.IsUnsupportedExpression()
		pe.removes = topLevelRemoves(text, nil)
	case exprProjection:
		p := language.NewParser(language.NewLexer(text))
		pe.proj = p.ParseProjectionExpression()
		pe.errs = p.Errors()
	}
	l := language.NewLexer(text)
	seen := map[string]bool{}
	for tok := l.NextToken(); tok.Type != language.EOF; tok = l.NextToken() {
		if tok.Type == language.IDENT && strings.HasPrefix(tok.Literal, "#") && !seen[tok.Literal] {
			seen[tok.Literal] = true
			pe.names = append(pe.names, tok.Literal)
		}
	}
	return pe
}

// undeclared is interpreter.ValidateExpressionAttributeNamesDeclared on
// the cached placeholders: the first #name aliases does not declare.
func (pe *parsedExpr) undeclared(label string, aliases map[string]string) error {
	for _, n := range pe.names {
		if _, ok := aliases[n]; !ok {
			return fmt.Errorf("Invalid %s: An expression attribute name used in the document path is not defined; attribute name: %s", label, n) //nolint:staticcheck // minidyn's wording
		}
	}
	return nil
}

// Bounds of the expression cache: an application sends a few dozen
// distinct expressions, generated ones (a value's name in the text) can
// be many, so the oldest are forgotten beyond these.
const (
	maxCachedExprs     = 4096
	maxCachedExprBytes = 4 << 20
)

type exprKey struct {
	kind exprKind
	text string
}

// exprCache is a bounded cache of parsed expressions, safe for
// concurrent use. Beyond its bounds it forgets the entries it cached
// first (a FIFO: cheap, and an expression in use is parsed again at
// most once per round of the ring).
type exprCache struct {
	mu       sync.Mutex
	m        map[exprKey]*parsedExpr
	fifo     []exprKey // insertion order, ring of len(m) live keys from head
	head     int
	bytes    int
	maxN     int
	maxBytes int
}

func newExprCache(maxN, maxBytes int) *exprCache {
	return &exprCache{m: map[exprKey]*parsedExpr{}, maxN: maxN, maxBytes: maxBytes}
}

// exprs is the process's expression cache: parsing depends only on the
// text, so every engine shares it.
var exprs = newExprCache(maxCachedExprs, maxCachedExprBytes)

// get returns text parsed as kind, from the cache or parsed now (and
// then cached when it fits the bounds).
func (c *exprCache) get(kind exprKind, text string) *parsedExpr {
	k := exprKey{kind, text}
	c.mu.Lock()
	pe, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return pe
	}
	pe = parseExpr(kind, text)
	if pe.cost > c.maxBytes {
		return pe
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok { // parsed meanwhile by another request
		return old
	}
	for len(c.m) > 0 && (len(c.m) >= c.maxN || c.bytes+pe.cost > c.maxBytes) {
		old := c.fifo[c.head]
		c.fifo[c.head] = exprKey{}
		c.head++
		c.bytes -= c.m[old].cost
		delete(c.m, old)
	}
	if c.head > 0 && c.head >= len(c.fifo)/2 {
		c.fifo = append(c.fifo[:0], c.fifo[c.head:]...)
		c.head = 0
	}
	c.m[k] = pe
	c.fifo = append(c.fifo, k)
	c.bytes += pe.cost
	return pe
}

// stats returns the number of cached expressions and their estimated
// bytes.
func (c *exprCache) stats() (n, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}

// addItem adds item's attributes to env for evaluating pe as a condition
// or projection. Those evaluations read attributes only by names the
// expression or its aliases spell (an identifier, an alias, a part of a
// dotted path), so an attribute whose name appears in neither is left
// out; it is still checked to be convertible, so that an item minidyn
// cannot evaluate fails as it would with every attribute converted.
func addItem(env *language.Environment, text string, aliases map[string]string, item map[string]*types.Item) error {
	for name, v := range item {
		if !mentioned(name, text, aliases) {
			if convertible(v) {
				continue
			}
		}
		obj, err := language.MapToObject(v)
		if err != nil {
			return err
		}
		env.Set(name, obj)
	}
	return nil
}

// mentioned reports whether name, or the name it is set under (env.Set
// resolves an alias), appears in text or in an alias.
func mentioned(name, text string, aliases map[string]string) bool {
	in := func(n string) bool {
		if strings.Contains(text, n) {
			return true
		}
		for _, a := range aliases {
			if strings.Contains(a, n) {
				return true
			}
		}
		return false
	}
	if a, ok := aliases[name]; ok && in(a) {
		return true
	}
	return in(name)
}

// parsesAsFloat reports whether language.MapToObject reads s as a number.
func parsesAsFloat(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// convertible reports whether language.MapToObject converts v without
// an error.
func convertible(v *types.Item) bool {
	switch {
	case v == nil:
		return false
	case v.BOOL != nil, v.S != nil:
		return true
	case v.N != nil:
		return parsesAsFloat(*v.N)
	case v.NULL != nil && *v.NULL:
		return true
	case len(v.B) != 0:
		return true
	case v.M != nil:
		for _, e := range v.M {
			if !convertible(e) {
				return false
			}
		}
		return true
	case v.L != nil:
		for _, e := range v.L {
			if !convertible(e) {
				return false
			}
		}
		return true
	case v.SS != nil, v.BS != nil:
		return true
	case v.NS != nil:
		for _, s := range v.NS {
			if !parsesAsFloat(types.StringValue(s)) {
				return false
			}
		}
		return true
	}
	return false
}

// evalCondition is interpreter.Language.Match on the cached parse of
// expr: whether item (nil: absent) satisfies it, or minidyn's error.
func evalCondition(typ interpreter.ExpressionType, expr string, names map[string]string, values, item map[string]*types.Item) (bool, error) {
	pe := exprs.get(exprCondition, expr)
	key := typ == interpreter.ExpressionTypeKey
	if len(pe.errs) != 0 {
		if key {
			return false, fmt.Errorf("Invalid KeyConditionExpression: %w; %s", interpreter.ErrSyntaxError, strings.Join(pe.errs, "; ")) //nolint:staticcheck // minidyn's wording
		}
		return false, fmt.Errorf("%w: %s", interpreter.ErrSyntaxError, strings.Join(pe.errs, "\n"))
	}
	if pe.cond.Expression == nil {
		if key {
			return false, fmt.Errorf("Invalid KeyConditionExpression: %w; empty expression", interpreter.ErrSyntaxError) //nolint:staticcheck // minidyn's wording
		}
		return false, fmt.Errorf("%w: empty expression", interpreter.ErrSyntaxError)
	}
	if err := pe.undeclared(matchLabel(typ), names); err != nil {
		return false, err
	}
	env := language.NewEnvironment()
	for k, v := range names {
		env.Aliases[k] = v
	}
	if err := addItem(env, expr, names, item); err != nil {
		return false, fmt.Errorf("%w: %s", interpreter.ErrUnsupportedFeature, err.Error())
	}
	if err := env.AddAttributes(values); err != nil {
		return false, fmt.Errorf("%w: %s", interpreter.ErrUnsupportedFeature, err.Error())
	}
	result := language.Eval(pe.cond, env)
	if result.Type() == language.ObjectTypeError {
		if key {
			return false, fmt.Errorf("Invalid KeyConditionExpression: %w; %s", interpreter.ErrSyntaxError, result.Inspect()) //nolint:staticcheck // minidyn's wording
		}
		return false, fmt.Errorf("%w: %s", interpreter.ErrSyntaxError, result.Inspect())
	}
	return result == language.TRUE, nil
}

func matchLabel(t interpreter.ExpressionType) string {
	switch t {
	case interpreter.ExpressionTypeKey:
		return "KeyConditionExpression"
	case interpreter.ExpressionTypeFilter:
		return "FilterExpression"
	}
	return "ConditionExpression"
}

// evalUpdate is interpreter.Language.Update on the cached parse of expr:
// it changes item in place (its map: every attribute is replaced by a
// new value, none is changed in place), or returns minidyn's error.
func evalUpdate(expr string, names map[string]string, values, item map[string]*types.Item) error {
	pe := exprs.get(exprUpdate, expr)
	aliases := make(map[string]string, len(names))
	for k, v := range names {
		aliases[k] = v
	}
	env := language.NewEnvironment()
	env.Aliases = aliases
	if len(pe.errs) != 0 {
		errType := interpreter.ErrSyntaxError
		if pe.unsupported {
			errType = interpreter.ErrUnsupportedFeature
		}
		return fmt.Errorf("%w: %s", errType, strings.Join(pe.errs, "\n"))
	}
	if err := pe.undeclared("UpdateExpression", aliases); err != nil {
		return err
	}
	// Every attribute: Apply writes the whole environment back.
	if err := env.AddAttributes(item); err != nil {
		return fmt.Errorf("%w: %s", interpreter.ErrUnsupportedFeature, err.Error())
	}
	attributes := make(map[string]bool, len(values))
	for key := range values {
		attributes[key] = true
	}
	if err := env.AddAttributes(values); err != nil {
		return fmt.Errorf("%w: %s", interpreter.ErrUnsupportedFeature, err.Error())
	}
	result := language.EvalUpdate(pe.update, env)
	if result.Type() == language.ObjectTypeError {
		if errObj, ok := result.(*language.Error); ok {
			return errors.New(errObj.Message)
		}
		return errors.New(result.Inspect())
	}
	env.Apply(item, aliases, attributes)
	return nil
}

// evalProjection is interpreter.Language.Project on the cached parse of
// expr: the attributes of item the projection names.
func evalProjection(expr string, names map[string]string, item map[string]*types.Item) (map[string]*types.Item, error) {
	pe := exprs.get(exprProjection, expr)
	if len(pe.errs) != 0 {
		return nil, fmt.Errorf("Invalid ProjectionExpression: %w; %s", interpreter.ErrSyntaxError, strings.Join(pe.errs, "\n")) //nolint:staticcheck // minidyn's wording
	}
	if err := pe.undeclared("ProjectionExpression", names); err != nil {
		return nil, err
	}
	env := language.NewEnvironment()
	for k, v := range names {
		env.Aliases[k] = v
	}
	if err := addItem(env, expr, names, item); err != nil {
		return nil, fmt.Errorf("%w: %s", interpreter.ErrUnsupportedFeature, err.Error())
	}
	out := map[string]*types.Item{}
	for _, e := range pe.proj {
		result := language.Eval(e, env)
		if language.IsUndefinedObject(result) {
			continue
		}
		if result.Type() == language.ObjectTypeError {
			return nil, fmt.Errorf("%w: %s", interpreter.ErrSyntaxError, result.Inspect())
		}
		path, err := language.ExtractPath(e, env)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", interpreter.ErrSyntaxError, err.Error())
		}
		val := result.ToDynamoDB()
		language.SetProjectedPath(out, path, val)
	}
	return out, nil
}

// updateTargetsKey is language.ValidateUpdateExpressionDoesNotTargetPrimaryKey
// on the cached parse of expr: an error when an action's target is the
// hash or range key attribute; nil when it parses with errors (the
// evaluation reports those).
func updateTargetsKey(expr string, aliases map[string]string, hashKey, rangeKey string) error {
	if strings.TrimSpace(expr) == "" {
		return nil
	}
	pe := exprs.get(exprUpdate, expr)
	if len(pe.errs) != 0 || pe.update.Expression == nil {
		return nil
	}
	var hit string
	walkUpdateTargets(pe.update.Expression, aliases, func(root string) {
		if hit == "" && (root == hashKey || (rangeKey != "" && root == rangeKey)) {
			hit = root
		}
	})
	if hit == "" {
		return nil
	}
	return fmt.Errorf("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", hit) //nolint:staticcheck // DynamoDB's wording
}

func walkUpdateTargets(expr language.Expression, aliases map[string]string, visit func(root string)) {
	switch n := expr.(type) {
	case *language.UpdateExpression:
		for _, sub := range n.Expressions {
			walkUpdateTargets(sub, aliases, visit)
		}
	case *language.ActionExpression:
		if root, ok := updateRoot(n.Left, aliases); ok {
			visit(root)
		}
	}
}

func updateRoot(expr language.Expression, aliases map[string]string) (string, bool) {
	switch n := expr.(type) {
	case *language.Identifier:
		if r, ok := aliases[n.Value]; ok {
			return r, true
		}
		return n.Value, true
	case *language.IndexExpression:
		return updateRoot(n.Left, aliases)
	}
	return "", false
}
