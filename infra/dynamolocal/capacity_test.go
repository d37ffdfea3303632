package dynamolocal_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// capItem is an item of table "cap" of exactly size bytes as DynamoDB
// counts them (attribute names plus string values): PK, SK "s", the
// attributes of extra, and D padding it to size.
func capItem(t *testing.T, pk string, size int, extra map[string]string) map[string]types.AttributeValue {
	t.Helper()
	item := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: "s"}}
	n := len("PK") + len(pk) + len("SK") + len("s") + len("D")
	for k, v := range extra {
		item[k] = &types.AttributeValueMemberS{Value: v}
		n += len(k) + len(v)
	}
	if size <= n {
		t.Fatalf("item %s: %d bytes is less than its %d bytes of keys and attributes", pk, size, n)
	}
	item["D"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", size-n)}
	return item
}

func capKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: "s"}}
}

// capTable creates "cap": PK/SK, a global index G on GPK/GSK projecting
// every attribute and a global index K on KPK projecting keys only.
func capTable(ctx context.Context, t *testing.T, c *dynamodb.Client) {
	t.Helper()
	s := types.ScalarAttributeTypeS
	ks := func(h, r string) []types.KeySchemaElement {
		k := []types.KeySchemaElement{{AttributeName: aws.String(h), KeyType: types.KeyTypeHash}}
		if r != "" {
			k = append(k, types.KeySchemaElement{AttributeName: aws.String(r), KeyType: types.KeyTypeRange})
		}
		return k
	}
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("cap"), BillingMode: types.BillingModePayPerRequest, KeySchema: ks("PK", "SK"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: s}, {AttributeName: aws.String("SK"), AttributeType: s},
			{AttributeName: aws.String("GPK"), AttributeType: s}, {AttributeName: aws.String("GSK"), AttributeType: s}, {AttributeName: aws.String("KPK"), AttributeType: s}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{IndexName: aws.String("G"), KeySchema: ks("GPK", "GSK"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}},
			{IndexName: aws.String("K"), KeySchema: ks("KPK", ""), Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// capacityOf is the units of one ConsumedCapacity entry: the total, the
// table's and each index's (INDEXES).
type capacityOf struct {
	total   float64
	table   float64
	indexes map[string]float64
}

func capacityOfEntry(c *types.ConsumedCapacity) capacityOf {
	if c == nil {
		return capacityOf{total: -1}
	}
	out := capacityOf{total: aws.ToFloat64(c.CapacityUnits), indexes: map[string]float64{}}
	if c.Table != nil {
		out.table = aws.ToFloat64(c.Table.CapacityUnits)
	}
	for name, ix := range c.GlobalSecondaryIndexes {
		out.indexes[name] = aws.ToFloat64(ix.CapacityUnits)
	}
	return out
}

// TestConsumedCapacity: with ReturnConsumedCapacity, every operation
// answers the units DynamoDB's documented rules give for the sizes of its
// items (capacity.go); without it, none.
func TestConsumedCapacity(t *testing.T) {
	t.Parallel()
	_, _, c := start(t)
	ctx := ctxT(t)
	capTable(ctx, t, c)
	put := func(item map[string]types.AttributeValue) capacityOf {
		t.Helper()
		out, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), Item: item, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		if err != nil {
			t.Fatal(err)
		}
		return capacityOfEntry(out.ConsumedCapacity)
	}
	get := func(pk string, consistent bool, projection string) capacityOf {
		t.Helper()
		in := &dynamodb.GetItemInput{TableName: aws.String("cap"), Key: capKey(pk), ConsistentRead: aws.Bool(consistent), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
		if projection != "" {
			in.ProjectionExpression = aws.String(projection)
		}
		out, err := c.GetItem(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return capacityOfEntry(out.ConsumedCapacity)
	}
	update := func(pk, expr string, values map[string]types.AttributeValue) capacityOf {
		t.Helper()
		out, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("cap"), Key: capKey(pk), UpdateExpression: aws.String(expr),
			ExpressionAttributeValues: values, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		if err != nil {
			t.Fatal(err)
		}
		return capacityOfEntry(out.ConsumedCapacity)
	}
	del := func(pk string) capacityOf {
		t.Helper()
		out, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("cap"), Key: capKey(pk), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		return capacityOfEntry(out.ConsumedCapacity)
	}
	str := func(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
	check := func(name string, got capacityOf, total, table float64, indexes map[string]float64) {
		t.Helper()
		if got.total != total {
			t.Errorf("%s: %v units, want %v", name, got.total, total)
		}
		if table >= 0 && got.table != table {
			t.Errorf("%s: %v units on the table, want %v", name, got.table, table)
		}
		for ix, want := range indexes {
			if got.indexes[ix] != want {
				t.Errorf("%s: %v units on index %s, want %v (%v)", name, got.indexes[ix], ix, want, got.indexes)
			}
		}
		if indexes != nil && len(got.indexes) != len(indexes) {
			t.Errorf("%s: indexes %v, want %v", name, got.indexes, indexes)
		}
	}
	noIndex := map[string]float64{}

	// Writes and reads of single items: 1 KB write units of the larger
	// of the item before and after, 4 KB read units, halved when
	// eventually consistent, at least one.
	check("put of a new 1,500-byte item", put(capItem(t, "a", 1500, nil)), 2, 2, noIndex)
	put(capItem(t, "b", 3000, nil))
	check("put of 500 bytes over 3,000", put(capItem(t, "b", 500, nil)), 3, 3, noIndex)
	check("strongly consistent get of 1,500 bytes", get("a", true, ""), 1, -1, nil)
	check("eventually consistent get", get("a", false, ""), 0.5, -1, nil)
	put(capItem(t, "big", 10240, nil))
	check("get of 10,240 bytes (12 KB)", get("big", true, ""), 3, -1, nil)
	check("get with a projection (the whole item counts)", get("big", true, "PK"), 3, -1, nil)
	check("get of an item that does not exist", get("none", false, ""), 0.5, -1, nil)
	// b is 500 bytes: 7 of names and keys, 493 of D.
	check("update from 500 to 2,100 bytes", update("b", "SET D = :d", map[string]types.AttributeValue{":d": str(strings.Repeat("z", 2093))}), 3, 3, noIndex)
	check("delete of 10,240 bytes", del("big"), 10, -1, nil)
	check("delete of an item that does not exist", del("none"), 1, -1, nil)

	// Global secondary indexes: a put into the index, a delete and a put
	// when its key changes, one write when only projected attributes
	// change, a delete when the item leaves it; a keys-only index's
	// entries are the keys alone.
	g := capItem(t, "g", 900, map[string]string{"GPK": "g1", "GSK": "1", "KPK": "k"})
	check("put into both indexes", put(g), 3, 1, map[string]float64{"G": 1, "K": 1})
	check("index key change: delete and put", update("g", "SET GPK = :v", map[string]types.AttributeValue{":v": str("g2")}), 3, 1, map[string]float64{"G": 2})
	check("projected attribute change", update("g", "SET D = :v", map[string]types.AttributeValue{":v": str(strings.Repeat("w", 1500))}), 4, 2, map[string]float64{"G": 2})
	// g is now 1,520 bytes (1,515 without GPK): its entry in G leaves.
	check("leaving the index", update("g", "REMOVE GPK", nil), 4, 2, map[string]float64{"G": 2})

	// Query and Scan: the items evaluated, before the filter, summed and
	// rounded up to 4 KB; an index's entries as it projects them.
	for _, pk := range []string{"q1", "q2", "q3"} {
		put(capItem(t, pk, 1500, map[string]string{"GPK": "q", "GSK": pk, "KPK": "q"}))
	}
	query := func(index, filter string, consistent bool) capacityOf {
		t.Helper()
		in := &dynamodb.QueryInput{TableName: aws.String("cap"), KeyConditionExpression: aws.String("GPK = :q"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":q": str("q")}, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes}
		if index != "" {
			in.IndexName = aws.String(index)
		} else {
			in.KeyConditionExpression = aws.String("PK = :q")
			in.ExpressionAttributeValues[":q"] = str("q1")
			in.ConsistentRead = aws.Bool(consistent)
		}
		if index == "K" {
			in.KeyConditionExpression = aws.String("KPK = :q")
		}
		if filter != "" {
			in.FilterExpression = aws.String(filter)
		}
		out, err := c.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return capacityOfEntry(out.ConsumedCapacity)
	}
	check("query of three 1,500-byte entries of an index", query("G", "", false), 1, 0, map[string]float64{"G": 1})
	check("the same, filtered to none", query("G", "D = :q", false), 1, 0, map[string]float64{"G": 1})
	check("keys-only index", query("K", "", false), 0.5, 0, map[string]float64{"K": 0.5})
	check("consistent query of the table", query("", "", true), 1, 1, noIndex)
	scan, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("cap"), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		t.Fatal(err)
	}
	// a 1,500, b 2,100, g 1,515, q1-q3 1,500 each: 9,615 bytes, 3 units, halved.
	check("scan of the table", capacityOfEntry(scan.ConsumedCapacity), 1.5, -1, nil)

	// Batches count each item on its own; transactions double.
	put(capItem(t, "b1", 1536, nil))
	put(capItem(t, "b2", 6656, nil))
	bg, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"cap": {Keys: []map[string]types.AttributeValue{capKey("b1"), capKey("b2")}, ConsistentRead: aws.Bool(true)}},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		t.Fatal(err)
	}
	if len(bg.ConsumedCapacity) != 1 {
		t.Fatalf("BatchGetItem: %d entries, want 1", len(bg.ConsumedCapacity))
	}
	check("batch get of 1.5 KB and 6.5 KB: 4 KB + 8 KB", capacityOfEntry(&bg.ConsumedCapacity[0]), 3, -1, nil)
	tg, err := c.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
		{Get: &types.Get{TableName: aws.String("cap"), Key: capKey("b1")}}, {Get: &types.Get{TableName: aws.String("cap"), Key: capKey("b2")}}},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		t.Fatal(err)
	}
	check("transactional get: twice", capacityOfEntry(&tg.ConsumedCapacity[0]), 6, -1, nil)
	bw, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"cap": {
		{PutRequest: &types.PutRequest{Item: capItem(t, "w1", 1024, nil)}}, {PutRequest: &types.PutRequest{Item: capItem(t, "w2", 1025, nil)}},
		{DeleteRequest: &types.DeleteRequest{Key: capKey("b2")}}}}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		t.Fatal(err)
	}
	check("batch write of 1,024 and 1,025 bytes and a delete of 6,656", capacityOfEntry(&bw.ConsumedCapacity[0]), 1+2+7, -1, nil)
	tw, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("cap"), Item: capItem(t, "t1", 1500, map[string]string{"GPK": "t", "GSK": "1"})}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("cap"), Key: capKey("b1"), ConditionExpression: aws.String("attribute_exists(PK)")}},
		{Delete: &types.Delete{TableName: aws.String("cap"), Key: capKey("w1")}},
	}, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
	if err != nil {
		t.Fatal(err)
	}
	// Put 2 units and 2 in G, the check of 1,536 bytes 2, the delete 1: doubled.
	check("transaction", capacityOfEntry(&tw.ConsumedCapacity[0]), 2*(2+2+2+1), 2*(2+2+1), map[string]float64{"G": 4})

	// Without ReturnConsumedCapacity, nothing.
	plain, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("cap"), Key: capKey("a")})
	if err != nil || plain.ConsumedCapacity != nil || plain.Item == nil {
		t.Errorf("GetItem without ReturnConsumedCapacity: %+v, %v", plain.ConsumedCapacity, err)
	}
	if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("cap"), Key: capKey("a"), ReturnConsumedCapacity: "ALL"}); err == nil ||
		!strings.Contains(err.Error(), "returnConsumedCapacity") {
		t.Errorf("ReturnConsumedCapacity ALL: %v, want a ValidationException", err)
	}
}
