package dynamolocal_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// dataState renders everything a client can read of tables: every item
// (a Scan), the ByAuthor index of msgs in both orders, and the TTL
// settings.
func dataState(t *testing.T, client *dynamodb.Client, tables ...string) string {
	t.Helper()
	ctx := ctxT(t)
	var b strings.Builder
	for _, table := range tables {
		items := scanAll(t, client, table)
		slices.Sort(items)
		fmt.Fprintf(&b, "%s: %v\n", table, items)
		ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s TTL: %s %s\n", table, ttl.TimeToLiveDescription.TimeToLiveStatus, aws.ToString(ttl.TimeToLiveDescription.AttributeName))
	}
	db := dynamo.NewFromIface(client)
	for _, author := range []string{"ann", "bob", "cid"} {
		for _, order := range []dynamo.Order{dynamo.Ascending, dynamo.Descending} {
			var ms []msg
			if err := db.Table("msgs").Get("Author", author).Index("ByAuthor").Order(order).All(ctx, &ms); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "ByAuthor %s %v: %v\n", author, order, ids(ms))
		}
	}
	return b.String()
}

// writeEverything runs every kind of write against msgs (created by
// seedMessages) and kv: puts, conditional and REMOVE updates, a
// non-idempotent ADD, deletes, a transaction with a condition check, a
// batch, TTL, a table created and one deleted.
func writeEverything(t *testing.T, client *dynamodb.Client, round int) {
	t.Helper()
	ctx := ctxT(t)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	r := fmt.Sprint(round)
	must(client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("msgs"), Item: map[string]types.AttributeValue{
		"Chat": avS("c3"), "Seq": avN(r), "Author": avS("cid"), "Stamp": avS("2025-" + r), "Text": avS("hello " + r)}}))
	must(client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("msgs"),
		Key:              map[string]types.AttributeValue{"Chat": avS("c1"), "Seq": avN("2")},
		UpdateExpression: aws.String("SET Author = :a ADD Edits :one REMOVE Stamp"), ConditionExpression: aws.String("attribute_exists(Chat)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": avS("cid"), ":one": avN("1")}}))
	must(client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("msgs"),
		Key:              map[string]types.AttributeValue{"Chat": avS("c1"), "Seq": avN("4")},
		UpdateExpression: aws.String("SET Stamp = :s"), ExpressionAttributeValues: map[string]types.AttributeValue{":s": avS("2030-" + r)}}))
	must(client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("msgs"),
		Key: map[string]types.AttributeValue{"Chat": avS("c1"), "Seq": avN(fmt.Sprint(5 + round))}}))
	must(client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("msgs"), Key: map[string]types.AttributeValue{"Chat": avS("c1"), "Seq": avN("1")},
			ConditionExpression: aws.String("attribute_exists(Chat)")}},
		{Put: &types.Put{TableName: aws.String("kv"), Item: map[string]types.AttributeValue{"K": avS("tx" + r), "L": avL(), "M": avM(nil)}}},
		{Update: &types.Update{TableName: aws.String("kv"), Key: map[string]types.AttributeValue{"K": avS("counter")},
			UpdateExpression: aws.String("ADD N :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN("1")}}},
		{Delete: &types.Delete{TableName: aws.String("msgs"), Key: map[string]types.AttributeValue{"Chat": avS("c2"), "Seq": avN(fmt.Sprint(1 + round))}}},
	}}))
	// A failed transaction writes nothing, and journals nothing.
	_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String("kv"), Key: map[string]types.AttributeValue{"K": avS("counter")},
			UpdateExpression: aws.String("ADD N :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN("100")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("kv"), Key: map[string]types.AttributeValue{"K": avS("none")},
			ConditionExpression: aws.String("attribute_exists(K)")}},
	}})
	if errorCode(err) != "TransactionCanceledException" {
		t.Fatalf("failing transaction: %v", err)
	}
	must(client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"kv": {{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"K": avS("batch" + r), "B": &types.AttributeValueMemberB{Value: []byte{0, byte(round)}}}}},
			{DeleteRequest: &types.DeleteRequest{Key: map[string]types.AttributeValue{"K": avS("batch" + fmt.Sprint(round-1))}}}},
	}}))
	table := "extra" + r
	must(client.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("K"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("K"), KeyType: types.KeyTypeHash}}}))
	if round > 1 {
		must(client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("extra" + fmt.Sprint(round-1))}))
	}
}

