package dynamolocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/truora/minidyn/interpreter"
	"github.com/truora/minidyn/types"
)

// Every write runs under the exclusive lock, through h.write: it applies
// the write to the layer's items (index.go), appends the
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

// encode is the record's JSON, as json.Marshal writes it but without
// scanning the body again: every body journaled is a request the layer
// decoded whole (json.Unmarshal validated it) or JSON it encoded itself,
// and the body is most of a write's bytes. An empty body is null.
func (r record) encode() []byte {
	op, _ := json.Marshal(r.Op)
	body := []byte(r.Body)
	if len(body) == 0 {
		body = []byte("null")
	}
	b := make([]byte, 0, len(`{"op":,"body":}`)+len(op)+len(body))
	b = append(b, `{"op":`...)
	b = append(b, op...)
	b = append(b, `,"body":`...)
	b = append(b, body...)
	return append(b, '}')
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

// keyOf is item's table key (the key attributes it has).
func keyOf(sch *schema, item map[string]*types.Item) map[string]*types.Item {
	return keyItem(item, sch.keys.names()...)
}

// conditionFailed is a ConditionalCheckFailedException, with the item as
// it is when the request asked for it (ReturnValuesOnConditionCheckFailure
// ALL_OLD) and it exists.
func conditionFailed(item map[string]*types.Item, returnOld string) *reply {
	out := map[string]any{"__type": errTypePrefix + "ConditionalCheckFailedException", "message": "The conditional request failed"}
	if returnOld == "ALL_OLD" && len(item) > 0 {
		out["Item"] = outItem(item)
	}
	return &reply{status: http.StatusBadRequest, contentType: amzJSON, body: mustJSON(out)}
}

// checkReturnOnFailure refuses a ReturnValuesOnConditionCheckFailure
// DynamoDB does not know.
func checkReturnOnFailure(v string) error {
	switch v {
	case "", "NONE", "ALL_OLD":
		return nil
	}
	return validation("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: "+
		"Member must satisfy enum value set: [ALL_OLD, NONE]", v)
}

// match evaluates a ConditionExpression on item (nil: absent) with
// minidyn's interpreter, as minidyn does: an expression it cannot
// evaluate is a ValidationException.
func match(table, expr string, names map[string]string, values, item map[string]*types.Item) (bool, error) {
	if expr == "" {
		return true, nil
	}
	ok, err := evalCondition(interpreter.ExpressionTypeConditional, expr, names, values, item)
	if err != nil {
		return false, validation("%s", err.Error())
	}
	return ok, nil
}

// conditional is what every single-item write has: the table, a
// condition and its placeholders.
type conditional struct {
	TableName                           string
	ConditionExpression                 string
	ExpressionAttributeNames            map[string]string
	ExpressionAttributeValues           map[string]*types.Item
	ReturnValuesOnConditionCheckFailure string
}

// check refuses what minidyn refuses of a write's expressions (after the
// layer's own limits): placeholders exprs (and the condition) do not use
// or that are malformed, duplicate set members in the values; and an
// unknown ReturnValuesOnConditionCheckFailure, as DynamoDB does.
func (c *conditional) check(exprs ...string) error {
	if err := checkPlaceholders(c.ExpressionAttributeNames, c.ExpressionAttributeValues, append(exprs, c.ConditionExpression)...); err != nil {
		return err
	}
	if err := checkReturnOnFailure(c.ReturnValuesOnConditionCheckFailure); err != nil {
		return err
	}
	if err := types.ValidateItemMap(c.ExpressionAttributeValues); err != nil {
		return validation("%s", err.Error())
	}
	return nil
}

// putInput is a PutItem request, or the Put of a transaction.
type putInput struct {
	conditional
	Item map[string]*types.Item
}

// check refuses what minidyn refuses of a Put: see conditional.check,
// duplicate set members, a missing or mistyped key attribute.
func (p *putInput) check(ti *tableIndex) error {
	if err := p.conditional.check(); err != nil {
		return err
	}
	if err := types.ValidateItemMap(p.Item); err != nil {
		return validation("%s", err.Error())
	}
	return ti.checkItemKey(p.Item)
}

// table returns the table's items for checks made before the write
// lock; the write itself looks the table up again under the lock.
func (h *handler) table(ctx context.Context, table string) (*tableIndex, *reply) {
	ti, unlock, rep := h.readTable(ctx, table)
	if rep != nil {
		return nil, rep
	}
	unlock()
	return ti, nil
}

// itemWrite is a PutItem or a DeleteItem: what the two share.
type itemWrite struct {
	op, returnValues, capacity string
	conditional
	key          map[string]*types.Item  // the item's key (of the Item for a put)
	checkLimits  func(*schema) error     // DynamoDB's limits
	checkMinidyn func(*tableIndex) error // what minidyn refuses
	after        map[string]*types.Item  // the item stored; nil: deleted
}

// checked returns, under the write lock, the table and the item at key
// as stored (nil: absent) once c's condition holds on it; otherwise the
// answer (ConditionalCheckFailedException) or the error (a condition the
// interpreter refuses, a stored item that cannot be decoded).
func (h *handler) checked(ctx context.Context, c *conditional, key map[string]*types.Item) (*tableIndex, map[string]*types.Item, *reply, error) {
	ti, rep := h.tableLocked(ctx, c.TableName)
	if rep != nil {
		return nil, nil, rep, nil
	}
	old, err := ti.get(key)
	if err != nil {
		return nil, nil, nil, err
	}
	ok, err := match(c.TableName, c.ConditionExpression, c.ExpressionAttributeNames, c.ExpressionAttributeValues, old)
	if err != nil {
		return nil, nil, nil, err
	}
	if !ok {
		return nil, nil, conditionFailed(old, c.ReturnValuesOnConditionCheckFailure), nil
	}
	return ti, old, nil, nil
}

// writeItem runs a PutItem or DeleteItem: the request is checked against
// DynamoDB's limits and minidyn's checks, the condition evaluated on the
// item as stored, and the item stored or deleted. ReturnValues is NONE or
// ALL_OLD.
func (h *handler) writeItem(ctx context.Context, body []byte, w itemWrite) (*reply, error) {
	mode, err := checkCapacityMode(w.capacity)
	if err != nil {
		return nil, err
	}
	switch w.returnValues {
	case "", "NONE", "ALL_OLD":
	default:
		return nil, validation("ReturnValues can only be ALL_OLD or NONE for %s, got %q", w.op, w.returnValues)
	}
	if err := checkExpressions(expr{"ConditionExpression", w.ConditionExpression}); err != nil {
		return nil, err
	}
	if err := checkExpressionValues(w.ExpressionAttributeValues); err != nil {
		return nil, err
	}
	sch, rep := h.schema(ctx, w.TableName)
	if rep != nil {
		return rep, nil
	}
	if err := w.checkLimits(sch); err != nil {
		return nil, err
	}
	if rep := h.probeFailure(ctx, w.op, w.TableName, ""); rep != nil {
		return rep, nil
	}
	ti, rep := h.table(ctx, w.TableName)
	if rep != nil {
		return rep, nil
	}
	if err := w.checkMinidyn(ti); err != nil {
		return nil, err
	}
	var data []byte
	if w.after != nil {
		if data, err = encodeStored(w.after); err != nil {
			return nil, err
		}
	}
	return h.write(func() (*reply, []record, error) {
		ti, old, rep, err := h.checked(ctx, &w.conditional, w.key)
		if rep != nil || err != nil {
			return rep, nil, err
		}
		if w.after != nil {
			ti.putData(w.after, data)
		} else {
			ti.delete(w.key)
		}
		recs := []record{{w.op, body}}
		var out any = struct{}{}
		if w.returnValues == "ALL_OLD" && len(old) > 0 {
			out = map[string]any{"Attributes": outItem(old)}
		}
		rep, err = jsonReply(out)
		if err != nil || mode == "" {
			return rep, recs, err
		}
		u := newUsage()
		u.write(ti.sch, w.TableName, old, w.after, 1)
		rep, err = withUsage(rep, u, mode, false)
		return rep, recs, err
	})
}

// putItem stores an item (see writeItem).
func (h *handler) putItem(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		putInput
		ReturnValues           string
		ReturnConsumedCapacity string
	}
	if err := decodeWrite(body, &in, func(w *writeWire) {
		in.conditional, in.Item, in.ReturnValues, in.ReturnConsumedCapacity = w.conditional(), w.Item, w.ReturnValues, w.ReturnConsumedCapacity
	}); err != nil {
		return nil, err
	}
	return h.writeItem(ctx, body, itemWrite{op: "PutItem", returnValues: in.ReturnValues, capacity: in.ReturnConsumedCapacity,
		conditional: in.conditional, key: in.Item, after: in.Item,
		checkLimits: func(sch *schema) error { return sch.checkItem(in.Item) }, checkMinidyn: in.check})
}

