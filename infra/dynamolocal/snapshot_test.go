package dynamolocal_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// startData starts an engine with o (logging discarded), returning it with
// a guregu DB and a raw SDK client. The engine is closed when the test ends
// unless the test closed it.
func startData(t *testing.T, o dynamolocal.Options) (*dynamolocal.Engine, *dynamo.DB, *dynamodb.Client) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	e, err := dynamolocal.StartWith(o)
	if err != nil {
		t.Fatalf("StartWith: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	c, opt := cfg(e)
	return e, dynamo.New(c, opt), dynamodb.NewFromConfig(c, opt)
}

func closeEngine(t *testing.T, e *dynamolocal.Engine) {
	t.Helper()
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func avL(v ...types.AttributeValue) types.AttributeValue {
	return &types.AttributeValueMemberL{Value: append([]types.AttributeValue{}, v...)}
}
func avM(m map[string]types.AttributeValue) types.AttributeValue {
	if m == nil {
		m = map[string]types.AttributeValue{}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// render prints an attribute value deterministically, for comparisons.
func render(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S%q", v.Value)
	case *types.AttributeValueMemberN:
		return "N(" + v.Value + ")"
	case *types.AttributeValueMemberB:
		return "B(" + base64.StdEncoding.EncodeToString(v.Value) + ")"
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL(%v)", v.Value)
	case *types.AttributeValueMemberNULL:
		return fmt.Sprintf("NULL(%v)", v.Value)
	case *types.AttributeValueMemberSS:
		return fmt.Sprintf("SS%q", v.Value)
	case *types.AttributeValueMemberNS:
		return fmt.Sprintf("NS%v", v.Value)
	case *types.AttributeValueMemberBS:
		var parts []string
		for _, b := range v.Value {
			parts = append(parts, base64.StdEncoding.EncodeToString(b))
		}
		return fmt.Sprintf("BS%v", parts)
	case *types.AttributeValueMemberL:
		var parts []string
		for _, e := range v.Value {
			parts = append(parts, render(e))
		}
		return "L[" + strings.Join(parts, ",") + "]"
	case *types.AttributeValueMemberM:
		return "M" + renderItem(v.Value)
	}
	return fmt.Sprintf("?%T", av)
}

func renderItem(item map[string]types.AttributeValue) string {
	keys := make([]string, 0, len(item))
	for k := range item {
		if k != probeAttr {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+":"+render(item[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func scanAll(t *testing.T, client *dynamodb.Client, table string) []string {
	t.Helper()
	out, err := client.Scan(ctxT(t), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("scan %s: %v", table, err)
	}
	var items []string
	for _, it := range out.Items {
		items = append(items, renderItem(it))
	}
	return items
}

// typeCheck reports whether the stored value at path (names and list
// indexes) of the item with key has DynamoDB type typ, as minidyn's
// expression interpreter sees it: the only observer of empty lists, maps
// and binaries, which reads answer as NULL. It is a conditional update of
// the attribute probeAttr, which render ignores (a failed ConditionCheck
// would make minidyn lose the empty values).
func typeCheck(t *testing.T, client *dynamodb.Client, table string, key map[string]types.AttributeValue, typ string, path ...any) error {
	t.Helper()
	names := map[string]string{}
	var expr strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if expr.Len() > 0 {
				expr.WriteByte('.')
			}
			ph := fmt.Sprintf("#n%d", len(names))
			names[ph] = p
			expr.WriteString(ph)
		case int:
			fmt.Fprintf(&expr, "[%d]", p)
		}
	}
	names["#probe"] = probeAttr
	_, err := client.UpdateItem(ctxT(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
		UpdateExpression:          aws.String("SET #probe = :t"),
		ConditionExpression:       aws.String("attribute_type(" + expr.String() + ", :t)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": avS(typ)}})
	return err
}

const probeAttr = "_probe"

// snapshotJSON is the parts of a snapshot file the tests look at.
type snapshotJSON struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Tables  []struct {
		Name       string                       `json:"name"`
		Definition map[string]any               `json:"definition"`
		TimeToLive map[string]any               `json:"timeToLive"`
		Items      []map[string]json.RawMessage `json:"items"`
	} `json:"tables"`
}

func readSnapshotJSON(t *testing.T, path string) snapshotJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s snapshotJSON
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("snapshot %s is not JSON: %v\n%s", path, err, b)
	}
	return s
}

const bigN = "123456789012345678901234567890.12345678" // 38 digits: DynamoDB's precision

// TestSnapshotRoundTripsEveryType saves every attribute type through Close,
// restores it with StartWith and reads back the same items, empty lists,
// maps and binaries keeping their type.
func TestSnapshotRoundTripsEveryType(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "nested", "dir", "data.json")
	e, _, client := startData(t, dynamolocal.Options{DataFile: file})
	ctx := ctxT(t)
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String("types"),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("SK"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The empty containers are in their own item: the type checks update it,
	// and minidyn's UpdateItem rewrites every number of the item as a
	// float64.
	key := map[string]types.AttributeValue{"PK": avS("a"), "SK": avN("2")}
	items := []map[string]types.AttributeValue{
		{
			"PK": avS("a"), "SK": avN("1"),
			"str":     avS("héllo <&> \u2028 \"quoted\" \x00 end"),
			"num":     avN(bigN),
			"tiny":    avN("-0.000000000000000000000000000000000000001"),
			"exp":     avN("1E+125"),
			"bin":     &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 0xfe, 0xff}},
			"ss":      &types.AttributeValueMemberSS{Value: []string{"x", "y", ""}},
			"ns":      &types.AttributeValueMemberNS{Value: []string{"1", "2.50", bigN}},
			"bs":      &types.AttributeValueMemberBS{Value: [][]byte{{0}, {1, 2}}},
			"null":    &types.AttributeValueMemberNULL{Value: true},
			"yes":     &types.AttributeValueMemberBOOL{Value: true},
			"no":      &types.AttributeValueMemberBOOL{Value: false},
			"list":    avL(avS("x"), avN(bigN), &types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberBOOL{}, avL(avS("nested"))),
			"map":     avM(map[string]types.AttributeValue{"inner": avM(map[string]types.AttributeValue{"deep": avN(bigN)}), "flag": &types.AttributeValueMemberBOOL{Value: true}}),
			"keyword": avS("SELECT"),
		},
		{
			"PK": key["PK"], "SK": key["SK"],
			"list":   avL(avS("x"), avL(), avM(nil), avL(avL())),
			"map":    avM(map[string]types.AttributeValue{"inner": avM(map[string]types.AttributeValue{"deep": avL()}), "emptyMap": avM(nil)}),
			"emptyL": avL(),
			"emptyM": avM(nil),
		},
		{"PK": avS("a"), "SK": avN("10"), "emptyL": avL()},
		{"PK": avS("a"), "SK": avN("9"), "emptyM": avM(nil)},
		{"PK": avS("b.c"), "SK": avN(bigN)},
	}
	for _, it := range items {
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("types"), Item: it}); err != nil {
			t.Fatalf("put %s: %v", renderItem(it), err)
		}
	}
	// A table with an empty binary: minidyn's interpreter fails on any item
	// holding one, so the other items' types are found item by item.
	if err := db(e).CreateTable("bin", struct {
		PK string `dynamo:"PK,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	for _, it := range []map[string]types.AttributeValue{
		{"PK": avS("x"), "eb": &types.AttributeValueMemberB{Value: []byte{}}},
		{"PK": avS("y"), "el": avL(), "em": avM(nil)},
	} {
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("bin"), Item: it}); err != nil {
			t.Fatalf("put %s: %v", renderItem(it), err)
		}
	}
	// The empty containers, as stored, before and after the restart.
	emptyTypes := []struct {
		typ  string
		path []any
	}{
		{"L", []any{"emptyL"}}, {"M", []any{"emptyM"}}, {"L", []any{"list", 1}}, {"M", []any{"list", 2}},
		{"L", []any{"list", 3, 0}}, {"L", []any{"map", "inner", "deep"}}, {"M", []any{"map", "emptyMap"}},
	}
	checkTypes := func(name string, client *dynamodb.Client) {
		t.Helper()
		for _, c := range emptyTypes {
			if err := typeCheck(t, client, "types", key, c.typ, c.path...); err != nil {
				t.Errorf("%s: %v is not %s: %v", name, c.path, c.typ, err)
			}
			other := map[string]string{"L": "M", "M": "L"}[c.typ]
			if err := typeCheck(t, client, "types", key, other, c.path...); err == nil {
				t.Errorf("%s: %v is %s too", name, c.path, other)
			}
		}
		y := map[string]types.AttributeValue{"PK": avS("y")}
		if typeCheck(t, client, "bin", y, "L", "el") != nil || typeCheck(t, client, "bin", y, "M", "em") != nil {
			t.Errorf("%s: bin item y lost its empty list or map", name)
		}
	}
	checkTypes("before", client)
	typesBefore, binBefore := scanAll(t, client, "types"), scanAll(t, client, "bin")
	closeEngine(t, e)

	info, err := os.Stat(file)
	if err != nil {
		t.Fatalf("no data file after Close: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("data file mode %v, want 0600", info.Mode().Perm())
	}
	snap := readSnapshotJSON(t, file)
	if snap.Format != "dynamolocal-snapshot" || snap.Version != 3 || len(snap.Tables) != 2 {
		t.Fatalf("snapshot header %+v", snap)
	}
	for _, tb := range snap.Tables {
		if tb.Name == "bin" {
			for _, it := range tb.Items {
				if string(it["PK"]) == `{"S":"x"}` && string(it["eb"]) != `{"B":""}` {
					t.Errorf("empty binary saved as %s", it["eb"])
				}
			}
		}
	}
	raw, _ := os.ReadFile(file)
	for _, want := range []string{`"emptyL":{"L":[]}`, `"emptyM":{"M":{}}`, `"num":{"N":"` + bigN + `"}`, `"str":{"S":"héllo <&>`} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("snapshot lacks %s", want)
		}
	}

	e2, _, client2 := startData(t, dynamolocal.Options{DataFile: file})
	if e2.Restored == nil || e2.Restored.Tables != 2 || e2.Restored.Items != 7 || e2.Restored.Path != file {
		t.Errorf("Restored = %+v, want 2 tables, 7 items", e2.Restored)
	}
	if got := scanAll(t, client2, "types"); !slices.Equal(got, typesBefore) {
		t.Errorf("types after restore:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(typesBefore, "\n"))
	}
	if got := scanAll(t, client2, "bin"); !slices.Equal(got, binBefore) {
		t.Errorf("bin after restore: %v, want %v", got, binBefore)
	}
	// Keys sort as before: numbers numerically.
	q, err := client2.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("types"), KeyConditionExpression: aws.String("PK = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": avS("a")}})
	if err != nil || len(q.Items) != 4 || render(q.Items[3]["SK"]) != "N(10)" {
		t.Errorf("query after restore: %v, %v", q, err)
	}

	// Saving the restored engine again gives the same tables.
	again := filepath.Join(t.TempDir(), "again.json")
	if err := e2.Snapshot(again); err != nil {
		t.Fatal(err)
	}
	a, b := readSnapshotJSON(t, file), readSnapshotJSON(t, again)
	if ja, jb := mustMarshal(t, a.Tables), mustMarshal(t, b.Tables); ja != jb {
		t.Errorf("second snapshot differs:\n%s\n%s", ja, jb)
	}
	checkTypes("after", client2)
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func db(e *dynamolocal.Engine) *dynamo.DB {
	c, opt := cfg(e)
	return dynamo.New(c, opt)
}

