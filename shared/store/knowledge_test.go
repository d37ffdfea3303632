package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

func newKB(t *testing.T, s *store.Knowledge, userID string) knowledge.KnowledgeBase {
	t.Helper()
	now := time.Now().UTC()
	kb := knowledge.KnowledgeBase{ID: uuid.Must(uuid.NewV7()).String(), UserID: userID, Name: "kb", CreatedAt: now, UpdatedAt: now, Version: 1}
	if err := s.CreateKnowledgeBase(context.Background(), kb, 2); err != nil {
		t.Fatal(err)
	}
	return kb
}

func newDoc(kb knowledge.KnowledgeBase) knowledge.Document {
	now := time.Now().UTC()
	return knowledge.Document{ID: uuid.Must(uuid.NewV7()).String(), KnowledgeBaseID: kb.ID, UserID: kb.UserID, AttachmentID: uuid.NewString(),
		Name: "a.txt", ContentType: "text/plain", Status: knowledge.StatusIndexing, CreatedAt: now, UpdatedAt: now, Attempt: 1}
}

// TestKnowledgeLimits: at the limits and one over, on the embedded
// engine: the per-user cap of knowledge bases, 1,000 documents (the
// 1,001st is DOCUMENT_LIMIT, even when many are added at once), 50,000
// chunks (a document that would pass it is CHUNK_LIMIT, and nothing of
// it is counted).
func TestKnowledgeLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	s := store.NewKnowledge(db.DB, db.Data())
	user := uuid.NewString()
	kb := newKB(t, s, user)
	newKB(t, s, user)
	third := knowledge.KnowledgeBase{ID: uuid.NewString(), UserID: user, Name: "three", Version: 1}
	if err := s.CreateKnowledgeBase(ctx, third, 2); errs.CodeOf(err) != knowledge.CodeKnowledgeBaseLimit {
		t.Fatalf("third knowledge base over a cap of 2: %v", err)
	}

	lease := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	errsCh := make(chan error, knowledge.MaxDocuments+20)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < knowledge.MaxDocuments+20; i += 8 {
				errsCh <- s.CreateDocument(ctx, newDoc(kb), lease)
			}
		}()
	}
	wg.Wait()
	close(errsCh)
	ok, limited := 0, 0
	for err := range errsCh {
		switch {
		case err == nil:
			ok++
		case errs.CodeOf(err) == knowledge.CodeDocumentLimit:
			limited++
		default:
			t.Fatalf("create document: %v", err)
		}
	}
	got, err := s.KnowledgeBase(ctx, user, kb.ID)
	if ok != knowledge.MaxDocuments || limited != 20 || err != nil || got.DocumentCount != knowledge.MaxDocuments {
		t.Fatalf("%d created, %d limited, count %d (%v); want %d, 20, %d", ok, limited, got.DocumentCount, err, knowledge.MaxDocuments, knowledge.MaxDocuments)
	}

	// Chunks: a document of MaxChunks-1, then one of 1 (exactly at the
	// limit), then one of 1 more: CHUNK_LIMIT.
	docs, err := s.Documents(ctx, kb.ID)
	if err != nil || len(docs) != knowledge.MaxDocuments {
		t.Fatalf("documents: %d, %v", len(docs), err)
	}
	finish := func(d knowledge.Document, n int) error {
		d.Status, d.ChunkCount = knowledge.StatusReady, &n
		return s.FinishDocument(ctx, knowledge.Ref{KnowledgeBaseID: kb.ID, DocumentID: d.ID, Attempt: 1}, d)
	}
	if err := finish(docs[0], knowledge.MaxChunks-1); err != nil {
		t.Fatal(err)
	}
	if err := finish(docs[1], 1); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if err := finish(docs[2], 1); errs.CodeOf(err) != knowledge.CodeChunkLimit {
		t.Fatalf("one chunk over: %v, want CHUNK_LIMIT", err)
	}
	if d, _ := s.Document(ctx, kb.ID, docs[2].ID); d.Status != knowledge.StatusIndexing {
		t.Fatalf("the refused document: %+v, want still indexing (nothing written)", d)
	}
	if got, _ := s.KnowledgeBase(ctx, user, kb.ID); got.ChunkCount != knowledge.MaxChunks {
		t.Fatalf("chunk count %d", got.ChunkCount)
	}
	// A finish of a stale attempt is NOT_ACTIVE.
	if err := finish(docs[1], 1); errs.CodeOf(err) != job.CodeNotActive {
		t.Fatalf("second finish: %v", err)
	}
	// Deleting a ready document gives its chunks back.
	ready, _ := s.Document(ctx, kb.ID, docs[0].ID)
	if err := s.DeleteDocument(ctx, ready, knowledge.Purge{KnowledgeBaseID: kb.ID, DocumentID: ready.ID, DueAt: time.Now(), FinalAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.KnowledgeBase(ctx, user, kb.ID); got.ChunkCount != 1 || got.DocumentCount != knowledge.MaxDocuments-1 {
		t.Fatalf("after delete: %+v", got)
	}
	page, next, err := s.ListDocuments(ctx, kb.ID, paging.Cursor{Limit: 100})
	if err != nil || len(page) != 100 || next != page[99].ID {
		t.Fatalf("list: %d, %q, %v", len(page), next, err)
	}
}

// TestKnowledgeJobs: an indexing job's lease is found by the sweeper's
// query once it has expired, claimed once (a second claim of the same
// expiry is a Conflict), renewed only by its current attempt, and the
// claim of a deleted document ends the job.
func TestKnowledgeJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	s := store.NewKnowledge(db.DB, db.Data())
	jobs := store.NewJobs(db.DB, db.Data())
	kb := newKB(t, s, uuid.NewString())
	d := newDoc(kb)
	past := time.Now().Add(-time.Minute)
	if err := s.CreateDocument(ctx, d, past); err != nil {
		t.Fatal(err)
	}
	exp, err := jobs.Expired(ctx, time.Now(), 100)
	found := false
	for _, e := range exp {
		if e.Kind == knowledge.JobKind && e.ID == d.ID && e.Collection == kb.ID {
			found = true
		}
	}
	if err != nil || !found {
		t.Fatalf("expired jobs %+v, %v; want the document's", exp, err)
	}
	now := time.Now()
	claimed, err := s.ClaimIndexing(ctx, kb.ID, d.ID, now, now.Add(time.Minute))
	if err != nil || claimed.Attempt != 2 {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	if _, err := s.ClaimIndexing(ctx, kb.ID, d.ID, now, now.Add(time.Minute)); !errs.Is(err, errs.Conflict) {
		t.Fatalf("second claim: %v, want Conflict", err)
	}
	if err := s.RenewIndexing(ctx, knowledge.Ref{KnowledgeBaseID: kb.ID, DocumentID: d.ID, Attempt: 1}, now.Add(time.Hour)); errs.CodeOf(err) != job.CodeNotActive {
		t.Fatalf("renew by the old attempt: %v", err)
	}
	if err := s.RenewIndexing(ctx, knowledge.Ref{KnowledgeBaseID: kb.ID, DocumentID: d.ID, Attempt: 2}, now.Add(time.Hour)); err != nil {
		t.Fatalf("renew by the current attempt: %v", err)
	}
	// A document deleted while its job's end was lost.
	d2 := newDoc(kb)
	if err := s.CreateDocument(ctx, d2, past); err != nil {
		t.Fatal(err)
	}
	if err := db.DB.Table(db.Data()).Delete("PK", "KB#"+kb.ID).Range("SK", "DOC#"+d2.ID).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimIndexing(ctx, kb.ID, d2.ID, time.Now(), time.Now().Add(time.Minute)); !errs.Is(err, errs.NotFound) {
		t.Fatalf("claim of a deleted document: %v", err)
	}
	h, err := jobs.Head(ctx, job.Ref{Kind: knowledge.JobKind, Collection: kb.ID, ID: d2.ID})
	if err != nil || h.Active {
		t.Fatalf("head after the claim: %+v, %v; want ended", h, err)
	}
}

// TestKnowledgePurges, on the embedded engine: deleting a document or a
// knowledge base puts its purge in the same transaction; Purges finds
// only those due (a deferred one later), oldest first; finishing a
// knowledge base's purge deletes what was left of its collection, and
// the purge; listing one (its documents indexing kept on it) deletes the
// collection at once and makes it due later.
func TestKnowledgePurges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	s := store.NewKnowledge(db.DB, db.Data())
	user := uuid.NewString()
	kb := newKB(t, s, user)
	d := newDoc(kb)
	if err := s.CreateDocument(ctx, d, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Far in the past, so that no other test's purge sorts before these.
	t0 := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	pd := knowledge.Purge{KnowledgeBaseID: kb.ID, DocumentID: d.ID, Chunks: 0, DueAt: t0, FinalAt: t0.Add(time.Hour)}
	if err := s.DeleteDocument(ctx, d, pd); err != nil {
		t.Fatal(err)
	}
	d2 := newDoc(kb)
	if err := s.CreateDocument(ctx, d2, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	pk := knowledge.Purge{KnowledgeBaseID: kb.ID, DueAt: t0.Add(time.Minute), FinalAt: t0.Add(time.Hour)}
	if err := s.DeleteKnowledgeBase(ctx, kb, pk); err != nil {
		t.Fatal(err)
	}
	due := func(at time.Time) []knowledge.Purge {
		t.Helper()
		var mine []knowledge.Purge
		for deadline := time.Now().Add(10 * time.Second); ; {
			ps, err := s.Purges(ctx, at, 100)
			if err != nil {
				t.Fatal(err)
			}
			mine = mine[:0]
			for _, p := range ps {
				if p.KnowledgeBaseID == kb.ID {
					mine = append(mine, p)
				}
			}
			// GSI1 is eventually consistent: wait for the writes.
			if len(mine) > 0 || time.Now().After(deadline) {
				return mine
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if got := due(t0.Add(30 * time.Second)); len(got) != 1 || got[0].DocumentID != d.ID || !got[0].FinalAt.Equal(pd.FinalAt) {
		t.Fatalf("due at t0+30s: %+v, want the document's purge", got)
	}
	if got := due(t0.Add(2 * time.Minute)); len(got) != 2 || got[0].DocumentID != d.ID || got[1].DocumentID != "" {
		t.Fatalf("due at t0+2m: %+v, want both, oldest first", got)
	}
	if err := s.DeferPurge(ctx, pd, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := due(t0.Add(2 * time.Minute)); len(got) != 1 || got[0].DocumentID != "" {
		t.Fatalf("after deferring the document's: %+v", got)
	}
	// The knowledge base's collection stays until its purge is finished.
	if docs, err := s.Documents(ctx, kb.ID); err != nil || len(docs) != 1 || docs[0].ID != d2.ID {
		t.Fatalf("collection of the deleted knowledge base: %+v, %v", docs, err)
	}
	// Listing it keeps the ids of the documents indexing on the purge,
	// moves its due time and deletes the collection.
	pk.Listed, pk.Pending = true, []string{d2.ID}
	if err := s.ListPurge(ctx, pk, t0.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if docs, err := s.Documents(ctx, kb.ID); err != nil || len(docs) != 0 {
		t.Fatalf("collection of the listed purge: %+v, %v", docs, err)
	}
	if got := due(t0.Add(2 * time.Minute)); len(got) != 0 {
		t.Fatalf("due at t0+2m after listing: %+v, want none", got)
	}
	if got := due(t0.Add(31 * time.Minute)); len(got) != 1 || !got[0].Listed || len(got[0].Pending) != 1 || got[0].Pending[0] != d2.ID ||
		!got[0].DueAt.Equal(t0.Add(30*time.Minute)) {
		t.Fatalf("due at t0+31m after listing: %+v, want the listed purge naming %s", got, d2.ID)
	}
	if err := s.FinishPurge(ctx, pk); err != nil {
		t.Fatal(err)
	}
	if err := s.ListPurge(ctx, pk, t0); err != nil {
		t.Fatalf("listing a finished purge: %v", err)
	}
	if err := s.FinishPurge(ctx, pd); err != nil {
		t.Fatal(err)
	}
	if docs, err := s.Documents(ctx, kb.ID); err != nil || len(docs) != 0 {
		t.Fatalf("after the purge: %+v, %v", docs, err)
	}
	if err := s.DeferPurge(ctx, pd, t0); err != nil {
		t.Fatalf("deferring a finished purge: %v", err)
	}
	if got := due(t0.Add(2 * time.Hour)); len(got) != 0 {
		t.Fatalf("after finishing: %+v", got)
	}
}
