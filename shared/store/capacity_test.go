package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestCapacityMeter: a client opened with a CapacityMeter asks for the
// capacity of every item operation and sums it by kind, counting failed
// calls apart; the embedded engine reports the units DynamoDB would.
func TestCapacityMeter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tables := storetest.New(t)
	meter := &store.CapacityMeter{}
	db, err := store.Open(ctx, store.Options{Region: "us-east-1", Endpoint: storetest.Engine(t).URL, Capacity: meter})
	if err != nil {
		t.Fatal(err)
	}
	type item struct {
		PK, SK, Text string
	}
	data := db.Table(tables.Data())
	big := item{PK: "CAP#1", SK: "A", Text: strings.Repeat("x", 1500)} // 1,519 bytes: two write units, one read unit

	steps := []struct {
		name string
		do   func() error
		want store.Capacity
	}{
		{"put", func() error { return data.Put(big).Run(ctx) },
			store.Capacity{WriteUnits: 2, Writes: 1}},
		{"eventually consistent get", func() error { var it item; return data.Get("PK", big.PK).Range("SK", dynamo.Equal, "A").One(ctx, &it) },
			store.Capacity{ReadUnits: 0.5, Reads: 1}},
		{"consistent query", func() error {
			var its []item
			return data.Get("PK", big.PK).Consistent(true).All(ctx, &its)
		}, store.Capacity{ReadUnits: 1, Reads: 1}},
		{"failed conditional put: no capacity reported", func() error {
			if err := data.Put(big).If("attribute_not_exists(PK)").Run(ctx); !dynamo.IsCondCheckFailed(err) {
				t.Errorf("conditional put: %v, want a failed condition", err)
			}
			return nil
		}, store.Capacity{FailedWrites: 1}},
		{"transaction: doubled", func() error {
			tx := db.WriteTx()
			tx.Update(data.Update("PK", big.PK).Range("SK", "A").Set("Text", "short"))
			tx.Put(data.Put(item{PK: "CAP#1", SK: "B", Text: "b"}))
			return tx.Run(ctx)
		}, store.Capacity{WriteUnits: 2*2 + 2*1, Writes: 1}},
		{"a caller asking for INDEXES keeps it, and is counted", func() error {
			var cc dynamo.ConsumedCapacity
			var it item
			if err := data.Get("PK", big.PK).Range("SK", dynamo.Equal, "B").ConsumedCapacity(&cc).One(ctx, &it); err != nil {
				return err
			}
			if cc.Total != 0.5 || cc.Table != 0.5 {
				t.Errorf("the caller's ConsumedCapacity: %+v, want 0.5 on the table", cc)
			}
			return nil
		}, store.Capacity{ReadUnits: 0.5, Reads: 1}},
		{"other operations are not counted", func() error {
			_, err := db.Client().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &[]string{tables.Data()}[0]})
			return err
		}, store.Capacity{}},
	}
	for _, s := range steps {
		before := meter.Snapshot()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := meter.Snapshot().Sub(before); got != s.want {
			t.Errorf("%s: counted %+v, want %+v", s.name, got, s.want)
		}
	}
	if got := meter.Snapshot(); got.Unreported != 0 || got.Reads != 3 || got.Writes != 2 || got.FailedWrites != 1 {
		t.Errorf("in all: %+v", got)
	}
}