// TestSnapshotRestoresTablesIndexesAndTTL restores table definitions (keys,
// billing, throughput, GSIs and LSIs with projections, an index added by
// UpdateTable, creation time) and TTL settings, and the GSIs answer queries.
func TestSnapshotRestoresTablesIndexesAndTTL(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	e, gdb, client := startData(t, dynamolocal.Options{DataFile: file})
	ctx := ctxT(t)
	msgs := seedMessages(t, gdb)
	if err := msgs.UpdateTTL("ExpiresAt", true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String("prov"),
		BillingMode: types.BillingModeProvisioned,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("SK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("G"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("L"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange},
		},
		ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(5), WriteCapacityUnits: aws.Int64(7)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:             aws.String("ByG"),
			KeySchema:             []types.KeySchemaElement{{AttributeName: aws.String("G"), KeyType: types.KeyTypeHash}},
			Projection:            &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"Text"}},
			ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(3), WriteCapacityUnits: aws.Int64(4)},
		}},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{
			IndexName:  aws.String("ByL"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("L"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range []string{"g1", "g2", "g1"} {
		item := map[string]types.AttributeValue{"PK": avS("p"), "SK": avS(fmt.Sprint(i)), "G": avS(g), "L": avN(fmt.Sprint(10 - i)), "Text": avS("t"), "Other": avS("o")}
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("prov"), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	// An index added after creation.
	_, err = client.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName:            aws.String("msgs"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("Text"), AttributeType: types.ScalarAttributeTypeS}},
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
			IndexName:  aws.String("ByText"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("Text"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}}},
	})
	if err != nil {
		t.Fatalf("add index: %v", err)
	}

	type view struct {
		desc        map[string]string // table -> DescribeTable JSON
		byAuthor    []string
		byText      []string
		byG, byL    []string
		ttl, tables string
	}
	look := func(client *dynamodb.Client, gdb *dynamo.DB) view {
		t.Helper()
		v := view{desc: map[string]string{}}
		for _, name := range []string{"msgs", "prov"} {
			d, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			// minidyn does not backfill an index added by UpdateTable
			// (ItemCount 0 before the restart, not after); queries go
			// through the table anyway.
			d.Table.ItemCount = nil
			slices.SortFunc(d.Table.GlobalSecondaryIndexes, func(a, b types.GlobalSecondaryIndexDescription) int {
				return strings.Compare(*a.IndexName, *b.IndexName)
			})
			for i := range d.Table.GlobalSecondaryIndexes {
				d.Table.GlobalSecondaryIndexes[i].ItemCount = nil
			}
			for i := range d.Table.LocalSecondaryIndexes {
				d.Table.LocalSecondaryIndexes[i].ItemCount = nil
			}
			v.desc[name] = mustMarshal(t, d.Table)
		}
		var ms []msg
		if err := gdb.Table("msgs").Get("Author", "ann").Index("ByAuthor").All(ctx, &ms); err != nil {
			t.Fatal(err)
		}
		v.byAuthor = ids(ms)
		ms = nil
		if err := gdb.Table("msgs").Get("Text", "t").Index("ByText").All(ctx, &ms); err != nil {
			t.Fatal(err)
		}
		v.byText = ids(ms)
		for _, q := range []struct {
			index, cond string
			values      map[string]types.AttributeValue
			out         *[]string
		}{
			{"ByG", "G = :g", map[string]types.AttributeValue{":g": avS("g1")}, &v.byG},
			{"ByL", "PK = :p AND L > :l", map[string]types.AttributeValue{":p": avS("p"), ":l": avN("8")}, &v.byL},
		} {
			out, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("prov"), IndexName: aws.String(q.index),
				KeyConditionExpression: aws.String(q.cond), ExpressionAttributeValues: q.values})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range out.Items {
				*q.out = append(*q.out, renderItem(it))
			}
		}
		ttl, err := gdb.Table("msgs").DescribeTTL().Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v.ttl = fmt.Sprintf("%v %s", ttl.Status, ttl.Attribute)
		tables, err := gdb.ListTables().All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v.tables = strings.Join(tables, ",")
		return v
	}
	before := look(client, gdb)
	if len(before.byAuthor) != 9 || len(before.byText) != 12 || len(before.byG) != 2 || len(before.byL) != 2 || before.ttl != "ENABLED ExpiresAt" {
		t.Fatalf("before restart: %+v", before)
	}
	closeEngine(t, e)

	_, gdb2, client2 := startData(t, dynamolocal.Options{DataFile: file})
	after := look(client2, gdb2)
	for _, name := range []string{"msgs", "prov"} {
		if before.desc[name] != after.desc[name] {
			t.Errorf("%s description after restore:\n%s\nwant\n%s", name, after.desc[name], before.desc[name])
		}
	}
	before.desc, after.desc = nil, nil
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("after restore:\n%+v\nwant\n%+v", after, before)
	}
	// The application's bootstrap (store.CreateTables) sees the tables exist.
	_, err = client2.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("prov"),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if !errors.As(err, &inUse) {
		t.Errorf("CreateTable of a restored table: %v, want ResourceInUseException", err)
	}
}

