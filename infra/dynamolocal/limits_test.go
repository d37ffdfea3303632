package dynamolocal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxItem is DynamoDB's item size limit, 400 KB.
const maxItem = 400 * 1024

// createLimitsTable creates "lim": PK (S, hash), SK (S, range) and a GSI
// "G" keyed GPK (S, hash), GSK (S, range).
func createLimitsTable(t *testing.T, client *dynamodb.Client) {
	t.Helper()
	s := types.ScalarAttributeTypeS
	_, err := client.CreateTable(ctxT(t), &dynamodb.CreateTableInput{
		TableName:   aws.String("lim"),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: s},
			{AttributeName: aws.String("SK"), AttributeType: s}, {AttributeName: aws.String("GPK"), AttributeType: s},
			{AttributeName: aws.String("GSK"), AttributeType: s}},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("G"),
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("GPK"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("GSK"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": avS(pk), "SK": avS(sk)}
}

// sized returns the item {PK: pk, SK: "s", extra..., f: "xxx..."} whose
// DynamoDB size is exactly size bytes, given extraSize, the documented
// size of the extra attributes (names included).
func sized(pk string, size, extraSize int, extra map[string]types.AttributeValue) map[string]types.AttributeValue {
	item := key(pk, "s")
	for k, v := range extra {
		item[k] = v
	}
	fixed := len("PK") + len(pk) + len("SK") + len("s") + extraSize + len("f")
	item["f"] = avS(strings.Repeat("x", size-fixed))
	return item
}

// wantValidation checks that err is a ValidationException whose message
// contains msg.
func wantValidation(t *testing.T, what string, err error, msg string) {
	t.Helper()
	var apiErr interface {
		ErrorCode() string
		ErrorMessage() string
	}
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" || !strings.Contains(apiErr.ErrorMessage(), msg) {
		t.Errorf("%s: %v, want ValidationException %q", what, err, msg)
	}
}

// TestItemSizeIsComputedLikeDynamoDB puts, for each kind of attribute
// value, an item of exactly 400 KB as AWS documents item sizes (attribute
// names plus values; numbers one byte per two significant digits plus
// one; lists and maps 3 bytes plus one per element; sets the sum of their
// elements), which passes, and the same item one byte larger, which fails.
func TestItemSizeIsComputedLikeDynamoDB(t *testing.T) {
	t.Parallel()
	_, _, client := start(t)
	createLimitsTable(t, client)
	ctx := ctxT(t)
	null := &types.AttributeValueMemberNULL{Value: true}
	tests := []struct {
		name  string
		value types.AttributeValue
		size  int // of the attribute "v" and its value
	}{
		{"ASCII string", avS("abc"), 1 + 3},
		{"multibyte string (UTF-8 bytes)", avS("é漢"), 1 + 2 + 3},
		{"number, 5 digits", avN("12345"), 1 + 3 + 1},
		{"number, zeros trimmed", avN("-000120.500"), 1 + 2 + 1},
		{"number, 38 digits", avN("12345678901234567890123456789012345678"), 1 + 19 + 1},
		{"binary (raw bytes)", &types.AttributeValueMemberB{Value: []byte{1, 2, 3, 4}}, 1 + 4},
		{"boolean", &types.AttributeValueMemberBOOL{Value: true}, 1 + 1},
		{"null", null, 1 + 1},
		{"list", avL(avS("ab"), avN("7")), 1 + 3 + (1 + 2) + (1 + 2)},
		{"empty list", avL(), 1 + 3},
		{"map", avM(map[string]types.AttributeValue{"k": avS("vv"), "kk": null}), 1 + 3 + (1 + 1 + 2) + (1 + 2 + 1)},
		{"nested map in list", avL(avM(map[string]types.AttributeValue{"x": avS("y")})), 1 + 3 + 1 + (3 + 1 + 1 + 1)},
		{"string set", &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}, 1 + 1 + 2},
		{"number set", &types.AttributeValueMemberNS{Value: []string{"1", "22"}}, 1 + 2 + 2},
		{"binary set", &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}}, 1 + 1 + 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pk := fmt.Sprintf("p%d", i)
			at := sized(pk, maxItem, tt.size, map[string]types.AttributeValue{"v": tt.value})
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("lim"), Item: at}); err != nil {
				t.Errorf("item of exactly 400 KB: %v", err)
			}
			over := sized(pk+"o", maxItem+1, tt.size, map[string]types.AttributeValue{"v": tt.value})
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("lim"), Item: over})
			wantValidation(t, "item of 400 KB + 1 byte", err, "Item size has exceeded the maximum allowed size")
			got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("lim"), Key: key(pk+"o", "s")})
			if err != nil || got.Item != nil {
				t.Errorf("refused item stored: %v, %v", got, err)
			}
		})
	}
}

