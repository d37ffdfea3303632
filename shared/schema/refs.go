package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// The library's validator recurses once per schema it applies, with no
// bound of its own: a reference cycle it can follow without moving into
// the value ({"$ref": "#"}) recurses until the stack overflows, which
// kills the process, and so does a value nested deep enough under a long
// chain of references. CheckRefs refuses the first and measures the
// second, so that no schema Compile accepts can exhaust the stack.

// maxFrames bounds the validator's recursion: each frame takes about 4 KiB
// of stack, far below Go's 1 GiB limit even for many validations at once.
const maxFrames = 1 << 14

// ErrRefCycle is wrapped by Compile's and CheckRefs' error for a schema
// that applies itself to the same value again: a "$ref" (or "$dynamicRef")
// back to itself or an enclosing schema through keywords that apply to
// the value in place (allOf, anyOf, oneOf, not, if, then, else,
// dependentSchemas) rather than to one of its properties or items.
var ErrRefCycle = errors.New("reference cycle that never descends into the value")

// ErrCostly is wrapped by Compile's and CheckRefs' error for a schema
// that applies more than MaxInPlace schemas to one value: each in-place
// keyword ("$ref", allOf, anyOf ...) applies its schemas to the value
// again, so a chain of them that branches ({"allOf": [{"$ref": "#/$defs/b"},
// {"$ref": "#/$defs/b"}]} with b doing the same, and so on) doubles the
// work at each link: 30 links, 2 KB of schema, take a quarter of an hour.
var ErrCostly = errors.New("too costly to validate")

const (
	// MaxInPlace bounds the schemas one schema may apply to one value, in
	// place, itself included (its cost): 1 plus the costs of the schemas
	// its in-place keywords apply.
	MaxInPlace = 10_000
	// MaxWork bounds the schema applications one validation may make, over
	// all of the value: a value that would take more is refused before it
	// is validated. A million take about a quarter of a second.
	MaxWork = 1 << 20
)

// Nesting bounds the values a schema may validate: how many levels of
// arrays and objects the validator can descend through without risking
// the stack, and how many schema applications it may make in all.
type Nesting struct {
	depth int
	// work[k] is the most schemas applied to one value k levels under the
	// top (k up to depth; past len(work) they repeat with period every).
	work  []int64
	every int
	// defaults is what validating every default against its schema
	// costs, in schema applications.
	defaults int64
}

// Depth returns how many levels of arrays and objects n allows.
func (n Nesting) Depth() int { return n.depth }

// CheckDepth returns an error when v, a decoded JSON value, nests deeper
// than n allows.
func (n Nesting) CheckDepth(v any) error {
	if deeper(v, n.depth) {
		return fmt.Errorf("value nests more than %d levels of arrays and objects deep", n.depth)
	}
	return nil
}

// CheckDefaults returns an error when validating the schema's defaults,
// each against the schema it is the default of, could take more than
// MaxWork schema applications.
func (n Nesting) CheckDefaults() error {
	if n.defaults > MaxWork {
		return fmt.Errorf("defaults would take more than %d schema applications to validate", MaxWork)
	}
	return nil
}

// Check returns an error when v, a decoded JSON value, nests deeper than n
// allows, or when validating it could take more than MaxWork schema
// applications.
func (n Nesting) Check(v any) error {
	if err := n.CheckDepth(v); err != nil {
		return err
	}
	var total int64
	if !n.within(v, 0, &total) {
		return fmt.Errorf("value is too large to validate against this schema: it would take more than %d schema applications", MaxWork)
	}
	return nil
}

// within adds to total the schemas applied to v, at depth k, and to
// everything under it, and reports whether total stays within MaxWork.
func (n Nesting) within(v any, k int, total *int64) bool {
	*total = satAdd(*total, n.at(k))
	if *total > MaxWork {
		return false
	}
	switch x := v.(type) {
	case []any:
		if n.zeroFrom(k + 1) {
			return true
		}
		for _, e := range x {
			if !n.within(e, k+1, total) {
				return false
			}
		}
	case map[string]any:
		if n.zeroFrom(k + 1) {
			return true
		}
		for _, e := range x {
			if !n.within(e, k+1, total) {
				return false
			}
		}
	}
	return true
}

