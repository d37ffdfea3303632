package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/knowledgetest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
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
}

const indexFunction = "KnowledgeIndexFunction"

func newRig(t *testing.T) *rig {
	ctx := context.Background()
	r := &rig{lambda: &lambdaAPI{events: map[string][][]byte{}}, vectors: knowledgetest.NewFakeS3Vectors("kb-vectors", "chunks", knowledge.Dimensions)}
	lsrv := httptest.NewServer(r.lambda)
	t.Cleanup(lsrv.Close)
	vsrv := httptest.NewServer(r.vectors)
	t.Cleanup(vsrv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL_S3VECTORS", vsrv.URL)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	r.db = storetest.New(t)
	r.getenv = r.db.Env(t, map[string]string{"BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3blobtest.Start(t, "blobs"), "LOG_LEVEL": "error",
		"KNOWLEDGE_VECTOR_BUCKET": "arn:aws:s3vectors:us-east-1:123456789012:bucket/kb-vectors", "KNOWLEDGE_VECTOR_INDEX": r.vectors.ARN(),
		"KNOWLEDGE_INDEX_FUNCTION": indexFunction, "AWS_ENDPOINT_URL_LAMBDA": lsrv.URL, "RUNNER_FUNCTION": "RunnerFunction"})
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
// runs it; what an attempt still running at the delete writes later is
// deleted by the purge's last pass, after which the purge is gone. A
// knowledge base deleted the same way loses every document's vectors,
// then, at its purge's last pass, its collection.
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
	if n := r.vectors.Count(); n != 0 {
		t.Fatalf("after the sweeper's pass: %d vectors left", n)
	}
	// An attempt still running at the delete writes late.
	r.vectors.Reset()
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
	if docs, err := st.Documents(ctx, doc.KnowledgeBaseID); r.vectors.Count() != 0 || err != nil || len(docs) != 1 {
		t.Fatalf("after the sweeper's pass: %d vectors, collection %d documents (%v), want none and the list kept", r.vectors.Count(), len(docs), err)
	}
	sweep(20 * time.Minute)
	if docs, err := st.Documents(ctx, doc.KnowledgeBaseID); err != nil || len(docs) != 0 || purges(doc.KnowledgeBaseID) != 0 {
		t.Fatalf("after the last pass: collection %d documents (%v), %d purges", len(docs), err, purges(doc.KnowledgeBaseID))
	}
}
