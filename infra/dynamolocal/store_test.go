package dynamolocal_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"
	"github.com/truora/minidyn/server"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// backendCount asks minidyn itself, bypassing the layer, how many items
// it holds in table.
func backendCount(t *testing.T, e *dynamolocal.Engine, table string) int {
	t.Helper()
	var n int
	e.WithBackend(func(b *server.Server) {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"TableName":"`+table+`"}`))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.Scan")
		rec := httptest.NewRecorder()
		b.ServeHTTP(rec, req)
		var out struct{ Items []json.RawMessage }
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			t.Fatalf("backend scan of %s: %d %s", table, rec.Code, rec.Body)
		}
		n = len(out.Items)
	})
	return n
}

// TestItemsLiveInTheLayer checks that every kind of write lands in the
// layer's store and none in minidyn's tables (which keep only the schema
// for the failure emulation), that DescribeTable counts the layer's items,
// and that the keys minidyn would have merged ("a.b"+"c" and "a"+"b.c")
// are two items.
func TestItemsLiveInTheLayer(t *testing.T) {
	t.Parallel()
	e, db, client := start(t)
	table := seedMessages(t, db) // BatchWriteItem of 15 items
	ctx := ctxT(t)
	if err := table.Put(msg{Chat: "x", Seq: 1, Author: "ann", Stamp: "s"}).If("attribute_not_exists(Chat)").Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := table.Update("Chat", "x").Range("Seq", 1).Set("Text", "edited").Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteTx().Put(table.Put(msg{Chat: "x", Seq: 2})).Delete(table.Delete("Chat", "c2").Range("Seq", 3)).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := table.Delete("Chat", "c2").Range("Seq", 2).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := backendCount(t, e, "msgs"); n != 0 {
		t.Errorf("minidyn holds %d items, want 0", n)
	}
	desc, err := table.Describe().Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Items != 15 || len(desc.GSI) != 1 || desc.GSI[0].Items != 14 {
		t.Errorf("ItemCount %d, GSI %+v; want 15 items, 14 in ByAuthor", desc.Items, desc.GSI)
	}
	var got msg
	if err := table.Get("Chat", "x").Range("Seq", dynamo.Equal, 1).One(ctx, &got); err != nil || got.Text != "edited" {
		t.Errorf("updated item: %+v, %v", got, err)
	}

	// Keys minidyn joins with "." stay apart.
	if err := db.CreateTable("dots", struct {
		H string `dynamo:"H,hash"`
		R string `dynamo:"R,range"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][2]string{{"a.b", "c"}, {"a", "b.c"}} {
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("dots"), Item: map[string]types.AttributeValue{
			"H": avS(k[0]), "R": avS(k[1]), "V": avS(k[0] + "|" + k[1])}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range [][2]string{{"a.b", "c"}, {"a", "b.c"}} {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("dots"), Key: map[string]types.AttributeValue{"H": avS(k[0]), "R": avS(k[1])}})
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := out.Item["V"].(*types.AttributeValueMemberS); v == nil || v.Value != k[0]+"|"+k[1] {
			t.Errorf("item %v: %v", k, out.Item)
		}
	}
}

// TestConditionFailureReturnsOldItem: PutItem, DeleteItem and UpdateItem
// answer the item as it is with a failed condition when
// ReturnValuesOnConditionCheckFailure is ALL_OLD, and nothing otherwise;
// an unknown value is refused, as on AWS.
func TestConditionFailureReturnsOldItem(t *testing.T) {
	t.Parallel()
	_, db, client := start(t)
	seedMessages(t, db)
	ctx := ctxT(t)
	key := map[string]types.AttributeValue{"Chat": avS("c1"), "Seq": avN("1")}
	never := aws.String("attribute_not_exists(Chat)")
	calls := map[string]func(rv types.ReturnValuesOnConditionCheckFailure) error{
		"PutItem": func(rv types.ReturnValuesOnConditionCheckFailure) error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("msgs"), Item: map[string]types.AttributeValue{"Chat": avS("c1"), "Seq": avN("1"), "Text": avS("new")},
				ConditionExpression: never, ReturnValuesOnConditionCheckFailure: rv})
			return err
		},
		"DeleteItem": func(rv types.ReturnValuesOnConditionCheckFailure) error {
			_, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("msgs"), Key: key, ConditionExpression: never, ReturnValuesOnConditionCheckFailure: rv})
			return err
		},
		"UpdateItem": func(rv types.ReturnValuesOnConditionCheckFailure) error {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("msgs"), Key: key, UpdateExpression: aws.String("SET Text = :t"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":t": avS("new")}, ConditionExpression: never, ReturnValuesOnConditionCheckFailure: rv})
			return err
		},
	}
	for op, call := range calls {
		t.Run(op, func(t *testing.T) {
			for _, rv := range []types.ReturnValuesOnConditionCheckFailure{"", types.ReturnValuesOnConditionCheckFailureNone, types.ReturnValuesOnConditionCheckFailureAllOld} {
				err := call(rv)
				ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err)
				if !ok {
					t.Fatalf("%q: %v, want ConditionalCheckFailedException", rv, err)
				}
				text, _ := ccf.Item["Text"].(*types.AttributeValueMemberS)
				switch {
				case rv == types.ReturnValuesOnConditionCheckFailureAllOld && (text == nil || text.Value != "t"):
					t.Errorf("ALL_OLD: Item %v, want the stored item", ccf.Item)
				case rv != types.ReturnValuesOnConditionCheckFailureAllOld && ccf.Item != nil:
					t.Errorf("%q: Item %v, want none", rv, ccf.Item)
				}
			}
			if err := call("SOME"); errorCode(err) != "ValidationException" {
				t.Errorf("unknown ReturnValuesOnConditionCheckFailure: %v", err)
			}
		})
	}
	if _, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("msgs"), Key: key, ReturnValues: types.ReturnValueAllNew}); errorCode(err) != "ValidationException" {
		t.Errorf("DeleteItem ReturnValues ALL_NEW: %v, want ValidationException", err)
	}
	var got msg
	if err := db.Table("msgs").Get("Chat", "c1").Range("Seq", dynamo.Equal, 1).One(ctx, &got); err != nil || got.Text != "t" {
		t.Errorf("after failed writes: %+v, %v; want the item unchanged", got, err)
	}
}