// at returns the most schemas applied to one value k levels deep.
func (n Nesting) at(k int) int64 {
	if k < len(n.work) {
		return n.work[k]
	}
	if n.every == 0 {
		return 0
	}
	last := len(n.work) - n.every
	return n.work[last+(k-last)%n.every]
}

// zeroFrom reports whether no schema applies to any value k or more
// levels deep.
func (n Nesting) zeroFrom(k int) bool { return n.every == 0 && k >= len(n.work) }

// deeper reports whether v nests more than n levels of arrays and objects.
func deeper(v any, n int) bool {
	switch x := v.(type) {
	case []any:
		if n <= 0 {
			return true
		}
		for _, e := range x {
			if deeper(e, n-1) {
				return true
			}
		}
	case map[string]any:
		if n <= 0 {
			return true
		}
		for _, e := range x {
			if deeper(e, n-1) {
				return true
			}
		}
	}
	return false
}

// satAdd adds without overflowing: past 1<<62 the sum stays there.
func satAdd(a, b int64) int64 {
	const top = 1 << 62
	if a >= top-b {
		return top
	}
	return a + b
}

// satMul multiplies non-negative numbers as satAdd adds them.
func satMul(a, b int64) int64 {
	const top = 1 << 62
	if a != 0 && b > top/a {
		return top
	}
	return a * b
}

// levels returns how many values v holds at each depth, v itself at 0,
// up to depth.
func levels(v any, k, depth int, out []int64) []int64 {
	if k > depth {
		return out
	}
	if k == len(out) {
		out = append(out, 0)
	}
	out[k]++
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = levels(e, k+1, depth, out)
		}
	case map[string]any:
		for _, e := range x {
			out = levels(e, k+1, depth, out)
		}
	}
	return out
}

