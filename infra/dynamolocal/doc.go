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
// # Served by minidyn as is
//
// GetItem, PutItem, UpdateItem, DeleteItem with condition, update and
// projection expressions (SET with arithmetic, nested paths, list_append,
// if_not_exists; ADD; DELETE; nested REMOVE; all comparison operators,
// BETWEEN, IN, AND/OR/NOT, attribute_exists, attribute_not_exists,
// attribute_type, begins_with, contains, size), ReturnValues of UpdateItem and
// DeleteItem, ReturnValuesOnConditionCheckFailure, BatchGetItem,
// BatchWriteItem, TransactGetItems, TransactWriteItems (a failed condition
// cancels the whole transaction with a TransactionCanceledException carrying
// per-item CancellationReasons; nothing is written), CreateTable, UpdateTable,
// DeleteTable with GSIs and LSIs. ConditionalCheckFailedException and
// TransactionCanceledException decode normally (dynamo.IsCondCheckFailed
// works).
//
// # Translated or answered by the layer
//
//   - Query with the legacy KeyConditions parameter (guregu always sends it;
//     minidyn would silently return nothing) is rewritten to a
//     KeyConditionExpression with collision-free placeholders (#kcN, :kcN).
//     EQ, LE, LT, GE, GT, BEGINS_WITH and BETWEEN are supported; other
//     operators are a ValidationException, as on AWS.
//   - Query and Scan are evaluated by the layer: minidyn only validates the
//     request (expression syntax, unused placeholders, emulated failures) and
//     supplies the table's items. minidyn's own search sorts keys as strings
//     (numbers 10 < 9), loses GSI entries once an item gains index keys
//     through UpdateItem, and ignores Select. The layer orders by key like
//     DynamoDB (numbers numerically, strings and binaries bytewise; GSI ties
//     by table key), honours ScanIndexForward, ExclusiveStartKey, Limit
//     (counting items evaluated before FilterExpression), LastEvaluatedKey
//     (table and index keys, only when more items remain), Select COUNT,
//     Count and ScannedCount, sparse indexes, KEYS_ONLY/INCLUDE index
//     projections and ProjectionExpression. Parallel scans work: segment 0
//     returns every item, the other segments none.
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
//   - PutItem answers no Attributes unless ReturnValues is ALL_OLD, and then
//     the previous item (minidyn echoes the new item).
//   - Top-level REMOVE actions in UpdateItem and in the Update entries of
//     TransactWriteItems are applied by the layer (minidyn ignores them;
//     guregu emits them for Update.Remove and for Set of an empty value), and
//     ReturnValues is computed accordingly.
//   - Errors are AWS JSON 1.0 errors with a full
//     "com.amazonaws.dynamodb.v20120810#..." __type; minidyn's plain-text
//     errors become JSON (unsupported operations are
//     UnknownOperationException), a backend panic is a 500
//     InternalServerError. Request bodies are limited to 16 MiB.
//   - Legacy parameters minidyn would silently ignore (Expected,
//     AttributeUpdates, QueryFilter, ScanFilter, AttributesToGet,
//     ConditionalOperator) are rejected with a ValidationException.
//   - Backend access is serialized where minidyn is not thread-safe, so
//     parallel tests are race-free. Use Engine.WithBackend to call the
//     failure-emulation methods of Engine.Backend while requests may run.
//
// # Unsupported and known differences
//
//   - Empty lists, maps and binaries are stored, but minidyn cannot return
//     them; they come back as NULL (guregu decodes that as a nil slice or
//     map). Without the layer the SDK would read them as BOOL false.
//   - minidyn stores an item under hash + "." + range: on a table with a sort
//     key, partition key values containing "." can collide (("a.b","c") and
//     ("a","b.c") are the same item). Use another separator, e.g. "#".
//   - Numbers are not normalized: 1 and 1.0 are different keys (the SDK and
//     guregu encode numbers canonically).
//   - No size or throughput limits: no 400 KB item limit, no 1 MB page
//     limit, no throttling; every read is strongly consistent, GSIs included.
//   - The shape of a KeyConditionExpression is not validated like AWS does;
//     a condition on a non-key attribute is evaluated instead of rejected.
//   - BatchWriteItem applies sub-requests in order and stops at the first
//     invalid one (AWS validates the whole batch first). Transactions have no
//     ClientRequestToken idempotency.
//   - Streams, PartiQL, backups, tags, global tables and the other operations
//     minidyn lacks answer UnknownOperationException.
//   - Each Query and Scan reads the whole table: fine for development and
//     tests, not for large data sets.
package dynamolocal
