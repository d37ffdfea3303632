// Package iampolicy holds each Lambda function's DynamoDB permissions as
// template.yaml grants them, and checks DynamoDB requests against them as
// IAM would: the embedded engine, wrapped by Guard, answers a call its
// function's role may not make with AccessDeniedException, so that a grant
// missing from the template fails the local tests instead of a deploy.
//
// What is evaluated: the Allow and Deny statements of each function's
// inline Policies whose actions are DynamoDB's; their resources (a table,
// !GetAtt T.Arn; its indexes, !Sub "${T.Arn}/index/NAME" or /index/*; or
// "*"); and the one condition the template uses, ForAllValues:StringLike on
// dynamodb:LeadingKeys. A statement with another condition is refused by
// Load, so nothing is allowed or denied by a rule this package does not
// know. Both branches of an Fn::If count (the wider grant), as the
// template's conditions do not choose DynamoDB grants.
package iampolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Policies are the DynamoDB statements of each function of a template.
type Policies struct {
	byFunction map[string][]statement
}

// statement is one DynamoDB statement of a function's policy.
type statement struct {
	sid       string
	deny      bool
	actions   []string // lower-cased patterns, e.g. dynamodb:getitem
	resources []resource
	// leadingKeys, when not nil, are the StringLike patterns every
	// partition key of the request must match.
	leadingKeys []string
}

// resource is a table (index ""), one of its indexes or all of them
// ("*"); table "*" is every table and index.
type resource struct {
	table, index string
}

// Load reads the DynamoDB statements of every AWS::Serverless::Function
// of template. It fails on YAML it cannot read and on a DynamoDB
// statement it cannot evaluate (a condition other than
// ForAllValues:StringLike dynamodb:LeadingKeys, a resource that is not a
// table or index of the template).
func Load(template []byte) (*Policies, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(template, &root); err != nil {
		return nil, fmt.Errorf("iampolicy: read template: %w", err)
	}
	if len(root.Content) == 0 {
		return nil, errors.New("iampolicy: empty template")
	}
	resources := mapping(root.Content[0])["Resources"]
	if resources == nil {
		return nil, errors.New("iampolicy: the template has no Resources")
	}
	types := map[string]string{}
	for id, r := range mapping(resources) {
		if t := mapping(r)["Type"]; t != nil {
			types[id] = t.Value
		}
	}
	p := &Policies{byFunction: map[string][]statement{}}
	for id, r := range mapping(resources) {
		if types[id] != "AWS::Serverless::Function" {
			continue
		}
		props := mapping(mapping(r)["Properties"])
		p.byFunction[id] = nil
		for _, doc := range branches(props["Policies"]) {
			for _, st := range branches(mapping(doc)["Statement"]) {
				s, ok, err := readStatement(st, types)
				if err != nil {
					return nil, fmt.Errorf("iampolicy: %s: %w", id, err)
				}
				if ok {
					p.byFunction[id] = append(p.byFunction[id], s)
				}
			}
		}
	}
	return p, nil
}