// CheckRefs checks the references of root, which root.Resolve has
// resolved without error: it resolves each "$ref" and "$dynamicRef" as the
// library does and fails (ErrRefCycle, naming the schemas of the cycle by
// their JSON pointers) when following references and in-place keywords
// can come back to a schema without descending into a property or an
// item, and (ErrCostly, naming it) when a schema applies more than
// MaxInPlace schemas to one value. Otherwise it returns how deep the
// values that root validates may nest and how much validating them costs.
func CheckRefs(root *jsonschema.Schema) (Nesting, error) {
	g, err := newRefGraph(root)
	if err != nil {
		return Nesting{}, err
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[*jsonschema.Schema]int{}
	chain := map[*jsonschema.Schema]int{} // the most schemas applied in place from here, itself included
	next := map[*jsonschema.Schema][]*jsonschema.Schema{}
	var post []*jsonschema.Schema // every schema after those it applies in place
	var stack []*jsonschema.Schema
	var visit func(*jsonschema.Schema) error
	visit = func(s *jsonschema.Schema) error {
		switch state[s] {
		case open:
			loop := append(slices.Clone(stack[slices.Index(stack, s):]), s)
			names := make([]string, len(loop))
			for i, l := range loop {
				names[i] = "#" + g.path[l]
			}
			return fmt.Errorf("%w: %s", ErrRefCycle, strings.Join(names, " -> "))
		case done:
			return nil
		}
		state[s] = open
		stack = append(stack, s)
		ts, err := g.inPlace(s)
		if err != nil {
			return err
		}
		next[s] = ts
		longest := 0
		for _, t := range ts {
			if err := visit(t); err != nil {
				return err
			}
			longest = max(longest, chain[t])
		}
		chain[s] = longest + 1
		stack = stack[:len(stack)-1]
		state[s] = done
		post = append(post, s)
		return nil
	}
	longest := 1
	for _, s := range g.order {
		if err := visit(s); err != nil {
			return Nesting{}, err
		}
		longest = max(longest, chain[s])
	}
	depth := max(1, min(maxDepth, maxFrames/longest))
	n, err := g.cost(root, post, next, depth)
	if err != nil {
		return Nesting{}, err
	}
	return n, nil
}

// cost returns the Nesting of root: for k from 0 up to depth, the most
// schemas root applies to one value k levels under the top (all the
// levels when they repeat from some point on: the last every of them
// then repeat forever), and the cost of validating the defaults. It fails
// when a schema's cost, the schemas it applies in place to one value,
// itself included, is over MaxInPlace. post lists every schema after
// those next says it applies in place.
//
// The cost of applying s to the values k+1 levels under a value is that
// of applying, k levels under each child of the value, the schemas that
// s and every schema it applies in place apply to the child: one
// property's (the most costly: a child is one property), every pattern's
// and additionalProperties, or one item's, contains and
// unevaluatedItems; plus propertyNames on the child's name. An upper
// bound, as the library may apply less (additionalProperties applies only
// to the properties nothing else does, a failed allOf stops ...).
func (g *refGraph) cost(root *jsonschema.Schema, post []*jsonschema.Schema,
	next map[*jsonschema.Schema][]*jsonschema.Schema, depth int) (Nesting, error) {
	id := make(map[*jsonschema.Schema]int, len(post))
	for i, s := range post {
		id[s] = i
	}
	ids := func(l ...*jsonschema.Schema) []int {
		var out []int
		for _, s := range l {
			if s != nil {
				out = append(out, id[s])
			}
		}
		return out
	}
	type node struct {
		inPlace           []int
		oneProp, allProps []int // applied to a property's value: the most costly of the first, all of the second
		oneItem, allItems []int // the same for an item
		names             []int // applied to each property's name
	}
	nodes := make([]node, len(post))
	for i, s := range post {
		n := &nodes[i]
		n.inPlace = ids(next[s]...)
		n.oneProp = ids(slices.Collect(maps.Values(s.Properties))...)
		n.allProps = ids(append(slices.Collect(maps.Values(s.PatternProperties)), s.AdditionalProperties, s.UnevaluatedProperties)...)
		n.oneItem = ids(append(append(slices.Clone(s.PrefixItems), s.ItemsArray...), s.Items, s.AdditionalItems)...)
		n.allItems = ids(s.Contains, s.UnevaluatedItems)
		n.names = ids(s.PropertyNames)
	}
	// cur[i] is the most schemas post[i] applies to one value k levels
	// under the one it applies to; for k = 0, its cost.
	cur := make([]int64, len(post))
	for i := range post {
		c := int64(1)
		for _, t := range nodes[i].inPlace {
			c = satAdd(c, cur[t])
		}
		if c > MaxInPlace {
			return Nesting{}, fmt.Errorf("%w: the schema at #%s applies more than %d schemas to one value in place (through $ref, allOf, anyOf, oneOf, not, if, then, else, dependentSchemas or $dynamicRef)",
				ErrCostly, g.path[post[i]], MaxInPlace)
		}
		cur[i] = c
	}
	costs := slices.Clone(cur)
	// The values of the defaults at each depth, by schema; a default that
	// does not decode is the library's to refuse.
	defaults := map[int][]int64{}
	deepest := 0
	for i, s := range post {
		var d any
		if s.Default != nil && json.Unmarshal(s.Default, &d) == nil {
			defaults[i] = levels(d, 0, depth, nil)
			deepest = max(deepest, len(defaults[i])-1)
		}
	}
	n := Nesting{depth: depth}
	r := id[root]
	n.work = []int64{cur[r]}
	addDefaults := func(k int, w []int64) {
		for i, l := range defaults {
			if k < len(l) {
				n.defaults = satAdd(n.defaults, satMul(l[k], w[i]))
			}
		}
	}
	addDefaults(0, cur)
	var prev []int64
	for k := 1; k <= depth; k++ {
		below := make([]int64, len(post))
		nonzero := false
		for i := range post {
			n := &nodes[i]
			var prop, item int64
			for _, t := range n.oneProp {
				prop = max(prop, cur[t])
			}
			for _, t := range n.allProps {
				prop = satAdd(prop, cur[t])
			}
			if k == 1 {
				for _, t := range n.names {
					prop = satAdd(prop, costs[t])
				}
			}
			for _, t := range n.oneItem {
				item = max(item, cur[t])
			}
			for _, t := range n.allItems {
				item = satAdd(item, cur[t])
			}
			c := max(prop, item)
			for _, t := range n.inPlace {
				c = satAdd(c, below[t])
			}
			below[i] = c
			nonzero = nonzero || c != 0
		}
		n.work = append(n.work, below[r])
		addDefaults(k, below)
		if k >= deepest {
			switch {
			case !nonzero:
				n.work = n.work[:len(n.work)-1]
				for len(n.work) > 0 && n.work[len(n.work)-1] == 0 {
					n.work = n.work[:len(n.work)-1]
				}
				return n, nil
			case slices.Equal(below, cur):
				n.every = 1
				return n, nil
			case slices.Equal(below, prev):
				n.every = 2
				return n, nil
			}
		}
		prev, cur = cur, below
	}
	return n, nil
}

// refGraph holds what resolving references takes, computed as the
// library's Resolve computes it: every schema's location, its base (the
// nearest enclosing schema with an $id, or the root), the base URIs and
// the anchors of each base.
type refGraph struct {
	draft7  bool
	order   []*jsonschema.Schema          // every schema, parents first
	path    map[*jsonschema.Schema]string // JSON pointer from the root
	at      map[string]*jsonschema.Schema // by path
	base    map[*jsonschema.Schema]*jsonschema.Schema
	uri     map[*jsonschema.Schema]*url.URL // of each base
	docs    map[string]*jsonschema.Schema   // bases by URI
	anchors map[*jsonschema.Schema]map[string]anchor
	dynamic map[string][]*jsonschema.Schema // schemas by $dynamicAnchor
}

type anchor struct {
	s       *jsonschema.Schema
	dynamic bool
}

func newRefGraph(root *jsonschema.Schema) (*refGraph, error) {
	g := &refGraph{
		draft7:  root.Schema == draft7 || root.Schema == draft7s,
		path:    map[*jsonschema.Schema]string{},
		at:      map[string]*jsonschema.Schema{},
		base:    map[*jsonschema.Schema]*jsonschema.Schema{},
		uri:     map[*jsonschema.Schema]*url.URL{},
		docs:    map[string]*jsonschema.Schema{},
		anchors: map[*jsonschema.Schema]map[string]anchor{},
		dynamic: map[string][]*jsonschema.Schema{},
	}
	start, err := url.Parse(baseURI)
	if err != nil {
		return nil, err
	}
	g.uri[root] = start
	g.docs[start.String()] = root
	var visit func(s, base *jsonschema.Schema, path string) error
	visit = func(s, base *jsonschema.Schema, path string) error {
		if _, seen := g.path[s]; seen {
			return fmt.Errorf("schema at #%s appears more than once", path)
		}
		g.order = append(g.order, s)
		g.path[s], g.at[path] = path, s
		// A draft-07 $id beside a $ref is ignored, as everything is there.
		if s.ID != "" && !(g.draft7 && s.Ref != "") {
			id, err := url.Parse(s.ID)
			if err != nil {
				return fmt.Errorf("$id at #%s: %w", path, err)
			}
			if g.draft7 && id.Fragment != "" {
				g.anchor(base, strings.TrimPrefix(s.ID, "#"), s, false)
			} else {
				u := g.uri[base].ResolveReference(id)
				g.uri[s] = u
				g.docs[u.String()] = s
				base = s
			}
		}
		g.base[s] = base
		if !g.draft7 {
			g.anchor(base, s.Anchor, s, false)
			g.anchor(base, s.DynamicAnchor, s, true)
		}
		var err error
		children(s, func(name string, c *jsonschema.Schema) {
			if err == nil {
				err = visit(c, base, path+"/"+name)
			}
		})
		return err
	}
	if err := visit(root, root, ""); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *refGraph) anchor(base *jsonschema.Schema, name string, s *jsonschema.Schema, dynamic bool) {
	if name == "" {
		return
	}
	if g.anchors[base] == nil {
		g.anchors[base] = map[string]anchor{}
	}
	if _, dup := g.anchors[base][name]; !dup {
		g.anchors[base][name] = anchor{s, dynamic}
	}
	if dynamic {
		g.dynamic[name] = append(g.dynamic[name], s)
	}
}

// inPlace returns the schemas the library applies to the same value as s
// after s itself.
func (g *refGraph) inPlace(s *jsonschema.Schema) ([]*jsonschema.Schema, error) {
	var out []*jsonschema.Schema
	if s.Ref != "" {
		t, _, err := g.resolve(s, s.Ref)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if g.draft7 {
			return out, nil // draft-07 ignores the keywords beside a $ref
		}
	}
	if s.DynamicRef != "" {
		t, name, err := g.resolve(s, s.DynamicRef)
		if err != nil {
			return nil, err
		}
		if name != "" {
			// Resolved at validation time to one of the schemas with
			// this dynamic anchor: any of them.
			out = append(out, g.dynamic[name]...)
		} else {
			out = append(out, t)
		}
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, m := range []map[string]*jsonschema.Schema{s.DependentSchemas, s.DependencySchemas} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
	}
	for _, c := range []*jsonschema.Schema{s.Not, s.If, s.Then, s.Else} {
		if c != nil {
			out = append(out, c)
		}
	}
	return slices.DeleteFunc(out, func(c *jsonschema.Schema) bool { return c == nil }), nil
}

// resolve returns the schema ref, in s, refers to, and the name of the
// dynamic anchor it names if it does. A reference the library resolved
// and this cannot is an error: the check would otherwise miss its cycles.
func (g *refGraph) resolve(s *jsonschema.Schema, ref string) (*jsonschema.Schema, string, error) {
	fail := fmt.Errorf("$ref %q at #%s cannot be followed", ref, g.path[s])
	u, err := url.Parse(ref)
	if err != nil {
		return nil, "", fail
	}
	full := g.uri[g.base[s]].ResolveReference(u)
	doc := *full
	doc.Fragment = ""
	d := g.docs[doc.String()]
	if d == nil {
		return nil, "", fail
	}
	frag := full.Fragment
	if frag != "" && !strings.HasPrefix(frag, "/") {
		a, ok := g.anchors[d][frag]
		if !ok {
			return nil, "", fail
		}
		if a.dynamic {
			return a.s, frag, nil
		}
		return a.s, "", nil
	}
	p := g.path[d]
	if frag != "" {
		esc := strings.NewReplacer("~", "~0", "/", "~1")
		for _, seg := range strings.Split(frag[1:], "/") {
			p += "/" + esc.Replace(strings.NewReplacer("~1", "/", "~0", "~").Replace(seg))
		}
	}
	t := g.at[p]
	if t == nil {
		return nil, "", fail
	}
	return t, "", nil
}

// children calls f on each schema directly under s with its location
// relative to s, as a JSON pointer names it.
func children(s *jsonschema.Schema, f func(name string, c *jsonschema.Schema)) {
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, m := range []struct {
		name string
		m    map[string]*jsonschema.Schema
	}{
		{"$defs", s.Defs}, {"definitions", s.Definitions}, {"dependencies", s.DependencySchemas},
		{"properties", s.Properties}, {"patternProperties", s.PatternProperties}, {"dependentSchemas", s.DependentSchemas},
	} {
		for _, k := range slices.Sorted(maps.Keys(m.m)) {
			if c := m.m[k]; c != nil {
				f(m.name+"/"+esc.Replace(k), c)
			}
		}
	}
	for _, l := range []struct {
		name string
		l    []*jsonschema.Schema
	}{
		{"prefixItems", s.PrefixItems}, {"items", s.ItemsArray}, {"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf},
	} {
		for i, c := range l.l {
			if c != nil {
				f(l.name+"/"+strconv.Itoa(i), c)
			}
		}
	}
	for _, c := range []struct {
		name string
		s    *jsonschema.Schema
	}{
		{"items", s.Items}, {"additionalItems", s.AdditionalItems}, {"contains", s.Contains},
		{"unevaluatedItems", s.UnevaluatedItems}, {"additionalProperties", s.AdditionalProperties},
		{"propertyNames", s.PropertyNames}, {"unevaluatedProperties", s.UnevaluatedProperties},
		{"not", s.Not}, {"if", s.If}, {"then", s.Then}, {"else", s.Else}, {"contentSchema", s.ContentSchema},
	} {
		if c.s != nil {
			f(c.name, c.s)
		}
	}
}
