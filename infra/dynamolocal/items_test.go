package dynamolocal_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"
	"github.com/truora/minidyn/server"

	"github.com/workflowchat/service/infra/dynamolocal"
)

func TestConditionalWritesAndTransactions(t *testing.T) {
	t.Parallel()
	_, db, _ := start(t)
	table := seedMessages(t, db)
	ctx := ctxT(t)

	t.Run("conditional put", func(t *testing.T) {
		err := table.Put(msg{Chat: "c1", Seq: 1, Text: "dup"}).If("attribute_not_exists('Chat')").Run(ctx)
		if !dynamo.IsCondCheckFailed(err) {
			t.Fatalf("err = %v, want conditional check failure", err)
		}
		var got msg
		if err := table.Get("Chat", "c1").Range("Seq", dynamo.Equal, 1).One(ctx, &got); err != nil || got.Text != "t" {
			t.Fatalf("item changed by failed put: %+v, %v", got, err)
		}
		if err := table.Put(msg{Chat: "c1", Seq: 100}).If("attribute_not_exists('Chat')").Run(ctx); err != nil {
			t.Fatalf("put of new item: %v", err)
		}
	})
	t.Run("conditional update", func(t *testing.T) {
		err := table.Update("Chat", "c1").Range("Seq", 2).Set("Text", "x").If("Author = ?", "ann").Run(ctx)
		if !dynamo.IsCondCheckFailed(err) {
			t.Fatalf("err = %v, want conditional check failure", err)
		}
	})
	t.Run("failed transaction writes nothing", func(t *testing.T) {
		tx := db.WriteTx()
		tx.Put(table.Put(msg{Chat: "tx", Seq: 1, Text: "new"}))
		tx.Update(table.Update("Chat", "c1").Range("Seq", 3).Set("Text", "changed"))
		tx.Check(table.Check("Chat", "c1").Range("Seq", 4).If("Author = ?", "ann")) // bob wrote 4
		err := tx.Run(ctx)
		if !dynamo.IsCondCheckFailed(err) {
			t.Fatalf("err = %v, want conditional check failure", err)
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) || len(tce.CancellationReasons) != 3 || aws.ToString(tce.CancellationReasons[2].Code) != "ConditionalCheckFailed" {
			t.Fatalf("err = %#v, want TransactionCanceledException with 3 reasons", err)
		}
		var got msg
		if err := table.Get("Chat", "tx").Range("Seq", dynamo.Equal, 1).One(ctx, &got); !errors.Is(err, dynamo.ErrNotFound) {
			t.Fatalf("put of failed tx is visible: %+v, %v", got, err)
		}
		if err := table.Get("Chat", "c1").Range("Seq", dynamo.Equal, 3).One(ctx, &got); err != nil || got.Text != "t" {
			t.Fatalf("update of failed tx is visible: %+v, %v", got, err)
		}
	})
	t.Run("successful transaction with REMOVE", func(t *testing.T) {
		tx := db.WriteTx()
		tx.Put(table.Put(msg{Chat: "tx", Seq: 2, Text: "new"}))
		tx.Update(table.Update("Chat", "c1").Range("Seq", 5).Set("Text", "changed").Remove("Stamp"))
		if err := tx.Run(ctx); err != nil {
			t.Fatal(err)
		}
		var got msg
		if err := table.Get("Chat", "c1").Range("Seq", dynamo.Equal, 5).One(ctx, &got); err != nil ||
			got.Text != "changed" || got.Stamp != "" || got.Author != "ann" {
			t.Fatalf("after tx: %+v, %v", got, err)
		}
		if err := db.GetTx().GetOne(table.Get("Chat", "tx").Range("Seq", dynamo.Equal, 2), &got).Run(ctx); err != nil || got.Text != "new" {
			t.Fatalf("GetTx: %+v, %v", got, err)
		}
	})
}