// TestWriteLimits checks each write operation against DynamoDB's limits:
// at the limit it passes, one over it fails with AWS's ValidationException
// and writes nothing.
func TestWriteLimits(t *testing.T) {
	t.Parallel()
	_, _, client := start(t)
	createLimitsTable(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // 4 MB transactions are slow under -race on a loaded machine
	defer cancel()
	tbl := aws.String("lim")
	put := func(item map[string]types.AttributeValue) error {
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: tbl, Item: item})
		return err
	}
	withAttrs := func(item map[string]types.AttributeValue, kv ...any) map[string]types.AttributeValue {
		for i := 0; i+1 < len(kv); i += 2 {
			item[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return item
	}
	long := func(n int) string { return strings.Repeat("k", n) }
	puts := func(n int, size int, prefix string) []types.TransactWriteItem {
		var out []types.TransactWriteItem
		for i := range n {
			out = append(out, types.TransactWriteItem{Put: &types.Put{TableName: tbl, Item: sized(fmt.Sprintf("%s%03d", prefix, i), size, 0, nil)}})
		}
		return out
	}
	writes := func(n int, prefix string) []types.WriteRequest {
		var out []types.WriteRequest
		for i := range n {
			out = append(out, types.WriteRequest{PutRequest: &types.PutRequest{Item: key(fmt.Sprintf("%s%03d", prefix, i), "s")}})
		}
		return out
	}
	keys := func(n int) []map[string]types.AttributeValue {
		var out []map[string]types.AttributeValue
		for i := range n {
			out = append(out, key(fmt.Sprintf("g%03d", i), "s"))
		}
		return out
	}
	gets := func(n int) []types.TransactGetItem {
		var out []types.TransactGetItem
		for i := range n {
			out = append(out, types.TransactGetItem{Get: &types.Get{TableName: tbl, Key: key(fmt.Sprintf("g%03d", i), "s")}})
		}
		return out
	}
	update := func(pk string, valueLen int) error {
		_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: tbl, Key: key(pk, "s"),
			UpdateExpression:          aws.String("SET g = :g"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":g": avS(strings.Repeat("y", valueLen))}})
		return err
	}
	txUpdate := func(pk string, valueLen int) error {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{TableName: tbl, Key: key(pk, "s"), UpdateExpression: aws.String("SET g = :g"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":g": avS(strings.Repeat("y", valueLen))}}},
			{Put: &types.Put{TableName: tbl, Item: key(pk+"-other", "s")}},
		}})
		return err
	}
	// Items of 400 KB - 1000 bytes to grow by update: "g" + value adds
	// 1 + len bytes.
	for _, pk := range []string{"u1", "u2", "t1", "t2"} {
		if err := put(sized(pk, maxItem-1000, 0, nil)); err != nil {
			t.Fatal(err)
		}
	}
	padded := func(expr string, n int) *string { return aws.String(expr + strings.Repeat(" ", n-len(expr))) }

	tests := []struct {
		name       string
		atLimit    func() error
		overLimit  func() error
		msg        string
		notWritten map[string]types.AttributeValue // checked absent after overLimit
		cancelled  bool                            // a TransactionCanceledException with a ValidationError reason
	}{
		{"PutItem item size",
			func() error { return put(sized("a1", maxItem, 0, nil)) },
			func() error { return put(sized("a2", maxItem+1, 0, nil)) },
			"Item size has exceeded the maximum allowed size", key("a2", "s"), false},
		{"BatchWriteItem item size",
			func() error {
				_, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
					"lim": {{PutRequest: &types.PutRequest{Item: sized("b1", maxItem, 0, nil)}}}}})
				return err
			},
			func() error {
				_, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
					"lim": {{PutRequest: &types.PutRequest{Item: key("b3", "s")}}, {PutRequest: &types.PutRequest{Item: sized("b2", maxItem+1, 0, nil)}}}}})
				return err
			},
			"Item size has exceeded the maximum allowed size", key("b3", "s"), false},
		{"TransactWriteItems Put item size",
			func() error {
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(1, maxItem, "c")})
				return err
			},
			func() error {
				items := append(puts(1, 10, "d"), puts(1, maxItem+1, "e")...)
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
				return err
			},
			"Item size has exceeded the maximum allowed size", key("d000", "s"), false},
		{"UpdateItem resulting item size",
			func() error { return update("u1", 1000-1) },
			func() error { return update("u2", 1000) },
			"Item size to update has exceeded the maximum allowed size", nil, false},
		{"TransactWriteItems Update resulting item size",
			func() error { return txUpdate("t1", 1000-1) },
			func() error { return txUpdate("t2", 1000) },
			"Item size to update has exceeded the maximum allowed size", key("t2-other", "s"), true},
		{"partition key 2048 bytes",
			func() error { return put(key(long(2048), "s")) },
			func() error { return put(key(long(2049), "s")) },
			"Size of hashkey has exceeded the maximum size limit of2048 bytes", nil, false},
		{"sort key 1024 bytes",
			func() error { return put(key("sk", long(1024))) },
			func() error { return put(key("sk", long(1025))) },
			"Aggregated size of all range keys has exceeded the size limit of 1024 bytes", nil, false},
		{"GSI partition key 2048 bytes",
			func() error { return put(withAttrs(key("gp1", "s"), "GPK", avS(long(2048)), "GSK", avS("x"))) },
			func() error { return put(withAttrs(key("gp2", "s"), "GPK", avS(long(2049)), "GSK", avS("x"))) },
			"Size limit exceeded for Index Key GPK Actual Size: 2049 bytes Max Size: 2048 bytes IndexName: G", key("gp2", "s"), false},
		{"GSI sort key 1024 bytes",
			func() error { return put(withAttrs(key("gs1", "s"), "GPK", avS("x"), "GSK", avS(long(1024)))) },
			func() error { return put(withAttrs(key("gs2", "s"), "GPK", avS("x"), "GSK", avS(long(1025)))) },
			"Size limit exceeded for Index Key GSK Actual Size: 1025 bytes Max Size: 1024 bytes IndexName: G", key("gs2", "s"), false},
		{"key of a read 2048 bytes",
			func() error {
				_, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: key(long(2048), "s")})
				return err
			},
			func() error {
				_, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: key(long(2049), "s")})
				return err
			},
			"Size of hashkey has exceeded the maximum size limit of2048 bytes", nil, false},
		{"key condition of a Query 2048 bytes",
			func() error {
				_, err := client.Query(ctx, &dynamodb.QueryInput{TableName: tbl, KeyConditionExpression: aws.String("PK = :p"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(long(2048))}})
				return err
			},
			func() error {
				_, err := client.Query(ctx, &dynamodb.QueryInput{TableName: tbl, KeyConditionExpression: aws.String("PK = :p"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(long(2049))}})
				return err
			},
			"Size of hashkey has exceeded the maximum size limit of2048 bytes", nil, false},
		{"TransactWriteItems 100 actions",
			func() error {
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(100, 20, "h")})
				return err
			},
			func() error {
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(101, 20, "i")})
				return err
			},
			"Member must have length less than or equal to 100", key("i000", "s"), false},
		{"TransactWriteItems 4 MB",
			func() error {
				// 4 MB = 10 x 381300 + 381304 bytes.
				items := append(puts(10, 381300, "j"), puts(1, 381304, "jj")...)
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
				return err
			},
			func() error {
				items := append(puts(10, 381300, "k"), puts(1, 381305, "kk")...)
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
				return err
			},
			"Transaction request size has exceeded the maximum allowed size of 4 MB", key("k000", "s"), false},
		{"TransactWriteItems same item twice",
			func() error {
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: append(puts(1, 20, "m"), puts(1, 20, "n")...)})
				return err
			},
			func() error {
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Put: &types.Put{TableName: tbl, Item: key("o", "s")}},
					{ConditionCheck: &types.ConditionCheck{TableName: tbl, Key: key("o", "s"), ConditionExpression: aws.String("attribute_not_exists(PK)")}}}})
				return err
			},
			"Transaction request cannot include multiple operations on one item", key("o", "s"), false},
		{"BatchWriteItem 25 requests",
			func() error {
				_, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"lim": writes(25, "p")}})
				return err
			},
			func() error {
				_, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"lim": writes(26, "q")}})
				return err
			},
			"Member must have length less than or equal to 25", key("q000", "s"), false},
		{"BatchGetItem 100 keys",
			func() error {
				_, err := client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"lim": {Keys: keys(100)}}})
				return err
			},
			func() error {
				_, err := client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"lim": {Keys: keys(101)}}})
				return err
			},
			"Too many items requested for the BatchGetItem call", nil, false},
		{"TransactGetItems 100 items",
			func() error {
				_, err := client.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: gets(100)})
				return err
			},
			func() error {
				_, err := client.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: gets(101)})
				return err
			},
			"Member must have length less than or equal to 100", nil, false},
		{"ConditionExpression 4 KB",
			func() error {
				_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: tbl, Item: key("r1", "s"), ConditionExpression: padded("attribute_not_exists(PK)", 4096)})
				return err
			},
			func() error {
				_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: tbl, Item: key("r2", "s"), ConditionExpression: padded("attribute_not_exists(PK)", 4097)})
				return err
			},
			"Invalid ConditionExpression: Expression size has exceeded the maximum allowed size; expression size: 4097", key("r2", "s"), false},
		{"UpdateExpression 4 KB",
			func() error {
				_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: tbl, Key: key("s1", "s"), UpdateExpression: padded("SET a = :a", 4096),
					ExpressionAttributeValues: map[string]types.AttributeValue{":a": avS("x")}})
				return err
			},
			func() error {
				_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: tbl, Key: key("s2", "s"), UpdateExpression: padded("SET a = :a", 4097),
					ExpressionAttributeValues: map[string]types.AttributeValue{":a": avS("x")}})
				return err
			},
			"Invalid UpdateExpression: Expression size has exceeded the maximum allowed size; expression size: 4097", key("s2", "s"), false},
		{"KeyConditionExpression 4 KB",
			func() error {
				_, err := client.Query(ctx, &dynamodb.QueryInput{TableName: tbl, KeyConditionExpression: padded("PK = :p", 4096),
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS("x")}})
				return err
			},
			func() error {
				_, err := client.Query(ctx, &dynamodb.QueryInput{TableName: tbl, KeyConditionExpression: padded("PK = :p", 4097),
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS("x")}})
				return err
			},
			"Invalid KeyConditionExpression: Expression size has exceeded the maximum allowed size; expression size: 4097", nil, false},
		{"FilterExpression 4 KB",
			func() error {
				_, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: tbl, FilterExpression: padded("attribute_exists(PK)", 4096)})
				return err
			},
			func() error {
				_, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: tbl, FilterExpression: padded("attribute_exists(PK)", 4097)})
				return err
			},
			"Invalid FilterExpression: Expression size has exceeded the maximum allowed size; expression size: 4097", nil, false},
		{"ProjectionExpression 4 KB",
			func() error {
				_, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: key("a1", "s"), ProjectionExpression: padded("PK", 4096)})
				return err
			},
			func() error {
				_, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: key("a1", "s"), ProjectionExpression: padded("PK", 4097)})
				return err
			},
			"Invalid ProjectionExpression: Expression size has exceeded the maximum allowed size; expression size: 4097", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.atLimit(); err != nil {
				t.Errorf("at the limit: %v", err)
			}
			if err := tt.overLimit(); tt.cancelled {
				var tce *types.TransactionCanceledException
				if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[0].Code) != "ValidationError" ||
					!strings.Contains(aws.ToString(tce.CancellationReasons[0].Message), tt.msg) || aws.ToString(tce.CancellationReasons[1].Code) != "None" {
					t.Errorf("over the limit: %v, want TransactionCanceledException [ValidationError %q, None]", err, tt.msg)
				}
			} else {
				wantValidation(t, "over the limit", err, tt.msg)
			}
			if tt.notWritten != nil {
				got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: tt.notWritten})
				if err != nil {
					t.Errorf("read back: %v", err)
				} else if got.Item != nil {
					t.Errorf("refused request wrote %v", got.Item)
				}
			}
		})
	}
	// A refused update leaves the item as it was.
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: key("u2", "s")})
	if err != nil || got.Item["g"] != nil {
		t.Errorf("refused update changed the item: %v", err)
	}
	got, err = client.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: key("t2", "s")})
	if err != nil || got.Item["g"] != nil {
		t.Errorf("refused transaction changed the item: %v", err)
	}
}