// TestSnapshotWriteIsAtomic fails a snapshot after its temporary file is
// written: the previous file stays intact and no temporary file is left;
// the journal keeps the write the failed snapshots did not save.
func TestSnapshotWriteIsAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "data.json")
	e, _, client := startData(t, dynamolocal.Options{DataFile: file})
	ctx := ctxT(t)
	if err := db(e).CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	put := func(client *dynamodb.Client, v string) {
		t.Helper()
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("kv"), Item: map[string]types.AttributeValue{"K": avS("k"), "V": avS(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	put(client, "old")
	if err := e.Snapshot(file); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	put(client, "new")
	dynamolocal.SetBeforeRename(e, func(tmp string) error {
		if b, err := os.ReadFile(tmp); err != nil || !bytes.Contains(b, []byte(`"new"`)) {
			t.Errorf("temporary file %s: %s, %v", tmp, b, err)
		}
		return errors.New("disk on fire")
	})
	unchanged := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, old) {
			t.Errorf("%s: data file changed or unreadable (%v):\n%s", when, err, b)
		}
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			if n := e.Name(); n != "data.json.journal" && n != "data.json.lock" {
				names = append(names, n)
			}
		}
		if len(names) != 1 {
			t.Errorf("%s: directory holds %v, want only data.json (besides its journal and lock)", when, names)
		}
	}
	if err := e.Snapshot(file); err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), file) {
		t.Errorf("failed Snapshot = %v, want the cause and the path", err)
	}
	unchanged("after a failed Snapshot")
	if err := e.Close(); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("Close with a failing final snapshot = %v, want the cause", err)
	}
	unchanged("after a failed final snapshot")

	if _, err := os.Stat(file + ".journal"); err != nil {
		t.Errorf("the journal is gone after a failed final snapshot: %v", err)
	}
	// The write no snapshot saved was answered: the journal replays it.
	_, _, client2 := startData(t, dynamolocal.Options{DataFile: file})
	got, err := client2.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("kv"), Key: map[string]types.AttributeValue{"K": avS("k")}})
	if err != nil || render(got.Item["V"]) != `S"new"` {
		t.Errorf("restored %v, %v; want the journaled new value", got, err)
	}

	t.Run("read-only directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root ignores directory permissions")
		}
		ro := t.TempDir()
		file := filepath.Join(ro, "data.json")
		e, _, client := startData(t, dynamolocal.Options{DataFile: file})
		if err := db(e).CreateTable("kv", struct {
			K string `dynamo:"K,hash"`
		}{}).OnDemand(true).Run(ctx); err != nil {
			t.Fatal(err)
		}
		put(client, "old")
		if err := e.Snapshot(file); err != nil {
			t.Fatal(err)
		}
		old, _ := os.ReadFile(file)
		put(client, "new")
		if err := os.Chmod(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(ro, 0o700)
		if err := e.Snapshot(file); err == nil {
			t.Error("Snapshot into a read-only directory succeeded")
		}
		if b, _ := os.ReadFile(file); !bytes.Equal(b, old) {
			t.Error("data file changed")
		}
	})
}

