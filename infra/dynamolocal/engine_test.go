package dynamolocal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// msg is the test item: table key (Chat, Seq) with a numeric sort key, and a
// GSI ByAuthor keyed (Author, Stamp) with a string sort key.
type msg struct {
	Chat   string `dynamo:"Chat,hash"`
	Seq    int    `dynamo:"Seq,range"`
	Author string `dynamo:"Author,omitempty" index:"ByAuthor,hash"`
	Stamp  string `dynamo:"Stamp,omitempty" index:"ByAuthor,range"`
	Text   string `dynamo:"Text,omitempty"`
}

func (m msg) id() string { return fmt.Sprintf("%s/%d", m.Chat, m.Seq) }

func ids(ms []msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.id()
	}
	return out
}

func seqIDs(chat string, seqs ...int) []string {
	out := make([]string, len(seqs))
	for i, s := range seqs {
		out[i] = fmt.Sprintf("%s/%d", chat, s)
	}
	return out
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// keysOf names the hash and range key of the table ("") or of ByAuthor.
func keysOf(index string) (hash, rng string) {
	if index != "" {
		return "Author", "Stamp"
	}
	return "Chat", "Seq"
}

func cfg(e *dynamolocal.Engine) (aws.Config, func(*dynamodb.Options)) {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")},
		func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(e.URL) }
}

// start runs an engine for one test and returns it with a guregu DB and a
// raw SDK client, both configured exactly like against AWS.
func start(t *testing.T) (*dynamolocal.Engine, *dynamo.DB, *dynamodb.Client) {
	t.Helper()
	e, err := dynamolocal.Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	c, opt := cfg(e)
	return e, dynamo.New(c, opt), dynamodb.NewFromConfig(c, opt)
}

// ctxT is a test's context: a bound against a hung engine, not a timing
// assertion (a test of 400 KB items under -race on a loaded 2-core
// machine took over 20 s).
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// seedMessages creates table "msgs" with chat c1 (Seq 1..12; odd by ann,
// even by bob, Stamp 2024-MM-01) and chat c2 (Seq 1..3 by ann, Stamp
// 2023-MM-01). Numbers 1..12 sort differently as strings, on purpose.
func seedMessages(t *testing.T, db *dynamo.DB) dynamo.Table {
	t.Helper()
	ctx := ctxT(t)
	if err := db.CreateTable("msgs", msg{}).OnDemand(true).Wait(ctx); err != nil {
		t.Fatalf("create table: %v", err)
	}
	table := db.Table("msgs")
	var items []any
	for seq := 1; seq <= 12; seq++ {
		author := "bob"
		if seq%2 == 1 {
			author = "ann"
		}
		items = append(items, msg{Chat: "c1", Seq: seq, Author: author, Stamp: fmt.Sprintf("2024-%02d-01", seq), Text: "t"})
	}
	for seq := 1; seq <= 3; seq++ {
		items = append(items, msg{Chat: "c2", Seq: seq, Author: "ann", Stamp: fmt.Sprintf("2023-%02d-01", seq)})
	}
	if _, err := table.Batch().Write().Put(items...).Run(ctx); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return table
}

