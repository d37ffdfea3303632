package dynamolocal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/truora/minidyn/types"
)

// checkRead refuses GetItem, BatchGetItem and TransactGetItems requests
// that break DynamoDB's limits (see the package documentation) before
// minidyn answers them. Tables the layer cannot describe are left to
// minidyn, which answers ResourceNotFoundException.
func (h *handler) checkRead(ctx context.Context, op string, body []byte) error {
	type get struct {
		TableName            string
		Key                  map[string]*types.Item
		ProjectionExpression string
	}
	checkKey := func(table string, key map[string]*types.Item) error {
		sch, rep := h.schema(ctx, table)
		if rep != nil {
			return nil
		}
		return sch.checkKeyValues(key)
	}
	switch op {
	case "GetItem":
		var in get
		if err := decodeRequest(body, &in); err != nil {
			return err
		}
		if err := checkExpressions(expr{"ProjectionExpression", in.ProjectionExpression}); err != nil {
			return err
		}
		return checkKey(in.TableName, in.Key)
	case "BatchGetItem":
		var in struct {
			RequestItems map[string]struct {
				Keys                 []map[string]*types.Item
				ProjectionExpression string
			}
		}
		if err := decodeRequest(body, &in); err != nil {
			return err
		}
		total := 0
		for _, r := range in.RequestItems {
			total += len(r.Keys)
		}
		if total > maxBatchGet {
			return validation("Too many items requested for the BatchGetItem call")
		}
		for table, r := range in.RequestItems {
			if err := checkExpressions(expr{"ProjectionExpression", r.ProjectionExpression}); err != nil {
				return err
			}
			sch, rep := h.schema(ctx, table)
			if rep != nil {
				continue
			}
			seen := map[string]bool{}
			for _, k := range r.Keys {
				if err := sch.checkKeyValues(k); err != nil {
					return err
				}
				id := sch.itemID(k)
				if seen[id] {
					return validation("Provided list of item keys contains duplicates")
				}
				seen[id] = true
			}
		}
	case "TransactGetItems":
		var in struct {
			TransactItems []struct{ Get *get }
		}
		if err := decodeRequest(body, &in); err != nil {
			return err
		}
		if len(in.TransactItems) > maxTxActions {
			return lengthError("transactItems", maxTxActions)
		}
		for _, it := range in.TransactItems {
			if it.Get == nil {
				continue // minidyn answers it
			}
			if err := checkExpressions(expr{"ProjectionExpression", it.Get.ProjectionExpression}); err != nil {
				return err
			}
			if err := checkKey(it.Get.TableName, it.Get.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

// getOp is one item a GetItem, BatchGetItem or TransactGetItems reads.
type getOp struct {
	TableName                string
	Key                      map[string]*types.Item
	ProjectionExpression     string
	ExpressionAttributeNames map[string]string
}

// readItems answers GetItem, BatchGetItem and TransactGetItems from the
// layer's items. The request is first given to minidyn, whose tables are
// empty: it answers what it refuses (a key that is not the table's, a
// missing table, a ProjectionExpression it cannot parse), emulated
// failures and, for BatchGetItem, the keys it leaves unprocessed; then
// the items are read, and projected, under the shared lock, with their
// ConsumedCapacity when asked (capacity.go).
func (h *handler) readItems(ctx context.Context, op string, body []byte) (*reply, error) {
	if err := h.checkRead(ctx, op, body); err != nil {
		return nil, err
	}
	mode, err := capacityMode(body)
	if err != nil {
		return nil, err
	}
	rep := h.shared(ctx, op, body)
	if rep.status != http.StatusOK {
		return rep, nil
	}
	u := newUsage()
	// read returns the item g names, projected, and counts its read.
	read := func(g *getOp, consistent bool, factor float64) (map[string]*types.Item, error) {
		sch, r := h.schemaLocked(ctx, g.TableName)
		if r != nil {
			return nil, &apiError{status: r.status, typ: "InternalServerError", msg: string(r.body)}
		}
		var item map[string]*types.Item
		if ti := h.indexes[g.TableName]; ti != nil {
			if e := ti.items[sch.itemID(g.Key)]; e != nil {
				if item, err = e.item(); err != nil {
					return nil, err
				}
			}
		}
		u.read(g.TableName, item, consistent, factor)
		if item == nil || g.ProjectionExpression == "" {
			return item, nil
		}
		p, err := evalProjection(g.ProjectionExpression, g.ExpressionAttributeNames, item)
		if err != nil {
			return nil, validation("%s", err.Error())
		}
		return p, nil
	}
	var out any
	h.lock.RLock()
	defer h.lock.RUnlock()
	switch op {
	case "GetItem":
		var in struct {
			getOp
			ConsistentRead bool
		}
		if err := decodeRequest(body, &in); err != nil {
			return nil, err
		}
		item, err := read(&in.getOp, in.ConsistentRead, 1)
		if err != nil {
			return nil, err
		}
		res := map[string]any{}
		if len(item) > 0 {
			res["Item"] = outItem(item)
		}
		out = res
	case "BatchGetItem":
		var in struct {
			RequestItems map[string]struct {
				Keys                     []map[string]*types.Item
				ProjectionExpression     string
				ExpressionAttributeNames map[string]string
				ConsistentRead           bool
			}
		}
		if err := decodeRequest(body, &in); err != nil {
			return nil, err
		}
		var got struct {
			UnprocessedKeys map[string]struct{ Keys []map[string]*types.Item }
		}
		var raw struct{ UnprocessedKeys json.RawMessage }
		if err := json.Unmarshal(rep.body, &got); err != nil {
			return nil, fmt.Errorf("decode backend BatchGetItem: %w", err)
		}
		_ = json.Unmarshal(rep.body, &raw)
		responses := map[string][]map[string]any{}
		for _, table := range slices.Sorted(mapsKeys(in.RequestItems)) {
			r := in.RequestItems[table]
			sch, sr := h.schemaLocked(ctx, table)
			if sr != nil {
				return sr, nil
			}
			skip := map[string]bool{}
			for _, k := range got.UnprocessedKeys[table].Keys {
				skip[sch.itemID(k)] = true
			}
			items := []map[string]any{}
			for _, k := range r.Keys {
				if skip[sch.itemID(k)] {
					continue
				}
				item, err := read(&getOp{TableName: table, Key: k, ProjectionExpression: r.ProjectionExpression,
					ExpressionAttributeNames: r.ExpressionAttributeNames}, r.ConsistentRead, 1)
				if err != nil {
					return nil, err
				}
				if len(item) > 0 {
					items = append(items, outItem(item))
				}
			}
			responses[table] = items
		}
		res := map[string]any{"Responses": responses}
		if len(got.UnprocessedKeys) > 0 {
			res["UnprocessedKeys"] = raw.UnprocessedKeys
		}
		out = res
	case "TransactGetItems":
		var in struct {
			TransactItems []struct{ Get *getOp }
		}
		if err := decodeRequest(body, &in); err != nil {
			return nil, err
		}
		responses := make([]map[string]any, 0, len(in.TransactItems))
		for _, it := range in.TransactItems {
			item, err := read(it.Get, true, 2)
			if err != nil {
				return nil, err
			}
			res := map[string]any{}
			if len(item) > 0 {
				res["Item"] = outItem(item)
			}
			responses = append(responses, res)
		}
		out = map[string]any{"Responses": responses}
	}
	rep, err = jsonReply(out)
	if err != nil {
		return nil, err
	}
	return withUsage(rep, u, mode, op != "GetItem")
}