// TestBackendResetDropsItems: tables minidyn drops behind the layer's
// back (Reset) take their items with them; a table created again with
// the same name starts empty.
func TestBackendResetDropsItems(t *testing.T) {
	t.Parallel()
	e, db, _ := start(t)
	seedMessages(t, db)
	e.WithBackend(func(b *server.Server) {
		if err := b.Reset(); err != nil {
			t.Errorf("Reset: %v", err)
		}
	})
	ctx := ctxT(t)
	var out []msg
	if err := db.Table("msgs").Scan().All(ctx, &out); errorCode(err) != "ResourceNotFoundException" {
		t.Fatalf("scan after Reset: %d items, %v; want ResourceNotFoundException", len(out), err)
	}
	if err := db.CreateTable("msgs", msg{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Table("msgs").Scan().All(ctx, &out); err != nil || len(out) != 0 {
		t.Fatalf("recreated table: %d items, %v; want none", len(out), err)
	}
}

// TestEmulatedUnprocessedItems: minidyn's EmulateUnprocessedItems still
// decides which batch requests are left unprocessed; those are not
// stored (nor journaled), the others are, and nothing stays in minidyn.
func TestEmulatedUnprocessedItems(t *testing.T) {
	t.Parallel()
	e, db, client := start(t)
	seedMessages(t, db)
	ctx := ctxT(t)
	e.WithBackend(func(b *server.Server) {
		b.EmulateUnprocessedItems("msgs", func(n int, raw map[string]*server.AttributeValue) bool {
			return raw["Text"] != nil && raw["Text"].S != nil && *raw["Text"].S == "skip"
		})
	})
	var reqs []types.WriteRequest
	for i, text := range []string{"keep", "skip", "keep"} {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"Chat": avS("b"), "Seq": avN(fmt.Sprint(i)), "Text": avS(text)}}})
	}
	out, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"msgs": reqs}})
	if err != nil {
		t.Fatal(err)
	}
	if un := out.UnprocessedItems["msgs"]; len(un) != 1 {
		t.Fatalf("unprocessed %v, want the one item marked skip", un)
	}
	var got []msg
	if err := db.Table("msgs").Get("Chat", "b").All(ctx, &got); err != nil || len(got) != 2 || got[0].Seq != 0 || got[1].Seq != 2 {
		t.Fatalf("stored %+v, %v; want items 0 and 2", got, err)
	}
	// BatchGetItem: minidyn's emulation applies to keys too.
	e.WithBackend(func(b *server.Server) {
		b.ClearUnprocessedItems()
		b.EmulateUnprocessedItems("msgs", func(n int, raw map[string]*server.AttributeValue) bool { return n == 0 })
	})
	keys := []map[string]types.AttributeValue{{"Chat": avS("b"), "Seq": avN("0")}, {"Chat": avS("b"), "Seq": avN("2")}}
	bg, err := client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"msgs": {Keys: keys}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(bg.Responses["msgs"]) != 1 || len(bg.UnprocessedKeys["msgs"].Keys) != 1 {
		t.Fatalf("BatchGetItem: %d items, unprocessed %v; want one of each", len(bg.Responses["msgs"]), bg.UnprocessedKeys)
	}
	if n := backendCount(t, e, "msgs"); n != 0 {
		t.Errorf("minidyn holds %d items after the batches, want 0", n)
	}
}