func TestQueryOperators(t *testing.T) {
	t.Parallel()
	_, db, _ := start(t)
	table := seedMessages(t, db)
	c1All := seqIDs("c1", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	annAll := append(seqIDs("c2", 1, 2, 3), seqIDs("c1", 1, 3, 5, 7, 9, 11)...)
	tests := []struct {
		name       string
		index      string
		hash       string
		op         dynamo.Operator // "" = hash only
		values     []any
		descending bool
		want       []string
	}{
		{name: "table hash only asc", hash: "c1", want: c1All},
		{name: "table hash only desc", hash: "c1", descending: true, want: reversed(c1All)},
		{name: "table EQ", hash: "c1", op: dynamo.Equal, values: []any{10}, want: seqIDs("c1", 10)},
		{name: "table LT", hash: "c1", op: dynamo.Less, values: []any{3}, want: seqIDs("c1", 1, 2)},
		{name: "table LE", hash: "c1", op: dynamo.LessOrEqual, values: []any{3}, want: seqIDs("c1", 1, 2, 3)},
		{name: "table GT", hash: "c1", op: dynamo.Greater, values: []any{9}, want: seqIDs("c1", 10, 11, 12)},
		{name: "table GE", hash: "c1", op: dynamo.GreaterOrEqual, values: []any{10}, want: seqIDs("c1", 10, 11, 12)},
		{name: "table BETWEEN asc", hash: "c1", op: dynamo.Between, values: []any{2, 10}, want: seqIDs("c1", 2, 3, 4, 5, 6, 7, 8, 9, 10)},
		{name: "table BETWEEN desc", hash: "c1", op: dynamo.Between, values: []any{8, 11}, descending: true, want: seqIDs("c1", 11, 10, 9, 8)},
		{name: "table LT desc", hash: "c1", op: dynamo.Less, values: []any{11}, descending: true, want: seqIDs("c1", 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)},
		{name: "table other partition", hash: "c2", want: seqIDs("c2", 1, 2, 3)},
		{name: "table unknown partition", hash: "zz", want: []string{}},
		{name: "gsi hash only asc", index: "ByAuthor", hash: "ann", want: annAll},
		{name: "gsi hash only desc", index: "ByAuthor", hash: "ann", descending: true, want: reversed(annAll)},
		{name: "gsi EQ", index: "ByAuthor", hash: "bob", op: dynamo.Equal, values: []any{"2024-08-01"}, want: seqIDs("c1", 8)},
		{name: "gsi LT", index: "ByAuthor", hash: "bob", op: dynamo.Less, values: []any{"2024-04-01"}, want: seqIDs("c1", 2)},
		{name: "gsi LE", index: "ByAuthor", hash: "bob", op: dynamo.LessOrEqual, values: []any{"2024-04-01"}, want: seqIDs("c1", 2, 4)},
		{name: "gsi GT", index: "ByAuthor", hash: "ann", op: dynamo.Greater, values: []any{"2024-06"}, want: seqIDs("c1", 7, 9, 11)},
		{name: "gsi GE desc", index: "ByAuthor", hash: "bob", op: dynamo.GreaterOrEqual, values: []any{"2024-10-01"}, descending: true, want: seqIDs("c1", 12, 10)},
		{name: "gsi BEGINS_WITH", index: "ByAuthor", hash: "ann", op: dynamo.BeginsWith, values: []any{"2024-0"}, want: seqIDs("c1", 1, 3, 5, 7, 9)},
		{name: "gsi BEGINS_WITH desc", index: "ByAuthor", hash: "ann", op: dynamo.BeginsWith, values: []any{"2023"}, descending: true, want: seqIDs("c2", 3, 2, 1)},
		{name: "gsi BETWEEN", index: "ByAuthor", hash: "bob", op: dynamo.Between, values: []any{"2024-02-01", "2024-06-01"}, want: seqIDs("c1", 2, 4, 6)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			hashName, rangeName := keysOf(tc.index)
			q := table.Get(hashName, tc.hash)
			if tc.index != "" {
				q = q.Index(tc.index)
			}
			if tc.op != "" {
				q = q.Range(rangeName, tc.op, tc.values...)
			}
			if tc.descending {
				q = q.Order(dynamo.Descending)
			}
			var got []msg
			if err := q.All(ctx, &got); err != nil {
				t.Fatalf("query: %v", err)
			}
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("got %v, want %v", ids(got), tc.want)
			}
			n, err := q.Count(ctx)
			if err != nil {
				t.Fatalf("count: %v", err)
			}
			if n != len(tc.want) {
				t.Fatalf("Count() = %d, want %d", n, len(tc.want))
			}
		})
	}
}

