// Command bench measures the service and writes docs/benchmarks.md, all of
// it: the Go benchmark suites, each Lambda function's cold start, the
// first invocation of each under the Lambda Runtime Interface Emulator, and
// a short load test against a spawned dev server (infra/load). Every
// timing is also given as a ratio against a floor measured in the same run
// (the bare handler with no storage, the bare tool call, the storage-free
// function), so the numbers mean something on a noisy shared machine.
//
// The tool's part of the file is its sections, one per entry of sections,
// each written by one function and held between two marker lines of its
// own (splice.go); a run rewrites what lies between the markers of the
// sections it measures and keeps every other byte of the file as it was:
// the header, sections measured by hand, paragraphs after a section's end
// marker. To add a benchmark, add an entry, a goSuite for Go benchmarks
// with a floor or a section whose run measures and writes its body, and its
// two markers where it belongs in the file. `-only REGEXP` measures just the
// sections whose titles match: the whole run takes minutes on two cores. A
// figure about a generated section measured by hand is best its handNote,
// printed with its date and its command, so that it stays with the section.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// options are the run's settings, from the flags.
type options struct {
	benchtime string        // go test -benchtime of the suites that set none
	runs      int           // cold start: runs per function
	rounds    int           // first invoke under the emulator: rounds
	loadDur   time.Duration // load test duration
	loadC     int           // load test virtual users
}

// section is one "## title" part of the report, between its markers. run
// measures and writes its body (Markdown, after the title and the line
// saying when and where it was measured); an error is reported and fails
// the run, and whatever run wrote is spliced in.
type section struct {
	title string
	run   func(doc *bytes.Buffer, o options) error
	// notes are figures measured by hand, printed after the body.
	notes []handNote
}

// handNote is a figure measured by hand: when, with what command, and what
// it showed.
type handNote struct {
	date, command, text string
}

