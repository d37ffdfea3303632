package dynamolocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/truora/minidyn/interpreter"
	"github.com/truora/minidyn/types"
)

// Every write runs under the exclusive lock, through h.write: it applies
// the write to minidyn, updates the layer's key index, appends the
// request to the journal (when the engine has a data file) and, once the
// lock is released, waits until the journal is on disk before answering.
// So the journal holds the writes in the order they were applied, and no
// write is answered before it is durable.

// record is one journal entry: a write request as it was applied.
// Replaying the records in order on the snapshot they follow rebuilds the
// data: each write is deterministic given the data before it.
type record struct {
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body"`
}

// write runs fn under the exclusive lock. When fn succeeds with a 200
// reply, its records are appended to the journal, and write returns only
// once they are durable. A journal that failed refuses every write (the
// data in memory may already be ahead of the disk).
func (h *handler) write(fn func() (*reply, []record, error)) (*reply, error) {
	j := h.journal
	if err := j.failed(); err != nil {
		return nil, journalError(err)
	}
	h.lock.Lock()
	rep, recs, err := fn()
	var lsn uint64
	if err == nil && rep != nil && rep.status == http.StatusOK && len(recs) > 0 && j != nil {
		lsn = j.append(recs...)
	}
	h.lock.Unlock()
	if lsn > 0 {
		if err := j.wait(lsn); err != nil {
			return nil, journalError(err)
		}
	}
	return rep, err
}

func journalError(err error) error {
	return &apiError{status: http.StatusInternalServerError, typ: "InternalServerError",
		msg: fmt.Sprintf("the local engine cannot make writes durable: %v; restart it", err)}
}

// getItem reads an item with the lock already held; nil if absent. A
// non-nil reply is the backend's error (e.g. an emulated failure).
func (h *handler) getItem(ctx context.Context, table string, key any) (map[string]json.RawMessage, *reply) {
	rep := h.call(ctx, "GetItem", mustJSON(map[string]any{"TableName": table, "Key": key, "ConsistentRead": true}))
	if rep.status != http.StatusOK {
		return nil, rep
	}
	var out struct{ Item map[string]json.RawMessage }
	if err := json.Unmarshal(rep.body, &out); err != nil {
		return nil, errorReply(&apiError{status: http.StatusInternalServerError, typ: "InternalServerError", msg: err.Error()})
	}
	return out.Item, nil
}

// typed decodes a wire item; values minidyn answered as {} become NULL.
func typed(raw map[string]json.RawMessage) map[string]*types.Item {
	if raw == nil {
		return nil
	}
	var item map[string]*types.Item
	if err := json.Unmarshal(mustJSON(raw), &item); err != nil {
		return nil
	}
	for k, v := range item {
		item[k] = nullIfEmpty(v)
	}
	return item
}

func keyOf(sch *schema, item map[string]*types.Item) map[string]*types.Item {
	k := map[string]*types.Item{}
	for _, n := range sch.keys.names() {
		if v, ok := item[n]; ok {
			k[n] = v
		}
	}
	return k
}

// exactImage returns the item at key exactly as stored, for undoing a
// write: minidyn answers empty lists, maps and binaries as {}, so each
// such value's type is asked of minidyn's interpreter, which sees the
// stored value, with a conditional no-op update (attribute_type). nil if
// the item does not exist. Callers hold h.lock exclusively.
func (h *handler) exactImage(ctx context.Context, table string, key map[string]*types.Item) (map[string]any, *reply) {
	raw, rep := h.getItem(ctx, table, encodeItem(key))
	if rep != nil || raw == nil {
		return nil, rep
	}
	var item map[string]any
	dec := json.NewDecoder(bytes.NewReader(mustJSON(raw)))
	dec.UseNumber()
	if err := dec.Decode(&item); err != nil {
		return nil, errorReply(&apiError{status: http.StatusInternalServerError, typ: "InternalServerError", msg: err.Error()})
	}
	var holes []hole
	for k, av := range item {
		findHoles(av, 0, []any{k}, func(v any) { item[k] = v }, &holes)
	}
	for _, hl := range holes {
		typ := "B"
		for _, t := range []string{"L", "M"} {
			names := map[string]string{"#dynamolocalNoop": "dynamolocal-noop"}
			cond, values := typeCondition(hl.path, t, names)
			r := h.call(ctx, "UpdateItem", mustJSON(map[string]any{"TableName": table, "Key": encodeItem(key),
				"UpdateExpression": "REMOVE #dynamolocalNoop", "ConditionExpression": cond,
				"ExpressionAttributeNames": names, "ExpressionAttributeValues": values}))
			if r.status == http.StatusOK {
				typ = t
				break
			}
		}
		hl.set(map[string]func() any{
			"L": func() any { return map[string]any{"L": []any{}} },
			"M": func() any { return map[string]any{"M": map[string]any{}} },
			"B": func() any { return map[string]any{"B": ""} },
		}[typ]())
	}
	return item, nil
}

