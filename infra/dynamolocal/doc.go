// Package dynamolocal is the embedded local DynamoDB engine used by the local
// dev server and by the storage tests. It runs minidyn's HTTP server
// (github.com/truora/minidyn/server) in-process on a loopback listener behind
// a thin translation layer, so that the application's unmodified
// aws-sdk-go-v2 and guregu/dynamo code, the exact code path used against AWS,
// works against it. Only the endpoint differs:
//
//	engine, err := dynamolocal.Start()
//	...
//	defer engine.Close()
//	db := dynamo.New(aws.Config{Region: "us-east-1",
//		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")},
//		func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(engine.URL) })
//
// # Where the items live
//
// The layer holds every table's items itself, once: each item as its
// DynamoDB JSON (the form the snapshot holds), with an ordered index of
// its keys per table and per secondary index (index.go). minidyn keeps
// every table with its schema and no items, for what only it does: the
// failure emulation of Engine.WithBackend and the table descriptions. A
// request's cost follows its item or its page, never the store: minidyn
// re-sorts a table's whole key list, and each index's, whenever an item
// is inserted, so a store inside it slows as it fills.
//
// Conditions, updates, filters and projections are evaluated by
// minidyn's exported interpreter (SET with arithmetic, nested paths,
// list_append, if_not_exists; ADD; DELETE; nested REMOVE; all comparison
// operators, BETWEEN, IN, AND/OR/NOT, attribute_exists,
// attribute_not_exists, attribute_type, begins_with, contains, size) on
// the one item a write touches, an update on a copy, so that a failed
// condition or limit changes nothing. minidyn's own checks of keys
// (exactly the table's key attributes, of their defined types), of
// update expressions that target a key attribute, of duplicate set
// members and of unused or malformed placeholders are made by the layer
// with minidyn's exported functions, with minidyn's messages. GetItem,
// BatchGetItem and TransactGetItems are first given to minidyn, whose
// empty tables answer its validation errors, emulated failures and the
// keys it leaves unprocessed; the items then come from the layer.
// ConditionalCheckFailedException and TransactionCanceledException
// decode normally (dynamo.IsCondCheckFailed works).
//
// # Translated or answered by the layer
//
//   - Query with the legacy KeyConditions parameter (guregu always sends it;
//     minidyn would silently return nothing) is rewritten to a
//     KeyConditionExpression with collision-free placeholders (#kcN, :kcN).
//     EQ, LE, LT, GE, GT, BEGINS_WITH and BETWEEN are supported; other
//     operators are a ValidationException, as on AWS.
//   - Query and Scan are answered from the layer's key index: per table and
//     per secondary index, the key values of every item in DynamoDB's order
//     (numbers numerically, strings and binaries bytewise; index ties by
//     table key), kept in step with each write. A Query finds its range by
//     binary search and reads only the items of its page: its cost follows
//     the page, not the table. The key condition is checked as AWS does
//     (equality on the partition key, at most one sort key condition,
//     operands of the key's type); the layer honours ScanIndexForward,
//     ExclusiveStartKey, Limit (counting items evaluated before
//     FilterExpression), the 1 MB page, LastEvaluatedKey (table and index
//     keys, only when more items remain), Select COUNT, Count and
//     ScannedCount, sparse indexes, KEYS_ONLY/INCLUDE index projections and
//     ProjectionExpression. Failures emulated for the table or index
//     (Engine.WithBackend) are asked of minidyn in constant time. Parallel
//     scans work: segment 0 returns every item, the other segments none.
//   - Every write (PutItem, UpdateItem, DeleteItem, BatchWriteItem,
//     TransactWriteItems, CreateTable, UpdateTable, DeleteTable,
//     UpdateTimeToLive) runs under one exclusive lock, so the key index and
//     the journal follow the order writes are applied; reads share the lock.
//   - TransactWriteItems: every condition is evaluated on the items as they
//     are, and any failing one cancels the transaction with a
//     TransactionCanceledException giving a reason per action
//     (ConditionalCheckFailed, with the item for ALL_OLD; None for the
//     others), nothing written. Then every action's item is computed, and
//     only when all are valid are they stored.
//   - BatchWriteItem is validated whole before anything is applied, as on
//     AWS (minidyn applies the requests before an invalid one); minidyn
//     then runs it on its empty table, which is emptied again at once, to
//     tell which requests it leaves unprocessed (EmulateUnprocessedItems)
//     or whether it fails; the processed requests are stored.
//   - CreateTable, UpdateTable, DeleteTable and DescribeTable descriptions are
//     completed: TableStatus (ACTIVE; DELETING for DeleteTable), TableArn,
//     CreationDateTime, AttributeDefinitions, BillingModeSummary,
//     ProvisionedThroughput, and per index IndexArn and IndexStatus, so
//     guregu's Table.Describe, Table.Wait, CreateTable(...).Wait and the SDK
//     table waiters work.
//   - UpdateTimeToLive and DescribeTimeToLive are answered from per-table
//     memory (DISABLED until enabled; enabling twice or disabling when
//     disabled is a ValidationException, as on AWS). TTL deletion is NOT
//     emulated: nothing ever expires locally. AWS deletes expired items
//     lazily too, so the application must check expiry itself anyway.
//   - ListTables is answered from the tables created through the layer
//     (checked against minidyn, sorted, with Limit, ExclusiveStartTableName
//     and LastEvaluatedTableName).
//   - PutItem and DeleteItem answer no Attributes unless ReturnValues is
//     ALL_OLD, and then the previous item; another value is a
//     ValidationException. UpdateItem answers every ReturnValues.
//     PutItem, DeleteItem, UpdateItem and the actions of
//     TransactWriteItems answer the item as it is with a failed condition
//     when ReturnValuesOnConditionCheckFailure is ALL_OLD.
//   - Top-level REMOVE actions in UpdateItem and in the Update entries of
//     TransactWriteItems are applied by the layer (minidyn's interpreter
//     ignores them; guregu emits them for Update.Remove and for Set of an
//     empty value).
//   - DescribeTable's ItemCount, the table's and each index's, is the
//     layer's count.
//   - Errors are AWS JSON 1.0 errors with a full
//     "com.amazonaws.dynamodb.v20120810#..." __type; minidyn's plain-text
//     errors become JSON (unsupported operations are
//     UnknownOperationException), a backend panic is a 500
//     InternalServerError. Request bodies are limited to 16 MiB.
//   - Legacy parameters minidyn would silently ignore (Expected,
//     AttributeUpdates, QueryFilter, ScanFilter, AttributesToGet,
//     ConditionalOperator) are rejected with a ValidationException.
//   - ReturnConsumedCapacity TOTAL or INDEXES is answered with the
//     ConsumedCapacity DynamoDB would charge, computed from the items'
//     sizes by its documented rules (capacity.go): 4 KB read units (half
//     when eventually consistent, twice in a transaction), 1 KB write
//     units of the larger of the item before and after, the writes of
//     each global secondary index, transactions doubled. minidyn reports
//     none; without the parameter nothing is computed.
//   - Use Engine.WithBackend to call the failure-emulation methods of
//     Engine.Backend while requests may run. minidyn's data methods
//     (ClearTable, ClearAllTables) have no effect on the items, which are
//     the layer's; Reset drops the tables and their items.
//
// # DynamoDB's limits
//
// The layer refuses what DynamoDB refuses, with AWS's ValidationException
// messages (some of AWS's own quirks included, such as "limit of2048"):
//
//   - Item size, 400 KB (409,600 bytes), computed as AWS documents it: the
//     UTF-8 bytes of every attribute name plus the value's size; strings
//     their UTF-8 bytes, binaries their raw bytes, numbers one byte per two
//     significant digits plus one, booleans and nulls one byte, sets the sum
//     of their elements, lists and maps 3 bytes plus, per element, one byte
//     and its size (its name too, in a map). PutItem, BatchWriteItem puts
//     and TransactWriteItems puts over it: "Item size has exceeded the
//     maximum allowed size". An UpdateItem whose resulting item is over it
//     is undone: "Item size to update has exceeded the maximum allowed
//     size"; in a transaction, a TransactionCanceledException whose reason
//     for that action is ValidationError with the same message. An
//     expression attribute value over it: "ExpressionAttributeValues
//     contains invalid value: Item size has exceeded the maximum allowed
//     size for key :v".
//   - Key values, in items and in the Key of every operation: a partition
//     key over 2048 bytes, "One or more parameter values were invalid: Size
//     of hashkey has exceeded the maximum size limit of2048 bytes"; a sort
//     key over 1024 bytes, "One or more parameter values were invalid:
//     Aggregated size of all range keys has exceeded the size limit of 1024
//     bytes"; an empty string or binary, "One or more parameter values are
//     not valid. The AttributeValue for a key attribute cannot contain an
//     empty string value. Key: PK". Secondary index keys of items written:
//     "One or more parameter values were invalid: Size limit exceeded for
//     Index Key GSI1PK Actual Size: 2049 bytes Max Size: 2048 bytes
//     IndexName: GSI1" (1024 for a sort key), a type other than the
//     attribute definition's, "... Type mismatch for Index Key GSI1PK
//     Expected: S Actual: N IndexName: GSI1", and empty values.
//   - Numbers: more than 38 significant digits, "Attempting to store more
//     than 38 significant digits in a Number"; magnitudes from 1E+126 or
//     under 1E-130, "Number overflow. ..." / "Number underflow. ...".
//     Lists and maps nested deeper than 32 levels: "Nesting Levels have
//     exceeded supported limits".
//   - Expressions (KeyCondition, Filter, Projection, Condition, Update) over
//     4 KB: "Invalid FilterExpression: Expression size has exceeded the
//     maximum allowed size; expression size: 4097".
//   - TransactWriteItems: more than 100 actions, "1 validation error
//     detected: Value at 'transactItems' failed to satisfy constraint:
//     Member must have length less than or equal to 100" (none: "...
//     greater than or equal to 1"); items (keys for the actions other than
//     Put) over 4 MB in all, "Transaction request size has exceeded the
//     maximum allowed size of 4 MB"; two actions on one item, "Transaction
//     request cannot include multiple operations on one item".
//     TransactGetItems: more than 100 items, the same message as above.
//   - BatchWriteItem: more than 25 requests for a table, "1 validation
//     error detected: Value at 'requestItems' failed to satisfy constraint:
//     Map value must satisfy constraint: [Member must have length less than
//     or equal to 25, ...]", more than 25 in all, "Too many items requested
//     for the BatchWriteItem call"; the same key twice, "Provided list of
//     item keys contains duplicates". BatchGetItem: more than 100 keys, "Too
//     many items requested for the BatchGetItem call"; duplicates as above.
//   - Query and Scan: a page ends with the item that brings the data read
//     to 1 MB (1,048,576 bytes; the items as stored, or as the index
//     projects them), with a LastEvaluatedKey when more items remain.
//
// Not checked: attribute name lengths, the 2 MB of expression attribute
// names and values (request bodies are limited to 16 MiB), BatchGetItem's
// 16 MB response, throughput and throttling, item collection sizes.
//
// # Durability (Options.DataFile)
//
// The store is two files: the snapshot, DataFile, and the journal,
// DataFile + ".journal" (DataFile + ".lock" only keeps a second engine
// off them, on Unix). Every successful write request is appended to the
// journal, and the file synced, before the write is answered; writers
// arriving during a sync share the next one (group commit). Failed
// requests are not journaled. A write is applied before its sync, so a
// request served meanwhile (a read, a condition that failed on the new
// item) could see it; every request is therefore answered only once the
// writes appended before it was served are synced too: nothing a client
// saw is lost by a crash. StartWith restores the snapshot and
// replays, in order, the journal's records after the last one the
// snapshot holds; each write is deterministic given the data before it,
// so the replay rebuilds exactly the answered state; the restore's
// buffers (the files read whole and decoded) are then handed back to the
// system at once (debug.FreeOSMemory), so that the process starts at
// about what its items hold rather than several times it. Every Interval
// (when data changed), when the journal passes 64 MiB and at Close, the
// data is written to DataFile atomically (a synced temporary file
// renamed over it), with the sequence number of the last write it holds,
// and the journal is then rewritten, atomically too, without those
// records: its header alone, when no write came in between. A crash in
// between replays only the later records. If the journal cannot be
// written or synced, every later write fails with an InternalServerError
// until the engine restarts. Changes made through Engine.WithBackend or
// Engine.Restore are not journaled; the next snapshot saves them.
//
// # Integrity at start
//
// Both files carry checksums (the formats are described in journal.go
// and snapshot.go): each journal record a CRC-32C of its header (length
// and sequence number) and one of its payload; the snapshot a trailer
// with the CRC-32C of every 64 KiB of its content. The start tells what a
// crash can leave from what it cannot:
//
//   - A crash can leave only a prefix of the journal's last append,
//     which was never answered: a record the file ends inside of (its
//     20-byte header, or the payload its verified header declares, is
//     incomplete). That record is dropped and the journal truncated after
//     the last whole record; every answered write is there.
//   - Everything else is damage and stops StartWith with an error naming
//     the file and the byte offset, the files left untouched, byte for
//     byte: a record whose bytes are all there but fail their checksum
//     (the last one too: a crash does not change bytes), a whole header
//     that fails its checksum (so a damaged length is never read as a
//     cut record), records out of sequence or a journal that does not
//     continue its snapshot, an empty (0-byte) journal or one whose
//     header is missing or changed, and a snapshot whose content, length
//     or trailer does not match its checksums, or that is cut short.
//   - A journal is never legitimately empty or headerless: it is created,
//     at the first start, as a complete file holding its header
//     (temporary file, synced, renamed), compaction keeps the header, and
//     Close leaves it beside the snapshot. No snapshot and no journal is a
//     first start. A missing journal beside a snapshot is damage when the
//     snapshot was saved with one (the snapshots of a data file say so);
//     a snapshot written elsewhere with Engine.Snapshot has none, and
//     starts alone. Close removes the journal only when nothing was ever
//     saved (no snapshot, no write): the directory is as before the start.
//   - The errors say how to go on knowingly: truncating the journal at the
//     offset of a damaged record keeps the writes before it; replacing
//     the journal by its header alone starts from the snapshot.
//
// A data file written by an earlier build (snapshot versions 1 and 2,
// without checksum) is read unchecked, then rewritten in the current
// format before the first request, so it is read unchecked only once.
// Not detected: a journal cut at a record boundary (indistinguishable
// from fewer writes), up to 19 stray bytes at its end (read as a torn
// header), and changes that keep every checksum consistent (deliberate
// rewrites; CRC-32C guards against accidents, not forgery). The prefix
// assumption holds for a killed process and for file systems that keep
// an interrupted append a prefix of what was written (ext4 in its
// default mode, XFS, APFS); one that shows a grown file filled with zeros
// after a power loss makes the start stop, rather than lose a write.
//
// # Unsupported and known differences
//
//   - Empty lists, maps and binaries (and empty sets) are stored with their
//     type, and the snapshot keeps it, but reads answer them as NULL, as
//     minidyn always did (guregu decodes that as a nil slice or map).
//     minidyn's interpreter cannot evaluate an empty binary: a condition,
//     update, filter or projection on an item holding one is a
//     ValidationException.
//   - Numbers are not normalized: 1 and 1.0 are different keys (the SDK and
//     guregu encode numbers canonically). An UpdateItem rewrites every
//     number of the item as minidyn's interpreter holds it (a float64).
//   - No throughput limits, no throttling; every read is strongly
//     consistent, GSIs included.
//   - Transactions have no ClientRequestToken idempotency.
//   - Writes wait for each other (one exclusive lock); a write costs its
//     item, its partitions' inserts and the journal, whatever the store
//     holds (BenchmarkWriteMixAtStoreSize).
//   - Streams, PartiQL, backups, tags, global tables and the other operations
//     minidyn lacks answer UnknownOperationException.
package dynamolocal