// sections are the report, in order.
var sections = []section{
	goSuite("REST endpoints, in process, embedded DynamoDB over loopback HTTP", "./infra/local/", "BenchmarkEndpoints", "BenchmarkEndpoints/liveness_(no_storage)", "",
		"Floor: GET /api/liveness, the full middleware stack with no storage. `ddbcalls/op` counts DynamoDB API calls per request with an aws-sdk middleware: an authenticated read costs exactly one read for the session plus one for the endpoint; a write costs the session read plus one write (a transaction where several items change). "+
			"The calls per message are asserted exactly by `TestDynamoDBCallBudget` and `TestDynamoDBCallBudgetWithTokenBudget` (infra/local): POST .../messages with the built-in model makes 6 calls (the model call's usage is recorded by one `UpdateItem` right after it, so that a reply that fails to save still counts) and POST .../messages/stream 10 (its start is the chat's mark, the messages' transaction and a read of the chat; its end the reply, the log's last events and the mark's release, one write each), 7 and 11 with `USER_MONTHLY_TOKEN_BUDGET` (one conditional `UpdateItem` reserving the model call before anything is stored), GET /api/users/{userId}/usage 2."),
	goSuite("Chat stream and long conversations", "./infra/local/", "BenchmarkStreamFirstByte|BenchmarkListMessages1000|BenchmarkEndpoints/liveness", "BenchmarkEndpoints/liveness_(no_storage)", "",
		"Stream: time to the first byte and to the `start` event over loopback HTTP with the built-in model (the user message is stored before `start`, so this includes the session read, the conversation Query and one transaction). ListMessages1000: GET messages of a chat with 1,000 messages; one Query of the chat's item collection (paged by DynamoDB's 1 MB limit). Floor: liveness.",
		handNote{"2026-11-25", "go test -run '^$' -bench BenchmarkStreamFirstByte -benchtime 3s ./infra/local/ (main and the resumable-replies branch in one session)",
			"the start transaction that also writes the assistant message and the log's head and first batch: p50 to the `start` event 4.86 ms before, 5.10 ms after (+5%; p99 26.3 and 22.6 ms, noise)."},
		handNote{"2026-11-26", "go test -run '^$' -bench BenchmarkStreamFirstByte -benchtime 2s ./infra/local/ (5c6d407, before the one engine, the tool gate and the blob store, and main, one after the other)",
			"p50 to the `start` event 3.77 ms before, 3.46 ms after (-8%, within the noise)."}),
	goSuite("Conversations: a chat of 1,000 messages in 10 branches against one that never branched", "./infra/local/", "BenchmarkListMessagesBranched", "BenchmarkListMessagesBranched/linear_1000", "30x",
		"ListMessagesBranched: GET /api/chats/{id}/messages in process on a chat of 1,000 messages in 10 branches (each branch 100 messages, each next one an edit under the 25th reply of the one before, so that the current path runs through all ten: 550 messages, 9 of them with siblings) against the same request on a chat of 1,000 messages that never branched (the floor, today's list), on the same store. Both are one Query of the chat's item collection after the session read (`ddbcalls/op` 2 each: the branches cost no call); the branched answer builds the message tree in memory and answers the current path with every message's parentId, siblingIds and siblingIndex (`path/op`: the messages answered). `x floor` of 10_branches_1000 is the figure: below 1 when the path is shorter than the whole chat, since encoding the answer weighs more than building the tree."),
	goSuite("Resumable replies: resume to the first event", "./infra/local/", "BenchmarkResumeFirstEvent", "BenchmarkResumeFirstEvent/liveness_over_http", "",
		"ResumeFirstEvent: GET .../messages/stream with Last-Event-ID on a finished reply of 50 events, over loopback HTTP, to the first replayed event (session read, rate limit, chat read, one Query of the log). Floor: GET /api/liveness over the same loopback HTTP; compare the p50s. A follower's events arrive within the batching delay (at most 400 ms) plus the follow's polling interval (25 ms after news, backing off to 150 ms)."),
	goSuite("Resumable replies: DynamoDB calls per streamed reply", "./infra/local/", "BenchmarkReplyWrites|BenchmarkEndpoints/liveness", "BenchmarkEndpoints/liveness_(no_storage)", "1x",
		"ReplyWrites: whole streamed replies of the built-in model's `count to N slowly` (N content events, 100 ms apart), all DynamoDB calls of the request and their write units (`ddbwriteunits/op`, as the embedded engine computes them by DynamoDB's rules): 6 to start (session, rate limit, conversation, the chat's generation mark, which is the log's head, the transaction of the two messages, a read of the chat that tells no delete began), then the event log's writes and the end (the reply, its last events, the mark's release: three writes, no transaction). Each log write is one conditional PutItem of only the events new since the last (shared/store/joblog.go), at most every 400 ms or when the events fill just under 1 KB, one a second while silent, and the lease is renewed every half lease: so `ddbwriteunits/op` grows with the reply's duration or bytes, by about one unit a write. The calls and write units are asserted exactly: 10 calls for a short reply (`TestDynamoDBCallBudget`), make cost's 150- and 1,200-token replies at 16 calls and 22 write units and 62 calls and 71 write units (`TestDynamoDBReplyBudget`), a reply that calls json_query at 12 calls and 16 write units with a 100-byte result, 16 and 83 with 16 KiB, 17 and 148 with 32 KiB (`TestDynamoDBCallBudgetStreamedToolResult`; both on a standing clock so that the log's timed writes cannot vary), and 8 calls for a non-streamed reply whatever its results (`TestDynamoDBCallBudgetLargeToolResult`).",
		handNote{"2026-12-01", "go test -run '^$' -bench 'BenchmarkReplyWrites' -benchtime 1x ./infra/local/ (before and after the log's single-PutItem writes)",
			"count_to_10, count_to_50, count_to_200: 14, 36 and 116 DynamoDB calls before (2026-11-26: a write every 100 ms, each a transaction of the batch and the head whose lease moved its GSI1 key, 8 write units), 10, 18 and 51 after at 38, 46 and 83 write units. make cost's replies (docs/cost.md): the short one 203.2 write units in 27.4 calls and $0.1349 per 1,000 before, 37 in 13 and $0.0310 after; the long one 1,445 in 182 and $0.9479 before, 94 in 60 and $0.1033 after."},
		handNote{"2026-12-02", "go test -count=1 -run 'TestDynamoDBReplyBudget|TestDynamoDBCallBudget' ./infra/local/ and go run ./infra/cost -dynamodb (before and after the chat's mark became the log's head)",
			"asserted on a standing clock: a short stream of the built-in model 6 calls before, 10 after; make cost's short reply 12 calls and 36 write units before, 16 and 22 after; its long reply 58 and 88 before, 62 and 71 after; with a json_query result of 100 B, 16 KiB and 32 KiB: 8/29, 12/127, 13/224 before, 12/16, 16/83, 17/148 after. At make cost's pace (60 tokens a second): the short reply 25.2 write units in 16.2 calls with a condition check in the messages' transaction (2 units, `go run ./infra/cost -dynamodb`), then by make cost (docs/cost.md, 2026-12-02 03:01) 23 in 17 and $0.0224 per 1,000 (was 37 in 13 and $0.0310); the long reply 77 and $0.0928 (was 94 and $0.1033). count_to_10, count_to_50, count_to_200 (the table): 38, 46 and 83 write units in 10, 18 and 51 calls before, 24, 33 and 70 in 13, 22 and 55 after. The calls grew (the mark, the chat's read, the reply and the release are calls of their own); the write units, which are billed, fell."}),
	goSuite("Resumable replies: log writes against the event rate", "./shared/store/", "BenchmarkLogWrites", "", "1x",
		"LogWrites: a job.Writer (shared/job) over the real store fed 2 s of events at three rates. A write goes out when its events fill just under 1 KB (job.BatchFill) or the oldest has waited 400 ms, so writes stay at or under 2.5 a second until the events pass about 2 KB a second, then follow their bytes: one write unit per write either way."),
	goSuite("Tool server: runTool overhead for json_query", "./shared/toolserver/", "BenchmarkRunToolOverhead|BenchmarkBareJSONQuery", "BenchmarkBareJSONQuery", "",
		"Floor: the json_query tool's bare function call. RunToolOverhead is the whole POST /mcp handler in process: middleware, constant-time key check, dispatch, decoding, schema validation, the run under the tool's timeout, encoding. RunToolOverheadSandboxed is the same with json_query run in a sandbox worker process, as McpFunction and the dev server run it: the difference is the price of the isolation. p50 is the steadier figure on a shared machine.",
		handNote{"2026-11-25", "go test -run '^$' -bench 'RunToolOverhead|BareJSONQuery' -benchtime 3000x -count 3 ./shared/toolserver/ (before and after the isolation)",
			"runTool's p50 was 6.2 times the floor's before the isolation and 14.6 times with it: the worker round trip adds about 0.1 ms."},
		handNote{"2026-11-26", "go test -run '^$' -bench 'RunToolOverheadSandboxed|BareJSONQuery' -benchtime 3000x (twice) and 8000x (three times) ./shared/toolserver/, 5c6d407 and main alternated",
			"RunToolOverheadSandboxed's p50 over five alternations: 334 µs before the per-user admission, the signed caller identity, tracing and the by-reference values (273 to 390), 380 µs after (358 to 395): +14%, with the floor itself drifting from 11 to 19 µs between runs."}),
	goSuite("Tool gate: json_query for a user, through the gate and straight", "./shared/toolgate/", "BenchmarkGateRunTool", "BenchmarkGateRunTool/direct", "300x",
		"Floor (direct): json_query run for a user straight through the tool catalog: the client's loopback HTTP round trip to the tool server in process, with the user's signed identity, the handler and the tool. chat: the same call through the tool gate as a chat makes it, which reads the user's policy of the tool (one read of the embedded DynamoDB over HTTP). step_budgeted: as a workflow step makes it under a monthly budget: the user's own policy override is read and the tool's declaration comes from the catalog's cache (json_query is not metered, so nothing is reserved). `p50-ns` is the figure to compare: what the gate adds is its one read."),
	goSuite("Tool isolation: json_query in process and in a sandbox worker", "./shared/tools/", "BenchmarkJSONQuery|BenchmarkRegistryRunJSONQuery", "BenchmarkJSONQuery", "",
		"Floor: the json_query tool's bare function call. RegistryRunJSONQuery adds schema validation and the timeout; Sandboxed runs the same call in one of the tool server's worker processes (memory and CPU bounded by the kernel), as the tool server and the dev server do: the difference is the price of the isolation."),
	goSuite("Workflows: a code step against a json_query step", "./shared/tools/", "BenchmarkRegistryRunJSONQuerySandboxed|BenchmarkRegistryRunCode", "BenchmarkRegistryRunJSONQuerySandboxed", "",
		"Floor: RegistryRunJSONQuerySandboxed, a json_query step's tool call as a workflow step makes it (schema validation, the timeout, one of the tool server's sandbox workers). RegistryRunCodeSandboxed: the same query written as a code step's JavaScript (`return input.items.filter(i => i.price > 2).map(i => i.name);`) through the same registry and workers: its `x floor` is a code step's overhead over a json_query step (a fresh JavaScript runtime per call, the CPU watchdog, the result's checks). RegistryRunCodeInProcess leaves the worker round trip out. The rest of a step (its two checkpoints, DurableRunStep above) is the same for both tools."),
	goSuite("Workflows: DynamoDB calls per retry attempt", "./infra/local/", "BenchmarkRetryAttempt", "BenchmarkRetryAttempt/no_failure", "10x",
		"RetryAttempt: a durable run of one step with a retry of 4 attempts and no backoff, started by POST .../workflow-runs (respond-async) on the dev server's stack in process and driven to its end as AWS drives it: a failed attempt with attempts left records the run waiting (step_retrying) with its lease ending at retryAt, the sweeper (Sweeper.Sweep, SweeperFunction's schedule) finds the ended lease, records the run running and invokes the runner, which reads the run and runs the step again. Floor: no_failure, the step succeeding at its first attempt (no sweep). three_failures fails three times and succeeds at its fourth. `ddbcalls/attempt` is three_failures' calls beyond the floor's per retried attempt, the sweeps included; `run-ddbcalls/attempt` the same without each sweep's fixed Queries of the lease index (`idle-sweep-ddbcalls`, an idle sweep measured in the same run: the schedule makes them every minute whatever waits). Reading the run's status between sweeps is not counted; `ns/op` includes those reads."),
	goSuite("Workflows: memory of a code step's sandbox worker at the 128 MiB bound", "./shared/tools/", "BenchmarkCodeWorkerMemory", "BenchmarkCodeWorkerMemory/floor", "3x",
		"CodeWorkerMemory: the peak resident memory (VmHWM, sampled every 2 ms from /proc) of the sandbox workers running code steps, on Linux, where the kernel bounds a worker's address space at its size at start plus the code tool's 128 MiB and the Go runtime's 24 MiB of overhead; before setting that limit the worker pins, untouched, the unused part of the Go heap's first arena (reserved as it starts, at a random offset), so that its heap grows only in the two 64 MiB arenas the limit counts. Floor: `return 6 * 7`, a warm worker's own size. heap_64MiB builds and returns 64 MiB of strings, within the bound; bound_1GiB_string asks for 1 GiB at once (refused at once: the worker never grows); bound_growing_list adds strings of 32 MiB until it cannot, bound_growing_list_16MiB strings of 16 MiB; the bound cases fail with TOOL_RESOURCE_LIMIT, the call's failure alone (`timeouts/op`: the calls a loaded machine cut at their 15 s first, TOOL_TIMEOUT). `peak-MiB` and `x-floor-peak` (its ratio to the floor's) are the figures; `ns/op` is the time to reach the bound on this machine. The pool's sizing (mcpfn.SandboxSize) counts 168 MiB a worker in the worst case (TestCodeWorkerPeakWithinItsAccounting fails above it).",
		handNote{"2026-12-02", "go test -run '^$' -bench 'BenchmarkCodeWorkerMemory/(floor|bound_growing_list_16MiB)' -benchtime 3x ./shared/tools/, before the worker pinned its first arena's remainder",
			"the workers' peak 176.7 MiB with strings of 16 MiB (floor 14.1 MiB), above the 168 MiB a worker that mcpfn.SandboxSize counts: the heap filled the first arena's unused part (0 to 64 MiB, by the random offset) on top of its 128 MiB; over four runs of TestMemoryLimit's 512 MiB allocation the peak was 141 to 183 MiB, with the claim 132 MiB every run."}),
	goSuite("Workflows: applying a proposal", "./infra/local/", "BenchmarkApplyProposal|BenchmarkEndpoints/liveness", "BenchmarkEndpoints/liveness_(no_storage)", "200x",
		"ApplyProposal: POST .../messages/apply in process; `ddbcalls/op` = the session read, one consistent read of the workflow and the proposal (TransactGetItems), one transaction writing both. Making each proposal is outside the timing. Floor: liveness."),
	goSuite("Embedded engine: a Query at store size", "./infra/local/", "BenchmarkListChatsAtStoreSize", "BenchmarkListChatsAtStoreSize/empty_store", "300x",
		"ListChatsAtStoreSize: GET /api/users/{id}/chats?limit=10 on the embedded engine holding only the user's chats (the floor) and holding 10,000 more items of other users (chats, counters, messages). The engine answers a Query from its ordered key index, so the cost follows the page, not the store; `p50-ns` is the figure to compare.",
		handNote{"2026-11-25", "go run ./infra/load -spawn -c 50 (before the engine's key index)",
			"a 3,240-item store made the same request's p50 8.1 s under 50 clients, against 935 ms on a fresh store."}),
	goSuite("Search: a user's 10,000 messages", "./infra/local/", "BenchmarkSearch10000", "BenchmarkSearch10000/list_chats_(floor)", "20x",
		"Search10000: GET /api/users/{id}/chats/search in process over one user's 10,000 messages in 500 chats (12 words each, drawn by Zipf from 5,000), indexed before the timing (by four workers through the index's own Add): a word in one message, a word in 1% of them, the most common word (in about half) and three words together, each asked once before its timing. Floor: GET /api/users/{id}/chats?limit=20 on the same store. `ddbcalls/op`: the session, the rate limit, the catch-up's two reads (the user's progress, the chats changed since), the totals, one Query per word, one BatchGetItem for the page; `ddbreadunits/op` grows with the postings of the words read. store_a_message: one more 12-word message stored (AddMessages), its calls and write units; index_a_message: the next search's catch-up indexing it (its postings, its DOC item and the commit), the write cost the index adds per message (docs/decisions.md, Search over a user's chats; make cost prices it, docs/cost.md). `cpu-ns/op` is the process's CPU time per request, the embedded engine's included: on a loaded machine `p50-ns` also waits for a core (compare it with the load average above), while the CPU time is the work the query asks of one. A word's postings are ordered by its weight in each message (search.Impact, in the sort key) and a search reads its best 1,000 (search.TopPostings) with its recorded count in the same Query, so the most common word (about 5,000 postings) reads 1,000 and the rare ones all theirs; count_most_common_word is that count taken again (a Select COUNT Query of every posting and two puts), which a search does when the index has grown or shrunk by a tenth since it was recorded. Its time is the engine's and the SDK's per item; the engine answers an item of strings and numbers as stored, without decoding it (infra/dynamolocal).",
		handNote{"2026-12-02", "go test -c of infra/local before and after the engine's raw answers, then -test.bench 'BenchmarkSearch10000/(list|search_most|search_three)' -test.benchtime 10x, one after the other at load 35",
			"search_most_common_word p50 858 ms before, 200 ms after, 47.9 MB and 509k allocations a search before, 14.4 MB and 105k after; search_three_words 751 ms and 236 ms. The floor moved from 5.9 to 0.9 ms between the two runs: the machine's load, not the change."},
		handNote{"2026-12-02", "go test -c of infra/local at 6f9ae04 and with the page's stored items copied as they are, then -test.bench 'BenchmarkSearch10000/(list|search_most|search_three)' -test.benchtime 10x, alternated twice at load 15 to 19",
			"CPU a search of the most common word 53.6 and 33.6 ms with the copy, 70.1 and 37.3 ms without; three words 45.3 and 37.5 ms against 53.2 and 48.0; in the quietest minute the p50s were 32 ms (most common word) and 28 ms (three words) with the copy, 67 and 113 ms without in the next. The table's p50s, taken at other minutes, move with the machine's load more than with the change."},
		handNote{"2026-12-02", "go test -c of infra/local at afab9e0 (every posting read, in message order) and with impact-ordered postings (the best 1,000 read), then -test.bench BenchmarkSearch10000 -test.benchtime 20x, after then before, twice, at load 49 to 60",
			"p50 in ms and as a multiple of the floor's p50 in the same run, before -> after. First round (floor 2.09 and 1.72 ms): rare word 1.63 (0.78x) -> 1.53 (0.89x); word in 1% 3.45 (1.65x) -> 6.97 (4.06x); most common word 73.7 (35.3x) -> 10.1 (5.9x); three words 100.0 (47.9x) -> 9.9 (5.8x). Second round, load 53 to 60 (floor 4.30 and 22.6 ms): rare word 7.0 (1.6x) -> 5.4 (0.24x); word in 1% 76.3 (17.7x) -> 5.1 (0.23x); most common word 414.9 (96.5x) -> 62.4 (2.8x); three words 784.1 (182x) -> 92.6 (4.1x). CPU a search, steadier: most common word 45.3 and 60.2 -> 20.9 and 19.9 ms, three words 48.3 and 65.6 -> 21.1 and 26.3 ms. Read units a search 142.5 -> 48 (most common word) and 154 -> 60 (three words); DynamoDB calls 7 (9 for three words) before and after. The index's write units per message (go run ./infra/cost -dynamodb, before and after): 15.6 for make cost's short exchange and 16 for its long one, unchanged."}),
	goSuite("Embedded engine: writes at store size", "./infra/dynamolocal/", "BenchmarkWriteMixAtStoreSize", "BenchmarkWriteMixAtStoreSize/0_items", "200x",
		"WriteMixAtStoreSize: a durable step's writes (a new item put under attribute_not_exists, a conditional UpdateItem of a counter, a TransactWriteItems of a new item and the counter), three requests over loopback HTTP, on a table shaped like the application's (PK, SK, two global secondary indexes) holding nothing else (the floor), 10,000 and 100,000 items of 100 other users (about 300 bytes each; 100,000 items are about what 10,000 stored runs write). On a filled store every iteration also runs the mix on a fresh engine, in turn and outside the timer, so that the machine's other work weighs on both: `p50-ns` is the filled store's median, `fresh-p50-ns` the fresh engine's, `x-fresh-p50` their ratio, the figure to compare on a shared machine (`ns/op` and `x floor` move with the load). `heap-B/item` is the Go heap in use after the fill, per stored item; `snapshot-B/item` the snapshot's bytes per item; `heap/snapshot` their ratio. The layer holds each item once, as its DynamoDB JSON, and minidyn keeps its tables empty, so a write costs its item, whatever the store holds (docs/decisions.md, \"The embedded store slows as it fills\"): targets `x-fresh-p50` at most 1.25 and `heap/snapshot` at most 3. A new item's insert into a partition's ordered rows moves the rows after it (a memmove of 8 bytes per row), so a write's cost follows its partitions, here GSI2's one partition of every item. Before, at load 0.3: 1.44x at 10,000 items, 3.87x at 30,000 (100,000 did not fill within five minutes), heap/snapshot 8.7. DYNAMOLOCAL_BENCH_ITEMS=N adds a store of N items.",
		handNote{"2026-12-02", "go run ./infra/load -c 8 -d 30s against a dev server (SNAPSHOT_INTERVAL=0) on a fresh DATA_FILE, then on one holding 100,000 run items of 100 other users in the data table, back to back at load 19 to 25",
			"fresh 212.0 req/s, 4.6 workflow runs/s; with 100,000 items 211.2 req/s, 5.1 runs/s (the same within the machine's noise; dev server RSS 100 MB and 380 MB after the run). Before the fix a fresh server ran 35 three-step runs/s with 8 clients and 11.6 after about 2,000 stored runs."},
		handNote{"2026-12-02", "a data file of 100,000 run-shaped items written through the engine (snapshot 41.8 MB, about 420 bytes an item); the dev server started on it and on an empty one, VmRSS read 10 s after /api/health answers, before and after StartWith gave the restore's buffers back (debug.FreeOSMemory)",
			"the snapshot 39.9 MiB; before: 326 MiB with the items, 44 MiB empty: (326 - 44) / 39.9 = 7.1x the snapshot's bytes per stored item (8.2x the whole process); after: 157 MiB and 40 MiB: 2.9x (3.9x). In process, right after StartWith: heap in use 245 MiB before (112 MiB live after a collection, 2.8x), 112 MiB after. After 20 s of infra/load -c 4 the dev server was at 280 MiB (peak 420 MiB): the collector's headroom and the argon2id hashes of sign-ups and sign-ins (64 MiB each while they run), which do not grow with the items."}),
	goSuite("Workflows: engine overhead per step and durable runs", "./shared/workflow/runs/", "BenchmarkDurableRunStep|BenchmarkForEachElement|BenchmarkAcceptedToRunStarted|BenchmarkSweepWithActiveRuns|BenchmarkEngineBareTool", "BenchmarkEngineBareTool", "50x",
		"Floor: the bare json_query call through the registry (EngineBareTool). DurableRunStep: a ten-step json_query workflow as a durable run, each step reading the previous step's result through a template. json_query only computes, so no step's start or result waits for a write before the next such step runs: up to eight steps (runs.MaxRiders) ride the next checkpoint, for at most a second (runs.StartDelay) after the oldest of them, so this run writes two checkpoints, the ninth step's start (recorded before its call, with the eight before it) and the run's end; a step whose tool may have effects has its start recorded before its call and that write also carries the previous step's result (one checkpoint a step). Each checkpoint is one transaction with the events, and with the lease once a third of it has passed since the runner last renewed it; `ns/step` is the figure to set against the floor. "+
			"ForEachElement: one forEach step of json_query over 100 elements as a durable run; each element's output is one more write, apart from the run's record; `ns/element` and `ddbcalls/element` spread the run's own calls over its elements. "+
			"The calls are asserted exactly by `TestDurableRunDynamoDBCalls` and `TestForEachDynamoDBCalls` (shared/workflow/runs): a run of n steps with effects makes 3 + n DynamoDB calls (its creation, the runner's read, the first start, one checkpoint per step with the run's end last; 3 + 2n when a step's start and its result were two writes), a quick run of n compute-only steps 2 + (1 + n/9) (4 for ten steps), with values up to the 32 KiB spill threshold and no blob call; a forEach step adds one write per element. "+
			"AcceptedToRunStarted: from the run being stored and handed to the in-process runner (what precedes the 202) to its `run_started` being readable in its log, against one strongly consistent read (`ns-floor-read`). SweepWithActiveRuns: one sweep of the expired leases with 0 and 100 active runs (none expired): its cost is the Queries of the sparse index of active leases, whatever the number of active runs."),
	goSuite("Workflows: a durable step against one journaled write", "./shared/workflow/runs/", "BenchmarkDurableStepAgainstJournaledWrite", "", "20x",
		"DurableStepAgainstJournaledWrite: on an embedded engine with a data file (every answered write synced to its journal first, as the dev server's DATA_FILE), in the same run, the ten json_query steps of DurableRunStep as a durable run (`ns/step`), the same calls bare (`ns-tool`), and one PutItem of a 1 KB item (`ns-floor-write`, the floor of a durable step: one journaled write). `overhead-x-floor` is (ns/step - ns-tool) / ns-floor-write, the step's cost beyond its tool in journaled writes (the target is at most 1.5); `ddbcalls/step` its DynamoDB calls. `overhead-x-floor-p50` is the same ratio taken in each iteration, its median (steadier on a shared machine). Two runners over the same steps. `recorded_first` is told of no compute-only tool, as for tools with effects: a step's transition is one checkpoint, one journaled transaction, the next step's start (running, with its resolved input: what a non-idempotent tool needs recorded before it runs) carrying the previous step's result; with the run's creation, the runner's read and the first start, a ten-step run makes 13 calls, 12 of them journaled writes, so the figure cannot go below about 1.2 plus the engine's own work on a transaction (two items, the run's record and the events, and the log's head too when it renews the lease; a larger request) beyond a PutItem's. `compute_only` is told that json_query only computes (as the runner function is): up to eight such steps ride one checkpoint for at most a second, so the ten steps make 4 calls, 3 of them journaled writes. `recorded_first_added_step` sets what a step adds apart from what a run costs whatever its length (its creation, the runner's read, its end): each iteration runs the recorded_first runner over ten steps and over twenty; `added-step-x-floor` is the difference beyond the ten more tool calls per added step, in journaled writes (`ddbcalls/added-step`: one checkpoint each).",
		handNote{"2026-12-02", "go test -c of shared/workflow/runs at main and on this change, then seven runs of each in turn of -test.bench 'BenchmarkDurableStepAgainstJournaledWrite' -test.benchtime 20x, at load 26 to 45",
			"before (a step's start and its result two checkpoints): 2.300 ddbcalls/step, overhead-x-floor 2.23 to 4.07 (median 3.40), its p50 3.00 to 5.34 (median 3.58); after (one checkpoint per transition): 1.300 ddbcalls/step, overhead-x-floor 1.47 to 2.42 (median 1.74), its p50 1.41 to 2.69 (median 2.13). Where the rest goes (pprof, 150 iterations): the engine's TransactWriteItems takes about 0.55 ms of CPU against 0.2 ms for the floor's PutItem (decoding the request 23%, conditions, index and capacity bookkeeping, encoding the stored items; the fsync is the same one), the runner's own work (events, the steps' JSON, the SDK) about 0.23 ms a step, and the extra calls 0.3 a step (the run's creation, the runner's read, its end)."}),
	goSuite("Workflows: a child run against its steps inline", "./shared/workflow/runs/", "BenchmarkChildRunOverhead", "BenchmarkChildRunOverhead/inline", "50x",
		"ChildRunOverhead: the floor (inline) is a durable run of three json_query steps, started through the run service (Service.Start: the workflow read, the run stored with its log) and run to its end by the in-process runner (the dev server's), then read; child is a run of one run_workflow step whose child workflow has the same three steps. The child's overhead: the parent's own start and runner read, the step's start and its wait (two checkpoints), the child's start through the same service, the parent's read of its child once the wait is recorded (a child that ended first still resumes it), the child's end passed to the parent (a read of the parent and one checkpoint that completes its step), and the parent's second runner attempt (a read and the checkpoint of its end). `ddbcalls/op` counts each one's DynamoDB calls; `x floor` of child is the figure. The parent holds no runner while it waits: in AWS the runner function is invoked again at the child's end."),
	goSuite("Workflows: a 1 MB step output", "./shared/workflow/runs/", "BenchmarkStepOutput", "BenchmarkStepOutput/100_B", "30x",
		"StepOutput: a durable run of two json_query steps, the first outputting 100 bytes of JSON (the floor) or 1 MB, the second reading it whole through a template and outputting its length. A value over 32 KiB is kept in the blob store (S3 in AWS; here in memory, counted by a wrapper) and the run's record holds its cut form: the 1 MB output and the second step's resolved input (the same megabyte) are each written once (`blob-written-B/op`), and the DynamoDB calls do not change (`ddbcalls/op`, 3 for both: the run's creation, the runner's read and one checkpoint, json_query's two steps riding the run's end). The second step reads the value back whole from the blob store (`blob-read-B/op`, one Get; main did so too before this note said otherwise), as a later attempt (after a pause for a person, a takeover, a retry) does. `p50-ns` is the steadier figure on a shared machine."),
	goSuite("Workflows: webhook call to run_started", "./infra/local/", "BenchmarkWebhookToRunStarted", "", "100x",
		"WebhookToRunStarted: a signed POST /hooks/{triggerId} (X-Signature, HMAC-SHA256 of the time and body with the trigger's secret) through the whole stack in process on the embedded DynamoDB: the signature verified, the trigger read, the run stored and handed to the in-process runner, to its 202 (`to-202-p50-ns`), then to the run's `run_started` event being readable in its log, polled with strongly consistent reads as a follower reads it (`to-run_started-p50-ns`). Floor: one strongly consistent read of the same log, measured in the same iteration (`floor-read-p50-ns`); `x-floor-read` is the ratio of the two p50s. In AWS the runner is another Lambda function invoked asynchronously, which adds its invocation."),
	goSuite("MCP: tools/call of a workflow against the REST API", "./infra/local/", "BenchmarkMCPToolsCall", "", "50x",
		"MCPToolsCall: the same one-step json_query workflow run to its end, in turn in every iteration, through the REST API (POST /api/chats/{chatId}/workflow-runs with the session cookie, which waits for the run and answers 201 with it: `rest-p50-ns`) and as a tool of the MCP gateway (POST /api/mcp `tools/call` with a personal access token, which waits for the run and answers its result: `mcp-p50-ns`). `mcp/rest` is the ratio of the p50s: the gateway's overhead over the same run (the token's validation instead of the session's, a fresh stateless MCP server listing the user's exposed workflows, JSON-RPC). The token validation alone is the next section."),
	goSuite("MCP: bearer token validation per request", "./shared/oauth/bearer/", "BenchmarkVerify", "BenchmarkVerify/store_read", "",
		"Verify: the validation every POST /api/mcp request pays, over the embedded DynamoDB. Floor: one store read (GetItem of a personal token by its hash), because a token's validation is a read: a personal token cannot be checked without it, and an OAuth access token's grant is read on every request so that revoking it stops its tokens at once; an HMAC or a hash would be a floor a thousand times below both, saying nothing of their difference. personal_token: SHA-256 of the token, that read, the expiry. oauth_access_token: the EdDSA signature, issuer, audience and expiry, then the grant's read. signature_only: the access token's checks without the read, the CPU part."),
	goSuite("Tracing: a request through the middleware, tracing off and on", "./shared/httpapi/", "BenchmarkTraceMiddleware|BenchmarkTraceOffOverhead", "BenchmarkTraceMiddleware/none", "",
		"Floor: a request through the core of the middleware (security headers, request id, access log, recover, body limit) to a route answering 204, without the Trace middleware. off: the same with Trace and no tracer provider installed, as every function runs unless OTEL_EXPORTER_OTLP_ENDPOINT is set; on: the SDK recording every span into a batch processor that drops them. TraceMiddlewareOff serves a none and an off request in turn in every iteration, so that the machine's other work weighs on both: `off/none` is the ratio of their totals. TraceOffOverhead isolates the Trace middleware off (trace) against a middleware that only passes the request on (pass), around a handler that does nothing."),
	{title: "Cold start: binary size and init time per function", run: func(doc *bytes.Buffer, o options) error { return coldStartSection(doc, o.runs) }},
	{title: "Lambda runtime: size, zip and first invocation under the Runtime Interface Emulator", run: lambdaRuntimeSection},
	{title: "Load test: the dev server under a realistic mix", run: func(doc *bytes.Buffer, o options) error { return loadSection(doc, o.loadC, o.loadDur) }},
}