// TestJournalReplaysEveryWrite writes with every write operation on an
// engine with a data file and no snapshot in between (a long interval),
// crashes it, and restarts: every answered write is there, replayed from
// the journal, indexes and TTL included; twice, the second time on top of
// a snapshot taken between the rounds.
func TestJournalReplaysEveryWrite(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	o := dynamolocal.Options{DataFile: file, Interval: time.Hour}
	e, gdb, client := startData(t, o)
	ctx := ctxT(t)
	seedMessages(t, gdb)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := gdb.Table("kv").UpdateTTL("expiresAt", true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	writeEverything(t, client, 1)
	tables := []string{"msgs", "kv", "extra1"}
	before := dataState(t, client, tables...)
	dynamolocal.Crash(e)
	if _, err := os.Stat(file); err == nil {
		t.Fatalf("a snapshot was written; the test needs the journal alone")
	}

	e2, _, client2 := startData(t, o)
	if after := dataState(t, client2, tables...); after != before {
		t.Fatalf("after the crash:\n%s\nwant\n%s", after, before)
	}
	if e2.Restored == nil || e2.Restored.Replayed < 10 {
		t.Errorf("Restored = %+v, want the journaled writes counted", e2.Restored)
	}
	// A snapshot, then more writes, then a crash: the snapshot plus the
	// rest of the journal.
	if err := e2.Snapshot(file); err != nil {
		t.Fatal(err)
	}
	writeEverything(t, client2, 2)
	tables = []string{"msgs", "kv", "extra2"}
	before = dataState(t, client2, tables...)
	dynamolocal.Crash(e2)
	e3, _, client3 := startData(t, o)
	if after := dataState(t, client3, tables...); after != before {
		t.Fatalf("after the second crash:\n%s\nwant\n%s", after, before)
	}
	if _, err := client3.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("extra1")}); errorCode(err) != "ResourceNotFoundException" {
		t.Errorf("the deleted table is back: %v", err)
	}
	// A clean stop folds the journal into the data file and compacts
	// it to its header.
	closeEngine(t, e3)
	if b, err := os.ReadFile(file + ".journal"); err != nil || string(b) != journalHeader {
		t.Errorf("journal after Close: %q, %v; want its header alone", b, err)
	}
	_, _, client4 := startData(t, o)
	if after := dataState(t, client4, tables...); after != before {
		t.Fatalf("after a clean restart:\n%s\nwant\n%s", after, before)
	}
}

func keysIn(t *testing.T, gdb *dynamo.DB) []string {
	t.Helper()
	var items []struct{ K string }
	if err := gdb.Table("kv").Scan().All(ctxT(t), &items); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range items {
		keys = append(keys, it.K)
	}
	slices.Sort(keys)
	return keys
}

// recordOffsets returns the offsets of the journal's records, walking
// their frames (a 20-byte header starting with the payload's length).
func recordOffsets(t *testing.T, journal []byte) []int {
	t.Helper()
	magic := journalHeader
	if !bytes.HasPrefix(journal, []byte(magic)) {
		t.Fatalf("journal starts with %q", journal[:min(len(journal), 30)])
	}
	var offs []int
	off := len(magic)
	for off+20 <= len(journal) {
		offs = append(offs, off)
		off += 20 + int(binary.LittleEndian.Uint32(journal[off:]))
	}
	if off != len(journal) {
		t.Fatalf("journal framing ends at %d of %d", off, len(journal))
	}
	return offs
}