func TestItemReturnValues(t *testing.T) {
	t.Parallel()
	_, db, client := start(t)
	table := seedMessages(t, db)
	ctx := ctxT(t)

	t.Run("put OldValue", func(t *testing.T) {
		var old msg
		if err := table.Put(msg{Chat: "p", Seq: 1, Text: "one"}).OldValue(ctx, &old); !errors.Is(err, dynamo.ErrNotFound) {
			t.Fatalf("OldValue of new item: %+v, %v; want ErrNotFound", old, err)
		}
		if err := table.Put(msg{Chat: "p", Seq: 1, Text: "two"}).OldValue(ctx, &old); err != nil || old.Text != "one" {
			t.Fatalf("OldValue: %+v, %v; want the previous item", old, err)
		}
		out, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("msgs"), Item: map[string]types.AttributeValue{
			"Chat": &types.AttributeValueMemberS{Value: "p"}, "Seq": &types.AttributeValueMemberN{Value: "1"}}})
		if err != nil || out.Attributes != nil {
			t.Fatalf("PutItem without ReturnValues: %v, %v; want no attributes", out.Attributes, err)
		}
	})
	// Top-level REMOVE is a no-op in minidyn; the layer applies it.
	removeTests := []struct {
		name     string
		seq      int
		update   func(*dynamo.Update) *dynamo.Update
		run      func(*dynamo.Update, *msg) error
		returned msg
		stored   msg
	}{
		{
			name:     "ALL_NEW",
			seq:      6,
			update:   func(u *dynamo.Update) *dynamo.Update { return u.Set("Text", "new").Remove("Author") },
			run:      func(u *dynamo.Update, out *msg) error { return u.Value(ctx, out) },
			returned: msg{Chat: "c1", Seq: 6, Stamp: "2024-06-01", Text: "new"},
			stored:   msg{Chat: "c1", Seq: 6, Stamp: "2024-06-01", Text: "new"},
		},
		{
			name:     "ALL_OLD",
			seq:      7,
			update:   func(u *dynamo.Update) *dynamo.Update { return u.Remove("Author", "Stamp") },
			run:      func(u *dynamo.Update, out *msg) error { return u.OldValue(ctx, out) },
			returned: msg{Chat: "c1", Seq: 7, Author: "ann", Stamp: "2024-07-01", Text: "t"},
			stored:   msg{Chat: "c1", Seq: 7, Text: "t"},
		},
		{
			name:     "UPDATED_OLD",
			seq:      8,
			update:   func(u *dynamo.Update) *dynamo.Update { return u.Set("Text", "") }, // guregu sends REMOVE
			run:      func(u *dynamo.Update, out *msg) error { return u.OnlyUpdatedOldValue(ctx, out) },
			returned: msg{Text: "t"},
			stored:   msg{Chat: "c1", Seq: 8, Author: "bob", Stamp: "2024-08-01"},
		},
		{
			name:     "UPDATED_NEW",
			seq:      9,
			update:   func(u *dynamo.Update) *dynamo.Update { return u.Set("Text", "n").Remove("Stamp") },
			run:      func(u *dynamo.Update, out *msg) error { return u.OnlyUpdatedValue(ctx, out) },
			returned: msg{Text: "n"},
			stored:   msg{Chat: "c1", Seq: 9, Author: "ann", Text: "n"},
		},
		{
			name:   "NONE",
			seq:    10,
			update: func(u *dynamo.Update) *dynamo.Update { return u.Remove("Text") },
			run:    func(u *dynamo.Update, _ *msg) error { return u.Run(ctx) },
			stored: msg{Chat: "c1", Seq: 10, Author: "bob", Stamp: "2024-10-01"},
		},
	}
	for _, tc := range removeTests {
		t.Run("update REMOVE "+tc.name, func(t *testing.T) {
			var got msg
			if err := tc.run(tc.update(table.Update("Chat", "c1").Range("Seq", tc.seq)), &got); err != nil {
				t.Fatal(err)
			}
			if got != tc.returned {
				t.Errorf("returned %+v, want %+v", got, tc.returned)
			}
			var stored msg
			if err := table.Get("Chat", "c1").Range("Seq", dynamo.Equal, tc.seq).One(ctx, &stored); err != nil {
				t.Fatal(err)
			}
			if stored != tc.stored {
				t.Errorf("stored %+v, want %+v", stored, tc.stored)
			}
		})
	}
}