// goSuite is a section of Go benchmarks: the benchmarks of pkg matching
// pattern, each also as a ratio to the floor benchmark (none: ""), run
// with benchtime (the run's -benchtime when ""; a suite whose setup grows
// the data it measures pins its iteration count, since the embedded
// engine's Query reads its whole table).
func goSuite(title, pkg, pattern, floor, benchtime, note string, notes ...handNote) section {
	return section{title: title, notes: notes, run: func(doc *bytes.Buffer, o options) error {
		bt := benchtime
		if bt == "" {
			bt = o.benchtime
		}
		return goBench(doc, pkg, pattern, floor, note, bt)
	}}
}

type result struct {
	name    string
	nsPerOp float64
	metrics map[string]string
}

func main() {
	out := flag.String("out", "docs/benchmarks.md", "report to write: only the sections between its bench markers are rewritten")
	only := flag.String("only", "", "measure only the sections whose titles match this regular expression, keeping the others as -out has them")
	list := flag.Bool("list", false, "list the sections' titles and exit")
	var o options
	flag.StringVar(&o.benchtime, "benchtime", "2s", "go test -benchtime of the suites that pin none")
	flag.IntVar(&o.runs, "runs", 5, "cold start: runs per function (the median is reported)")
	flag.IntVar(&o.rounds, "rounds", 11, "first invoke under the emulator: rounds (medians are reported)")
	flag.DurationVar(&o.loadDur, "load", 15*time.Second, "load test duration")
	flag.IntVar(&o.loadC, "load-c", 4, "load test virtual users")
	flag.Parse()
	if *list {
		for _, s := range sections {
			fmt.Println(s.title)
		}
		return
	}
	var match *regexp.Regexp
	if *only != "" {
		var err error
		if match, err = regexp.Compile(*only); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -only:", err)
			os.Exit(2)
		}
	}
	var selected []section
	for _, s := range sections {
		if match == nil || match.MatchString(s.title) {
			selected = append(selected, s)
		}
	}
	if len(selected) == 0 {
		fmt.Fprintf(os.Stderr, "bench: no section matches %q (-list shows them)\n", *only)
		os.Exit(2)
	}
	// The report is read and its markers checked before anything is
	// measured: a report the tool cannot splice fails in a second, not
	// after ten minutes, and is never written.
	if err := updateReport(*out, titles(), nil); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fresh := map[string]string{}
	failed := false
	for _, s := range selected {
		fmt.Fprintf(os.Stderr, "bench: %s\n", s.title)
		var doc bytes.Buffer
		if err := writeSection(&doc, s, o); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", s.title, err)
			failed = true
		}
		fresh[s.title] = doc.String()
	}
	if err := updateReport(*out, titles(), fresh); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", *out)
	if failed {
		os.Exit(1)
	}
}

