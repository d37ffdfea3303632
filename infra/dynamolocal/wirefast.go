package dynamolocal

import "slices"

// decodeWireFast decodes body into w (a *writeWire or a *txWire) when the
// request is in the form the AWS SDKs send: compact JSON, each field
// once, named exactly as the API names it, no null, attribute values in
// the form decodeStored reads. It reports false for anything else, and
// decodeWrite then decodes the request with encoding/json as before; what
// it decodes is what json.Unmarshal would. encoding/json scanned a
// transaction's bytes two or three times (the whole body checked, then
// each attribute map skipped to find its end, then read again by
// avMap): a quarter of the engine's work on a durable step's checkpoint.
func decodeWireFast(body []byte, w any) bool {
	d := storedDecoder{data: body}
	ok := false
	switch w := w.(type) {
	case *writeWire:
		ok = d.writeWire(w)
	case *txWire:
		ok = d.txWire(w)
	}
	return ok && d.pos == len(body)
}

// fields reads an object whose members field reads by name; false for a
// member named twice, or one field refuses.
func (d *storedDecoder) fields(field func(name string) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	var seen []string
	for {
		k, ok := d.str()
		if !ok || slices.Contains(seen, k) || !d.next(':') || !field(k) {
			return false
		}
		seen = append(seen, k)
		if d.next('}') {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}

// strField reads a string into *dst.
func (d *storedDecoder) strField(dst *string) bool {
	s, ok := d.str()
	*dst = s
	return ok
}

// avField reads an attribute map into *dst.
func (d *storedDecoder) avField(dst *avMap) bool {
	m, ok := d.object()
	*dst = m
	return ok
}

// writeWire reads one item write's request, or one action of a
// transaction.
func (d *storedDecoder) writeWire(w *writeWire) bool {
	return d.fields(func(name string) bool {
		switch name {
		case "TableName":
			return d.strField(&w.TableName)
		case "ConditionExpression":
			return d.strField(&w.ConditionExpression)
		case "ReturnValuesOnConditionCheckFailure":
			return d.strField(&w.ReturnValuesOnConditionCheckFailure)
		case "UpdateExpression":
			return d.strField(&w.UpdateExpression)
		case "ReturnValues":
			return d.strField(&w.ReturnValues)
		case "ReturnConsumedCapacity":
			return d.strField(&w.ReturnConsumedCapacity)
		case "Key":
			return d.avField(&w.Key)
		case "Item":
			return d.avField(&w.Item)
		case "ExpressionAttributeValues":
			return d.avField(&w.ExpressionAttributeValues)
		case "ExpressionAttributeNames":
			w.ExpressionAttributeNames = map[string]string{}
			return d.fields(func(k string) bool {
				v, ok := d.str()
				w.ExpressionAttributeNames[k] = v
				return ok
			})
		}
		return false
	})
}

// txWire reads a TransactWriteItems request. Its ClientRequestToken and
// ReturnItemCollectionMetrics are read and dropped, as json.Unmarshal
// drops them (txWire has no field for them).
func (d *storedDecoder) txWire(w *txWire) bool {
	return d.fields(func(name string) bool {
		switch name {
		case "ReturnConsumedCapacity":
			return d.strField(&w.ReturnConsumedCapacity)
		case "ClientRequestToken", "ReturnItemCollectionMetrics":
			_, ok := d.str()
			return ok
		case "TransactItems":
			w.TransactItems = []map[string]*writeWire{}
			return d.list(func() bool {
				action := map[string]*writeWire{}
				w.TransactItems = append(w.TransactItems, action)
				return d.fields(func(kind string) bool {
					switch kind {
					case "ConditionCheck", "Put", "Delete", "Update":
						a := &writeWire{}
						action[kind] = a
						return d.writeWire(a)
					}
					return false
				})
			})
		}
		return false
	})
}
