package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/google/uuid"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/knowledgefn"
	"github.com/workflowchat/service/functions/assembly/sweeperfn"
	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/blob/s3blob/s3blobtest"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/knowledgetest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/trigger/eventbridge/schedulertest"
)

// lambdaAPI is a local endpoint of the Lambda Invoke API: it accepts
// asynchronous invokes (202) and keeps each function's payloads, the
// events Lambda would deliver.
type lambdaAPI struct {
	mu     sync.Mutex
	events map[string][][]byte
}

func (l *lambdaAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fn, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/2015-03-31/functions/"), "/invocations")
	if !ok || r.Method != http.MethodPost || r.Header.Get("X-Amz-Invocation-Type") != "Event" ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/") {
		http.Error(w, "not an asynchronous, signed invoke", http.StatusBadRequest)
		return
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(r.Body)
	l.mu.Lock()
	l.events[fn] = append(l.events[fn], b.Bytes())
	l.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// take returns and forgets fn's events.
func (l *lambdaAPI) take(fn string) [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events[fn]
	delete(l.events, fn)
	return out
}

// rig is KnowledgeFunction's service, the indexing function's handler
// and the sweeper as Lambda builds them, over the embedded DynamoDB
// engine, an S3 endpoint, a fake S3 Vectors index named by its ARN and a
// Lambda endpoint: the AWS SDK's endpoints and credentials come from the
// process environment, as in Lambda.
type rig struct {
	getenv  func(string) string
	lambda  *lambdaAPI
	vectors *knowledgetest.FakeS3Vectors
	kn      *knowledge.Service
	invoke  lambda.Handler
	db      *storetest.DB
	// hold, when set, is handed each PutVectors request before the fake
	// index takes it (holdPut).
	hold atomic.Pointer[func(w http.ResponseWriter, req *http.Request)]
}

const indexFunction = "KnowledgeIndexFunction"

func newRig(t *testing.T, extra ...string) *rig {
	ctx := context.Background()
	r := &rig{lambda: &lambdaAPI{events: map[string][][]byte{}}, vectors: knowledgetest.NewFakeS3Vectors("kb-vectors", "chunks", knowledge.Dimensions)}
	lsrv := httptest.NewServer(r.lambda)
	t.Cleanup(lsrv.Close)
	vsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if h := r.hold.Load(); h != nil && req.URL.Path == "/PutVectors" {
			(*h)(w, req)
			return
		}
		r.vectors.ServeHTTP(w, req)
	}))
	t.Cleanup(vsrv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL_S3VECTORS", vsrv.URL)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	r.db = storetest.New(t)
	env := map[string]string{"BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3blobtest.Start(t, "blobs"), "LOG_LEVEL": "error",
		"KNOWLEDGE_VECTOR_BUCKET": "arn:aws:s3vectors:us-east-1:123456789012:bucket/kb-vectors", "KNOWLEDGE_VECTOR_INDEX": r.vectors.ARN(),
		"KNOWLEDGE_INDEX_FUNCTION": indexFunction, "AWS_ENDPOINT_URL_LAMBDA": lsrv.URL, "RUNNER_FUNCTION": "RunnerFunction",
		// The sweeper's erasure deletes the triggers' schedules; these
		// users have none, so the scheduler is never called.
		"SCHEDULE_GROUP": "workflow-chat-triggers", "SCHEDULER_ENDPOINT": schedulertest.Unused(t)}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	r.getenv = r.db.Env(t, env)
	h, err := newHandler(ctx, r.getenv)
	if err != nil {
		t.Fatal(err)
	}
	// The Lambda runtime's own decoding of the event into the handler's
	// argument.
	r.invoke = lambda.NewHandler(h)
	// KnowledgeFunction's service: its own process (its own client, so
	// not the handler's cached service).
	cfg, d, err := assembly.Load(ctx, r.getenv, "DATA_TABLE", "BLOB_BUCKET")
	if err != nil {
		t.Fatal(err)
	}
	if r.kn, err = knowledgefn.Service(ctx, cfg, d); err != nil {
		t.Fatal(err)
	}
	return r
}