func TestQueryPaging(t *testing.T) {
	t.Parallel()
	_, db, client := start(t)
	table := seedMessages(t, db)
	c1All := seqIDs("c1", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	annAll := append(seqIDs("c2", 1, 2, 3), seqIDs("c1", 1, 3, 5, 7, 9, 11)...)
	tests := []struct {
		name       string
		index      string
		hash       string
		pageSize   int
		descending bool
		want       []string
	}{
		{name: "table asc by 5", hash: "c1", pageSize: 5, want: c1All},
		{name: "table desc by 5", hash: "c1", pageSize: 5, descending: true, want: reversed(c1All)},
		{name: "table asc by 1", hash: "c1", pageSize: 1, want: c1All},
		{name: "table exact multiple", hash: "c1", pageSize: 4, want: c1All},
		{name: "gsi asc by 2", index: "ByAuthor", hash: "ann", pageSize: 2, want: annAll},
		{name: "gsi desc by 4", index: "ByAuthor", hash: "ann", pageSize: 4, descending: true, want: reversed(annAll)},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/guregu", func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			hashName, _ := keysOf(tc.index)
			var all []string
			var key dynamo.PagingKey
			for pages := 0; ; pages++ {
				if pages > len(tc.want)+1 {
					t.Fatalf("too many pages; so far %v", all)
				}
				q := table.Get(hashName, tc.hash).SearchLimit(tc.pageSize).StartFrom(key)
				if tc.index != "" {
					q = q.Index(tc.index)
				}
				if tc.descending {
					q = q.Order(dynamo.Descending)
				}
				var page []msg
				var err error
				if key, err = q.AllWithLastEvaluatedKey(ctx, &page); err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				if len(page) > tc.pageSize {
					t.Fatalf("page %d has %d items, limit %d", pages, len(page), tc.pageSize)
				}
				all = append(all, ids(page)...)
				if key == nil {
					break
				}
			}
			if !slices.Equal(all, tc.want) {
				t.Fatalf("paged %v, want %v", all, tc.want)
			}
		})
		t.Run(tc.name+"/sdk", func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			hashName, _ := keysOf(tc.index)
			in := &dynamodb.QueryInput{
				TableName:                 aws.String("msgs"),
				KeyConditionExpression:    aws.String("#h = :h"),
				ExpressionAttributeNames:  map[string]string{"#h": hashName},
				ExpressionAttributeValues: map[string]types.AttributeValue{":h": &types.AttributeValueMemberS{Value: tc.hash}},
				Limit:                     aws.Int32(int32(tc.pageSize)),
				ScanIndexForward:          aws.Bool(!tc.descending),
			}
			if tc.index != "" {
				in.IndexName = aws.String(tc.index)
			}
			var all []string
			pages := 0
			for p := dynamodb.NewQueryPaginator(client, in); p.HasMorePages(); pages++ {
				out, err := p.NextPage(ctx)
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				if int(out.Count) != len(out.Items) || len(out.Items) > tc.pageSize {
					t.Fatalf("page %d: Count %d, %d items, limit %d", pages, out.Count, len(out.Items), tc.pageSize)
				}
				for _, item := range out.Items {
					all = append(all, item["Chat"].(*types.AttributeValueMemberS).Value+"/"+item["Seq"].(*types.AttributeValueMemberN).Value)
				}
			}
			if !slices.Equal(all, tc.want) {
				t.Fatalf("paged %v, want %v", all, tc.want)
			}
			if wantPages := (len(tc.want) + tc.pageSize - 1) / tc.pageSize; pages != wantPages {
				t.Fatalf("%d pages, want %d", pages, wantPages)
			}
		})
	}
}

