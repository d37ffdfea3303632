package dynamolocal_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// BenchmarkWrite measures a PutItem of a small item through the SDK, on
// an engine in memory only (the floor) and on one with a data file, one
// writer at a time and with parallel writers, so that the cost of making
// each write durable before it is answered shows.
func BenchmarkWrite(b *testing.B) {
	for _, mode := range []string{"memory", "data_file"} {
		for _, parallel := range []bool{false, true} {
			name := mode + "/sequential"
			if parallel {
				name = mode + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				o := dynamolocal.Options{Logger: slog.New(slog.DiscardHandler)}
				if mode == "data_file" {
					o.DataFile = filepath.Join(b.TempDir(), "data.json")
					o.Interval = 30 * time.Second
				}
				_, client := startBench(b, o)
				ctx := ctxB(b)
				if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("kv"), BillingMode: types.BillingModePayPerRequest,
					AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("K"), AttributeType: types.ScalarAttributeTypeS}},
					KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("K"), KeyType: types.KeyTypeHash}}}); err != nil {
					b.Fatal(err)
				}
				var n atomic.Int64
				put := func() {
					i := n.Add(1)
					if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("kv"), Item: map[string]types.AttributeValue{
						"K": avS(fmt.Sprint(i % 1000)), "V": avS("a small value of some forty bytes......"), "N": avN(fmt.Sprint(i))}}); err != nil {
						b.Error(err)
					}
				}
				b.ReportAllocs()
				if parallel {
					b.SetParallelism(4)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							put()
						}
					})
					return
				}
				for b.Loop() {
					put()
				}
			})
		}
	}
}

// startBench starts an engine with o for one benchmark, closed at its
// end, and returns it with a raw SDK client configured as against AWS.
func startBench(b *testing.B, o dynamolocal.Options) (*dynamolocal.Engine, *dynamodb.Client) {
	b.Helper()
	e, err := dynamolocal.StartWith(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	c, opt := cfg(e)
	return e, dynamodb.NewFromConfig(c, opt)
}