// Functions returns the logical ids of the template's functions, sorted.
func (p *Policies) Functions() []string {
	ids := make([]string, 0, len(p.byFunction))
	for id := range p.byFunction {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// readStatement reads st; ok is false for a statement with no DynamoDB
// action.
func readStatement(st *yaml.Node, types map[string]string) (statement, bool, error) {
	m := mapping(st)
	s := statement{}
	if sid := m["Sid"]; sid != nil {
		s.sid = sid.Value
	}
	for _, a := range scalars(m["Action"]) {
		if strings.HasPrefix(strings.ToLower(a), "dynamodb:") || a == "*" {
			s.actions = append(s.actions, strings.ToLower(a))
		}
	}
	if len(s.actions) == 0 {
		return s, false, nil
	}
	if e := m["Effect"]; e == nil || (e.Value != "Allow" && e.Value != "Deny") {
		return s, false, fmt.Errorf("statement %q: Effect must be Allow or Deny", s.sid)
	}
	s.deny = m["Effect"].Value == "Deny"
	if m["NotAction"] != nil || m["NotResource"] != nil {
		return s, false, fmt.Errorf("statement %q: NotAction and NotResource are not evaluated", s.sid)
	}
	for _, r := range branches(m["Resource"]) {
		res, err := readResource(r, types)
		if err != nil {
			return s, false, fmt.Errorf("statement %q: %w", s.sid, err)
		}
		s.resources = append(s.resources, res)
	}
	if c := m["Condition"]; c != nil {
		for op, keys := range mapping(c) {
			for key, v := range mapping(keys) {
				if op != "ForAllValues:StringLike" || key != "dynamodb:LeadingKeys" {
					return s, false, fmt.Errorf("statement %q: condition %s %s is not evaluated", s.sid, op, key)
				}
				s.leadingKeys = append(s.leadingKeys, scalars(v)...)
			}
		}
	}
	return s, true, nil
}

// readResource reads a statement's resource: "*", !GetAtt T.Arn or
// !Sub "${T.Arn}/index/NAME" (or their long forms) of a table T.
func readResource(n *yaml.Node, types map[string]string) (resource, error) {
	tag, val := intrinsic(n)
	table := func(id string) (resource, error) {
		if types[id] != "AWS::DynamoDB::Table" {
			return resource{}, fmt.Errorf("resource %s is not a table of the template", id)
		}
		return resource{table: id}, nil
	}
	switch {
	case tag == "" && val == "*":
		return resource{table: "*", index: "*"}, nil
	case tag == "GetAtt":
		id, attr, _ := strings.Cut(val, ".")
		if attr != "Arn" {
			return resource{}, fmt.Errorf("resource !GetAtt %s: only a table's Arn is evaluated", val)
		}
		return table(id)
	case tag == "Sub":
		rest, ok := strings.CutPrefix(val, "${")
		id, after, ok2 := strings.Cut(rest, ".Arn}")
		if !ok || !ok2 {
			break
		}
		r, err := table(id)
		if err != nil {
			return r, err
		}
		if after == "" {
			return r, nil
		}
		idx, ok := strings.CutPrefix(after, "/index/")
		if !ok || idx == "" {
			break
		}
		r.index = idx
		return r, nil
	}
	return resource{}, fmt.Errorf("resource %q (%s) is not evaluated: use \"*\", !GetAtt Table.Arn or !Sub \"${Table.Arn}/index/Name\"", val, tag)
}

// Request is one authorization IAM makes of a DynamoDB call: a
// transaction makes one per item (PutItem, UpdateItem, DeleteItem,
// ConditionCheckItem, GetItem), a batch one per table.
type Request struct {
	// Action is the IAM action, e.g. "dynamodb:GetItem".
	Action string
	// Table is the table's logical id; Index the index's name, "" for the
	// table itself.
	Table, Index string
	// LeadingKeys are the partition key values the request touches;
	// none for a Scan, which names no key: a ForAllValues condition then
	// holds, as IAM evaluates it over an empty set.
	LeadingKeys []string
}

// Allow reports whether function fn's role may make r: nil when a
// statement allows it and none denies it, else an error saying why, as
// AWS's AccessDenied message does.
func (p *Policies) Allow(fn string, r Request) error {
	stmts, ok := p.byFunction[fn]
	if !ok {
		return fmt.Errorf("%s is not a function of the template", fn)
	}
	resource := "table/" + r.Table
	if r.Index != "" {
		resource += "/index/" + r.Index
	}
	allowed := ""
	for _, s := range stmts {
		if !s.matches(r) {
			continue
		}
		if s.deny {
			return fmt.Errorf("%s is not authorized to perform: %s on resource: %s with an explicit deny in statement %q", fn, r.Action, resource, s.sid)
		}
		allowed = s.sid
	}
	if allowed == "" {
		return fmt.Errorf("%s is not authorized to perform: %s on resource: %s because no identity-based policy allows the %s action%s", fn, r.Action, resource, r.Action, keysNote(r))
	}
	return nil
}

func keysNote(r Request) string {
	if len(r.LeadingKeys) == 0 {
		return ""
	}
	return fmt.Sprintf(" (leading keys %q)", r.LeadingKeys)
}

// matches reports whether s applies to r: its action, one of its
// resources and its condition.
func (s statement) matches(r Request) bool {
	action := strings.ToLower(r.Action)
	if !slices.ContainsFunc(s.actions, func(p string) bool { return like(p, action) }) {
		return false
	}
	if !slices.ContainsFunc(s.resources, func(res resource) bool {
		switch {
		case res.table == "*":
			return true
		case res.table != r.Table:
			return false
		case res.index == "*":
			return r.Index != ""
		}
		return res.index == r.Index
	}) {
		return false
	}
	if s.leadingKeys == nil {
		return true
	}
	// ForAllValues: every key matches, which an empty set does.
	for _, k := range r.LeadingKeys {
		if !slices.ContainsFunc(s.leadingKeys, func(p string) bool { return like(p, k) }) {
			return false
		}
	}
	return true
}

// like is IAM's StringLike: * matches any run of characters (none
// included), ? any one; every other character itself.
func like(pattern, s string) bool {
	p, v := []rune(pattern), []rune(s)
	pi, vi, star, mark := 0, 0, -1, 0
	for vi < len(v) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == v[vi]):
			pi++
			vi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, vi
			pi++
		case star >= 0:
			pi, mark = star+1, mark+1
			vi = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// mapping returns the keys of mapping node n (nil for another node).
func mapping(n *yaml.Node) map[string]*yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out[n.Content[i].Value] = n.Content[i+1]
	}
	return out
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return n.Content[0]
	}
	return n
}

