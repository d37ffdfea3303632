package dynamolocal

import (
	"encoding/json"

	"github.com/truora/minidyn/types"
)

// The item writes' requests (PutItem, UpdateItem, DeleteItem,
// TransactWriteItems) are mostly attribute values, which encoding/json
// decodes by reflection, field by field. They are first decoded into
// writeWire, whose attribute values are read by decodeStored's reader;
// any error sends the request to encoding/json with the request's own
// types, whose answer (the decoded request, or its error, word for word)
// stands. So a request decodes to the same values, and fails with the
// same message, as with encoding/json alone.

// avMap is a map of attribute values read as json.Unmarshal reads one
// into map[string]*types.Item, through decodeStored.
type avMap map[string]*types.Item

// UnmarshalJSON decodes data as json.Unmarshal would into the map: null
// leaves none, an object's attributes are added to those already
// there. It fails as json.Unmarshal fails (its message lacks the
// request's field path: decodeWrite then decodes the request again).
func (m *avMap) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*m = nil
		return nil
	}
	item, err := decodeStored(data)
	if err != nil {
		return err
	}
	if *m == nil {
		*m = item
		return nil
	}
	for k, v := range item {
		(*m)[k] = v
	}
	return nil
}

// writeWire holds every field of the item writes' requests and of a
// transaction's actions; each request takes the fields it has.
type writeWire struct {
	TableName                           string
	ConditionExpression                 string
	ExpressionAttributeNames            map[string]string
	ExpressionAttributeValues           avMap
	ReturnValuesOnConditionCheckFailure string
	Key                                 avMap
	Item                                avMap
	UpdateExpression                    string
	ReturnValues                        string
	ReturnConsumedCapacity              string
}

func (w *writeWire) conditional() conditional {
	return conditional{TableName: w.TableName, ConditionExpression: w.ConditionExpression,
		ExpressionAttributeNames: w.ExpressionAttributeNames, ExpressionAttributeValues: w.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: w.ReturnValuesOnConditionCheckFailure}
}

// decodeWrite decodes body into v (the request's own type) through
// wire, filled from it by fill (read by decodeWireFast when the request
// is in the SDKs' form, else by json.Unmarshal); when wire does not
// decode, as decodeRequest does.
func decodeWrite[W any](body []byte, v any, fill func(w *W)) error {
	var w W
	ok := decodeWireFast(body, &w)
	if !ok {
		var fresh W // the fast read may have filled part of w
		w = fresh
		ok = json.Unmarshal(body, &w) == nil
	}
	if ok {
		fill(&w)
		return nil
	}
	return decodeRequest(body, v)
}

// txWire is a TransactWriteItems request through writeWire.
type txWire struct {
	TransactItems          []map[string]*writeWire
	ReturnConsumedCapacity string
}

// actions are the request's actions as encoding/json decodes them into
// []map[string]*txAction (null actions and elements kept).
func (w *txWire) actions() []map[string]*txAction {
	if w.TransactItems == nil {
		return nil
	}
	out := make([]map[string]*txAction, len(w.TransactItems))
	for i, raw := range w.TransactItems {
		if raw == nil {
			continue
		}
		out[i] = make(map[string]*txAction, len(raw))
		for kind, a := range raw {
			if a == nil {
				out[i][kind] = nil
				continue
			}
			out[i][kind] = &txAction{updateInput: updateInput{conditional: a.conditional(), Key: a.Key, UpdateExpression: a.UpdateExpression}, Item: a.Item}
		}
	}
	return out
}
