package dynamolocal_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// storeSizes are the numbers of other users' items a store holds in
// BenchmarkWriteMixAtStoreSize: 0 (the floor), 10,000, 100,000 (about as
// many items as 10,000 stored runs write), and the size
// DYNAMOLOCAL_BENCH_ITEMS names (e.g. 300000).
func storeSizes(tb testing.TB) []int {
	sizes := []int{0, 10000, 100000}
	if v := os.Getenv("DYNAMOLOCAL_BENCH_ITEMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			tb.Fatalf("DYNAMOLOCAL_BENCH_ITEMS=%q: want a positive number of items", v)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// createAppTable creates a table shaped like the application's: PK and SK,
// two global secondary indexes projecting everything.
func createAppTable(tb testing.TB, ctx context.Context, client *dynamodb.Client) {
	tb.Helper()
	s := types.ScalarAttributeTypeS
	def := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: s}
	}
	keys := func(h, r string) []types.KeySchemaElement {
		return []types.KeySchemaElement{{AttributeName: aws.String(h), KeyType: types.KeyTypeHash}, {AttributeName: aws.String(r), KeyType: types.KeyTypeRange}}
	}
	all := &types.Projection{ProjectionType: types.ProjectionTypeAll}
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("data"), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{def("PK"), def("SK"), def("GSI1PK"), def("GSI1SK"), def("GSI2PK"), def("GSI2SK")},
		KeySchema:            keys("PK", "SK"),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{IndexName: aws.String("GSI1"), KeySchema: keys("GSI1PK", "GSI1SK"), Projection: all},
			{IndexName: aws.String("GSI2"), KeySchema: keys("GSI2PK", "GSI2SK"), Projection: all},
		}}); err != nil {
		tb.Fatal(err)
	}
}

// appItem is a run's step record of about 300 bytes, in both indexes.
func appItem(user string, i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"PK": avS("USER#" + user), "SK": avS(fmt.Sprintf("RUN#%08d", i)),
		"GSI1PK": avS("RUNS#" + user), "GSI1SK": avS(fmt.Sprintf("2026-12-02T00:%08d", i)),
		"GSI2PK": avS("STATUS#done"), "GSI2SK": avS(fmt.Sprintf("%s#%08d", user, i)),
		"status": avS("done"), "steps": avN("3"), "output": avS(strings.Repeat("o", 160)),
	}
}

// fill stores n items of 100 other users, 25 to a BatchWriteItem.
func fill(tb testing.TB, ctx context.Context, client *dynamodb.Client, n int) {
	tb.Helper()
	for i := 0; i < n; i += 25 {
		var reqs []types.WriteRequest
		for j := i; j < min(i+25, n); j++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: appItem(fmt.Sprintf("other%03d", j%100), j)}})
		}
		if _, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"data": reqs}}); err != nil {
			tb.Fatal(err)
		}
	}
}

// writeMix is one operation of a run's writes: a new item put under a
// condition, a conditional update of a counter, and a transaction of a
// new item and the counter, as a durable step writes them.
func writeMix(ctx context.Context, client *dynamodb.Client, i int) error {
	item := appItem("me", 1_000_000+i)
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("data"), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(PK)")}); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	counter := map[string]types.AttributeValue{"PK": avS("USER#me"), "SK": avS("COUNTER")}
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("data"), Key: counter,
		UpdateExpression:          aws.String("SET n = if_not_exists(n, :z) + :one, GSI1PK = :g, GSI1SK = :s"),
		ConditionExpression:       aws.String("attribute_not_exists(n) OR n < :max"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":z": avN("0"), ":one": avN("1"), ":max": avN("1000000000"), ":g": avS("COUNTERS"), ":s": avS(fmt.Sprintf("%08d", i))}}); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	next := appItem("me", 2_000_000+i)
	if _, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("data"), Item: next, ConditionExpression: aws.String("attribute_not_exists(PK)")}},
		{Update: &types.Update{TableName: aws.String("data"), Key: counter, UpdateExpression: aws.String("SET n = n + :one"),
			ConditionExpression: aws.String("attribute_exists(n)"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN("1")}}},
	}}); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	return nil
}

// BenchmarkWriteMixAtStoreSize measures writeMix (three write requests,
// two of them new items) on an engine in memory holding 0, 10,000 and
// 100,000 items of other users in the same table: a write's cost should
// not depend on what else is stored. The first size is the floor. On a
// filled store every iteration also runs the mix on a fresh engine, in
// turn, outside the timer, so that the machine's other work weighs on
// both: p50-ns is the filled store's median, fresh-p50-ns the fresh
// engine's, x-fresh-p50 their ratio (the figure to compare on a shared
// machine). Each filled size also reports the Go heap in use per stored
// item, the snapshot's bytes per item, and their ratio.
func BenchmarkWriteMixAtStoreSize(b *testing.B) {
	for _, size := range storeSizes(b) {
		b.Run(fmt.Sprintf("%d_items", size), func(b *testing.B) {
			e, client := startBench(b, dynamolocal.Options{Logger: slog.New(slog.DiscardHandler)})
			ctx := ctxB(b)
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			createAppTable(b, ctx, client)
			fill(b, ctx, client, size)
			var report func()
			var fresh *dynamodb.Client
			if size > 0 {
				var after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&after)
				path := filepath.Join(b.TempDir(), "snap.json")
				if err := e.Snapshot(path); err != nil {
					b.Fatal(err)
				}
				st, err := os.Stat(path)
				if err != nil {
					b.Fatal(err)
				}
				heap := float64(after.HeapInuse) - float64(before.HeapInuse)
				report = func() {
					b.ReportMetric(heap/float64(size), "heap-B/item")
					b.ReportMetric(float64(st.Size())/float64(size), "snapshot-B/item")
					b.ReportMetric(heap/float64(st.Size()), "heap/snapshot")
				}
				_, fresh = startBench(b, dynamolocal.Options{Logger: slog.New(slog.DiscardHandler)})
				createAppTable(b, ctx, fresh)
			}
			var filled, floor []time.Duration
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if err := writeMix(ctx, client, i); err != nil {
					b.Fatal(err)
				}
				filled = append(filled, time.Since(start))
				if fresh != nil {
					b.StopTimer()
					start := time.Now()
					if err := writeMix(ctx, fresh, i); err != nil {
						b.Fatal(err)
					}
					floor = append(floor, time.Since(start))
					b.StartTimer()
				}
				i++
			}
			b.ReportMetric(float64(median(filled)), "p50-ns")
			if fresh != nil {
				b.ReportMetric(float64(median(floor)), "fresh-p50-ns")
				b.ReportMetric(float64(median(filled))/float64(median(floor)), "x-fresh-p50")
			}
			if report != nil {
				report()
			}
		})
	}
}

// median is the middle of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