// branches returns the elements of list n, n itself when it is one
// value, both branches' elements of an Fn::If, and nothing for
// AWS::NoValue.
func branches(n *yaml.Node) []*yaml.Node {
	n = resolve(n)
	if n == nil {
		return nil
	}
	if cond, ok := ifBranches(n); ok {
		var out []*yaml.Node
		for _, b := range cond {
			out = append(out, branches(b)...)
		}
		return out
	}
	if tag, val := intrinsic(n); tag == "Ref" && val == "AWS::NoValue" {
		return nil
	}
	if n.Kind == yaml.SequenceNode && n.Tag != "!If" {
		var out []*yaml.Node
		for _, c := range n.Content {
			if cond, ok := ifBranches(resolve(c)); ok {
				for _, b := range cond {
					out = append(out, branches(b)...)
				}
				continue
			}
			if tag, val := intrinsic(c); tag == "Ref" && val == "AWS::NoValue" {
				continue
			}
			out = append(out, c)
		}
		return out
	}
	return []*yaml.Node{n}
}

// ifBranches returns the two values of an Fn::If (!If [c, a, b] or
// {Fn::If: [c, a, b]}).
func ifBranches(n *yaml.Node) ([]*yaml.Node, bool) {
	if n == nil {
		return nil, false
	}
	args := n
	if n.Kind == yaml.MappingNode {
		m := mapping(n)
		if len(m) != 1 || m["Fn::If"] == nil {
			return nil, false
		}
		args = resolve(m["Fn::If"])
	} else if n.Tag != "!If" {
		return nil, false
	}
	if args.Kind != yaml.SequenceNode || len(args.Content) != 3 {
		return nil, false
	}
	return args.Content[1:], true
}

// scalars returns the string values of a scalar or a list of them.
func scalars(n *yaml.Node) []string {
	var out []string
	for _, c := range branches(n) {
		if c = resolve(c); c.Kind == yaml.ScalarNode {
			out = append(out, c.Value)
		}
	}
	return out
}

// intrinsic returns the function and argument of !Ref, !GetAtt and !Sub
// (short or long form) as ("Ref"|"GetAtt"|"Sub", its string), or ("",
// the value) of a plain scalar.
func intrinsic(n *yaml.Node) (string, string) {
	n = resolve(n)
	if n == nil {
		return "", ""
	}
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!Ref", "!GetAtt", "!Sub":
			return n.Tag[1:], n.Value
		}
		return "", n.Value
	}
	if n.Kind == yaml.SequenceNode && (n.Tag == "!GetAtt" || n.Tag == "!Sub") && len(n.Content) > 0 {
		if n.Tag == "!GetAtt" {
			return "GetAtt", strings.Join(scalars(n), ".")
		}
		return "Sub", resolve(n.Content[0]).Value
	}
	if m := mapping(n); len(m) == 1 {
		for k, v := range m {
			fn, ok := strings.CutPrefix(k, "Fn::")
			if k == "Ref" {
				fn, ok = "Ref", true
			}
			if !ok || (fn != "Ref" && fn != "GetAtt" && fn != "Sub") {
				return "", ""
			}
			v = resolve(v)
			if v.Kind == yaml.ScalarNode {
				return fn, v.Value
			}
			if fn == "GetAtt" {
				return fn, strings.Join(scalars(v), ".")
			}
			if len(v.Content) > 0 {
				return fn, resolve(v.Content[0]).Value
			}
		}
	}
	return "", ""
}