// TestDataFileProblemsFailLoudly: a data file that cannot be read or is not
// a valid snapshot stops StartWith with the path and the reason, and is
// left untouched; a missing one starts empty.
func TestDataFileProblemsFailLoudly(t *testing.T) {
	t.Parallel()
	valid := `{"format":"dynamolocal-snapshot","version":1,"savedAt":"2026-01-02T03:04:05Z","tables":[
{"name":"kv","createdAt":"2026-01-02T03:04:05Z","definition":{"AttributeDefinitions":[{"AttributeName":"K","AttributeType":"S"}],"KeySchema":[{"AttributeName":"K","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"},"items":[
{"K":{"S":"a"}}
]}
]}
`
	cases := []struct {
		name, content, reason string
	}{
		{"garbage", "not json at all", "invalid JSON"},
		{"truncated", valid[:len(valid)/2], "invalid JSON"},
		{"empty", "", "empty file"},
		{"other JSON", `{"users":[]}`, "not a dynamolocal-snapshot file"},
		{"future version", `{"format":"dynamolocal-snapshot","version":4,"tables":[]}`, "version 4 is not supported"},
		{"version 3 without its checksum", `{"format":"dynamolocal-snapshot","version":3,"tables":[]}`, "not the checksum trailer"},
		{"trailing data", valid + "{}", "after the JSON"},
		{"bad gzip", "\x1f\x8b\x08garbage", "gzip"},
		{"no key schema", `{"format":"dynamolocal-snapshot","version":1,"tables":[{"name":"kv","definition":{},"items":[]}]}`, "no key schema"},
		{"item not an object", strings.Replace(valid, `{"K":{"S":"a"}}`, `[1]`, 1), "not an object"},
		{"item rejected", strings.Replace(valid, `{"K":{"S":"a"}}`, `{"X":{"S":"a"}}`, 1), "restore"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "data.json")
			if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			stamp := time.Now().Add(-time.Hour).Truncate(time.Second)
			if err := os.Chtimes(file, stamp, stamp); err != nil {
				t.Fatal(err)
			}
			e, err := dynamolocal.StartWith(dynamolocal.Options{DataFile: file, Interval: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				e.Close()
				t.Fatal("StartWith succeeded")
			}
			if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %q, want the path and %q", err, c.reason)
			}
			time.Sleep(5 * time.Millisecond) // a stray saver would have run
			b, _ := os.ReadFile(file)
			info, _ := os.Stat(file)
			if string(b) != c.content || !info.ModTime().Equal(stamp) {
				t.Errorf("data file was modified")
			}
			entries, _ := os.ReadDir(filepath.Dir(file))
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only the data file", len(entries))
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "data.json")
		if err := os.Mkdir(file, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := dynamolocal.StartWith(dynamolocal.Options{DataFile: file})
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("StartWith on a directory: %v", err)
		}
	})
	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "data.json")
		if err := os.WriteFile(file, []byte(valid), 0o600); err != nil {
			t.Fatal(err)
		}
		e, _, client := startData(t, dynamolocal.Options{DataFile: file})
		if got := scanAll(t, client, "kv"); len(got) != 1 || e.Restored.Items != 1 || !e.Restored.SavedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
			t.Errorf("restored %v, %+v", got, e.Restored)
		}
		// An earlier build's format is rewritten at start, checksummed,
		// with the same data.
		closeEngine(t, e)
		if s := readSnapshotJSON(t, file); s.Version != 3 || len(s.Tables) != 1 || len(s.Tables[0].Items) != 1 {
			t.Errorf("data file after the start: %+v", s)
		}
		e, _, client = startData(t, dynamolocal.Options{DataFile: file})
		if got := scanAll(t, client, "kv"); len(got) != 1 || e.Restored.Items != 1 {
			t.Errorf("restored %v, %+v after the rewrite", got, e.Restored)
		}
		before, _ := os.ReadFile(file)
		closeEngine(t, e)
		if after, _ := os.ReadFile(file); !bytes.Equal(after, before) {
			t.Error("an unchanged engine rewrote its data file")
		}
	})
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "sub", "data.json")
		e, gdb, _ := startData(t, dynamolocal.Options{DataFile: file})
		if e.Restored != nil {
			t.Errorf("Restored = %+v, want nil", e.Restored)
		}
		if tables, err := gdb.ListTables().All(ctxT(t)); err != nil || len(tables) != 0 {
			t.Errorf("tables %v, %v; want none", tables, err)
		}
		if err := gdb.CreateTable("kv", struct {
			K string `dynamo:"K,hash"`
		}{}).OnDemand(true).Run(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		closeEngine(t, e)
		if s := readSnapshotJSON(t, file); len(s.Tables) != 1 || s.Tables[0].Name != "kv" {
			t.Errorf("saved %+v", s)
		}
	})
}