// document adds a text attachment of user's as a document of a new
// knowledge base through KnowledgeFunction's service, whose dispatch
// queues one event for the indexing function, returned with the
// document.
func (r *rig) document(t *testing.T, user, text string) (knowledge.Document, []byte) {
	t.Helper()
	ctx := auth.ActingFor(context.Background(), user)
	cfg, d, err := assembly.Load(ctx, r.getenv, "DATA_TABLE", "BLOB_BUCKET")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	c := chat.Chat{ID: uuid.NewString(), UserID: user, Title: "t", CreatedAt: now, UpdatedAt: now}
	if err := store.NewChats(d.DB, cfg.DataTable).CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	atts := blobstore.Attachments(cfg, d, blobs)
	size := int64(len(text))
	a, err := atts.Create(ctx, c.ID, attachment.CreateRequest{Name: "notes.txt", ContentType: "text/plain", Size: &size})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.Put(ctx, attachment.UploadKey(user, a.ID), strings.NewReader(text), blob.PutOptions{ContentType: "text/plain", Size: int64(len(text))}); err != nil {
		t.Fatal(err)
	}
	kb, err := r.kn.Create(ctx, user, knowledge.CreateRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := r.kn.AddDocument(ctx, user, kb.ID, knowledge.AddRequest{AttachmentID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	evs := r.lambda.take(indexFunction)
	if len(evs) != 1 {
		t.Fatalf("adding a document queued %d events for %s, want 1", len(evs), indexFunction)
	}
	return doc, evs[0]
}

func (r *rig) stored(t *testing.T, d knowledge.Document) knowledge.Document {
	t.Helper()
	cfg, deps, err := assembly.Load(context.Background(), r.getenv, "DATA_TABLE")
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.NewKnowledge(deps.DB, cfg.DataTable).Document(context.Background(), d.KnowledgeBaseID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// notes is a document of a few chunks.
var notes = strings.Repeat("The refund policy allows returns within thirty days of delivery. Shipping costs depend on the country. ", 120)

// TestKnowledgeIndexFunctionEvent: the event KnowledgeFunction queues
// when a document is added (the job's reference, through the Invoke API)
// is decoded by the Lambda runtime's handler and indexes the document:
// ready, its chunks' vectors in the S3 Vectors index named by its ARN,
// found by a query; the same event again (a duplicate delivery) changes
// nothing, and an event that is not a job's reference is a no-op.
func TestKnowledgeIndexFunctionEvent(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	user := uuid.NewString()
	doc, ev := r.document(t, user, notes)
	var ref knowledge.Ref
	if err := json.Unmarshal(ev, &ref); err != nil || ref != (knowledge.Ref{KnowledgeBaseID: doc.KnowledgeBaseID, DocumentID: doc.ID, Attempt: 1}) {
		t.Fatalf("queued event %s (%v), want the job's reference at attempt 1", ev, err)
	}
	for range 2 {
		if out, err := r.invoke.Invoke(ctx, ev); err != nil {
			t.Fatalf("invoke: %v (%s)", err, out)
		}
	}
	got := r.stored(t, doc)
	if got.Status != knowledge.StatusReady || got.ChunkCount == nil || *got.ChunkCount < 2 || r.vectors.Count() != *got.ChunkCount {
		t.Fatalf("document %+v with %d vectors in the index, want ready with one vector per chunk", got, r.vectors.Count())
	}
	res, err := r.kn.Query(ctx, user, doc.KnowledgeBaseID, knowledge.QueryRequest{Query: "refund policy returns"})
	if err != nil || len(res) == 0 || res[0].DocumentID != doc.ID {
		t.Fatalf("query: %+v, %v", res, err)
	}
	if out, err := r.invoke.Invoke(ctx, []byte(`{}`)); err != nil {
		t.Fatalf("an empty event: %v (%s)", err, out)
	}
	if _, err := r.invoke.Invoke(ctx, []byte(`"not an object"`)); err == nil {
		t.Fatal("an event that is not a reference was taken")
	}
}

// TestInterruptedIndexingIsFinished: an indexing whose invocation died
// (its event was taken, some of its vectors written, then nothing: its
// lease ends) is claimed by the sweeper when the lease has ended and
// handed to the indexing function again as attempt 2, which finishes it
// (the crashed attempt's vectors overwritten, one per chunk). A job that
// dies at every attempt fails after the third with the reason, and the
// vectors its attempts left are deleted: no document stays indexing, and
// no vector outlives a failed one.
func TestInterruptedIndexingIsFinished(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sweep := func(at time.Duration) {
		t.Helper()
		cfg, d, err := assembly.Load(ctx, r.getenv, sweeperfn.Required...)
		if err != nil {
			t.Fatal(err)
		}
		d.Now = func() time.Time { return time.Now().Add(at) }
		sw, err := sweeperfn.Sweeper(ctx, cfg, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
	// A crashed attempt's writes: the first vectors of the document.
	crashed := func(d knowledge.Document) {
		t.Helper()
		vs, _ := knowledge.Lexical{}.Embed(ctx, []string{"refund", "shipping"})
		body, _ := json.Marshal(map[string]any{"indexArn": r.vectors.ARN(), "vectors": []map[string]any{
			{"key": knowledge.ChunkID(d.ID, 0), "data": map[string]any{"float32": vs[0]}, "metadata": map[string]any{"kb": d.KnowledgeBaseID, "doc": d.ID}},
			{"key": knowledge.ChunkID(d.ID, 1), "data": map[string]any{"float32": vs[1]}, "metadata": map[string]any{"kb": d.KnowledgeBaseID, "doc": d.ID}}}})
		rec := httptest.NewRecorder()
		r.vectors.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/PutVectors", bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("the crashed attempt's vectors: %d %s", rec.Code, rec.Body)
		}
	}

	// Resumed and finished.
	doc, _ := r.document(t, uuid.NewString(), notes) // its event is lost with the invocation
	crashed(doc)
	sweep(0)
	if evs := r.lambda.take(indexFunction); len(evs) != 0 {
		t.Fatalf("a sweep within the lease handed the job over: %s", evs)
	}
	sweep(2 * time.Minute)
	evs := r.lambda.take(indexFunction)
	var ref knowledge.Ref
	if len(evs) != 1 || json.Unmarshal(evs[0], &ref) != nil || ref.Attempt != 2 || ref.DocumentID != doc.ID {
		t.Fatalf("after the lease: events %s, want the job's reference at attempt 2", evs)
	}
	if _, err := r.invoke.Invoke(ctx, evs[0]); err != nil {
		t.Fatal(err)
	}
	got := r.stored(t, doc)
	if got.Status != knowledge.StatusReady || got.Attempt != 2 || got.ChunkCount == nil || r.vectors.Count() != *got.ChunkCount {
		t.Fatalf("after attempt 2: %+v, %d vectors", got, r.vectors.Count())
	}

	// Interrupted at every attempt.
	r.vectors.Reset()
	doc, _ = r.document(t, uuid.NewString(), notes)
	crashed(doc)
	for i := 1; i <= knowledge.MaxAttempts; i++ {
		sweep(time.Duration(i) * 2 * time.Minute)
		evs := r.lambda.take(indexFunction)
		if i < knowledge.MaxAttempts && len(evs) != 1 {
			t.Fatalf("sweep %d: %d events, want attempt %d handed over", i, len(evs), i+1)
		}
		if i == knowledge.MaxAttempts && len(evs) != 0 {
			t.Fatalf("sweep %d: %s, want no fourth attempt", i, evs)
		}
	}
	got = r.stored(t, doc)
	if got.Status != knowledge.StatusFailed || !strings.Contains(got.Error, "interrupted 3 times") || r.vectors.Count() != 0 {
		t.Fatalf("after %d interrupted attempts: %+v, %d vectors left", knowledge.MaxAttempts, got, r.vectors.Count())
	}
	// The failed job is over: later sweeps leave it.
	sweep(time.Hour)
	if evs := r.lambda.take(indexFunction); len(evs) != 0 {
		t.Fatalf("a failed job was handed over again: %s", evs)
	}
}

// TestDeletesNeverLeakVectors: a document deleted while the vector index
// cannot be reached is gone at once (its delete succeeds), and its
// purge, stored with the delete, deletes its vectors when the sweeper
// runs it, and, the document having been ready, is gone with that pass.
// A document deleted while indexing keeps its purge: what an attempt
// still running at the delete writes later is deleted by the purge's
// last pass, after which the purge is gone. A knowledge base deleted the
// same way loses every document's vectors and, none indexing, its
// collection and its purge at the sweeper's pass.
func TestDeletesNeverLeakVectors(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	cfg, d, err := assembly.Load(ctx, r.getenv, "DATA_TABLE")
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewKnowledge(d.DB, cfg.DataTable)
	sweep := func(at time.Duration) {
		t.Helper()
		cfg, d, err := assembly.Load(ctx, r.getenv, sweeperfn.Required...)
		if err != nil {
			t.Fatal(err)
		}
		d.Now = func() time.Time { return time.Now().Add(at) }
		sw, err := sweeperfn.Sweeper(ctx, cfg, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
	purges := func(kbID string) int {
		t.Helper()
		ps, err := st.Purges(ctx, time.Now().Add(24*time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range ps {
			if p.KnowledgeBaseID == kbID {
				n++
			}
		}
		return n
	}
	indexed := func(user string) knowledge.Document {
		t.Helper()
		doc, ev := r.document(t, user, notes)
		if _, err := r.invoke.Invoke(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if got := r.stored(t, doc); got.Status != knowledge.StatusReady {
			t.Fatalf("not indexed: %+v", got)
		}
		return doc
	}

	// A document.
	user := uuid.NewString()
	doc := indexed(user)
	if r.vectors.Count() == 0 {
		t.Fatal("no vectors indexed")
	}
	r.vectors.Refuse(true)
	if err := r.kn.DeleteDocument(ctx, user, doc.KnowledgeBaseID, doc.ID); err != nil {
		t.Fatalf("delete with the index unreachable: %v", err)
	}
	r.vectors.Refuse(false)
	if r.vectors.Count() == 0 {
		t.Fatal("the vectors went with an unreachable index")
	}
	if _, err := r.kn.Document(ctx, user, doc.KnowledgeBaseID, doc.ID); err == nil {
		t.Fatal("the deleted document is still served")
	}
	sweep(2 * time.Minute)
	if n, p := r.vectors.Count(), purges(doc.KnowledgeBaseID); n != 0 || p != 0 {
		t.Fatalf("after the sweeper's pass: %d vectors, %d purges left", n, p)
	}
	// A document deleted while indexing: an attempt still running at the
	// delete writes late.
	doc, _ = r.document(t, user, notes)
	if err := r.kn.DeleteDocument(ctx, user, doc.KnowledgeBaseID, doc.ID); err != nil {
		t.Fatal(err)
	}
	late, _ := json.Marshal(map[string]any{"indexArn": r.vectors.ARN(), "vectors": []map[string]any{{"key": knowledge.ChunkID(doc.ID, 0),
		"data": map[string]any{"float32": make([]float32, knowledge.Dimensions)}, "metadata": map[string]any{"kb": doc.KnowledgeBaseID, "doc": doc.ID}}}})
	rec := httptest.NewRecorder()
	r.vectors.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/PutVectors", bytes.NewReader(late)))
	if rec.Code != http.StatusOK || r.vectors.Count() != 1 || purges(doc.KnowledgeBaseID) != 1 {
		t.Fatalf("late write %d, %d vectors, %d purges", rec.Code, r.vectors.Count(), purges(doc.KnowledgeBaseID))
	}
	sweep(20 * time.Minute)
	if n, p := r.vectors.Count(), purges(doc.KnowledgeBaseID); n != 0 || p != 0 {
		t.Fatalf("after the last pass: %d vectors, %d purges left", n, p)
	}

	// A knowledge base.
	user = uuid.NewString()
	doc = indexed(user)
	r.vectors.Refuse(true)
	if err := r.kn.Delete(ctx, user, doc.KnowledgeBaseID); err != nil {
		t.Fatalf("delete with the index unreachable: %v", err)
	}
	r.vectors.Refuse(false)
	if r.vectors.Count() == 0 {
		t.Fatal("the vectors went with an unreachable index")
	}
	sweep(2 * time.Minute)
	if docs, err := st.Documents(ctx, doc.KnowledgeBaseID); r.vectors.Count() != 0 || err != nil || len(docs) != 0 || purges(doc.KnowledgeBaseID) != 0 {
		t.Fatalf("after the sweeper's pass: %d vectors, collection %d documents (%v), %d purges; want none", r.vectors.Count(), len(docs), err, purges(doc.KnowledgeBaseID))
	}
}

// holdPut makes the next PutVectors request wait: its body is read (so
// that the client going away cannot lose it), arrived is closed, and
// once release is closed the fake index takes it, whether or not its
// client is still waiting (a write in flight that lands after its
// writer gave up), then applied is closed. Later requests pass.
func (r *rig) holdPut(t *testing.T) (arrived <-chan struct{}, release chan<- struct{}, applied <-chan struct{}) {
	t.Helper()
	a, rel, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := func(w http.ResponseWriter, req *http.Request) {
		held := false
		once.Do(func() { held = true })
		if !held {
			r.vectors.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Errorf("the held PutVectors' body: %v", err)
		}
		close(a)
		<-rel
		req.Body = io.NopCloser(bytes.NewReader(body))
		r.vectors.ServeHTTP(httptest.NewRecorder(), req)
		close(done)
		http.Error(w, "too late", http.StatusServiceUnavailable)
	}
	r.hold.Store(&h)
	t.Cleanup(func() {
		select {
		case <-rel:
		default:
			close(rel)
		}
	})
	return a, rel, done
}

// TestErasureWhileIndexingLeavesNothing: a user with three knowledge
// bases (one ready document; none; one large document whose indexing
// is under way, its first PutVectors in flight) deletes the account. The
// erasure's first pass deletes the knowledge bases: right after it, of
// the user's knowledge only the purge of the one indexing remains (its
// item, naming the document still indexing), the collections, the
// ready document's vectors and every segment are gone. The attempt under
// way loses its lease at its next renewal and ends; its write in flight
// then lands in the index (after the first pass and after the attempt
// ended: only the purge can find it). Once the clock passes the purge's
// and the erasure's last passes (one sweep 17 minutes on: the purges run
// before the erasures), a scan of the Data and Users tables names none
// of the user's ids, the vector index holds nothing and no segment is
// left.
func TestErasureWhileIndexingLeavesNothing(t *testing.T) {
	r := newRig(t, "GENERATION_LEASE", "2s")
	ctx := context.Background()
	cfg, d, err := assembly.Load(ctx, r.getenv, sweeperfn.Required...)
	if err != nil {
		t.Fatal(err)
	}
	sweep := func(at time.Duration) {
		t.Helper()
		cfg, d, err := assembly.Load(ctx, r.getenv, sweeperfn.Required...)
		if err != nil {
			t.Fatal(err)
		}
		d.Now = func() time.Time { return time.Now().Add(at) }
		sw, err := sweeperfn.Sweeper(ctx, cfg, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatalf("sweep at +%s: %v", at, err)
		}
	}
	now := time.Now().UTC()
	u := auth.User{ID: uuid.NewString(), Email: "erased-while-indexing@example.com", Name: "Gone", CreatedAt: now.Add(-time.Hour), UpdatedAt: now}
	if err := store.NewUsers(d.DB, cfg.UsersTable, cfg.SessionsTable).CreateUser(ctx, u, "hash",
		auth.Session{TokenHash: uuid.NewString(), User: u, CreatedAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ready, ev := r.document(t, u.ID, notes)
	if _, err := r.invoke.Invoke(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if got := r.stored(t, ready); got.Status != knowledge.StatusReady || r.vectors.Count() == 0 {
		t.Fatalf("not indexed: %+v, %d vectors", got, r.vectors.Count())
	}
	empty, err := r.kn.Create(auth.ActingFor(ctx, u.ID), u.ID, knowledge.CreateRequest{Name: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	big, ev := r.document(t, u.ID, strings.Repeat(notes, 40))
	arrived, release, applied := r.holdPut(t)
	indexing := make(chan error, 1)
	go func() {
		_, err := r.invoke.Invoke(ctx, ev)
		indexing <- err
	}()
	<-arrived
	ids := map[string]string{"user": u.ID, "ready knowledge base": ready.KnowledgeBaseID, "ready document": ready.ID,
		"empty knowledge base": empty.ID, "indexing knowledge base": big.KnowledgeBaseID, "indexing document": big.ID}

	accounts := d.Accounts(cfg)
	if err := accounts.BeginDeletion(ctx, u, now); err != nil {
		t.Fatal(err)
	}
	sweep(0)
	if pending, err := accounts.PendingDeletions(ctx, now.Add(time.Hour), 10); err != nil || len(pending) != 1 || pending[0].LastPassAt.IsZero() {
		t.Fatalf("after the first pass the queue holds %+v, %v; want the deletion awaiting its last pass", pending, err)
	}
	// Right after the first pass: the deletion request, and the purge of
	// the knowledge base whose document was indexing.
	left := r.scan(t, ctx, ids)
	if len(left) != 2 || left["DELETION#"+u.ID+" DELETION"] == "" || !strings.Contains(left["KBPURGE#"+big.KnowledgeBaseID+" KB"], big.ID) {
		t.Errorf("after the first pass the tables hold %v; want only the deletion and the indexing knowledge base's purge", left)
	}
	if n := r.vectors.Count(); n != 0 {
		t.Errorf("after the first pass %d vectors are left", n)
	}
	r.noSegments(t, ctx, ready, big)
	// The attempt under way notices at its next renewal and ends; its
	// write in flight lands afterwards.
	select {
	case err := <-indexing:
		if err != nil {
			t.Fatalf("the attempt under way: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the attempt under way did not end: it kept its lease on a deleted knowledge base")
	}
	close(release)
	<-applied
	if r.vectors.Count() == 0 {
		t.Fatal("the late write did not land")
	}

	sweep(17 * time.Minute)
	if pending, err := accounts.PendingDeletions(ctx, now.Add(time.Hour), 10); err != nil || len(pending) != 0 {
		t.Fatalf("after the last pass the queue holds %+v, %v", pending, err)
	}
	for k, v := range r.scan(t, ctx, ids) {
		t.Errorf("after the last passes: %s: %s", k, v)
	}
	if n := r.vectors.Count(); n != 0 {
		t.Errorf("after the last passes %d vectors are left", n)
	}
	r.noSegments(t, ctx, ready, big)
}

// scan reads every item of the Data and Users tables (a Scan: the
// tables are this test's own) and returns those that name any of ids,
// by "PK SK" (or PK), as JSON.
func (r *rig) scan(t *testing.T, ctx context.Context, ids map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range []string{r.db.Data(), r.db.Users()} {
		var items []map[string]any
		if err := r.db.Table(table).Scan().Consistent(true).All(ctx, &items); err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			b, err := json.Marshal(it)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if strings.Contains(string(b), id) {
					key := fmt.Sprint(it["PK"])
					if sk, ok := it["SK"]; ok {
						key += " " + fmt.Sprint(sk)
					}
					out[key] = string(b)
					break
				}
			}
		}
	}
	return out
}

// noSegments fails the test for any segment of docs left in the blob
// store.
func (r *rig) noSegments(t *testing.T, ctx context.Context, docs ...knowledge.Document) {
	t.Helper()
	cfg, d, err := assembly.Load(ctx, r.getenv, "DATA_TABLE", "BLOB_BUCKET")
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		if _, err := blobs.Stat(ctx, knowledge.SegmentKey(doc.KnowledgeBaseID, doc.ID)); !errs.Is(err, errs.NotFound) {
			t.Errorf("document %s's segment: %v, want NotFound", doc.ID, err)
		}
	}
}
