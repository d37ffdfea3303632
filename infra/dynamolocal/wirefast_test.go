package dynamolocal

import (
	"encoding/json"
	"reflect"
	"testing"
)

// wireBodies are item writes' requests: as the SDKs send them (the fast
// path must take them) and in other forms json.Unmarshal accepts or
// refuses (the fast path must leave them, or decode them the same).
var wireBodies = []struct {
	name, body string
	fast       bool
}{
	{"put", `{"Item":{"PK":{"S":"a"},"SK":{"S":"b"},"n":{"N":"1"},"m":{"M":{"x":{"L":[{"BOOL":true},{"NULL":true}]}}}},"TableName":"data","ConditionExpression":"attribute_not_exists(PK)"}`, true},
	{"update", `{"ExpressionAttributeNames":{"#s":"status"},"ExpressionAttributeValues":{":v0":{"S":"running"},":v1":{"N":"1"}},"Key":{"PK":{"S":"RUN#1"},"SK":{"S":"RUN"}},"TableName":"data","UpdateExpression":"SET #s = :v0 ADD version :v1","ReturnValues":"ALL_NEW","ReturnConsumedCapacity":"TOTAL","ReturnValuesOnConditionCheckFailure":"ALL_OLD"}`, true},
	{"transaction", string(stepMapBody("f6175c56-20c2-465e-8159-200920a9fe23", 5)), true},
	{"transaction with every kind", `{"ReturnConsumedCapacity":"TOTAL","ReturnItemCollectionMetrics":"NONE","TransactItems":[{"ConditionCheck":{"TableName":"t","Key":{"PK":{"S":"a"}},"ConditionExpression":"attribute_exists(PK)"}},{"Delete":{"TableName":"t","Key":{"PK":{"S":"b"}}}},{"Put":{"TableName":"t","Item":{"PK":{"S":"c"}}}},{"Update":{"TableName":"t","Key":{"PK":{"S":"d"}},"UpdateExpression":"SET x = :x","ExpressionAttributeValues":{":x":{"SS":["1","2"]}}}}]}`, true},
	{"empty transaction", `{"TransactItems":[]}`, true},
	{"escapes", `{"TableName":"data","Item":{"PK":{"S":"a\"\\\n\u00e9"},"SK":{"S":"é"}}}`, true},
	{"whitespace", `{ "TableName": "data", "Item": {"PK": {"S": "a"}} }`, false},
	{"field named in another case", `{"tablename":"data","Item":{"PK":{"S":"a"}}}`, false},
	{"field twice", `{"TableName":"a","TableName":"b","Item":{"PK":{"S":"a"}}}`, false},
	{"item twice", `{"Item":{"PK":{"S":"a"}},"Item":{"SK":{"S":"b"}}}`, false},
	{"null item", `{"TableName":"data","Item":null}`, false},
	{"unknown field", `{"TableName":"data","Item":{"PK":{"S":"a"}},"Expected":{}}`, false},
	{"two kinds in one action", `{"TransactItems":[{"Put":{"TableName":"t","Item":{"PK":{"S":"c"}}},"Delete":{"TableName":"t","Key":{"PK":{"S":"c"}}}}]}`, true},
	{"unknown kind", `{"TransactItems":[{"Get":{"TableName":"t"}}]}`, false},
	{"null action", `{"TransactItems":[{"Put":null}]}`, false},
	{"trailing bytes", `{"TableName":"data"} x`, false},
	{"cut short", `{"TableName":"data","Item":{"PK":{"S":"a"}}`, false},
	{"not an object", `[]`, false},
	{"a value with two types", `{"TableName":"data","Item":{"PK":{"S":"a","N":"1"}}}`, false},
	{"invalid UTF-8", "{\"TableName\":\"d\xffa\",\"Item\":{\"PK\":{\"S\":\"a\"}}}", true},
}

// TestWireFastMatchesEncodingJSON: every request the fast path decodes
// decodes as json.Unmarshal decodes it, and the SDKs' form takes it.
func TestWireFastMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, c := range wireBodies {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := checkWireFast(t, []byte(c.body)); got != c.fast {
				t.Errorf("fast path taken: %v, want %v", got, c.fast)
			}
		})
	}
}

// checkWireFast decodes data as both wires with decodeWireFast and with
// json.Unmarshal, fails the test on any difference where the fast path
// decoded, and reports whether it decoded either.
func checkWireFast(t *testing.T, data []byte) bool {
	t.Helper()
	var w, wantW writeWire
	okW := decodeWireFast(data, &w)
	if okW && (json.Unmarshal(data, &wantW) != nil || !reflect.DeepEqual(w, wantW)) {
		t.Fatalf("writeWire of %q: %+v, json.Unmarshal: %+v", data, w, wantW)
	}
	var tx, wantTx txWire
	okTx := decodeWireFast(data, &tx)
	if okTx && (json.Unmarshal(data, &wantTx) != nil || !reflect.DeepEqual(tx, wantTx)) {
		t.Fatalf("txWire of %q: %+v, json.Unmarshal: %+v", data, tx, wantTx)
	}
	return okW || okTx
}

// FuzzWireFast checks decodeWireFast against json.Unmarshal on any input.
func FuzzWireFast(f *testing.F) {
	for _, c := range wireBodies {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkWireFast(t, data) })
}
