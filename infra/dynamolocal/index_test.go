package dynamolocal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/truora/minidyn/server"
)

// TestRewriteKeepsIndexes writes items again, keeping, changing, adding
// and removing their secondary index keys (a rewrite with the same table
// key takes its old rows' places): after each write the table's
// partition and each index list exactly the items they should, in order,
// and the counts agree.
func TestRewriteKeepsIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHandler(server.NewServer())
	do := func(op, body string) map[string]any {
		t.Helper()
		rep, err := h.dispatch(ctx, op, []byte(body), "us-east-1")
		if err == nil && rep.status != http.StatusOK {
			err = fmt.Errorf("%s: %s", op, rep.body)
		}
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(rep.body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	do("CreateTable", checkpointTable)
	put := func(sk, gsi1 string) {
		item := `"PK":{"S":"P"},"SK":{"S":"` + sk + `"}`
		if gsi1 != "" {
			item += `,"GSI1PK":{"S":"G"},"GSI1SK":{"S":"` + gsi1 + `"}`
		}
		do("PutItem", `{"TableName":"data","Item":{`+item+`}}`)
	}
	query := func(index, hashAttr, hash string) []string {
		q := `{"TableName":"data","KeyConditionExpression":"#h = :h","ExpressionAttributeNames":{"#h":"` + hashAttr + `"},"ExpressionAttributeValues":{":h":{"S":"` + hash + `"}}`
		if index != "" {
			q += `,"IndexName":"` + index + `"`
		}
		var sks []string
		for _, it := range do("Query", q+"}")["Items"].([]any) {
			sks = append(sks, it.(map[string]any)["SK"].(map[string]any)["S"].(string))
		}
		return sks
	}
	check := func(step string, table, gsi1 []string) {
		t.Helper()
		if got := query("", "PK", "P"); !slices.Equal(got, table) {
			t.Errorf("%s: table partition %v, want %v", step, got, table)
		}
		if got := query("GSI1", "GSI1PK", "G"); !slices.Equal(got, gsi1) {
			t.Errorf("%s: GSI1 %v, want %v", step, got, gsi1)
		}
		n, idx, _ := h.counts("data")
		if n != len(table) || idx["GSI1"] != len(gsi1) || idx["GSI2"] != 0 {
			t.Errorf("%s: counts %d %v, want %d and GSI1 %d", step, n, idx, len(table), len(gsi1))
		}
	}
	put("a", "3")
	put("b", "2")
	put("c", "1")
	check("three items", []string{"a", "b", "c"}, []string{"c", "b", "a"})
	put("b", "2")
	check("b again, same keys", []string{"a", "b", "c"}, []string{"c", "b", "a"})
	put("b", "4")
	check("b's index key changed", []string{"a", "b", "c"}, []string{"c", "a", "b"})
	put("a", "")
	check("a left the index", []string{"a", "b", "c"}, []string{"c", "b"})
	put("a", "0")
	check("a back in the index", []string{"a", "b", "c"}, []string{"a", "c", "b"})
	do("UpdateItem", `{"TableName":"data","Key":{"PK":{"S":"P"},"SK":{"S":"c"}},"UpdateExpression":"SET x = :x","ExpressionAttributeValues":{":x":{"N":"1"}}}`)
	check("c updated, keys kept", []string{"a", "b", "c"}, []string{"a", "c", "b"})
	do("UpdateItem", `{"TableName":"data","Key":{"PK":{"S":"P"},"SK":{"S":"c"}},"UpdateExpression":"REMOVE GSI1SK"}`)
	check("c's index key removed by an update", []string{"a", "b", "c"}, []string{"a", "b"})
	do("DeleteItem", `{"TableName":"data","Key":{"PK":{"S":"P"},"SK":{"S":"a"}}}`)
	check("a deleted", []string{"b", "c"}, []string{"b"})
}