// deleteInput is a DeleteItem request, the Delete of a transaction, or
// (with its ConditionExpression required) a ConditionCheck.
type deleteInput struct {
	conditional
	Key map[string]*types.Item
}

// check refuses what minidyn refuses of a Key and its condition.
func (d *deleteInput) check(ti *tableIndex) error {
	if err := d.conditional.check(); err != nil {
		return err
	}
	return ti.checkKey(d.Key)
}

// deleteItem deletes an item (see writeItem).
func (h *handler) deleteItem(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		deleteInput
		ReturnValues           string
		ReturnConsumedCapacity string
	}
	if err := decodeWrite(body, &in, func(w *writeWire) {
		in.conditional, in.Key, in.ReturnValues, in.ReturnConsumedCapacity = w.conditional(), w.Key, w.ReturnValues, w.ReturnConsumedCapacity
	}); err != nil {
		return nil, err
	}
	return h.writeItem(ctx, body, itemWrite{op: "DeleteItem", returnValues: in.ReturnValues, capacity: in.ReturnConsumedCapacity,
		conditional: in.conditional, key: in.Key,
		checkLimits: func(sch *schema) error { return sch.checkKeyValues(in.Key) }, checkMinidyn: in.check})
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
	conditional
	Key              map[string]*types.Item
	UpdateExpression string
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

