package dynamolocal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// seedMany adds n messages to "msgs" (created by seedMessages), ten per
// chat "bulkN", authors "authorN" with ten messages each.
func seedMany(t testing.TB, table dynamo.Table, n int) {
	t.Helper()
	var batch []any
	flush := func() {
		if _, err := table.Batch().Write().Put(batch...).Run(ctxB(t)); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range n {
		batch = append(batch, msg{Chat: fmt.Sprintf("bulk%d", i/10), Seq: i % 10, Author: fmt.Sprintf("author%d", i/10),
			Stamp: fmt.Sprintf("s%05d", i), Text: "bulk message"})
		if len(batch) == 25 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// TestQueryReadsOnlyItsPage: a Query reads the items of its page from
// the store, not the whole table, on the table and on a GSI; a Scan page
// reads its page.
func TestQueryReadsOnlyItsPage(t *testing.T) {
	t.Parallel()
	e, db, _ := start(t)
	table := seedMessages(t, db)
	seedMany(t, table, 2000)
	ctx := ctxT(t)
	tests := []struct {
		name  string
		query func() (int, error)
		items int
	}{
		{"table partition", func() (int, error) {
			var out []msg
			err := table.Get("Chat", "c1").All(ctx, &out)
			return len(out), err
		}, 12},
		{"table page of 5", func() (int, error) {
			var out []msg
			_, err := table.Get("Chat", "bulk7").Limit(5).AllWithLastEvaluatedKey(ctx, &out)
			return len(out), err
		}, 5},
		{"GSI partition, descending", func() (int, error) {
			var out []msg
			err := table.Get("Author", "author42").Index("ByAuthor").Order(dynamo.Descending).All(ctx, &out)
			return len(out), err
		}, 10},
		{"scan page of 3", func() (int, error) {
			var out []msg
			_, err := table.Scan().Limit(3).AllWithLastEvaluatedKey(ctx, &out)
			return len(out), err
		}, 3},
	}
	for _, tt := range tests {
		before := dynamolocal.BackendItemsRead(e)
		n, err := tt.query()
		read := dynamolocal.BackendItemsRead(e) - before
		if err != nil || n != tt.items {
			t.Errorf("%s: %d items, %v; want %d", tt.name, n, err, tt.items)
		}
		if read > int64(tt.items)+1 {
			t.Errorf("%s: read %d stored items for a page of %d (the table holds 2015)", tt.name, read, tt.items)
		}
	}
}

func ctxB(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// BenchmarkQuery reads one chat's ten messages (one Query of its
// partition) from tables of 100 and of 10,000 messages: the cost should
// follow the page, not the table.
func BenchmarkQuery(b *testing.B) {
	for _, size := range []int{100, 10000} {
		b.Run(fmt.Sprintf("%d_items", size), func(b *testing.B) {
			e, err := dynamolocal.Start()
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			c, opt := cfg(e)
			db := dynamo.New(c, opt)
			if err := db.CreateTable("msgs", msg{}).OnDemand(true).Run(ctxB(b)); err != nil {
				b.Fatal(err)
			}
			table := db.Table("msgs")
			seedMany(b, table, size)
			ctx := ctxB(b)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var out []msg
				if err := table.Get("Chat", fmt.Sprintf("bulk%d", i%(size/10))).All(ctx, &out); err != nil || len(out) != 10 {
					b.Fatalf("%d items, %v", len(out), err)
				}
			}
		})
	}
}

// TestKeyConditionIsCheckedLikeDynamoDB: a KeyConditionExpression must be
// an equality on the partition key and at most one condition on the sort
// key, with operands of the keys' types; anything else is refused with
// AWS's message instead of being evaluated.
func TestKeyConditionIsCheckedLikeDynamoDB(t *testing.T) {
	t.Parallel()
	_, db, client := start(t)
	seedMessages(t, db)
	ctx := ctxT(t)
	tests := []struct {
		name, expr, index, want string
		values                  map[string]types.AttributeValue
	}{
		{"partition key only", "Chat = :c", "", "", map[string]types.AttributeValue{":c": avS("c1")}},
		{"with a sort key condition, parenthesized", "(Chat = :c) AND (Seq BETWEEN :a AND :b)", "", "", map[string]types.AttributeValue{":c": avS("c1"), ":a": avN("1"), ":b": avN("3")}},
		{"missing the partition key", "Seq = :s", "", "Query condition missed key schema element: Chat", map[string]types.AttributeValue{":s": avN("1")}},
		{"a non-key attribute", "Chat = :c AND Author = :a", "", "Query key condition not supported", map[string]types.AttributeValue{":c": avS("c1"), ":a": avS("ann")}},
		{"a range on the partition key", "Chat > :c", "", "Query key condition not supported", map[string]types.AttributeValue{":c": avS("c1")}},
		{"OR", "Chat = :c OR Seq = :s", "", "Invalid operator used in KeyConditionExpression: OR", map[string]types.AttributeValue{":c": avS("c1"), ":s": avN("1")}},
		{"two sort key conditions", "Chat = :c AND Seq > :a AND Seq < :b", "", "KeyConditionExpressions must only contain one condition per key", map[string]types.AttributeValue{":c": avS("c1"), ":a": avN("1"), ":b": avN("3")}},
		{"operand of another type", "Chat = :c AND Seq = :s", "", "Condition parameter type does not match schema type", map[string]types.AttributeValue{":c": avS("c1"), ":s": avS("1")}},
		{"begins_with on a number", "Chat = :c AND begins_with(Seq, :s)", "", "operator or function: begins_with, operand type: N", map[string]types.AttributeValue{":c": avS("c1"), ":s": avN("1")}},
		{"undefined value", "Chat = :nope", "", "An expression attribute value used in expression is not defined; attribute value: :nope", nil},
		{"syntax error", "Chat = = :c", "", "Invalid KeyConditionExpression: Syntax error", map[string]types.AttributeValue{":c": avS("c1")}},
		{"index keys", "Author = :a AND begins_with(Stamp, :p)", "ByAuthor", "", map[string]types.AttributeValue{":a": avS("ann"), ":p": avS("2024")}},
		{"table key on an index", "Chat = :c", "ByAuthor", "Query condition missed key schema element: Author", map[string]types.AttributeValue{":c": avS("c1")}},
	}
	for _, tt := range tests {
		in := &dynamodb.QueryInput{TableName: aws.String("msgs"), KeyConditionExpression: aws.String(tt.expr), ExpressionAttributeValues: tt.values}
		if tt.index != "" {
			in.IndexName = aws.String(tt.index)
		}
		_, err := client.Query(ctx, in)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		wantValidation(t, tt.name, err, tt.want)
	}
}
