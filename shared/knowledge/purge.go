package knowledge

import (
	"context"
	"errors"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Purge is the durable record that a deleted document's, or a deleted
// knowledge base's documents', vectors and segments are to be deleted:
// written in the transaction that deletes the document or the knowledge
// base, so that a crash or an unreachable vector index after it leaves
// the work queued instead of the vectors behind. Its first pass runs at
// once, the sweeper runs it again when it is due.
//
// Only an indexing attempt running at the delete can write after the
// first pass (nothing else writes a deleted document's vectors or
// segment), so a purge waits only for such an attempt: a last pass at
// FinalAt (after any attempt running at the delete must have ended,
// IndexTimeout after it, with the lease's margin) catches what it wrote
// late, then the purge is removed. A purge with nothing indexing is
// removed by its first pass that succeeds: a document's deleted when it
// was ready or failed, a knowledge base's whose documents all were. A
// knowledge base's purge that finds documents indexing keeps their ids
// (Pending) and deletes the collection at once (Store.ListPurge), so
// that until its last pass only the purge item remains, and the attempts
// lose their lease at their next renewal.
type Purge struct {
	KnowledgeBaseID string
	// DocumentID is the deleted document's; "" for a whole knowledge
	// base (its documents are read from its collection).
	DocumentID string
	// Chunks is the document's chunk count; 0 when it was not ready
	// (then up to MaxChunks keys are deleted).
	Chunks int
	// Listed is true once a knowledge base's purge read its collection
	// and deleted it; Pending then lists the documents that were
	// indexing, which its later passes purge (their counts unknown).
	Listed  bool
	Pending []string
	// DueAt is when the sweeper runs the purge next; FinalAt when its
	// last pass may run.
	DueAt, FinalAt time.Time
}

// purgeRetry is how long a purge whose pass failed waits for the next.
const purgeRetry = time.Minute

// MaxPurgesPerSweep bounds the purges one sweep runs.
const MaxPurgesPerSweep = 25

// newPurge is the purge of a delete at now; indexing is whether an
// attempt may be running (for a knowledge base, unknown until its first
// pass reads the collection: true), else its first pass is its last.
func (s *Service) newPurge(kbID, docID string, chunks int, indexing bool) Purge {
	now := s.now()
	final := now
	if indexing {
		final = now.Add(s.o.IndexTimeout + 2*s.o.Lease + time.Minute)
	}
	return Purge{KnowledgeBaseID: kbID, DocumentID: docID, Chunks: chunks, DueAt: now.Add(purgeRetry), FinalAt: final}
}

// runPurge runs one pass of p: every document's vectors and segment are
// deleted (a knowledge base's documents read from its collection, or,
// once listed, those that were indexing). A knowledge base's first pass
// that finds none indexing finishes the purge; one that finds some lists
// them and deletes the collection (Store.ListPurge), due at p.FinalAt.
// Otherwise, at or after p.FinalAt, the purge is finished, else it is
// due again at p.FinalAt. A failed pass is due again in a minute. It
// returns whether the purge is finished.
func (s *Service) runPurge(ctx context.Context, p Purge) (bool, error) {
	const op = "knowledge.runPurge"
	docs := []Document{{ID: p.DocumentID, KnowledgeBaseID: p.KnowledgeBaseID}}
	if p.Chunks > 0 {
		docs[0].ChunkCount = &p.Chunks
	}
	switch {
	case p.DocumentID == "" && p.Listed:
		docs = make([]Document, len(p.Pending))
		for i, id := range p.Pending {
			docs[i] = Document{ID: id, KnowledgeBaseID: p.KnowledgeBaseID, Status: StatusIndexing}
		}
	case p.DocumentID == "":
		var err error
		if docs, err = s.o.Store.Documents(ctx, p.KnowledgeBaseID); err != nil {
			return false, s.deferPurge(ctx, p, errs.Wrap(op, err))
		}
	}
	var failed []error
	var pending []string
	for _, d := range docs {
		if d.Status == StatusIndexing {
			pending = append(pending, d.ID)
		}
		if d.Status != StatusReady {
			// What an attempt may have written, whatever its count.
			d.ChunkCount = nil
			if p.DocumentID != "" && p.Chunks > 0 {
				d.ChunkCount = &p.Chunks
			}
		}
		if err := s.dropIndexesErr(ctx, d); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return false, s.deferPurge(ctx, p, errs.Wrap(op, errors.Join(failed...)))
	}
	if p.DocumentID == "" && !p.Listed {
		if len(pending) == 0 {
			// Nothing can write for it any more: done at once.
			return true, errs.Wrap(op, s.o.Store.FinishPurge(ctx, p))
		}
		if s.now().Before(p.FinalAt) {
			p.Listed, p.Pending = true, pending
			return false, errs.Wrap(op, s.o.Store.ListPurge(ctx, p, p.FinalAt))
		}
	}
	if s.now().Before(p.FinalAt) {
		return false, errs.Wrap(op, s.o.Store.DeferPurge(ctx, p, p.FinalAt))
	}
	return true, errs.Wrap(op, s.o.Store.FinishPurge(ctx, p))
}

// deferPurge makes p due again after a failed pass and returns cause.
func (s *Service) deferPurge(ctx context.Context, p Purge, cause error) error {
	if err := s.o.Store.DeferPurge(ctx, p, s.now().Add(purgeRetry)); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// purgeNow runs the first pass of p right after its delete, logging a
// failure (the sweeper runs it again when it is due).
func (s *Service) purgeNow(ctx context.Context, p Purge) {
	if _, err := s.runPurge(context.WithoutCancel(ctx), p); err != nil {
		s.o.Logger.WarnContext(ctx, "knowledge: purge", "knowledgeBaseId", p.KnowledgeBaseID, "documentId", p.DocumentID, "err", err.Error())
	}
}

// SweepPurges runs the purges that are due (the sweeper's task): it
// returns how many it finished, and the failures joined (each failed one
// is due again in a minute).
func (s *Service) SweepPurges(ctx context.Context) (int, error) {
	ps, err := s.o.Store.Purges(ctx, s.now(), MaxPurgesPerSweep)
	if err != nil {
		return 0, errs.Wrap("knowledge.SweepPurges", err)
	}
	n := 0
	var failed []error
	for _, p := range ps {
		done, err := s.runPurge(ctx, p)
		if err != nil {
			failed = append(failed, err)
		}
		if done && err == nil {
			n++
		}
	}
	return n, errors.Join(failed...)
}

// dropIndexesErr deletes d's vectors and segment (all MaxChunks keys
// when its count is unknown) and returns the first failure.
func (s *Service) dropIndexesErr(ctx context.Context, d Document) error {
	n := MaxChunks
	if d.ChunkCount != nil {
		n = *d.ChunkCount
	}
	if err := s.o.Vectors.DeleteDocument(ctx, d.KnowledgeBaseID, d.ID, n); err != nil {
		return err
	}
	if err := s.o.Blobs.Delete(ctx, segmentKey(d.KnowledgeBaseID, d.ID)); err != nil && !errs.Is(err, errs.NotFound) {
		return err
	}
	s.segments.drop(d.ID)
	return nil
}