// titles are the sections' titles, in order.
func titles() []string {
	t := make([]string, len(sections))
	for i, s := range sections {
		t[i] = s.title
	}
	return t
}

// readReport returns the report at path, or, when there is none, a new
// one: the preamble and the markers of every section of known, holding
// nothing yet.
// Reading fails for any other reason.
func readReport(path string, known []string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		var doc strings.Builder
		doc.WriteString(preamble)
		for _, t := range known {
			doc.WriteString("\n" + beginMarker(t) + "\n" + endMarker(t) + "\n")
		}
		return doc.String(), nil
	}
	if err != nil {
		return "", fmt.Errorf("readReport: %w", err)
	}
	return string(b), nil
}

// updateReport splices fresh (section titles to their text) into the
// report at path as it is now, so that what was edited while the sections
// were measured is kept, and writes it; with fresh nil it only checks that
// the report can be spliced and writes nothing. Reading, splice's checks
// (markers that do not pair up, unknown or missing sections) and writing
// fail with the path named, and the file is then left as it was.
func updateReport(path string, known []string, fresh map[string]string) error {
	report, err := readReport(path, known)
	if err == nil {
		report, err = splice(report, known, fresh)
	}
	if err == nil && fresh != nil {
		err = writeFileAtomic(path, []byte(report))
	}
	if err != nil {
		return fmt.Errorf("updateReport %s: %w", path, err)
	}
	return nil
}