func TestQueryLimitFilterCountProjection(t *testing.T) {
	t.Parallel()
	_, db, client := start(t)
	seedMessages(t, db)
	ctx := ctxT(t)
	base := func() *dynamodb.QueryInput {
		return &dynamodb.QueryInput{
			TableName:                 aws.String("msgs"),
			KeyConditionExpression:    aws.String("Chat = :c"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberS{Value: "c1"}},
		}
	}

	t.Run("Limit counts evaluated items before the filter", func(t *testing.T) {
		in := base()
		in.Limit = aws.Int32(5)
		in.FilterExpression = aws.String("Author = :a")
		in.ExpressionAttributeValues[":a"] = &types.AttributeValueMemberS{Value: "bob"}
		out, err := client.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if out.ScannedCount != 5 || out.Count != 2 || len(out.Items) != 2 {
			t.Fatalf("ScannedCount %d Count %d items %d, want 5 2 2", out.ScannedCount, out.Count, len(out.Items))
		}
		if got := out.LastEvaluatedKey["Seq"].(*types.AttributeValueMemberN).Value; got != "5" {
			t.Fatalf("LastEvaluatedKey Seq = %s, want 5", got)
		}
	})
	t.Run("Select COUNT answers no items", func(t *testing.T) {
		in := base()
		in.Select = types.SelectCount
		out, err := client.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if out.Count != 12 || out.Items != nil {
			t.Fatalf("Count %d, items %v; want 12 and none", out.Count, out.Items)
		}
	})
	t.Run("ProjectionExpression", func(t *testing.T) {
		in := base()
		in.ProjectionExpression = aws.String("Seq, #t")
		in.ExpressionAttributeNames = map[string]string{"#t": "Text"}
		in.Limit = aws.Int32(1)
		out, err := client.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Items) != 1 || len(out.Items[0]) != 2 || out.Items[0]["Text"] == nil || out.Items[0]["Seq"] == nil {
			t.Fatalf("projected items %v, want one item with Seq and Text only", out.Items)
		}
	})
	t.Run("guregu filter", func(t *testing.T) {
		var got []msg
		err := db.Table("msgs").Get("Chat", "c1").Range("Seq", dynamo.Greater, 6).Filter("Author = ?", "ann").All(ctx, &got)
		if err != nil {
			t.Fatal(err)
		}
		if want := seqIDs("c1", 7, 9, 11); !slices.Equal(ids(got), want) {
			t.Fatalf("got %v, want %v", ids(got), want)
		}
	})
	t.Run("scan with Limit pages everything once", func(t *testing.T) {
		var all []string
		for p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String("msgs"), Limit: aws.Int32(4)}); p.HasMorePages(); {
			out, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, item := range out.Items {
				all = append(all, item["Chat"].(*types.AttributeValueMemberS).Value+"/"+item["Seq"].(*types.AttributeValueMemberN).Value)
			}
		}
		want := append(seqIDs("c1", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), seqIDs("c2", 1, 2, 3)...)
		slices.Sort(all)
		slices.Sort(want)
		if !slices.Equal(all, want) {
			t.Fatalf("scanned %v, want %v", all, want)
		}
	})
	t.Run("guregu parallel scan sees each item once", func(t *testing.T) {
		var got []msg
		if err := db.Table("msgs").Scan().AllParallel(ctx, 4, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 15 {
			t.Fatalf("parallel scan returned %d items, want 15", len(got))
		}
	})
	t.Run("unknown index", func(t *testing.T) {
		in := base()
		in.IndexName = aws.String("Nope")
		_, err := client.Query(ctx, in)
		var apiErr interface{ ErrorCode() string }
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" {
			t.Fatalf("err = %v, want ValidationException", err)
		}
	})
}

func TestGSIAfterUpdate(t *testing.T) {
	t.Parallel()
	_, db, _ := start(t)
	table := seedMessages(t, db)
	ctx := ctxT(t)
	// An item written without index keys gains them through UpdateItem;
	// minidyn's own index loses entries in this case.
	if err := table.Put(msg{Chat: "c3", Seq: 1}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := table.Update("Chat", "c3").Range("Seq", 1).Set("Author", "bob").Set("Stamp", "2024-03-15").Run(ctx); err != nil {
		t.Fatal(err)
	}
	var got []msg
	if err := table.Get("Author", "bob").Index("ByAuthor").All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"c1/2", "c3/1", "c1/4", "c1/6", "c1/8", "c1/10", "c1/12"}
	if !slices.Equal(ids(got), want) {
		t.Fatalf("got %v, want %v", ids(got), want)
	}
	// Removing an index key takes the item out of the index.
	if err := table.Update("Chat", "c1").Range("Seq", 4).Remove("Stamp").Run(ctx); err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := table.Get("Author", "bob").Index("ByAuthor").All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(s string) bool { return s == "c1/4" })
	if !slices.Equal(ids(got), want) {
		t.Fatalf("after remove got %v, want %v", ids(got), want)
	}
}
