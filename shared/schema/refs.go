package schema

import (
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

// Nesting bounds the nesting of the values a schema may validate: how
// many levels of arrays and objects the validator can descend through
// without risking the stack.
type Nesting int

// Check returns an error when v, a decoded JSON value, nests deeper than n
// levels of arrays and objects.
func (n Nesting) Check(v any) error {
	if deeper(v, int(n)) {
		return fmt.Errorf("value nests more than %d levels of arrays and objects deep", int(n))
	}
	return nil
}

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

// CheckRefs checks the references of root, which root.Resolve has
// resolved without error: it resolves each "$ref" and "$dynamicRef" as the
// library does and fails (ErrRefCycle, naming the schemas of the cycle by
// their JSON pointers) when following references and in-place keywords
// can come back to a schema without descending into a property or an
// item. Otherwise it returns how deep the values that root validates may
// nest.
func CheckRefs(root *jsonschema.Schema) (Nesting, error) {
	g, err := newRefGraph(root)
	if err != nil {
		return 0, err
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[*jsonschema.Schema]int{}
	chain := map[*jsonschema.Schema]int{} // the most schemas applied in place from here, itself included
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
		next, err := g.inPlace(s)
		if err != nil {
			return err
		}
		longest := 0
		for _, t := range next {
			if err := visit(t); err != nil {
				return err
			}
			longest = max(longest, chain[t])
		}
		chain[s] = longest + 1
		stack = stack[:len(stack)-1]
		state[s] = done
		return nil
	}
	longest := 1
	for _, s := range g.order {
		if err := visit(s); err != nil {
			return 0, err
		}
		longest = max(longest, chain[s])
	}
	return Nesting(max(1, min(maxDepth, maxFrames/longest))), nil
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