// restoreImage puts back an item as exactImage captured it (nil: the item
// did not exist), undoing a write. Callers hold h.lock exclusively.
func (h *handler) restoreImage(ctx context.Context, table string, sch *schema, key map[string]*types.Item, image map[string]any) {
	if image == nil {
		h.call(ctx, "DeleteItem", mustJSON(map[string]any{"TableName": table, "Key": encodeItem(key)}))
		h.indexDelete(table, key)
		return
	}
	h.call(ctx, "PutItem", mustJSON(map[string]any{"TableName": table, "Item": image}))
	var item map[string]*types.Item
	if json.Unmarshal(mustJSON(image), &item) == nil {
		h.indexPut(table, item)
	}
}

func isConditionFailure(rep *reply) bool {
	return rep.status == http.StatusBadRequest && bytes.Contains(rep.body, []byte("ConditionalCheckFailedException"))
}

// putItem validates the item against DynamoDB's limits and fixes
// minidyn's PutItem ReturnValues (it always echoes the new item): NONE
// answers no attributes; ALL_OLD reads the old item first, atomically.
func (h *handler) putItem(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		TableName                 string
		Item                      map[string]*types.Item
		ReturnValues              string
		ConditionExpression       string
		ExpressionAttributeValues map[string]*types.Item
		ReturnConsumedCapacity    string
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	mode, err := checkCapacityMode(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	switch in.ReturnValues {
	case "", "NONE", "ALL_OLD":
	default:
		return nil, validation("ReturnValues can only be ALL_OLD or NONE for PutItem, got %q", in.ReturnValues)
	}
	if err := checkExpressions(expr{"ConditionExpression", in.ConditionExpression}); err != nil {
		return nil, err
	}
	if err := checkExpressionValues(in.ExpressionAttributeValues); err != nil {
		return nil, err
	}
	sch, rep := h.schema(ctx, in.TableName)
	if rep != nil {
		return rep, nil
	}
	if err := sch.checkItem(in.Item); err != nil {
		return nil, err
	}
	return h.write(func() (*reply, []record, error) {
		var old map[string]json.RawMessage
		if in.ReturnValues == "ALL_OLD" || mode != "" {
			if old, rep = h.getItem(ctx, in.TableName, encodeItem(keyOf(sch, in.Item))); rep != nil {
				return rep, nil, nil
			}
		}
		if rep := h.call(ctx, "PutItem", body); rep.status != http.StatusOK {
			return rep, nil, nil
		}
		h.indexPut(in.TableName, in.Item)
		recs := []record{{"PutItem", body}}
		var out any = struct{}{}
		if in.ReturnValues == "ALL_OLD" && len(old) > 0 {
			out = map[string]json.RawMessage{"Attributes": mustJSON(old)}
		}
		rep, err := jsonReply(out)
		if err != nil || mode == "" {
			return rep, recs, err
		}
		u := newUsage()
		u.write(sch, in.TableName, typed(old), in.Item, 1)
		rep, err = withUsage(rep, u, mode, false)
		return rep, recs, err
	})
}

// deleteItem validates the key and keeps the index in step.
func (h *handler) deleteItem(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		TableName                 string
		Key                       map[string]*types.Item
		ConditionExpression       string
		ExpressionAttributeValues map[string]*types.Item
		ReturnConsumedCapacity    string
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	mode, err := checkCapacityMode(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if err := checkExpressions(expr{"ConditionExpression", in.ConditionExpression}); err != nil {
		return nil, err
	}
	if err := checkExpressionValues(in.ExpressionAttributeValues); err != nil {
		return nil, err
	}
	sch, rep := h.schema(ctx, in.TableName)
	if rep != nil {
		return rep, nil
	}
	if err := sch.checkKeyValues(in.Key); err != nil {
		return nil, err
	}
	return h.write(func() (*reply, []record, error) {
		var old map[string]json.RawMessage
		if mode != "" {
			if old, rep = h.getItem(ctx, in.TableName, encodeItem(in.Key)); rep != nil {
				return rep, nil, nil
			}
		}
		rep := h.call(ctx, "DeleteItem", body)
		if rep.status != http.StatusOK {
			return rep, nil, nil
		}
		h.indexDelete(in.TableName, in.Key)
		recs := []record{{"DeleteItem", body}}
		if mode == "" {
			return rep, recs, nil
		}
		u := newUsage()
		u.write(sch, in.TableName, typed(old), nil, 1)
		rep, err := withUsage(rep, u, mode, false)
		return rep, recs, err
	})
}

// exprToken splits an update expression into names (with # or : prefix)
// and single punctuation characters.
var exprToken = regexp.MustCompile(`[#:]?[A-Za-z0-9_]+|\S`)

// topLevelRemoves returns the top-level attributes an UpdateExpression
// REMOVEs, with #placeholders resolved. minidyn drops nested REMOVEs (a.b,
// a[0]) correctly but silently ignores top-level ones.
func topLevelRemoves(expr string, names map[string]string) []string {
	var out, group []string
	inRemove, depth := false, 0
	flush := func() {
		if inRemove && len(group) == 1 && !strings.HasPrefix(group[0], ":") {
			name := group[0]
			if alias, ok := names[name]; ok {
				name = alias
			}
			out = append(out, name)
		}
		group = group[:0]
	}
	for _, tok := range exprToken.FindAllString(expr, -1) {
		switch kw := strings.ToUpper(tok); {
		case depth == 0 && (kw == "SET" || kw == "REMOVE" || kw == "ADD" || kw == "DELETE"):
			flush()
			inRemove = kw == "REMOVE"
			continue
		case tok == "(" || tok == "[":
			depth++
		case tok == ")" || tok == "]":
			depth--
		case tok == "," && depth == 0:
			flush()
			continue
		}
		group = append(group, tok)
	}
	flush()
	return out
}

// updateInput is an UpdateItem request, or the Update of a transaction.
type updateInput struct {
	TableName                           string
	Key                                 map[string]*types.Item
	UpdateExpression                    string
	ConditionExpression                 string
	ExpressionAttributeNames            map[string]string
	ExpressionAttributeValues           map[string]*types.Item
	ReturnValuesOnConditionCheckFailure string
}

func (u *updateInput) check(sch *schema) error {
	if err := checkExpressions(expr{"UpdateExpression", u.UpdateExpression}, expr{"ConditionExpression", u.ConditionExpression}); err != nil {
		return err
	}
	if err := checkExpressionValues(u.ExpressionAttributeValues); err != nil {
		return err
	}
	return sch.checkKeyValues(u.Key)
}

// applyUpdate applies an update with minidyn and returns the resulting
// item (raw and decoded). minidyn ignores top-level REMOVE actions
// (guregu also emits them for Set of an empty value): the layer rewrites
// the item without the removed attributes. The resulting item is checked
// against DynamoDB's limits; when it breaks one (or minidyn fails other
// than on the condition), the item is put back as it was (image) and the
// error returned. Callers hold h.lock exclusively.
func (h *handler) applyUpdate(ctx context.Context, sch *schema, u *updateInput, body []byte, image map[string]any) (map[string]json.RawMessage, map[string]*types.Item, *reply, error) {
	var req map[string]json.RawMessage
	if err := decodeRequest(body, &req); err != nil {
		return nil, nil, nil, err
	}
	req["ReturnValues"] = mustJSON("ALL_NEW")
	delete(req, "ReturnConsumedCapacity")
	delete(req, "ReturnItemCollectionMetrics")
	rep := h.call(ctx, "UpdateItem", mustJSON(req))
	if rep.status != http.StatusOK {
		if !isConditionFailure(rep) {
			h.restoreImage(ctx, u.TableName, sch, u.Key, image)
		}
		return nil, nil, rep, nil
	}
	var out struct{ Attributes map[string]json.RawMessage }
	if err := json.Unmarshal(rep.body, &out); err != nil {
		return nil, nil, nil, fmt.Errorf("decode backend UpdateItem of %s: %w", u.TableName, err)
	}
	raw := out.Attributes
	if removes := topLevelRemoves(u.UpdateExpression, u.ExpressionAttributeNames); len(removes) > 0 {
		for _, n := range removes {
			delete(raw, n)
		}
		if rep := h.call(ctx, "PutItem", mustJSON(map[string]any{"TableName": u.TableName, "Item": raw})); rep.status != http.StatusOK {
			h.restoreImage(ctx, u.TableName, sch, u.Key, image)
			return nil, nil, rep, nil
		}
	}
	item := typed(raw)
	if err := sch.checkUpdated(item); err != nil {
		h.restoreImage(ctx, u.TableName, sch, u.Key, image)
		return nil, nil, nil, err
	}
	h.indexPut(u.TableName, item)
	return raw, item, nil, nil
}

// updateItem applies an update under the exclusive lock (see applyUpdate)
// and computes ReturnValues itself.
func (h *handler) updateItem(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		updateInput
		ReturnValues           string
		ReturnConsumedCapacity string
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	mode, err := checkCapacityMode(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	switch in.ReturnValues {
	case "", "NONE", "ALL_OLD", "UPDATED_OLD", "UPDATED_NEW", "ALL_NEW":
	default:
		return nil, validation("1 validation error detected: Value '%s' at 'returnValues' failed to satisfy constraint: "+
			"Member must satisfy enum value set: [NONE, ALL_OLD, UPDATED_OLD, UPDATED_NEW, ALL_NEW]", in.ReturnValues)
	}
	sch, rep := h.schema(ctx, in.TableName)
	if rep != nil {
		return rep, nil
	}
	if err := in.check(sch); err != nil {
		return nil, err
	}
	return h.write(func() (*reply, []record, error) {
		image, rep := h.exactImage(ctx, in.TableName, in.Key)
		if rep != nil {
			return rep, nil, nil
		}
		var old map[string]json.RawMessage
		if image != nil {
			_ = json.Unmarshal(mustJSON(image), &old)
		}
		item, after, rep, err := h.applyUpdate(ctx, sch, &in.updateInput, body, image)
		if rep != nil || err != nil {
			return rep, nil, err
		}
		var u *usage
		if mode != "" {
			u = newUsage()
			u.write(sch, in.TableName, imageItem(image), after, 1)
		}
		changed := func(a, b map[string]json.RawMessage) map[string]json.RawMessage {
			diff := map[string]json.RawMessage{}
			for k, v := range a {
				if !bytes.Equal(v, b[k]) {
					diff[k] = v
				}
			}
			return diff
		}
		var attrs map[string]json.RawMessage
		switch in.ReturnValues {
		case "ALL_NEW":
			attrs = item
		case "ALL_OLD":
			attrs = old
		case "UPDATED_NEW":
			attrs = changed(item, old)
		case "UPDATED_OLD":
			attrs = changed(old, item)
		}
		recs := []record{{"UpdateItem", body}}
		var out any = struct{}{}
		if attrs != nil {
			out = map[string]any{"Attributes": attrs}
		}
		if rep, err = jsonReply(out); err != nil {
			return nil, nil, err
		}
		rep, err = withUsage(rep, u, mode, false)
		return rep, recs, err
	})
}

// writeRequest is one request of BatchWriteItem.
type writeRequest struct {
	PutRequest    *struct{ Item map[string]*types.Item }
	DeleteRequest *struct{ Key map[string]*types.Item }
}

// batchWrite validates the whole batch first, as DynamoDB does (minidyn
// would apply the requests before an invalid one), then lets minidyn
// apply it (so that emulated unprocessed items still work) and keeps the
// index in step with the requests it processed.
func (h *handler) batchWrite(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		RequestItems           map[string][]writeRequest
		ReturnConsumedCapacity string
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	mode, err := checkCapacityMode(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if len(in.RequestItems) == 0 {
		return nil, emptyError("requestItems")
	}
	total := 0
	schemas := map[string]*schema{}
	tables := slices.Sorted(mapsKeys(in.RequestItems))
	for _, table := range tables {
		reqs := in.RequestItems[table]
		if len(reqs) == 0 || len(reqs) > maxBatchWrite {
			return nil, validation("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: "+
				"[Member must have length less than or equal to %d, Member must have length greater than or equal to 1]", maxBatchWrite)
		}
		total += len(reqs)
	}
	if total > maxBatchWrite {
		return nil, validation("Too many items requested for the BatchWriteItem call")
	}
	for _, table := range tables {
		sch, rep := h.schema(ctx, table)
		if rep != nil {
			return rep, nil
		}
		schemas[table] = sch
		ti := newTableIndex(sch)
		seen := map[string]bool{}
		for _, r := range in.RequestItems[table] {
			var key map[string]*types.Item
			switch {
			case (r.PutRequest == nil) == (r.DeleteRequest == nil):
				return nil, validation("Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes")
			case r.PutRequest != nil:
				if err := sch.checkItem(r.PutRequest.Item); err != nil {
					return nil, err
				}
				key = keyOf(sch, r.PutRequest.Item)
			default:
				if err := sch.checkKeyValues(r.DeleteRequest.Key); err != nil {
					return nil, err
				}
				key = r.DeleteRequest.Key
			}
			if id := ti.itemID(key); seen[id] {
				return nil, validation("Provided list of item keys contains duplicates")
			} else {
				seen[id] = true
			}
		}
	}
	return h.write(func() (*reply, []record, error) {
		// The items as they were, for the capacity (capacity.go).
		olds := map[string][]map[string]*types.Item{}
		if mode != "" {
			for _, table := range tables {
				for _, r := range in.RequestItems[table] {
					raw, rep := h.getItem(ctx, table, encodeItem(r.key(schemas[table])))
					if rep != nil {
						return rep, nil, nil
					}
					olds[table] = append(olds[table], typed(raw))
				}
			}
		}
		rep := h.call(ctx, "BatchWriteItem", body)
		if rep.status != http.StatusOK {
			h.resync(ctx, in.RequestItems, schemas)
			return rep, nil, nil
		}
		var out struct {
			UnprocessedItems map[string][]writeRequest
		}
		if err := json.Unmarshal(rep.body, &out); err != nil {
			return nil, nil, fmt.Errorf("decode backend BatchWriteItem: %w", err)
		}
		done := map[string][]writeRequest{}
		u := newUsage()
		for _, table := range tables {
			sch := schemas[table]
			ti := newTableIndex(sch)
			skip := map[string]bool{}
			for _, r := range out.UnprocessedItems[table] {
				skip[ti.itemID(r.key(sch))] = true
			}
			for i, r := range in.RequestItems[table] {
				if skip[ti.itemID(r.key(sch))] {
					continue
				}
				done[table] = append(done[table], r)
				if r.PutRequest != nil {
					h.indexPut(table, r.PutRequest.Item)
				} else {
					h.indexDelete(table, r.DeleteRequest.Key)
				}
				if mode != "" {
					var after map[string]*types.Item
					if r.PutRequest != nil {
						after = r.PutRequest.Item
					}
					u.write(sch, table, olds[table][i], after, 1)
				}
			}
		}
		if len(done) == 0 {
			return rep, nil, nil
		}
		applied := body
		if len(out.UnprocessedItems) > 0 {
			applied = mustJSON(map[string]any{"RequestItems": done})
		}
		rep, err := withUsage(rep, u, mode, true)
		return rep, []record{{"BatchWriteItem", applied}}, err
	})
}

func (r writeRequest) key(sch *schema) map[string]*types.Item {
	if r.PutRequest != nil {
		return keyOf(sch, r.PutRequest.Item)
	}
	return r.DeleteRequest.Key
}

// MarshalJSON writes a request back in DynamoDB JSON.
func (r writeRequest) MarshalJSON() ([]byte, error) {
	if r.PutRequest != nil {
		return json.Marshal(map[string]any{"PutRequest": map[string]any{"Item": encodeItem(r.PutRequest.Item)}})
	}
	return json.Marshal(map[string]any{"DeleteRequest": map[string]any{"Key": encodeItem(r.DeleteRequest.Key)}})
}

// resync re-reads the items a failed batch touched, so that the index
// matches whatever the backend applied before failing. Callers hold
// h.lock exclusively.
func (h *handler) resync(ctx context.Context, reqs map[string][]writeRequest, schemas map[string]*schema) {
	for table, rs := range reqs {
		for _, r := range rs {
			key := r.key(schemas[table])
			raw, rep := h.getItem(ctx, table, encodeItem(key))
			switch {
			case rep != nil:
			case raw == nil:
				h.indexDelete(table, key)
			default:
				h.indexPut(table, typed(raw))
			}
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// txAction is one action of TransactWriteItems.
type txAction struct {
	kind string // ConditionCheck, Put, Delete or Update
	raw  json.RawMessage
	updateInput
	Item map[string]*types.Item
}

// transactWrite runs TransactWriteItems in the layer, under the exclusive
// lock, instead of minidyn's (which copies every table it touches to roll
// back). It validates the request against DynamoDB's limits; evaluates
// every condition on the items as they are (all failing conditions are
// reported, as DynamoDB does, and nothing is written); then applies each
// action with minidyn's single-item operations, keeping an exact image of
// each item to undo them all if one fails (an update that makes an item
// too large cancels the transaction with a ValidationError reason).
func (h *handler) transactWrite(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		TransactItems          []map[string]json.RawMessage
		ReturnConsumedCapacity string
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	mode, err := checkCapacityMode(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if len(in.TransactItems) == 0 {
		return nil, emptyError("transactItems")
	}
	if len(in.TransactItems) > maxTxActions {
		return nil, lengthError("transactItems", maxTxActions)
	}
	actions := make([]*txAction, len(in.TransactItems))
	schemas := make([]*schema, len(actions))
	seen := map[string]bool{}
	total := 0
	for i, ti := range in.TransactItems {
		if len(ti) != 1 {
			return nil, validation("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		a := &txAction{}
		for kind, raw := range ti {
			a.kind, a.raw = kind, raw
		}
		switch a.kind {
		case "ConditionCheck", "Put", "Delete", "Update":
		default:
			return nil, validation("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		if err := decodeRequest(a.raw, &a.updateInput); err != nil {
			return nil, err
		}
		var item struct{ Item map[string]*types.Item }
		if err := decodeRequest(a.raw, &item); err != nil {
			return nil, err
		}
		a.Item = item.Item
		sch, rep := h.schema(ctx, a.TableName)
		if rep != nil {
			return rep, nil
		}
		schemas[i] = sch
		if a.kind == "Put" {
			if err := sch.checkItem(a.Item); err != nil {
				return nil, err
			}
			a.Key = keyOf(sch, a.Item)
			total += itemSize(a.Item)
		} else {
			total += itemSize(a.Key)
			for _, v := range a.ExpressionAttributeValues {
				total += valueSize(v)
			}
		}
		if err := a.check(sch); err != nil {
			return nil, err
		}
		if a.kind == "ConditionCheck" {
			if a.ConditionExpression == "" {
				return nil, validation("The ConditionExpression of a ConditionCheck is required")
			}
			if err := checkPlaceholders(a.ExpressionAttributeNames, a.ExpressionAttributeValues, a.ConditionExpression); err != nil {
				return nil, err
			}
		}
		id := a.TableName + "\x00" + newTableIndex(sch).itemID(a.Key)
		if seen[id] {
			return nil, validation("Transaction request cannot include multiple operations on one item")
		}
		seen[id] = true
		actions[i] = a
	}
	if total > maxTxSize {
		return nil, validation("Transaction request size has exceeded the maximum allowed size of 4 MB")
	}
	return h.write(func() (*reply, []record, error) {
		images := make([]map[string]any, len(actions))
		for i, a := range actions {
			image, rep := h.exactImage(ctx, a.TableName, a.Key)
			if rep != nil {
				return rep, nil, nil
			}
			images[i] = image
		}
		// Every condition first, on the items as they are.
		var lang interpreter.Language
		reasons := make([]map[string]any, len(actions))
		failed := false
		for i, a := range actions {
			reasons[i] = map[string]any{"Code": "None"}
			if a.ConditionExpression == "" {
				continue
			}
			var current map[string]*types.Item
			if images[i] != nil {
				_ = json.Unmarshal(mustJSON(images[i]), &current)
				for k, v := range current {
					current[k] = nullIfEmpty(v)
				}
			}
			if current == nil {
				current = map[string]*types.Item{}
			}
			ok, err := lang.Match(interpreter.MatchInput{TableName: a.TableName, Expression: a.ConditionExpression,
				ExpressionType: interpreter.ExpressionTypeConditional, Item: current,
				Aliases: a.ExpressionAttributeNames, Attributes: a.ExpressionAttributeValues})
			if err != nil {
				return nil, nil, validation("%s", err.Error())
			}
			if !ok {
				failed = true
				reasons[i] = map[string]any{"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
				if a.ReturnValuesOnConditionCheckFailure == "ALL_OLD" && images[i] != nil {
					reasons[i]["Item"] = images[i]
				}
			}
		}
		if failed {
			return cancelled(reasons), nil, nil
		}
		// Then the writes, each undone if a later one fails.
		undo := func(upto int) {
			for j := upto - 1; j >= 0; j-- {
				if actions[j].kind != "ConditionCheck" {
					h.restoreImage(ctx, actions[j].TableName, schemas[j], actions[j].Key, images[j])
				}
			}
		}
		// Every action is a transactional write (capacity.go): twice a
		// write's units, a ConditionCheck as a write of its item.
		u := newUsage()
		for i, a := range actions {
			var rep *reply
			switch a.kind {
			case "ConditionCheck":
				u.of(a.TableName).table.write += 2 * writeUnits(itemSize(imageItem(images[i])))
				continue
			case "Put":
				if rep = h.call(ctx, "PutItem", a.raw); rep.status == http.StatusOK {
					h.indexPut(a.TableName, a.Item)
					u.write(schemas[i], a.TableName, imageItem(images[i]), a.Item, 2)
				}
			case "Delete":
				if rep = h.call(ctx, "DeleteItem", a.raw); rep.status == http.StatusOK {
					h.indexDelete(a.TableName, a.Key)
					u.write(schemas[i], a.TableName, imageItem(images[i]), nil, 2)
				}
			case "Update":
				var err error
				var after map[string]*types.Item
				_, after, rep, err = h.applyUpdate(ctx, schemas[i], &a.updateInput, a.raw, images[i])
				if err == nil && rep == nil {
					u.write(schemas[i], a.TableName, imageItem(images[i]), after, 2)
				}
				if err != nil {
					undo(i)
					ae, ok := errors.AsType[*apiError](err)
					if !ok {
						return nil, nil, err
					}
					reasons[i] = map[string]any{"Code": "ValidationError", "Message": ae.msg}
					return cancelled(reasons), nil, nil
				}
				if rep == nil {
					rep = &reply{status: http.StatusOK}
				}
			}
			if rep.status != http.StatusOK {
				undo(i)
				if isConditionFailure(rep) {
					reasons[i] = map[string]any{"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
					return cancelled(reasons), nil, nil
				}
				return rep, nil, nil
			}
		}
		rep, err := jsonReply(struct{}{})
		if err == nil {
			rep, err = withUsage(rep, u, mode, true)
		}
		return rep, []record{{"TransactWriteItems", body}}, err
	})
}

// cancelled is a TransactionCanceledException with per-action reasons.
func cancelled(reasons []map[string]any) *reply {
	codes := make([]string, len(reasons))
	for i, r := range reasons {
		codes[i] = r["Code"].(string)
	}
	return &reply{status: http.StatusBadRequest, contentType: amzJSON, body: mustJSON(map[string]any{
		"__type":              errTypePrefix + "TransactionCanceledException",
		"message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	})}
}