// writeFileAtomic writes b to path through a temporary file in the same
// directory renamed over it, so that a failed write leaves the old report
// whole. It fails if the directory cannot be written.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writeFileAtomic: %w", err)
	}
	defer os.Remove(f.Name()) // after the rename, there is nothing to remove
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writeFileAtomic: %w", err)
	}
	return nil
}

// preamble opens a new report; an existing report keeps its own.
const preamble = "# Benchmarks\n\n" +
	"Generated by `make bench` (`go run ./infra/bench`); every section is measured by infra/bench, and says when and on what machine. " +
	"`go run ./infra/bench -only REGEXP` measures again only the sections whose titles match. " +
	"Timings vary with the machine and its load (the development machine is shared and noisy); " +
	"ratios against a floor measured in the same run are the figures to compare. " +
	"A figure measured by hand says so, with its date and command. " +
	"What the service costs in AWS, from usage measured the same way (DynamoDB capacity per call, each function's duration and peak memory under the emulator), " +
	"is [cost.md](cost.md), written by `make cost`.\n\n" +
	markerRule + "\n"

// markerRule says, in the report, which of its parts the tool rewrites.
const markerRule = "infra/bench rewrites only what lies between a `<!-- bench:begin TITLE -->` line and its `<!-- bench:end TITLE -->` line (the section of that title, from its heading to its last table row or hand note), and only for the sections it measures; " +
	"everything outside a pair of markers (this header, sections measured by hand, paragraphs added after a section's end marker) is kept byte for byte. " +
	"A marker naming a section infra/bench does not have (`-list`), a section of infra/bench without its markers, or markers that do not pair up fail the run before anything is measured, and the file is left as it was. " +
	"A new benchmark is an entry in infra/bench's sections and its two marker lines where it belongs in this file."

