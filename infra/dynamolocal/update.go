package dynamolocal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

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

type updateInput struct {
	TableName                string
	Key                      map[string]json.RawMessage
	UpdateExpression         string
	ExpressionAttributeNames map[string]string
}

// getItem reads an item with the lock already held; nil if absent.
func (h *handler) getItem(ctx context.Context, table string, key map[string]json.RawMessage) map[string]json.RawMessage {
	rep := h.call(ctx, "GetItem", mustJSON(map[string]any{"TableName": table, "Key": key, "ConsistentRead": true}))
	var out struct{ Item map[string]json.RawMessage }
	if rep.status != http.StatusOK || json.Unmarshal(rep.body, &out) != nil {
		return nil
	}
	return out.Item
}

// dropAttrs rewrites the item without names, with the lock already held.
func (h *handler) dropAttrs(ctx context.Context, table string, item map[string]json.RawMessage, names []string) *reply {
	for _, n := range names {
		delete(item, n)
	}
	return h.call(ctx, "PutItem", mustJSON(map[string]any{"TableName": table, "Item": item}))
}

// updateItem works around minidyn ignoring top-level REMOVE (which guregu
// also emits for Set of an empty value): it applies the update, then rewrites
// the item without the removed attributes, all under the exclusive lock, and
// computes ReturnValues itself.
func (h *handler) updateItem(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		updateInput
		ReturnValues string
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	removes := topLevelRemoves(in.UpdateExpression, in.ExpressionAttributeNames)
	if len(removes) == 0 {
		return h.shared(ctx, "UpdateItem", body), nil
	}
	var req map[string]json.RawMessage
	if err := decodeRequest(body, &req); err != nil {
		return nil, err
	}
	req["ReturnValues"] = mustJSON("ALL_NEW")
	h.lock.Lock()
	defer h.lock.Unlock()
	old := h.getItem(ctx, in.TableName, in.Key)
	rep := h.call(ctx, "UpdateItem", mustJSON(req))
	if rep.status != http.StatusOK {
		return rep, nil
	}
	var out struct{ Attributes map[string]json.RawMessage }
	if err := json.Unmarshal(rep.body, &out); err != nil {
		return nil, fmt.Errorf("decode backend UpdateItem of %s: %w", in.TableName, err)
	}
	item := out.Attributes
	if rep := h.dropAttrs(ctx, in.TableName, item, removes); rep.status != http.StatusOK {
		return rep, nil
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
	if attrs == nil {
		return jsonReply(struct{}{})
	}
	return jsonReply(map[string]any{"Attributes": attrs})
}

// transactWrite applies the same REMOVE workaround to the Update entries of
// TransactWriteItems: after the transaction succeeds, still holding the
// exclusive lock, each updated item is rewritten without its removed
// attributes, so no other request sees the intermediate state.
func (h *handler) transactWrite(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		TransactItems []struct{ Update *updateInput }
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	type fix struct {
		u       *updateInput
		removes []string
	}
	var fixes []fix
	for _, it := range in.TransactItems {
		if it.Update != nil {
			if r := topLevelRemoves(it.Update.UpdateExpression, it.Update.ExpressionAttributeNames); len(r) > 0 {
				fixes = append(fixes, fix{it.Update, r})
			}
		}
	}
	if len(fixes) == 0 {
		return h.shared(ctx, "TransactWriteItems", body), nil
	}
	h.lock.Lock()
	defer h.lock.Unlock()
	rep := h.call(ctx, "TransactWriteItems", body)
	if rep.status != http.StatusOK {
		return rep, nil
	}
	for _, f := range fixes {
		if item := h.getItem(ctx, f.u.TableName, f.u.Key); item != nil {
			if rep := h.dropAttrs(ctx, f.u.TableName, item, f.removes); rep.status != http.StatusOK {
				return rep, nil
			}
		}
	}
	return rep, nil
}