// TestSnapshotIsConsistentUnderConcurrentWrites takes snapshots while
// writers run transactions and REMOVE updates (which the layer applies in
// two backend steps): no snapshot holds half of one.
func TestSnapshotIsConsistentUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The periodic saver runs too, racing the explicit snapshots.
	e, gdb, client := startData(t, dynamolocal.Options{DataFile: filepath.Join(dir, "data.json"), Interval: time.Millisecond})
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	const writers = 4
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := avN(fmt.Sprint(i))
				// Pair: both items of a transaction, with the same value.
				_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Put: &types.Put{TableName: aws.String("kv"), Item: map[string]types.AttributeValue{"K": avS(fmt.Sprintf("a%d", w)), "V": v}}},
					{Put: &types.Put{TableName: aws.String("kv"), Item: map[string]types.AttributeValue{"K": avS(fmt.Sprintf("b%d", w)), "V": v}}},
				}})
				if err != nil {
					t.Error(err)
					return
				}
				// Parity: "odd" exists exactly when N is odd.
				update := "SET N = :n REMOVE odd"
				values := map[string]types.AttributeValue{":n": v}
				if i%2 == 1 {
					update = "SET N = :n, odd = :t"
					values[":t"] = &types.AttributeValueMemberBOOL{Value: true}
				}
				_, err = client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("kv"),
					Key: map[string]types.AttributeValue{"K": avS(fmt.Sprintf("u%d", w))}, UpdateExpression: aws.String(update),
					ExpressionAttributeValues: values})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	check := func(path string) {
		t.Helper()
		s := readSnapshotJSON(t, path)
		vals := map[string]string{}
		for _, tb := range s.Tables {
			for _, it := range tb.Items {
				var k struct{ S string }
				json.Unmarshal(it["K"], &k)
				if k.S[0] == 'u' {
					var n struct{ N string }
					json.Unmarshal(it["N"], &n)
					var i int
					fmt.Sscan(n.N, &i)
					if _, odd := it["odd"]; odd != (i%2 == 1) {
						t.Errorf("%s: torn update: %s", path, mustMarshal(t, it))
					}
					continue
				}
				vals[k.S] = string(it["V"])
			}
		}
		for w := range writers {
			if a, b := vals[fmt.Sprintf("a%d", w)], vals[fmt.Sprintf("b%d", w)]; a != b {
				t.Errorf("%s: torn transaction: a%d=%s b%d=%s", path, w, a, w, b)
			}
		}
	}
	deadline := time.Now().Add(400 * time.Millisecond)
	n := 0
	for ; time.Now().Before(deadline) || n < 5; n++ {
		path := filepath.Join(dir, fmt.Sprintf("s%d.json", n%3))
		if err := e.Snapshot(path); err != nil {
			t.Fatal(err)
		}
		check(path)
	}
	close(stop)
	wg.Wait()
	closeEngine(t, e)
	check(filepath.Join(dir, "data.json"))
}