func TestEmptyContainersComeBackAsNull(t *testing.T) {
	t.Parallel()
	_, db, client := start(t)
	seedMessages(t, db)
	ctx := ctxT(t)
	key := map[string]types.AttributeValue{"Chat": &types.AttributeValueMemberS{Value: "e"}, "Seq": &types.AttributeValueMemberN{Value: "1"}}
	item := map[string]types.AttributeValue{
		"Chat": key["Chat"], "Seq": key["Seq"],
		"L": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
		"M": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"inner": &types.AttributeValueMemberL{}}},
		"N": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}},
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("msgs"), Item: item}); err != nil {
		t.Fatal(err)
	}
	check := func(name string, got map[string]types.AttributeValue) {
		t.Helper()
		if _, ok := got["L"].(*types.AttributeValueMemberNULL); !ok {
			t.Errorf("%s: L = %#v, want NULL (minidyn cannot return an empty list)", name, got["L"])
		}
		m, ok := got["M"].(*types.AttributeValueMemberM)
		if !ok {
			t.Fatalf("%s: M = %#v", name, got["M"])
		}
		if _, ok := m.Value["inner"].(*types.AttributeValueMemberNULL); !ok {
			t.Errorf("%s: M.inner = %#v, want NULL", name, m.Value["inner"])
		}
		l, ok := got["N"].(*types.AttributeValueMemberL)
		if !ok || len(l.Value) != 1 {
			t.Fatalf("%s: N = %#v", name, got["N"])
		}
		if _, ok := l.Value[0].(*types.AttributeValueMemberNULL); !ok {
			t.Errorf("%s: N[0] = %#v, want NULL", name, l.Value[0])
		}
	}
	get, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("msgs"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	check("GetItem", get.Item)
	q, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("msgs"), KeyConditionExpression: aws.String("Chat = :c"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": key["Chat"]}})
	if err != nil || len(q.Items) != 1 {
		t.Fatalf("query: %v, %v", q, err)
	}
	check("Query", q.Items[0])
	var viaGuregu struct {
		L []string
		M map[string][]string
	}
	if err := db.Table("msgs").Get("Chat", "e").Range("Seq", dynamo.Equal, 1).One(ctx, &viaGuregu); err != nil || len(viaGuregu.L) != 0 {
		t.Fatalf("guregu decode: %+v, %v", viaGuregu, err)
	}
}

func TestRejectedAndUnsupported(t *testing.T) {
	t.Parallel()
	e, db, client := start(t)
	seedMessages(t, db)
	ctx := ctxT(t)
	key := map[string]types.AttributeValue{"Chat": &types.AttributeValueMemberS{Value: "c1"}, "Seq": &types.AttributeValueMemberN{Value: "1"}}
	tests := []struct {
		name string
		call func() error
		code string
	}{
		{"PutItem Expected", func() error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("msgs"), Item: key,
				Expected: map[string]types.ExpectedAttributeValue{"Chat": {Exists: aws.Bool(false)}}})
			return err
		}, "ValidationException"},
		{"UpdateItem AttributeUpdates", func() error {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("msgs"), Key: key,
				AttributeUpdates: map[string]types.AttributeValueUpdate{"Text": {Action: types.AttributeActionDelete}}})
			return err
		}, "ValidationException"},
		{"Query QueryFilter", func() error {
			_, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("msgs"), KeyConditionExpression: aws.String("Chat = :c"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":c": key["Chat"]},
				QueryFilter:               map[string]types.Condition{"Text": {ComparisonOperator: types.ComparisonOperatorNull}}})
			return err
		}, "ValidationException"},
		{"Scan ScanFilter", func() error {
			_, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("msgs"),
				ScanFilter: map[string]types.Condition{"Text": {ComparisonOperator: types.ComparisonOperatorNull}}})
			return err
		}, "ValidationException"},
		{"PutItem ReturnValues ALL_NEW", func() error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("msgs"), Item: key, ReturnValues: types.ReturnValueAllNew})
			return err
		}, "ValidationException"},
		{"guregu NotEqual key condition", func() error {
			var out []msg
			return db.Table("msgs").Get("Chat", "c1").Range("Seq", dynamo.NotEqual, 1).All(ctx, &out)
		}, "ValidationException"},
		{"Query unknown table", func() error {
			_, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("nope"), KeyConditionExpression: aws.String("Chat = :c"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":c": key["Chat"]}})
			return err
		}, "ResourceNotFoundException"},
		{"unsupported operation", func() error {
			_, err := client.DescribeLimits(ctx, &dynamodb.DescribeLimitsInput{})
			return err
		}, "UnknownOperationException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); errorCode(err) != tc.code {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
		})
	}
	status, _, body := post(t, e.URL, "ExecuteStatement", `{"Statement":"SELECT * FROM msgs"}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "#UnknownOperationException") {
		t.Errorf("raw unsupported op: %d %s", status, body)
	}
}

func TestFailureEmulation(t *testing.T) {
	t.Parallel()
	e, db, _ := start(t)
	table := seedMessages(t, db)
	ctx := ctxT(t)
	c, opt := cfg(e)
	noRetry := dynamo.New(c, opt, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }).Table("msgs")

	e.WithBackend(func(b *server.Server) {
		b.EmulateFailureForTable("msgs", server.FailureConditionInternalServerError, "ByAuthor")
	})
	var out []msg
	err := noRetry.Get("Author", "ann").Index("ByAuthor").All(ctx, &out)
	if errorCode(err) != "InternalServerError" {
		t.Fatalf("index query under emulated failure: %v", err)
	}
	if err := noRetry.Get("Chat", "c1").All(ctx, &out); err != nil || len(out) != 12 {
		t.Fatalf("table query must keep working: %d items, %v", len(out), err)
	}
	e.WithBackend(func(b *server.Server) { b.EmulateFailureForTable("msgs", server.FailureConditionNone, "ByAuthor") })
	out = nil
	if err := table.Get("Author", "ann").Index("ByAuthor").All(ctx, &out); err != nil || len(out) != 9 {
		t.Fatalf("after clearing: %d items, %v", len(out), err)
	}
}

// TestHandlerErrorMapping drives NewHandler over a fake backend to check that
// non-JSON and panicking backends still produce decodable AWS errors.
func TestHandlerErrorMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		backend    http.HandlerFunc
		wantStatus int
		wantType   string
	}{
		{"plain text 400", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad thing", http.StatusBadRequest) },
			http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ValidationException"},
		{"plain text 500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError"},
		{"unsupported operation", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "unsupported operation", http.StatusBadRequest)
		},
			http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#UnknownOperationException"},
		{"short __type gets the AWS prefix", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ConditionalCheckFailedException","message":"no","Item":{"a":{}}}`))
		}, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"},
		{"panic", func(w http.ResponseWriter, r *http.Request) { panic("kaboom") },
			http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(dynamolocal.NewHandler(tc.backend))
			defer srv.Close()
			status, ctype, body := post(t, srv.URL, "GetItem", `{"TableName":"t","Key":{"id":{"S":"1"}}}`)
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %q is not JSON: %v", body, err)
			}
			if status != tc.wantStatus || ctype != "application/x-amz-json-1.0" || got["__type"] != tc.wantType || got["message"] == "" {
				t.Fatalf("got %d %s %s", status, ctype, body)
			}
			if item, ok := got["Item"].(map[string]any); ok && item["a"].(map[string]any)["NULL"] != true {
				t.Fatalf("error Item not repaired: %s", body)
			}
		})
	}
	srv := httptest.NewServer(dynamolocal.NewHandler(http.NotFoundHandler()))
	defer srv.Close()
	status, _, body := post(t, srv.URL, "GetItem", strings.Repeat("x", 17<<20))
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "limit") {
		t.Errorf("oversized body: %d %s", status, body)
	}
}

func TestCloseWaitsAndRefuses(t *testing.T) {
	t.Parallel()
	e, err := dynamolocal.Start()
	if err != nil {
		t.Fatal(err)
	}
	c, opt := cfg(e)
	client := dynamodb.NewFromConfig(c, opt, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	ctx := ctxT(t)
	if err := dynamo.NewFromIface(client).CreateTable("t", struct {
		ID string `dynamo:"ID,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	closed := make(chan error, 1)
	// Holding the backend makes the request wait inside the engine.
	e.WithBackend(func(*server.Server) {
		go func() {
			_, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"),
				Key: map[string]types.AttributeValue{"ID": &types.AttributeValueMemberS{Value: "x"}}})
			got <- err
		}()
		time.Sleep(100 * time.Millisecond)
		go func() { closed <- e.Close() }()
		time.Sleep(100 * time.Millisecond)
		select {
		case err := <-closed:
			t.Errorf("Close returned (%v) while a request was in flight", err)
		default:
		}
	})
	if err := <-got; err != nil {
		t.Fatalf("in-flight request failed: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := http.Post(e.URL, "application/x-amz-json-1.0", strings.NewReader("{}")); err == nil {
		t.Fatal("engine still accepts connections after Close")
	}
}