// TestPageStopsAtOneMegabyte: a Query or Scan page ends with the item
// that brings the data read to 1 MB, with a LastEvaluatedKey to go on.
func TestPageStopsAtOneMegabyte(t *testing.T) {
	t.Parallel()
	_, _, client := start(t)
	createLimitsTable(t, client)
	ctx := ctxT(t)
	const mb = 1 << 20
	for _, tt := range []struct {
		name     string
		itemSize int
		want     []int // page sizes
	}{
		{"four items make exactly 1 MB", mb / 4, []int{4, 2}},
		{"four items one byte short of 1 MB each", mb/4 - 1, []int{5, 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pk := fmt.Sprintf("page%d", tt.itemSize)
			for i := range 6 {
				item := sized(pk, tt.itemSize, 0, nil)
				item["SK"] = avS(fmt.Sprint(i)) // same length as "s"
				if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("lim"), Item: item}); err != nil {
					t.Fatal(err)
				}
			}
			for _, op := range []string{"Query", "Scan"} {
				var pages []int
				var start map[string]types.AttributeValue
				for {
					var n int
					var err error
					var last map[string]types.AttributeValue
					if op == "Query" {
						var out *dynamodb.QueryOutput
						out, err = client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("lim"), KeyConditionExpression: aws.String("PK = :p"),
							ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(pk)}, ExclusiveStartKey: start})
						if err == nil {
							n, last = len(out.Items), out.LastEvaluatedKey
						}
					} else {
						var out *dynamodb.ScanOutput
						out, err = client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("lim"), ExclusiveStartKey: start,
							FilterExpression: aws.String("PK = :p"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(pk)}})
						if err == nil {
							n, last = int(out.Count), out.LastEvaluatedKey
						}
					}
					if err != nil {
						t.Fatalf("%s: %v", op, err)
					}
					if n > 0 || last != nil {
						pages = append(pages, n)
					}
					if last == nil || len(pages) > 10 {
						break
					}
					start = last
				}
				if op == "Query" && fmt.Sprint(pages) != fmt.Sprint(tt.want) {
					t.Errorf("Query pages %v, want %v", pages, tt.want)
				}
				if op == "Scan" {
					total := 0
					for _, p := range pages {
						total += p
					}
					if total != 6 || len(pages) < 2 {
						t.Errorf("Scan pages %v, want 6 items over several pages", pages)
					}
				}
			}
		})
	}
}
