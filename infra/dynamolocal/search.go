package dynamolocal

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"

	"github.com/truora/minidyn/interpreter"
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
}

type searchOutput struct {
	Items            any            `json:",omitempty"` // absent for Select COUNT
	Count            int            `json:"Count"`
	ScannedCount     int            `json:"ScannedCount"`
	LastEvaluatedKey map[string]any `json:",omitempty"`
}

// search answers Query and Scan. minidyn's own search orders keys as strings
// (numbers sort "10" < "9"), loses GSI entries after UpdateItem and ignores
// Select, so the layer only lets minidyn validate the request (expression
// syntax, placeholders, emulated failures), then reads the whole table with a
// plain Scan and evaluates key condition, order, paging, filter and
// projection itself, using minidyn's expression interpreter.
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
	if in.Limit != nil && *in.Limit < 1 {
		return nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *in.Limit)
	}
	if query && in.KeyConditionExpression == "" {
		return nil, validation("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	sch, rep := h.schema(ctx, in.TableName)
	if rep != nil {
		return rep, nil
	}
	order := sch.keys.names() // sort key tuple: index keys first, then table keys
	var idx *indexDef
	if in.IndexName != "" {
		def, ok := sch.indexes[in.IndexName]
		if !ok { // checked first: minidyn panics on an unknown index
			return nil, validation("The table does not have the specified index: %s", in.IndexName)
		}
		if def.global && in.ConsistentRead != nil && *in.ConsistentRead {
			return nil, validation("Consistent reads are not supported on global secondary indexes")
		}
		idx, order = &def, append(def.keys.names(), order...)
	}
	if rep := h.shared(ctx, op, body); rep.status != http.StatusOK {
		return rep, nil
	}
	if in.TotalSegments != nil && *in.TotalSegments > 1 && in.Segment != nil && *in.Segment > 0 {
		// A parallel scan: segment 0 returns everything, the others nothing.
		return jsonReply(searchOutput{Items: []any{}})
	}
	rep = h.shared(ctx, "Scan", mustJSON(map[string]string{"TableName": in.TableName}))
	if rep.status != http.StatusOK {
		return rep, nil
	}
	var all struct{ Items []map[string]*types.Item }
	if err := json.Unmarshal(rep.body, &all); err != nil {
		return nil, fmt.Errorf("decode backend scan of %s: %w", in.TableName, err)
	}
	var lang interpreter.Language
	match := func(expr string, typ interpreter.ExpressionType, item map[string]*types.Item) (bool, error) {
		ok, err := lang.Match(interpreter.MatchInput{TableName: in.TableName, Expression: expr, ExpressionType: typ,
			Item: item, Aliases: in.ExpressionAttributeNames, Attributes: in.ExpressionAttributeValues})
		if err != nil {
			return false, validation("%s", err.Error())
		}
		return ok, nil
	}
	cands := make([]map[string]*types.Item, 0, len(all.Items))
	for _, item := range all.Items {
		for k, v := range item {
			item[k] = nullIfEmpty(v)
		}
		if idx != nil {
			if !hasAll(item, idx.keys.names()) {
				continue // sparse index
			}
			item = idx.project(item, sch.keys)
		}
		if query {
			if ok, err := match(in.KeyConditionExpression, interpreter.ExpressionTypeKey, item); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
		}
		cands = append(cands, item)
	}
	dir := 1
	slices.SortStableFunc(cands, func(a, b map[string]*types.Item) int { return compareKeys(a, b, order) })
	if query && in.ScanIndexForward != nil && !*in.ScanIndexForward {
		slices.Reverse(cands)
		dir = -1
	}
	if len(in.ExclusiveStartKey) > 0 {
		if !hasAll(in.ExclusiveStartKey, order) {
			return nil, validation("The provided starting key is invalid: it must contain %s", strings.Join(order, ", "))
		}
		start, _ := slices.BinarySearchFunc(cands, in.ExclusiveStartKey, func(item, esk map[string]*types.Item) int {
			if dir*compareKeys(item, esk, order) > 0 {
				return 1
			}
			return -1
		})
		cands = cands[start:]
	}
	out := searchOutput{}
	if in.Limit != nil && int(*in.Limit) < len(cands) {
		cands = cands[:*in.Limit]
		last := cands[len(cands)-1]
		out.LastEvaluatedKey = map[string]any{}
		for _, k := range order {
			out.LastEvaluatedKey[k] = encodeAV(last[k])
		}
	}
	out.ScannedCount = len(cands)
	items := []any{}
	for _, item := range cands {
		if in.FilterExpression != "" {
			if ok, err := match(in.FilterExpression, interpreter.ExpressionTypeFilter, item); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
		}
		if in.ProjectionExpression != "" {
			var err error
			item, err = lang.Project(interpreter.ProjectInput{Expression: in.ProjectionExpression, Item: item, Aliases: in.ExpressionAttributeNames})
			if err != nil {
				return nil, validation("%s", err.Error())
			}
		}
		items = append(items, encodeItem(item))
	}
	out.Count = len(items)
	if in.Select != "COUNT" {
		out.Items = items
	}
	return jsonReply(out)
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

// compareKeys orders items by the key attributes in order, comparing like
// DynamoDB: numbers numerically, strings and binaries bytewise.
func compareKeys(a, b map[string]*types.Item, order []string) int {
	for _, k := range order {
		if c := compareAV(a[k], b[k]); c != 0 {
			return c
		}
	}
	return 0
}

func compareAV(a, b *types.Item) int {
	ka, sa := scalar(a)
	kb, sb := scalar(b)
	if ka != kb {
		return cmp.Compare(ka, kb)
	}
	if ka == 'N' {
		fa, okA := new(big.Float).SetPrec(256).SetString(sa)
		fb, okB := new(big.Float).SetPrec(256).SetString(sb)
		if okA && okB {
			return fa.Cmp(fb)
		}
	}
	return strings.Compare(sa, sb)
}

func scalar(v *types.Item) (byte, string) {
	switch {
	case v == nil:
		return 0, ""
	case v.N != nil:
		return 'N', *v.N
	case v.S != nil:
		return 'S', *v.S
	case v.B != nil:
		return 'B', string(v.B)
	}
	return 0, ""
}

// nullIfEmpty turns the empty values minidyn returns for empty lists, maps
// and binaries ({} on the wire) into NULL, recursively.
func nullIfEmpty(v *types.Item) *types.Item {
	if v == nil || (v.S == nil && v.N == nil && v.B == nil && v.BOOL == nil && v.NULL == nil &&
		v.SS == nil && v.NS == nil && v.BS == nil && v.L == nil && v.M == nil) {
		null := true
		return &types.Item{NULL: &null}
	}
	for i, e := range v.L {
		v.L[i] = nullIfEmpty(e)
	}
	for k, e := range v.M {
		v.M[k] = nullIfEmpty(e)
	}
	return v
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
