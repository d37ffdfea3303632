package dynamolocal

import (
	"context"

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
			ti := newTableIndex(sch)
			seen := map[string]bool{}
			for _, k := range r.Keys {
				if err := sch.checkKeyValues(k); err != nil {
					return err
				}
				id := ti.itemID(k)
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