// writeSection measures s and writes it: its title, when and where it was
// measured, its body and its hand notes.
func writeSection(doc *bytes.Buffer, s section, o options) error {
	fmt.Fprintf(doc, "## %s\n\n*Measured %s on %s, %d logical CPUs, %s memory, %s/%s, %s; load average %s at the start.*\n\n",
		s.title, time.Now().UTC().Format("2006-01-02 15:04 MST"), cpuModel(), runtime.NumCPU(), memTotal(), runtime.GOOS, runtime.GOARCH, runtime.Version(), loadAverage())
	err := s.run(doc, o)
	for _, n := range s.notes {
		fmt.Fprintf(doc, "\nBy hand on %s (`%s`): %s\n", n.date, n.command, n.text)
	}
	return err
}

// loadAverage is the one-minute load average, "unknown" off Linux.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// goBench runs one suite of Go benchmarks and writes its note and table.
func goBench(doc *bytes.Buffer, pkg, pattern, floorName, note, benchtime string) error {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", benchtime, "-count", "1", pkg)
	cmd.Stderr = os.Stderr
	raw, runErr := cmd.Output()
	if runErr != nil {
		runErr = fmt.Errorf("%s: %v\n%s", pkg, runErr, raw)
	}
	results := parse(raw)
	floor := 0.0
	for _, r := range results {
		if r.name == floorName {
			floor = r.nsPerOp
		}
	}
	fmt.Fprintf(doc, "`go test -run '^$' -bench '%s' -benchmem -benchtime %s %s`. %s\n\n| benchmark | ns/op | x floor | other metrics |\n|---|---:|---:|---|\n", pattern, benchtime, pkg, note)
	for _, r := range results {
		ratio := "-"
		if floor > 0 {
			ratio = strconv.FormatFloat(r.nsPerOp/floor, 'f', 1, 64)
		}
		var keys []string
		for k := range r.metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var m []string
		for _, k := range keys {
			m = append(m, r.metrics[k]+" "+k)
		}
		fmt.Fprintf(doc, "| %s | %.0f | %s | %s |\n", strings.TrimPrefix(r.name, "Benchmark"), r.nsPerOp, ratio, strings.Join(m, ", "))
	}
	if runErr == nil && len(results) == 0 {
		runErr = fmt.Errorf("%s: no benchmark matches %q", pkg, pattern)
	}
	if runErr != nil {
		fmt.Fprintf(doc, "\n**This suite failed**; the rows above are the benchmarks that completed.\n")
	}
	return runErr
}