// checkMinidyn refuses what minidyn refuses of an update (after the
// layer's own limits): unused or malformed placeholders, duplicate set
// members, a Key that is not exactly the table's key, an update of a key
// attribute.
func (u *updateInput) checkMinidyn(ti *tableIndex) error {
	if err := u.conditional.check(u.UpdateExpression); err != nil {
		return err
	}
	if err := types.ValidateItemMap(u.Key); err != nil {
		return validation("%s", err.Error())
	}
	if err := ti.keys.ValidatePrimaryKeyMap(u.Key); err != nil {
		return validation("%s", err.Error())
	}
	if err := updateTargetsKey(u.UpdateExpression, u.ExpressionAttributeNames, ti.sch.keys.hash, ti.sch.keys.rng); err != nil {
		return validation("%s", err.Error())
	}
	return ti.checkItemKey(u.Key)
}

// apply computes the item the update makes of cur (nil: absent, the item
// then starts as its key), with minidyn's interpreter, on a copy: cur is
// not changed. minidyn ignores top-level REMOVE actions (guregu also
// emits them for Set of an empty value): the layer removes those
// attributes itself. An expression the interpreter refuses is err; an
// item over DynamoDB's limits is limit (the update is then not applied).
func (u *updateInput) apply(sch *schema, cur map[string]*types.Item) (item map[string]*types.Item, limit, err error) {
	if cur == nil {
		item = maps.Clone(u.Key)
	} else {
		item = maps.Clone(cur)
	}
	if err := evalUpdate(u.UpdateExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues, item); err != nil {
		return nil, nil, validation("%s", err.Error())
	}
	for _, n := range exprs.get(exprUpdate, u.UpdateExpression).removes {
		if alias, ok := u.ExpressionAttributeNames[n]; ok {
			n = alias
		}
		delete(item, n)
	}
	if err := sch.checkUpdated(item); err != nil {
		return nil, err, nil
	}
	return item, nil, nil
}

// updateItem evaluates the condition on the item as stored, applies the
// update to a copy (see apply), stores the result and computes
// ReturnValues.
func (h *handler) updateItem(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		updateInput
		ReturnValues           string
		ReturnConsumedCapacity string
	}
	if err := decodeWrite(body, &in, func(w *writeWire) {
		in.conditional, in.Key, in.UpdateExpression = w.conditional(), w.Key, w.UpdateExpression
		in.ReturnValues, in.ReturnConsumedCapacity = w.ReturnValues, w.ReturnConsumedCapacity
	}); err != nil {
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
	if rep := h.probeFailure(ctx, "UpdateItem", in.TableName, ""); rep != nil {
		return rep, nil
	}
	ti, rep := h.table(ctx, in.TableName)
	if rep != nil {
		return rep, nil
	}
	if err := in.checkMinidyn(ti); err != nil {
		return nil, err
	}
	return h.write(func() (*reply, []record, error) {
		ti, old, rep, err := h.checked(ctx, &in.conditional, in.Key)
		if rep != nil || err != nil {
			return rep, nil, err
		}
		item, limit, err := in.apply(ti.sch, old)
		if err == nil {
			err = limit
		}
		if err != nil {
			return nil, nil, err
		}
		if err := ti.put(item); err != nil {
			return nil, nil, err
		}
		var attrs map[string]*types.Item
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
		var out any = struct{}{}
		if len(attrs) > 0 {
			out = map[string]any{"Attributes": outItem(attrs)}
		}
		if rep, err = jsonReply(out); err != nil {
			return nil, nil, err
		}
		recs := []record{{"UpdateItem", body}}
		if mode == "" {
			return rep, recs, nil
		}
		u := newUsage()
		u.write(ti.sch, in.TableName, old, item, 1)
		rep, err = withUsage(rep, u, mode, false)
		return rep, recs, err
	})
}

