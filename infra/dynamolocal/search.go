package dynamolocal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/truora/minidyn/interpreter"
	"github.com/truora/minidyn/interpreter/language"
	"github.com/truora/minidyn/types"
)

type searchInput struct {
	TableName                 string
	IndexName                 string
	KeyConditionExpression    string
	FilterExpression          string
	ProjectionExpression      string
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]*types.Item
	ExclusiveStartKey         map[string]*types.Item
	Limit                     *int32
	ScanIndexForward          *bool
	ConsistentRead            *bool
	Select                    string
	Segment, TotalSegments    *int32
	ReturnConsumedCapacity    string
}

type searchOutput struct {
	Items            any            `json:",omitempty"` // absent for Select COUNT
	Count            int            `json:"Count"`
	ScannedCount     int            `json:"ScannedCount"`
	LastEvaluatedKey map[string]any `json:",omitempty"`
	ConsumedCapacity any            `json:",omitempty"` // with ReturnConsumedCapacity
}

// search answers Query and Scan from the layer's ordered key index (see
// index.go): the key condition selects a range of rows by binary search,
// and only the items of the page are read from minidyn, by key. Order,
// paging, the 1 MB page limit, filter, projection and Select COUNT are
// applied here, with minidyn's expression interpreter. minidyn's own
// search is not used: it reads the whole table, orders keys as strings
// and loses GSI entries after UpdateItem.
func (h *handler) search(ctx context.Context, op string, body []byte) (*reply, error) {
	query := op == "Query"
	if query {
		var err error
		if body, err = rewriteKeyConditions(body); err != nil {
			return nil, err
		}
	}
	var in searchInput
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	if err := validateSearch(query, &in); err != nil {
		return nil, err
	}
	mode, err := checkCapacityMode(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	sch, rep := h.schema(ctx, in.TableName)
	if rep != nil {
		return rep, nil
	}
	keys := sch.keys
	var idx *indexDef
	if in.IndexName != "" {
		def, ok := sch.indexes[in.IndexName]
		if !ok {
			return nil, validation("The table does not have the specified index: %s", in.IndexName)
		}
		if def.global && in.ConsistentRead != nil && *in.ConsistentRead {
			return nil, validation("Consistent reads are not supported on global secondary indexes")
		}
		idx, keys = &def, def.keys
	}
	order := keys.names() // LastEvaluatedKey: the index keys, then the table keys
	if idx != nil {
		for _, n := range sch.keys.names() {
			if !slices.Contains(order, n) {
				order = append(order, n)
			}
		}
	}
	var cond keyCond
	if query {
		var err error
		if cond, err = parseKeyCondition(in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, keys, sch.attrTypes); err != nil {
			return nil, err
		}
	}
	if len(in.ExclusiveStartKey) > 0 && !hasAll(in.ExclusiveStartKey, order) {
		return nil, validation("The provided starting key is invalid: it must contain %s", strings.Join(order, ", "))
	}
	if rep := h.probeFailure(ctx, op, in.TableName, in.IndexName); rep != nil {
		return rep, nil
	}
	if in.TotalSegments != nil && *in.TotalSegments > 1 && in.Segment != nil && *in.Segment > 0 {
		// A parallel scan: segment 0 returns everything, the others nothing.
		return jsonReply(searchOutput{Items: []any{}})
	}

	ti, unlock, rep := h.readTable(ctx, in.TableName)
	if rep != nil {
		return rep, nil
	}
	defer unlock()
	ord := ti.primary
	if idx != nil {
		ord = ti.secondary[in.IndexName]
	}
	forward := !query || in.ScanIndexForward == nil || *in.ScanIndexForward
	cur := newCursor(ord, query, cond, forward, in.ExclusiveStartKey, keys, sch.keys)

	limit := -1
	if in.Limit != nil {
		limit = int(*in.Limit)
	}
	out := searchOutput{}
	items := []any{}
	// raw: the items are answered whole, as stored (entry.plain).
	raw := idx == nil && in.FilterExpression == "" && in.ProjectionExpression == ""
	size, scanned := 0, 0
	var last *row
	for more := true; more; {
		want := limit - scanned
		if limit < 0 || want > maxTxActions {
			want = maxTxActions
		}
		if scanned > 0 && size > 0 { // size the next read by the items seen so far
			want = min(want, max(1, (maxPageData-size)/(size/scanned)+1))
		} else {
			want = min(want, 25)
		}
		rows := cur.take(want)
		if len(rows) == 0 {
			break
		}
		h.itemsRead.Add(int64(len(rows)))
		for i, r := range rows {
			if raw && r.e.plain {
				// Its stored JSON is its answer: no decoding.
				size += r.e.size
				scanned++
				last = r
				items = append(items, json.RawMessage(r.e.data))
				if scanned == limit || size >= maxPageData {
					cur.unread(rows[i+1:])
					more = false
					break
				}
				continue
			}
			item, err := r.e.item()
			if err != nil {
				return nil, err
			}
			if idx != nil {
				item = idx.project(item, sch.keys)
			}
			size += itemSize(item)
			scanned++
			last = r
			if ok, err := h.matchFilter(&in, item); err != nil {
				return nil, err
			} else if ok {
				if in.ProjectionExpression != "" {
					item, err = evalProjection(in.ProjectionExpression, in.ExpressionAttributeNames, item)
					if err != nil {
						return nil, validation("%s", err.Error())
					}
				}
				items = append(items, outItem(item))
			}
			if scanned == limit || size >= maxPageData {
				cur.unread(rows[i+1:])
				more = false
				break
			}
		}
	}
	if last != nil && cur.more() {
		out.LastEvaluatedKey = map[string]any{}
		key := map[string]*types.Item{}
		if idx != nil {
			key[idx.keys.hash] = last.hash.av()
			if idx.keys.rng != "" {
				key[idx.keys.rng] = last.rng.av()
			}
		}
		key[sch.keys.hash] = last.e.primary.hash.av()
		if sch.keys.rng != "" {
			key[sch.keys.rng] = last.e.primary.rng.av()
		}
		for _, k := range order {
			out.LastEvaluatedKey[k] = encodeAV(key[k])
		}
	}
	out.ScannedCount = scanned
	out.Count = len(items)
	if in.Select != "COUNT" {
		out.Items = items
	}
	if mode != "" {
		// The items evaluated, as stored or as the index projects them,
		// rounded up together (capacity.go), in the answer itself: a
		// page of items is not encoded twice (withUsage).
		u := newUsage()
		cost := readUnits(size, in.ConsistentRead != nil && *in.ConsistentRead)
		if idx != nil {
			u.of(in.TableName).index(in.IndexName).read += cost
		} else {
			u.of(in.TableName).table.read += cost
		}
		if entries := u.entries(mode); len(entries) > 0 {
			out.ConsumedCapacity = entries[0]
		}
	}
	return searchReply(out)
}

// searchReply encodes out as jsonReply would, the page's items that are
// stored JSON (json.RawMessage, entry.plain) copied as they are: the
// encoder would validate and compact each again, the largest share of
// a long page's cost.
func searchReply(out searchOutput) (*reply, error) {
	items, ok := out.Items.([]any)
	if !ok {
		return jsonReply(out)
	}
	out.Items = nil
	rest, err := json.Marshal(out) // {"Count":...}: never empty
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	var b bytes.Buffer
	b.Grow(len(rest) + 64*len(items))
	b.WriteString(`{"Items":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		if raw, ok := it.(json.RawMessage); ok {
			b.Write(raw)
			continue
		}
		e, err := json.Marshal(it)
		if err != nil {
			return nil, fmt.Errorf("encode response: %w", err)
		}
		b.Write(e)
	}
	b.WriteString("],")
	b.Write(rest[1:])
	return &reply{status: http.StatusOK, contentType: amzJSON, body: b.Bytes()}, nil
}

func (h *handler) matchFilter(in *searchInput, item map[string]*types.Item) (bool, error) {
	if in.FilterExpression == "" {
		return true, nil
	}
	ok, err := evalCondition(interpreter.ExpressionTypeFilter, in.FilterExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, item)
	if err != nil {
		return false, validation("%s", err.Error())
	}
	return ok, nil
}

// validateSearch checks a Query or Scan request as DynamoDB does before
// reading anything: Limit, expression sizes and syntax, placeholders.
func validateSearch(query bool, in *searchInput) error {
	if in.Limit != nil && *in.Limit < 1 {
		return validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *in.Limit)
	}
	if query && in.KeyConditionExpression == "" {
		return validation("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	if !query && in.KeyConditionExpression != "" {
		return validation("KeyConditionExpression can only be specified for Query")
	}
	if err := checkExpressions(expr{"KeyConditionExpression", in.KeyConditionExpression}, expr{"FilterExpression", in.FilterExpression},
		expr{"ProjectionExpression", in.ProjectionExpression}); err != nil {
		return err
	}
	if err := checkPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues,
		in.KeyConditionExpression, in.FilterExpression, in.ProjectionExpression); err != nil {
		return err
	}
	if err := types.ValidateItemMap(in.ExpressionAttributeValues); err != nil {
		return validation("%s", err.Error())
	}
	if err := types.ValidateItemMap(in.ExclusiveStartKey); err != nil {
		return validation("%s", err.Error())
	}
	for _, e := range []expr{{"KeyConditionExpression", in.KeyConditionExpression}, {"FilterExpression", in.FilterExpression}} {
		if e.text == "" {
			continue
		}
		pe := exprs.get(exprCondition, e.text)
		if errs := pe.errs; len(errs) > 0 {
			return validation("Invalid %s: Syntax error; %s", e.name, strings.Join(errs, "; "))
		}
		if err := pe.undeclared(e.name, in.ExpressionAttributeNames); err != nil {
			return validation("%s", err.Error())
		}
	}
	if in.ProjectionExpression != "" {
		pe := exprs.get(exprProjection, in.ProjectionExpression)
		if errs := pe.errs; len(errs) > 0 {
			return validation("Invalid ProjectionExpression: Syntax error; %s", strings.Join(errs, "; "))
		}
		if err := pe.undeclared("ProjectionExpression", in.ExpressionAttributeNames); err != nil {
			return validation("%s", err.Error())
		}
	}
	return nil
}

var (
	namePlaceholder  = regexp.MustCompile(`^#[A-Za-z0-9_]+$`)
	valuePlaceholder = regexp.MustCompile(`^:[A-Za-z0-9_]+$`)
)

// checkPlaceholders refuses, as DynamoDB does, ExpressionAttributeNames
// and ExpressionAttributeValues entries that no expression uses or whose
// keys are not placeholders (the same check minidyn makes for the
// operations it answers).
func checkPlaceholders(names map[string]string, values map[string]*types.Item, exprs ...string) error {
	all := strings.TrimSpace(strings.Join(exprs, " "))
	if all == "" && len(names) == 0 && len(values) == 0 {
		return nil
	}
	unused := func(keys []string) []string {
		var out []string
		for _, k := range keys {
			if !strings.Contains(all, k) {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	nameKeys := make([]string, 0, len(names))
	for k := range names {
		nameKeys = append(nameKeys, k)
	}
	valueKeys := make([]string, 0, len(values))
	for k := range values {
		valueKeys = append(valueKeys, k)
	}
	if missing := unused(nameKeys); len(missing) > 0 {
		msg := "Value provided in ExpressionAttributeNames unused in expressions"
		if all == "" {
			msg = "ExpressionAttributeNames can only be specified when using expressions"
		}
		return validation("%s: keys: {%s}", msg, strings.Join(missing, ", "))
	}
	for _, k := range nameKeys {
		if !namePlaceholder.MatchString(k) {
			return validation("ExpressionAttributeNames contains invalid key: Syntax error; key: %s", k)
		}
	}
	if missing := unused(valueKeys); len(missing) > 0 {
		if all == "" {
			return validation("ExpressionAttributeValues can only be specified when using expressions")
		}
		return validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", strings.Join(missing, ", "))
	}
	for _, k := range valueKeys {
		if !valuePlaceholder.MatchString(k) {
			return validation("ExpressionAttributeValues contains invalid key: Syntax error; key: %s", k)
		}
	}
	return nil
}

// probeFailure asks minidyn whether a failure is emulated for the table
// or index (Engine.WithBackend), without searching: the probe is a
// request minidyn refuses as invalid right after its failure check, in
// constant time. It returns the emulated failure's reply, or nil. An
// engine's backend is probed only once Engine.WithBackend has run (only
// it may set a failure), a handler's from NewHandler always.
func (h *handler) probeFailure(ctx context.Context, op, table, index string) *reply {
	if !h.probe.Load() {
		return nil
	}
	req := map[string]any{"TableName": table, "ExpressionAttributeNames": map[string]string{"#dynamolocalProbe": "p"}}
	if index != "" {
		req["IndexName"] = index
	}
	h.lock.RLock()
	rep := h.call(ctx, op, mustJSON(req))
	h.lock.RUnlock()
	if rep.status == http.StatusBadRequest && strings.Contains(string(rep.body), "ExpressionAttributeNames") {
		return nil
	}
	return rep
}

// keyCond is a Query's key condition: the hash key value and an optional
// condition on the sort key.
type keyCond struct {
	hash       *types.Item
	op         string // "" (none), "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"
	rng1, rng2 *types.Item
}

// parseKeyCondition reads a KeyConditionExpression with minidyn's parser
// and checks it as DynamoDB does: an equality on the hash key, at most one
// condition on the sort key, operands of the key's type.
func parseKeyCondition(text string, names map[string]string, values map[string]*types.Item, keys keyPair, attrTypes map[string]string) (keyCond, error) {
	root := exprs.get(exprCondition, text).cond
	var leaves []language.Expression
	var walk func(e language.Expression)
	walk = func(e language.Expression) {
		if in, ok := e.(*language.InfixExpression); ok && in.Operator == "AND" {
			walk(in.Left)
			walk(in.Right)
			return
		}
		leaves = append(leaves, e)
	}
	walk(root.Expression)
	invalid := func(format string, args ...any) error {
		return validation("Invalid KeyConditionExpression: "+format, args...)
	}
	name := func(e language.Expression) (string, error) {
		id, ok := e.(*language.Identifier)
		if !ok || strings.HasPrefix(id.Value, ":") {
			return "", invalid("Key conditions must compare a key attribute to a value: %s", e.String())
		}
		if !strings.HasPrefix(id.Value, "#") {
			return id.Value, nil
		}
		n, ok := names[id.Value]
		if !ok {
			return "", invalid("An expression attribute name used in the document path is not defined; attribute name: %s", id.Value)
		}
		return n, nil
	}
	value := func(e language.Expression) (*types.Item, error) {
		id, ok := e.(*language.Identifier)
		if !ok || !strings.HasPrefix(id.Value, ":") {
			return nil, invalid("Key conditions must compare a key attribute to a value: %s", e.String())
		}
		v, ok := values[id.Value]
		if !ok {
			return nil, invalid("An expression attribute value used in expression is not defined; attribute value: %s", id.Value)
		}
		return v, nil
	}
	var c keyCond
	var rangeSet, other bool
	for _, leaf := range leaves {
		var attr, op string
		var vals []*types.Item
		switch e := leaf.(type) {
		case *language.InfixExpression:
			switch e.Operator {
			case "=", "<", "<=", ">", ">=":
			default:
				return c, invalid("Invalid operator used in KeyConditionExpression: %s", e.Operator)
			}
			n, err := name(e.Left)
			if err != nil {
				return c, err
			}
			v, err := value(e.Right)
			if err != nil {
				return c, err
			}
			attr, op, vals = n, e.Operator, []*types.Item{v}
		case *language.BetweenExpression:
			n, err := name(e.Left)
			if err != nil {
				return c, err
			}
			for _, r := range e.Range {
				v, err := value(r)
				if err != nil {
					return c, err
				}
				vals = append(vals, v)
			}
			attr, op = n, "BETWEEN"
		case *language.CallExpression:
			if e.Function == nil || e.Function.String() != "begins_with" || len(e.Arguments) != 2 {
				return c, invalid("Invalid operator used in KeyConditionExpression: %s", e.String())
			}
			n, err := name(e.Arguments[0])
			if err != nil {
				return c, err
			}
			v, err := value(e.Arguments[1])
			if err != nil {
				return c, err
			}
			attr, op, vals = n, "begins_with", []*types.Item{v}
		default:
			desc := "<empty>"
			if leaf != nil {
				desc = leaf.TokenLiteral()
			}
			return c, invalid("Invalid operator used in KeyConditionExpression: %s", desc)
		}
		for _, v := range vals {
			want := attrTypes[attr]
			if want == "" {
				want = typeOf(v)
			}
			if t := typeOf(v); t != want || (t != "S" && t != "N" && t != "B") {
				return c, validation("One or more parameter values were invalid: Condition parameter type does not match schema type")
			}
		}
		switch {
		case attr == keys.hash && c.hash == nil && op == "=":
			c.hash = vals[0]
		case attr == keys.hash:
			return c, validation("Query key condition not supported")
		case attr == keys.rng && keys.rng != "" && !rangeSet:
			if op == "begins_with" && typeOf(vals[0]) == "N" {
				return c, invalid("Incorrect operand type for operator or function; operator or function: begins_with, operand type: N")
			}
			c.op, c.rng1, rangeSet = op, vals[0], true
			if len(vals) > 1 {
				c.rng2 = vals[1]
			}
		case attr == keys.rng:
			return c, validation("KeyConditionExpressions must only contain one condition per key")
		default:
			other = true
		}
	}
	if c.hash == nil {
		return c, validation("Query condition missed key schema element: %s", keys.hash)
	}
	if other {
		return c, validation("Query key condition not supported")
	}
	if keySize(c.hash) > maxHashKey {
		return c, validation("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of%d bytes", maxHashKey)
	}
	if keySize(c.rng1) > maxRangeKey || keySize(c.rng2) > maxRangeKey {
		return c, validation("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of %d bytes", maxRangeKey)
	}
	if c.op == "BETWEEN" && scalarOf(c.rng1).compareValue(scalarOf(c.rng2)) > 0 {
		return c, invalid("The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: %s, upper bound operand: %s",
			scalarOf(c.rng1).raw, scalarOf(c.rng2).raw)
	}
	return c, nil
}

// cursor walks the rows of a Query (one partition, the key condition's
// range) or a Scan (every partition in order), after an optional
// ExclusiveStartKey.
type cursor struct {
	parts   []*partition
	pi      int // current partition (Scan)
	lo, hi  int // the remaining rows of the current partition: [lo, hi)
	forward bool
	scan    bool
	pending []*row // rows taken but not read, handed back by unread
}

func newCursor(o *ordered, query bool, c keyCond, forward bool, esk map[string]*types.Item, keys, table keyPair) *cursor {
	cur := &cursor{forward: forward, scan: !query}
	var start *row
	if len(esk) > 0 {
		start = &row{hash: scalarOf(esk[keys.hash]), rng: scalarOf(esk[keys.rng]),
			e: &entry{primary: row{hash: scalarOf(esk[table.hash]), rng: scalarOf(esk[table.rng])}}}
	}
	if query {
		p := o.parts[scalarOf(c.hash).id()]
		if p == nil {
			return cur
		}
		cur.parts = []*partition{p}
		cur.lo, cur.hi = rangeOf(p.rows, c)
		if start != nil {
			cur.after(p.rows, start)
		}
		return cur
	}
	cur.parts = o.order
	if start != nil {
		cur.pi, _ = slices.BinarySearchFunc(o.order, start.hash, func(p *partition, h scalar) int { return p.hash.compareOrder(h) })
		if cur.pi < len(o.order) && o.order[cur.pi].hash.compareOrder(start.hash) == 0 {
			cur.lo, cur.hi = 0, len(o.order[cur.pi].rows)
			cur.after(o.order[cur.pi].rows, start)
			return cur
		}
	}
	if cur.pi < len(cur.parts) {
		cur.lo, cur.hi = 0, len(cur.parts[cur.pi].rows)
	}
	return cur
}

// after narrows [lo, hi) to the rows after start in the walk's direction.
func (c *cursor) after(rows []*row, start *row) {
	if c.forward {
		c.lo = max(c.lo, sort.Search(len(rows), func(i int) bool { return rows[i].compare(start) > 0 }))
	} else {
		c.hi = min(c.hi, sort.Search(len(rows), func(i int) bool { return rows[i].compare(start) >= 0 }))
	}
	if c.lo > c.hi {
		c.lo = c.hi
	}
}

// rangeOf is the part of a partition's rows the sort key condition selects.
func rangeOf(rows []*row, c keyCond) (int, int) {
	lower := func(v *types.Item) int {
		s := scalarOf(v)
		return sort.Search(len(rows), func(i int) bool { return rows[i].rng.compareValue(s) >= 0 })
	}
	upper := func(v *types.Item) int {
		s := scalarOf(v)
		return sort.Search(len(rows), func(i int) bool { return rows[i].rng.compareValue(s) > 0 })
	}
	switch c.op {
	case "=":
		return lower(c.rng1), upper(c.rng1)
	case "<":
		return 0, lower(c.rng1)
	case "<=":
		return 0, upper(c.rng1)
	case ">":
		return upper(c.rng1), len(rows)
	case ">=":
		return lower(c.rng1), len(rows)
	case "BETWEEN":
		lo, hi := lower(c.rng1), upper(c.rng2)
		return lo, max(lo, hi)
	case "begins_with":
		lo := lower(c.rng1)
		prefix := scalarOf(c.rng1)
		hi := lo + sort.Search(len(rows)-lo, func(i int) bool {
			r := rows[lo+i].rng
			return r.typ != prefix.typ || !strings.HasPrefix(r.raw, prefix.raw)
		})
		return lo, hi
	}
	return 0, len(rows)
}

// take returns up to n next rows.
func (c *cursor) take(n int) []*row {
	var out []*row
	if len(c.pending) > 0 {
		k := min(n, len(c.pending))
		out = append(out, c.pending[:k]...)
		c.pending = c.pending[k:]
	}
	for len(out) < n && c.pi < len(c.parts) {
		rows := c.parts[c.pi].rows
		for len(out) < n && c.lo < c.hi {
			if c.forward {
				out = append(out, rows[c.lo])
				c.lo++
			} else {
				c.hi--
				out = append(out, rows[c.hi])
			}
		}
		if c.lo >= c.hi {
			if !c.scan {
				c.pi = len(c.parts)
				break
			}
			c.pi++
			if c.pi < len(c.parts) {
				c.lo, c.hi = 0, len(c.parts[c.pi].rows)
			}
		}
	}
	return out
}

// unread hands back rows taken but not read.
func (c *cursor) unread(rows []*row) {
	c.pending = append(slices.Clone(rows), c.pending...)
}

// more reports whether rows remain.
func (c *cursor) more() bool {
	if len(c.pending) > 0 {
		return true
	}
	if c.pi >= len(c.parts) {
		return false
	}
	if c.lo < c.hi {
		return true
	}
	if !c.scan {
		return false
	}
	for _, p := range c.parts[c.pi+1:] {
		if len(p.rows) > 0 {
			return true
		}
	}
	return false
}

// project applies the index projection to a table item.
func (d *indexDef) project(item map[string]*types.Item, table keyPair) map[string]*types.Item {
	if d.projection != "KEYS_ONLY" && d.projection != "INCLUDE" {
		return item
	}
	out := map[string]*types.Item{}
	for _, k := range slices.Concat(table.names(), d.keys.names(), d.include) {
		if v, ok := item[k]; ok {
			out[k] = v
		}
	}
	return out
}

func hasAll(item map[string]*types.Item, names []string) bool {
	for _, n := range names {
		if item[n] == nil {
			return false
		}
	}
	return true
}

// encodeItem encodes an item in DynamoDB JSON.
func encodeItem(item map[string]*types.Item) map[string]any {
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = encodeAV(v)
	}
	return out
}

func encodeAV(v *types.Item) map[string]any {
	deref := func(ss []*string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = *s
		}
		return out
	}
	switch {
	case v == nil:
		return map[string]any{"NULL": true}
	case v.S != nil:
		return map[string]any{"S": *v.S}
	case v.N != nil:
		return map[string]any{"N": *v.N}
	case v.B != nil:
		return map[string]any{"B": v.B}
	case v.BOOL != nil:
		return map[string]any{"BOOL": *v.BOOL}
	case v.SS != nil:
		return map[string]any{"SS": deref(v.SS)}
	case v.NS != nil:
		return map[string]any{"NS": deref(v.NS)}
	case v.BS != nil:
		return map[string]any{"BS": v.BS}
	case v.L != nil:
		l := make([]any, len(v.L))
		for i, e := range v.L {
			l[i] = encodeAV(e)
		}
		return map[string]any{"L": l}
	case v.M != nil:
		return map[string]any{"M": encodeItem(v.M)}
	}
	return map[string]any{"NULL": true}
}