// TestPeriodicSnapshot: the engine saves every Interval when data changed,
// and not otherwise; a .gz data file is compressed.
func TestPeriodicSnapshot(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json.gz")
	e, gdb, _ := startData(t, dynamolocal.Options{DataFile: file, Interval: 20 * time.Millisecond})
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := gdb.Table("kv").Put(map[string]string{"K": "k", "V": "v1"}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(10 * time.Millisecond) { // a bound for a stuck saver, not a measure
		if _, err := os.Stat(file); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no periodic snapshot within 10 min")
		}
	}
	b, _ := os.ReadFile(file)
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("%s is not gzip", file)
	}
	// Then reads only: nothing more to save.
	time.Sleep(100 * time.Millisecond)
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	var m []map[string]string
	if err := gdb.Table("kv").Scan().All(ctx, &m); err != nil || len(m) != 1 {
		t.Fatal(m, err)
	}
	time.Sleep(100 * time.Millisecond)
	if again, err := os.Stat(file); err != nil || !again.ModTime().Equal(info.ModTime()) {
		t.Errorf("unchanged data saved again (%v)", err)
	}
	// e crashes, without its final snapshot.
	dynamolocal.Crash(e)
	e2, gdb2, _ := startData(t, dynamolocal.Options{DataFile: file})
	var got map[string]string
	if err := gdb2.Table("kv").Get("K", "k").One(ctx, &got); err != nil || got["V"] != "v1" {
		t.Errorf("restored %v, %v", got, err)
	}
	closeEngine(t, e2)
	closeEngine(t, e)
}

// TestRestoreIntoRunningEngine restores a snapshot with Engine.Restore, and
// refuses to restore over existing tables.
func TestRestoreIntoRunningEngine(t *testing.T) {
	t.Parallel()
	src, gdb, _ := startData(t, dynamolocal.Options{})
	ctx := ctxT(t)
	seedMessages(t, gdb)
	file := filepath.Join(t.TempDir(), "msgs.json")
	if err := src.Snapshot(file); err != nil {
		t.Fatal(err)
	}
	dst, gdb2, _ := startData(t, dynamolocal.Options{})
	if err := dst.Restore(file); err != nil {
		t.Fatal(err)
	}
	var ms []msg
	if err := gdb2.Table("msgs").Get("Chat", "c1").All(ctx, &ms); err != nil || !slices.Equal(ids(ms), seqIDs("c1", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)) {
		t.Errorf("restored %v, %v", ids(ms), err)
	}
	if err := dst.Restore(file); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second Restore = %v, want already exists", err)
	}
	if err := dst.Restore(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Restore of a missing file = %v, want ErrNotExist", err)
	}
}