// changed is the attributes of a whose value b does not have.
func changed(a, b map[string]*types.Item) map[string]*types.Item {
	diff := map[string]*types.Item{}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(mustJSON(encodeAV(v)), mustJSON(encodeAV(w))) {
			diff[k] = v
		}
	}
	return diff
}

// writeRequest is one request of BatchWriteItem.
type writeRequest struct {
	PutRequest    *struct{ Item map[string]*types.Item }
	DeleteRequest *struct{ Key map[string]*types.Item }
}

// batchWrite validates the whole batch first, as DynamoDB does (minidyn
// would apply the requests before an invalid one), then asks minidyn
// which requests it processes (so that emulated failures and unprocessed
// items still work: minidyn applies them to its empty table, which is
// emptied again at once) and applies those to the layer's items.
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
		ti, rep := h.table(ctx, table)
		if rep != nil {
			return rep, nil
		}
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
				p := putInput{Item: r.PutRequest.Item}
				if err := p.check(ti); err != nil {
					return nil, err
				}
				key = keyOf(sch, r.PutRequest.Item)
			default:
				if err := sch.checkKeyValues(r.DeleteRequest.Key); err != nil {
					return nil, err
				}
				if err := ti.checkKey(r.DeleteRequest.Key); err != nil {
					return nil, err
				}
				key = r.DeleteRequest.Key
			}
			if id := sch.itemID(key); seen[id] {
				return nil, validation("Provided list of item keys contains duplicates")
			} else {
				seen[id] = true
			}
		}
	}
	return h.write(func() (*reply, []record, error) {
		stores := map[string]*tableIndex{}
		for _, table := range tables {
			ti, rep := h.tableLocked(ctx, table)
			if rep != nil {
				return rep, nil, nil
			}
			stores[table] = ti
		}
		rep := h.call(ctx, "BatchWriteItem", body)
		h.emptyBackend(ctx, tables, in.RequestItems)
		if rep.status != http.StatusOK {
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
			ti := stores[table]
			skip := map[string]bool{}
			for _, r := range out.UnprocessedItems[table] {
				skip[ti.sch.itemID(r.key(ti.sch))] = true
			}
			for _, r := range in.RequestItems[table] {
				key := r.key(ti.sch)
				if skip[ti.sch.itemID(key)] {
					continue
				}
				done[table] = append(done[table], r)
				var before map[string]*types.Item
				if mode != "" {
					var err error
					if before, err = ti.get(key); err != nil {
						return nil, nil, err
					}
				}
				var after map[string]*types.Item
				if r.PutRequest != nil {
					after = r.PutRequest.Item
					if err := ti.put(after); err != nil {
						return nil, nil, err
					}
				} else {
					ti.delete(key)
				}
				if mode != "" {
					u.write(ti.sch, table, before, after, 1)
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

// emptyBackend removes from minidyn's tables the items a BatchWriteItem
// put there: the layer holds the items, minidyn's tables stay empty.
// Callers hold h.lock exclusively.
func (h *handler) emptyBackend(ctx context.Context, tables []string, reqs map[string][]writeRequest) {
	if c, ok := h.backend.(interface{ ClearTable(string) error }); ok {
		for _, t := range tables {
			_ = c.ClearTable(t) // a table minidyn does not have holds nothing
		}
		return
	}
	for _, t := range tables {
		sch, rep := h.schemaLocked(ctx, t)
		if rep != nil {
			continue
		}
		for _, r := range reqs[t] {
			if r.PutRequest != nil {
				h.call(ctx, "DeleteItem", mustJSON(map[string]any{"TableName": t, "Key": encodeItem(keyOf(sch, r.PutRequest.Item))}))
			}
		}
	}
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
	updateInput
	Item map[string]*types.Item
	ti   *tableIndex // for the checks before the write lock
}

// transactWrite runs TransactWriteItems in the layer, under the exclusive
// lock. It validates the request against DynamoDB's limits and minidyn's
// checks; evaluates every condition on the items as they are (all failing
// conditions are reported, as DynamoDB does, and nothing is written);
// computes every action's item (an update that makes an item too large
// cancels the transaction with a ValidationError reason); and only then
// stores them all, so that nothing is half applied.
func (h *handler) transactWrite(ctx context.Context, body []byte) (*reply, error) {
	// One decode of the whole request: each action straight into its
	// txAction (its update's fields and its Item), under its kind.
	var in struct {
		TransactItems          []map[string]*txAction
		ReturnConsumedCapacity string
	}
	if err := decodeWrite(body, &in, func(w *txWire) {
		in.TransactItems, in.ReturnConsumedCapacity = w.actions(), w.ReturnConsumedCapacity
	}); err != nil {
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
	seen := map[string]bool{}
	probed := map[string]bool{}
	total := 0
	for i, raw := range in.TransactItems {
		if len(raw) != 1 {
			return nil, validation("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		var a *txAction
		var kind string
		for k, v := range raw {
			kind, a = k, v
		}
		if a == nil { // an action given as null
			a = &txAction{}
		}
		a.kind = kind
		switch a.kind {
		case "ConditionCheck", "Put", "Delete", "Update":
		default:
			return nil, validation("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		sch, rep := h.schema(ctx, a.TableName)
		if rep != nil {
			return rep, nil
		}
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
		if a.kind == "ConditionCheck" && a.ConditionExpression == "" {
			return nil, validation("The ConditionExpression of a ConditionCheck is required")
		}
		if !probed[a.TableName] {
			if rep := h.probeFailure(ctx, "GetItem", a.TableName, ""); rep != nil {
				return rep, nil
			}
			probed[a.TableName] = true
		}
		if a.ti, rep = h.table(ctx, a.TableName); rep != nil {
			return rep, nil
		}
		switch a.kind {
		case "Put":
			p := putInput{conditional: a.conditional, Item: a.Item}
			err = p.check(a.ti)
		case "Update":
			err = a.checkMinidyn(a.ti)
		default:
			d := deleteInput{conditional: a.conditional, Key: a.Key}
			err = d.check(a.ti)
		}
		if err != nil {
			return nil, err
		}
		id := a.TableName + "\x00" + sch.itemID(a.Key)
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
		stores := make([]*tableIndex, len(actions))
		olds := make([]map[string]*types.Item, len(actions))
		for i, a := range actions {
			ti, rep := h.tableLocked(ctx, a.TableName)
			if rep != nil {
				return rep, nil, nil
			}
			old, err := ti.get(a.Key)
			if err != nil {
				return nil, nil, err
			}
			stores[i], olds[i] = ti, old
		}
		// Every condition first, on the items as they are.
		reasons := make([]map[string]any, len(actions))
		failed := false
		for i, a := range actions {
			reasons[i] = map[string]any{"Code": "None"}
			ok, err := match(a.TableName, a.ConditionExpression, a.ExpressionAttributeNames, a.ExpressionAttributeValues, olds[i])
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				failed = true
				reasons[i] = map[string]any{"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
				if a.ReturnValuesOnConditionCheckFailure == "ALL_OLD" && len(olds[i]) > 0 {
					reasons[i]["Item"] = outItem(olds[i])
				}
			}
		}
		if failed {
			return cancelled(reasons), nil, nil
		}
		// Then every action's item, before anything is stored. Every
		// action is a transactional write (capacity.go): twice a write's
		// units, a ConditionCheck as a write of its item.
		afters := make([]map[string]*types.Item, len(actions))
		u := newUsage()
		for i, a := range actions {
			switch a.kind {
			case "ConditionCheck":
				if mode != "" {
					u.of(a.TableName).table.write += 2 * writeUnits(itemSize(olds[i]))
				}
				continue
			case "Put":
				afters[i] = a.Item
			case "Update":
				item, limit, err := a.apply(stores[i].sch, olds[i])
				if err != nil {
					return nil, nil, err
				}
				if limit != nil {
					ae, ok := errors.AsType[*apiError](limit)
					if !ok {
						return nil, nil, limit
					}
					reasons[i] = map[string]any{"Code": "ValidationError", "Message": ae.msg}
					return cancelled(reasons), nil, nil
				}
				afters[i] = item
			}
			if mode != "" { // the units are counted only when asked for
				u.write(stores[i].sch, a.TableName, olds[i], afters[i], 2)
			}
		}
		datas := make([][]byte, len(actions))
		for i := range actions {
			if afters[i] != nil {
				var err error
				if datas[i], err = encodeStored(afters[i]); err != nil {
					return nil, nil, err
				}
			}
		}
		for i, a := range actions {
			switch a.kind {
			case "Put", "Update":
				stores[i].putData(afters[i], datas[i])
			case "Delete":
				stores[i].delete(a.Key)
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