// loadSection runs the load generator against a dev server it spawns and
// includes its report. A failed run (incorrect responses) is still
// reported, and returned as an error.
func loadSection(doc *bytes.Buffer, c int, d time.Duration) error {
	dir, err := os.MkdirTemp("", "bench-load")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	md := filepath.Join(dir, "load.md")
	cmd := exec.Command("go", "run", "./infra/load", "-spawn", "-c", strconv.Itoa(c), "-d", d.String(), "-out", md)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	runErr := cmd.Run()
	report, err := os.ReadFile(md)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(doc, "`go run ./infra/load -spawn -c %d -d %v` (also `make load`): each virtual user signs up, then loops over a weighted mix "+
		"(session, list chats, create and delete chats, messages to the built-in model, one in four running json_query, streamed replies "+
		"checked event by event and read back, message lists, the tool catalog, liveness, sign-out and sign-in) over real HTTP on loopback, "+
		"with the embedded store in the same process. Every response is checked. Latency is the whole exchange, the body read to its end "+
		"(for the stream: to the `end` event). Floor: GET /api/liveness in the same run; `p50 x floor` is each route's p50 over the floor's.\n\n", c, d)
	doc.Write(report)
	if runErr != nil {
		fmt.Fprintf(doc, "\n**The load run failed: %v.**\n", runErr)
	}
	return runErr
}

// parse reads `go test -bench` output lines such as
// "BenchmarkX/y-2  1000  1234 ns/op  3.00 ddbcalls/op  456 B/op  7 allocs/op".
func parse(raw []byte) []result {
	var rs []result
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		r := result{name: name, metrics: map[string]string{}}
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] == "ns/op" {
				r.nsPerOp, _ = strconv.ParseFloat(f[i], 64)
			} else {
				r.metrics[f[i+1]] = f[i]
			}
		}
		rs = append(rs, r)
	}
	return rs
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// memTotal is the machine's memory from /proc/meminfo.
func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
			f := strings.Fields(v)
			if kb, err := strconv.ParseFloat(f[0], 64); err == nil && len(f) == 2 {
				return fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	return "unknown"
}