// TestJournalMustContinueTheSnapshot: a journal that starts after the
// writes its snapshot holds (writes missing in between) stops the start.
func TestJournalMustContinueTheSnapshot(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	o := dynamolocal.Options{DataFile: file, Interval: time.Hour}
	e, gdb, _ := startData(t, o)
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	put := func(db *dynamo.DB, k string) {
		if err := db.Table("kv").Put(map[string]string{"K": k}).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	put(gdb, "a")
	if err := e.Snapshot(file); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	put(gdb, "b")
	if err := e.Snapshot(file); err != nil {
		t.Fatal(err)
	}
	put(gdb, "c")
	dynamolocal.Crash(e)
	// The older snapshot with the newer journal: write b is in neither.
	if err := os.WriteFile(file, old, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = dynamolocal.StartWith(dynamolocal.Options{DataFile: file, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "writes are missing") || !strings.Contains(err.Error(), file+".journal") {
		t.Fatalf("StartWith = %v, want writes are missing", err)
	}
}

// TestJournalBehindTheSnapshot: a crash after a snapshot is written but
// before the last write it holds reached the journal leaves a journal
// that ends before the snapshot; the start goes on from the snapshot,
// and the writes after it are journaled in sequence (the next start
// reads them).
func TestJournalBehindTheSnapshot(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	o := dynamolocal.Options{DataFile: file, Interval: time.Hour}
	e, gdb, _ := startData(t, o)
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	put := func(db *dynamo.DB, k string) {
		t.Helper()
		if err := db.Table("kv").Put(map[string]string{"K": k}).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	put(gdb, "a")
	behind, err := os.ReadFile(file + ".journal")
	if err != nil {
		t.Fatal(err)
	}
	put(gdb, "b")
	if err := e.Snapshot(file); err != nil {
		t.Fatal(err)
	}
	dynamolocal.Crash(e)
	// The journal as it was before write b reached it.
	if err := os.WriteFile(file+".journal", behind, 0o600); err != nil {
		t.Fatal(err)
	}
	e2, gdb2, _ := startData(t, o)
	if got := keysIn(t, gdb2); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after the crash: %v", got)
	}
	put(gdb2, "c")
	dynamolocal.Crash(e2)
	_, gdb3, _ := startData(t, o)
	if got := keysIn(t, gdb3); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after the next crash: %v", got)
	}
}

// TestCompactionUnderConcurrentWrites folds the journal into the data
// file over and over while writers increment counters (ADD, not
// idempotent) and put items, and crashes as soon as they are done (the
// journal as the last compaction left it, plus the writes after it):
// every counter equals its number of answered increments: no write lost,
// none applied twice.
func TestCompactionUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	o := dynamolocal.Options{DataFile: file, Interval: time.Hour}
	e, gdb, client := startData(t, o)
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("kv"),
					Key: map[string]types.AttributeValue{"K": avS(fmt.Sprint("counter", w))}, UpdateExpression: aws.String("ADD N :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN("1")}})
				if err == nil {
					_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("kv"),
						Item: map[string]types.AttributeValue{"K": avS(fmt.Sprintf("item%d-%d", w, i))}})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	snapshots := 0
	for running := true; running; {
		select {
		case <-finished:
			running = false
		default:
			if err := e.Snapshot(file); err != nil {
				t.Fatal(err)
			}
			snapshots++
		}
	}
	dynamolocal.Crash(e)
	var snap struct{ JournalLSN uint64 }
	if b, err := os.ReadFile(file); err != nil || json.Unmarshal(b, &snap) != nil || snap.JournalLSN == 0 {
		t.Fatalf("no snapshot holding journaled writes (%v)", err)
	}
	_, gdb2, _ := startData(t, o)
	var items []struct {
		K string
		N int
	}
	if err := gdb2.Table("kv").Scan().All(ctx, &items); err != nil {
		t.Fatal(err)
	}
	counters := 0
	for _, it := range items {
		if strings.HasPrefix(it.K, "counter") {
			counters++
			if it.N != rounds {
				t.Errorf("%s = %d after %d answered increments", it.K, it.N, rounds)
			}
		}
	}
	if counters != writers || len(items) != writers*(rounds+1) {
		t.Errorf("%d counters, %d items; want %d, %d", counters, len(items), writers, writers*(rounds+1))
	}
	t.Logf("%d explicit snapshots during the writes", snapshots)
}

// TestCrashBetweenSnapshotAndCompaction: a crash after a snapshot is
// written but before the journal is compacted leaves a journal whose
// records the snapshot already holds: they are not applied twice.
func TestCrashBetweenSnapshotAndCompaction(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	o := dynamolocal.Options{DataFile: file, Interval: time.Hour}
	e, gdb, client := startData(t, o)
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	add := func(client *dynamodb.Client) {
		t.Helper()
		if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("kv"),
			Key: map[string]types.AttributeValue{"K": avS("counter")}, UpdateExpression: aws.String("ADD N :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN("1")}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		add(client)
	}
	dynamolocal.SetBeforeCompact(e, func() error { return errors.New("crash before compacting") })
	if err := e.Snapshot(file); err == nil {
		t.Fatal("the hook did not stop the compaction")
	}
	add(client)
	dynamolocal.Crash(e)
	_, gdb2, client2 := startData(t, o)
	var got struct{ N int }
	if err := gdb2.Table("kv").Get("K", "counter").One(ctx, &got); err != nil || got.N != 4 {
		t.Fatalf("counter = %d (%v) after 4 answered increments", got.N, err)
	}
	add(client2) // and the journal goes on from there
	if err := gdb2.Table("kv").Get("K", "counter").One(ctx, &got); err != nil || got.N != 5 {
		t.Fatalf("counter = %d (%v), want 5", got.N, err)
	}
}

// TestDataFileLocked: a second engine on the same data file is refused
// while the first runs, and starts once it has stopped.
func TestDataFileLocked(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	e, _, _ := startData(t, dynamolocal.Options{DataFile: file})
	_, err := dynamolocal.StartWith(dynamolocal.Options{DataFile: file, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") || !strings.Contains(err.Error(), file) {
		t.Fatalf("second StartWith = %v, want in use", err)
	}
	closeEngine(t, e)
	e2, _, _ := startData(t, dynamolocal.Options{DataFile: file})
	closeEngine(t, e2)
	entries, _ := os.ReadDir(filepath.Dir(file))
	if len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("after Close the directory holds %v; an unchanged engine writes nothing", names)
	}
}

// TestReadWaitsForTheJournal: a write is applied before its journal
// record is synced, so a read served meanwhile can see it; the read is
// answered only once that sync is done. When the sync never happens (the
// process is killed first), the read fails rather than answering what
// the restarted engine will not have: nothing a client saw is lost.
func TestReadWaitsForTheJournal(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	o := dynamolocal.Options{DataFile: file, Interval: time.Hour}
	e, gdb, client := startData(t, o)
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		P string `dynamo:"P,hash"`
		S string `dynamo:"S,range"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	once := func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }
	put := func(client *dynamodb.Client, s string) error {
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("kv"),
			Item: map[string]types.AttributeValue{"P": avS("p"), "S": avS(s)}}, once)
		return err
	}
	type answer struct {
		keys []string
		err  error
	}
	query := func(client *dynamodb.Client) answer {
		out, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("kv"), ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("P = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS("p")}}, once)
		if err != nil {
			return answer{err: err}
		}
		var keys []string
		for _, it := range out.Items {
			keys = append(keys, it["S"].(*types.AttributeValueMemberS).Value)
		}
		return answer{keys: keys}
	}
	if err := put(client, "a"); err != nil {
		t.Fatal(err)
	}
	// stalledRead puts s with the journal's flush held, then queries the
	// partition while the write is applied and not synced, and returns
	// the query's answer once release(err) ended the flush.
	stalledRead := func(s string, flushErr error) (answer, error) {
		stalled, release := dynamolocal.StallJournal(e)
		early := func(a answer) {
			release(nil) // so that the engine can close
			t.Fatalf("the query answered %v (%v) while the write it saw was not on disk", a.keys, a.err)
		}
		wrote := make(chan error, 1)
		go func() { wrote <- put(client, s) }()
		<-stalled
		read := dynamolocal.BackendItemsRead(e)
		answered := make(chan answer, 1)
		go func() { answered <- query(client) }()
		for dynamolocal.BackendItemsRead(e) == read { // the query has read the items
			select {
			case a := <-answered:
				early(a)
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
		select {
		case a := <-answered:
			early(a)
		default:
		}
		release(flushErr)
		return <-answered, <-wrote
	}
	a, err := stalledRead("b", nil)
	if err != nil || a.err != nil || !slices.Equal(a.keys, []string{"a", "b"}) {
		t.Fatalf("after the sync: put %v, query %v (%v), want a and b", err, a.keys, a.err)
	}
	a, err = stalledRead("c", errors.New("killed before the sync"))
	if err == nil || a.err == nil {
		t.Fatalf("the sync failed: put %v, query %v (%v); both must fail", err, a.keys, a.err)
	}
	dynamolocal.Crash(e)
	_, _, client2 := startData(t, o)
	if a := query(client2); a.err != nil || !slices.Equal(a.keys, []string{"a", "b"}) {
		t.Fatalf("after the restart: %v (%v), want a and b (c was never on disk, and no one saw it)", a.keys, a.err)
	}
}
